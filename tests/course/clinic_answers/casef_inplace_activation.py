"""Notebook 06, case 6 (fixed_forward): other correct answers and plausible wrong ones, with their diagnoses."""
import torch
import torch.nn.functional as F


# Other correct answers: each leaves the h that cls_head saved unchanged, and keeps every gradient path.
def forward_with_a_copy_for_the_head(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head(h.clone())


def forward_switching_inplace_off(encoder, cls_head, reg_head, x):
    reg_head[0].inplace = False
    h = encoder(x)
    return cls_head(h), reg_head(h)


def forward_copy_first_then_classifier(encoder, cls_head, reg_head, x):
    h = encoder(x)
    value = reg_head(h.clone())  # the regression head first: fine, it rewrites only its copy
    return cls_head(h), value


def forward_functional(encoder, cls_head, reg_head, x):
    h = encoder(x)
    linear = reg_head[1]
    return cls_head(h), F.linear(F.relu(h), linear.weight, linear.bias)


def forward_clone_then_relu_(encoder, cls_head, reg_head, x):
    h = encoder(x)
    features = h.clone()
    features.relu_()  # in place on a tensor nobody saved: allowed
    return cls_head(h), reg_head[1](features)


def forward_copy_for_the_classifier(encoder, cls_head, reg_head, x):
    h = encoder(x)
    logits = cls_head(h.clone())  # the classifier saves its own copy; the ReLU may then rewrite h
    return logits, reg_head(h)


# Wrong answers
def forward_as_written(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head(h)


def forward_detached(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head(h.detach())


def forward_detached_copy(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head(h.detach().clone())


def forward_through_data(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head(h.data)


def forward_head_under_no_grad(encoder, cls_head, reg_head, x):
    h = encoder(x)
    logits = cls_head(h)
    with torch.no_grad():
        value = reg_head(h.clone())
    return logits, value


def forward_regression_head_first(encoder, cls_head, reg_head, x):
    h = encoder(x)
    value = reg_head(h)
    return cls_head(h), value


def forward_copy_too_late(encoder, cls_head, reg_head, x):
    h = encoder(x)
    value = reg_head(h)
    return cls_head(h.clone()), value  # the copy is taken after the ReLU rewrote h


def forward_without_the_relu(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head[1](h)


def forward_returning_value_only(encoder, cls_head, reg_head, x):
    return reg_head[1](torch.relu(encoder(x)))


def forward_raising(encoder, cls_head, reg_head, x):
    raise RuntimeError("oops")


OTHER_CORRECT = {
    "fixed_forward": [forward_with_a_copy_for_the_head, forward_switching_inplace_off,
                      forward_copy_first_then_classifier, forward_functional, forward_clone_then_relu_,
                      forward_copy_for_the_classifier],
}

WRONG_ANSWERS = {
    "fixed_forward": [
        (forward_as_written, "still changes, in place, a tensor autograd saved"),
        (forward_detached, "shares h's memory and its version counter"),
        (forward_detached_copy, "received only the gradient of l_cls"),
        (forward_through_data, "without autograd noticing"),
        (forward_head_under_no_grad, "Your value carries no gradient"),
        (forward_regression_head_first, "the classifier read the features after"),
        (forward_copy_too_late, "the classifier read the features after"),
        (forward_without_the_relu, "without its ReLU"),
        (forward_returning_value_only, "Return the pair (logits, value)"),
        (forward_raising, "raised RuntimeError: oops"),
    ],
}

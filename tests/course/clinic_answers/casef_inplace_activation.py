"""Notebook 07, case 3 (fixed_forward, the residual head written in place): other correct answers and plausible
wrong ones, with their diagnoses."""
import torch
import torch.nn.functional as F


# Other correct answers: each leaves every saved tensor as it was saved, and keeps every gradient path.
def out_of_place(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head.out(torch.relu(h + reg_head.fc(h)))


def relu_in_place_on_the_new_sum(encoder, cls_head, reg_head, x):
    h = encoder(x)
    r = h + reg_head.fc(h)            # a new tensor that nobody saved...
    return cls_head(h), reg_head.out(r.relu_())   # ...so an in-place ReLU on it is fine


def add_in_place_into_a_copy(encoder, cls_head, reg_head, x):
    h = encoder(x)
    r = h.clone()                     # fc reads h, not r; the copy is rewritten, and nobody saved it
    r += reg_head.fc(h)
    return cls_head(h), reg_head.out(F.relu(r))


def functional_layers(encoder, cls_head, reg_head, x):
    h = encoder(x)
    skip = torch.add(h, F.linear(h, reg_head.fc.weight, reg_head.fc.bias))
    value = F.linear(torch.clamp(skip, min=0), reg_head.out.weight, reg_head.out.bias)
    return F.linear(h, cls_head.weight, cls_head.bias), value


def regression_head_first(encoder, cls_head, reg_head, x):
    h = encoder(x)
    value = reg_head.out(torch.relu(h + reg_head.fc(h)))   # out of place: the order no longer matters
    return cls_head(h), value


# Wrong answers
def as_written(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head(h)


def worked_fix_copied(encoder, cls_head, reg_head, x):
    """The clone from the case's "what to remember": the head still rewrites its own copy after fc saved it."""
    h = encoder(x)
    return cls_head(h), reg_head(h.clone())


def detached(encoder, cls_head, reg_head, x):
    """The head called on an alias: it shares h's version counter, and the head's own fc saved it."""
    h = encoder(x)
    return cls_head(h), reg_head(h.detach())


def out_of_place_on_a_detached_copy(encoder, cls_head, reg_head, x):
    """Out of place, but on h.detach(): runs, and the regression loss no longer reaches the encoder."""
    h = encoder(x)
    features = h.detach()
    return cls_head(h), reg_head.out(torch.relu(features + reg_head.fc(features)))


def clone_detach_then_the_head(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head(h.detach().clone())


def skip_added_through_data(encoder, cls_head, reg_head, x):
    """The += done on h.data, which autograd does not see: silently wrong gradients."""
    h = encoder(x)
    logits = cls_head(h)
    features = h.data
    features += reg_head.fc(h)
    return logits, reg_head.out(torch.relu(features))


def only_the_relu_out_of_place(encoder, cls_head, reg_head, x):
    """The worked fix's idea applied to the ReLU only: the += still rewrites what fc saved."""
    h = encoder(x)
    h2 = h.clone()
    h2 += reg_head.fc(h2)
    return cls_head(h), reg_head.out(torch.relu(h2))


def without_the_relu(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head.out(h + reg_head.fc(h))


def without_the_skip(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head.out(torch.relu(reg_head.fc(h)))


def relu_before_the_addition(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head.out(torch.relu(h) + reg_head.fc(h))


def head_first_in_place(encoder, cls_head, reg_head, x):
    """The in-place head first: the classifier then reads the rewritten h."""
    h = encoder(x)
    value = reg_head(h)
    return cls_head(h.clone()), value


_features = {}


def caches_the_features(encoder, cls_head, reg_head, x):
    """State carried: the encoder's features computed once per encoder and reused."""
    h = _features.setdefault(id(encoder), encoder(x))
    return cls_head(h), reg_head.out(torch.relu(h + reg_head.fc(h)))


def value_under_no_grad(encoder, cls_head, reg_head, x):
    h = encoder(x)
    with torch.no_grad():
        value = reg_head(h.clone())
    return cls_head(h), value


def checks_itself_with_a_backward(encoder, cls_head, reg_head, x):
    """Changes state the contract does not mention: a "sanity" backward that leaves .grad behind."""
    logits, value = out_of_place(encoder, cls_head, reg_head, x)
    value.sum().backward(retain_graph=True)
    return logits, value


def switches_the_head_to_eval(encoder, cls_head, reg_head, x):
    reg_head.eval()
    return out_of_place(encoder, cls_head, reg_head, x)


def returns_value_only(encoder, cls_head, reg_head, x):
    return out_of_place(encoder, cls_head, reg_head, x)[1]


def raises(encoder, cls_head, reg_head, x):
    raise RuntimeError("oops")


def returns_a_list(encoder, cls_head, reg_head, x):
    """Right values and gradients, in a list: the contract's pair is a tuple."""
    return list(out_of_place(encoder, cls_head, reg_head, x))


def reshapes_to_the_notebook_batch(encoder, cls_head, reg_head, x):
    """h reshaped to the notebook's 16 rows "to be safe": right only for batches of 16."""
    h = encoder(x).reshape(16, -1)
    return cls_head(h), reg_head.out(torch.relu(h + reg_head.fc(h)))


def puts_the_models_in_training_mode(encoder, cls_head, reg_head, x):
    """.train() on every model first, whatever mode it came in."""
    for model in (encoder, cls_head, reg_head):
        model.train()
    return out_of_place(encoder, cls_head, reg_head, x)


OTHER_CORRECT = {
    "fixed_forward": [out_of_place, relu_in_place_on_the_new_sum, add_in_place_into_a_copy, functional_layers,
                      regression_head_first],
}

WRONG_ANSWERS = {
    "fixed_forward": [
        (as_written, "rewrites the very tensor that self.fc saved"),
        (worked_fix_copied, "Handing the head a copy (h.clone()"),
        (detached, "an alias (h.detach(), h.data) does not help"),
        (out_of_place_on_a_detached_copy, "received only the gradient of l_cls"),
        (clone_detach_then_the_head, "Handing the head a copy"),
        (skip_added_through_data, "without autograd noticing"),
        (only_the_relu_out_of_place, "Write the head's computation out of place"),
        (without_the_relu, "Your value has no ReLU"),
        (without_the_skip, "Your value has no skip connection"),
        (relu_before_the_addition, "applies the ReLU to h before the addition"),
        (head_first_in_place, "the head ran first and changed h in place before cls_head read it"),
        (caches_the_features, "look for something kept from one call to the next"),
        (value_under_no_grad, "Your value carries no gradient"),
        (checks_itself_with_a_backward, "Your forward filled .grad"),
        (switches_the_head_to_eval, "reg_head is now in eval mode"),
        (returns_value_only, "Return the pair (logits, value)"),
        (raises, "raised RuntimeError: oops"),
        (returns_a_list, "returned a list, where the reference returns a tuple"),
        (reshapes_to_the_notebook_batch, "With a batch of 1 row (the notebook used 16): your function raised"),
        (puts_the_models_in_training_mode, "`encoder` came back in training mode; it was handed to you in eval mode"),
    ],
}

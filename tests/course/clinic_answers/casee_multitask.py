"""Case 5 (multi-task heads on one trunk): alternative correct answers and plausible wrong ones for multitask_step."""
import torch
import torch.nn.functional as F


def _losses(trunk, head_a, head_b, x, y_a, y_b):
    feats = trunk(x)
    return F.mse_loss(head_a(feats), y_a), F.cross_entropy(head_b(feats), y_b)


def _zero(*optimizers):
    for optimizer in optimizers:
        optimizer.zero_grad()


def _step(*optimizers):
    for optimizer in optimizers:
        optimizer.step()


# Correct alternatives
def two_backward_passes_then_steps(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    loss_a.backward(retain_graph=True)
    loss_b.backward()
    _step(opt_trunk, opt_a, opt_b)


def with_autograd_grad(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    params = [*trunk.parameters(), *head_a.parameters(), *head_b.parameters()]
    grads = torch.autograd.grad(loss_a + loss_b, params)
    for param, grad in zip(params, grads):
        param.grad = grad
    _step(opt_trunk, opt_a, opt_b)


def head_a_stepped_before_task_b(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    """Head A may step early: loss_b never passes through it. Only the trunk must wait."""
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    loss_a.backward(retain_graph=True)
    opt_a.step()
    loss_b.backward()
    opt_b.step()
    opt_trunk.step()


def two_forwards_before_any_trunk_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    """Wasteful (two forward passes) but right: the trunk is not moved until both gradients are in."""
    _zero(opt_trunk, opt_a, opt_b)
    F.mse_loss(head_a(trunk(x)), y_a).backward()
    F.cross_entropy(head_b(trunk(x)), y_b).backward()
    _step(opt_trunk, opt_a, opt_b)


# Wrong answers
def the_broken_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    _zero(opt_trunk, opt_a)
    loss_a.backward()
    _step(opt_trunk, opt_a)
    opt_b.zero_grad()
    loss_b.backward()
    opt_b.step()


def retain_graph_then_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    _zero(opt_trunk, opt_a, opt_b)
    loss_a.backward(retain_graph=True)
    _step(opt_trunk, opt_a)
    loss_b.backward()
    opt_b.step()


def recompute_after_trunk_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    _zero(opt_trunk, opt_a)
    F.mse_loss(head_a(trunk(x)), y_a).backward()
    _step(opt_trunk, opt_a)
    _zero(opt_trunk, opt_b)
    F.cross_entropy(head_b(trunk(x)), y_b).backward()
    _step(opt_trunk, opt_b)


def recompute_task_b_after_trunk_step_once(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    """Steps the trunk once (with task A only), then computes head B's gradient at the moved trunk."""
    _zero(opt_trunk, opt_a, opt_b)
    F.mse_loss(head_a(trunk(x)), y_a).backward()
    _step(opt_trunk, opt_a)
    F.cross_entropy(head_b(trunk(x)), y_b).backward(inputs=list(head_b.parameters()))
    opt_b.step()


def fresh_forward_for_head_b_after_trunk_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    """The trunk's gradient is right, but head B then learns from features of the already-moved trunk."""
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (loss_a + loss_b).backward(inputs=[*trunk.parameters(), *head_a.parameters()])
    _step(opt_trunk, opt_a)
    F.cross_entropy(head_b(trunk(x)), y_b).backward(inputs=list(head_b.parameters()))
    opt_b.step()


def detach_for_task_b(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    feats = trunk(x)
    loss_a = F.mse_loss(head_a(feats), y_a)
    loss_b = F.cross_entropy(head_b(feats.detach()), y_b)   # silences error 1; task B no longer trains the trunk
    _zero(opt_trunk, opt_a, opt_b)
    loss_a.backward()
    loss_b.backward()
    _step(opt_trunk, opt_a, opt_b)


def trunk_never_stepped(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (loss_a + loss_b).backward()
    _step(opt_a, opt_b)


def averaged_losses(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    ((loss_a + loss_b) / 2).backward()
    _step(opt_trunk, opt_a, opt_b)


def weighted_task_b(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    loss_a.backward(retain_graph=True)
    (0.3 * loss_b).backward(inputs=list(trunk.parameters()), retain_graph=True)
    loss_b.backward(inputs=list(head_b.parameters()))
    _step(opt_trunk, opt_a, opt_b)


def without_zero_grad(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (loss_a + loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


def forgets_trunk_zero_grad(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    _zero(opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (loss_a + loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


def zero_grad_before_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (loss_a + loss_b).backward()
    _zero(opt_trunk, opt_a, opt_b)
    _step(opt_trunk, opt_a, opt_b)


def manual_update_of_the_trunk(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (loss_a + loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)
    with torch.no_grad():
        for param in trunk.parameters():
            param.mul_(0.99)   # "weight decay", outside the optimizer


OTHER_CORRECT = {
    "multitask_step": [two_backward_passes_then_steps, with_autograd_grad, head_a_stepped_before_task_b,
                       two_forwards_before_any_trunk_step],
}

WRONG_ANSWERS = {
    "multitask_step": [
        (the_broken_step, "freed the trunk's part of the graph"),
        (retain_graph_then_step, "retain_graph=True keeps the saved tensors, not the weights"),
        (recompute_after_trunk_step, "then with task B's gradient taken at the trunk the first step had already moved"),
        (recompute_task_b_after_trunk_step_once, "task A's gradient only"),
        (fresh_forward_for_head_b_after_trunk_step, "head B's gradient of loss_b was taken at the trunk after"),
        (detach_for_task_b, "A feats.detach() for head B"),
        (trunk_never_stepped, "the trunk's optimizer was never stepped"),
        (averaged_losses, "0.5 x task A's gradient + 0.5 x task B's"),
        (weighted_task_b, "1 x task A's gradient + 0.3 x task B's"),
        (without_zero_grad, "the trunk's gradient still contained the previous step's"),
        (forgets_trunk_zero_grad, "opt_trunk too"),
        (zero_grad_before_step, "the trunk was stepped with an empty gradient"),
        (manual_update_of_the_trunk, "changed other than through its optimizer's step()"),
    ],
}

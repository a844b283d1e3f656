"""Notebook 07, case 2 (multi-task heads on one trunk, task weights, three optimizers): other correct answers and
plausible wrong ones for ``multitask_step``, each wrong one with the diagnosis it must get."""
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


def right_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


# Other correct answers
def two_weighted_backward_passes(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a).backward(retain_graph=True)
    (weight_b * loss_b).backward()
    _step(opt_b, opt_a, opt_trunk)


def with_autograd_grad(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    params = [p for m in (trunk, head_a, head_b) for p in m.parameters() if p.requires_grad]   # frozen: no grad
    for param, grad in zip(params, torch.autograd.grad(weight_a * loss_a + weight_b * loss_b, params)):
        param.grad = grad
    _step(opt_trunk, opt_a, opt_b)


def heads_stepped_before_the_trunks_backward_ends(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b,
                                                  weight_a, weight_b):
    """Head A may step early: loss_b never passes through it. Only the trunk must wait for both tasks."""
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a).backward(retain_graph=True)
    opt_a.step()
    (weight_b * loss_b).backward()
    opt_b.step()
    opt_trunk.step()


def separate_forward_passes_before_any_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a,
                                            weight_b):
    """Wasteful (two forward passes) but right: nothing moves until both gradients are in."""
    _zero(opt_trunk, opt_a, opt_b)
    (weight_a * F.mse_loss(head_a(trunk(x)), y_a)).backward()
    (F.cross_entropy(head_b(trunk(x)), y_b) * weight_b).backward()
    _step(opt_trunk, opt_a, opt_b)


def weighted_losses_with_sum_of_a_list(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a,
                                       weight_b):
    for optimizer in (opt_trunk, opt_a, opt_b):
        optimizer.zero_grad(set_to_none=False)
    feats = trunk(x)
    losses = [weight_a * F.mse_loss(head_a(feats), y_a), weight_b * F.cross_entropy(head_b(feats), y_b)]
    sum(losses).backward()
    _step(opt_trunk, opt_a, opt_b)


# Wrong answers
def copies_the_worked_fix(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """The worked fix's loss_a + loss_b: the weights forgotten."""
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (loss_a + loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


def weights_swapped(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    right_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_b, weight_a)


def weights_applied_twice(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    loss_a, loss_b = weight_a * loss_a, weight_b * loss_b
    (weight_a * loss_a + weight_b * loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


def weights_only_on_the_trunk(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """The weights given to the trunk's share only; each head gets its plain loss."""
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward(inputs=list(trunk.parameters()), retain_graph=True)
    (loss_a + loss_b).backward(inputs=[*head_a.parameters(), *head_b.parameters()])
    _step(opt_trunk, opt_a, opt_b)


def normalised_weights(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    total = weight_a + weight_b
    right_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a / total, weight_b / total)


def detach_for_task_b(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    feats = trunk(x)
    loss_a = F.mse_loss(head_a(feats), y_a)
    loss_b = F.cross_entropy(head_b(feats.detach()), y_b)   # silences error 1; task B no longer trains the trunk
    _zero(opt_trunk, opt_a, opt_b)
    (weight_a * loss_a).backward()
    (weight_b * loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


def trunk_stepped_per_task(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """A second forward after the trunk's first step: it runs, the trunk steps twice."""
    _zero(opt_trunk, opt_a)
    (weight_a * F.mse_loss(head_a(trunk(x)), y_a)).backward()
    _step(opt_trunk, opt_a)
    _zero(opt_trunk, opt_b)
    (weight_b * F.cross_entropy(head_b(trunk(x)), y_b)).backward()
    _step(opt_trunk, opt_b)


def per_task_backward_with_retain_graph(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a,
                                        weight_b):
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    _zero(opt_trunk, opt_a, opt_b)
    (weight_a * loss_a).backward(retain_graph=True)
    _step(opt_trunk, opt_a)
    (weight_b * loss_b).backward()
    opt_b.step()


def per_task_backward_without_retain_graph(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a,
                                           weight_b):
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    _zero(opt_trunk, opt_a, opt_b)
    (weight_a * loss_a).backward()
    (weight_b * loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


def head_b_after_the_trunk_moved(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """The trunk's gradient is right, but head B then learns from features of the already-moved trunk."""
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward(inputs=[*trunk.parameters(), *head_a.parameters()])
    _step(opt_trunk, opt_a)
    (weight_b * F.cross_entropy(head_b(trunk(x)), y_b)).backward(inputs=list(head_b.parameters()))
    opt_b.step()


def trunk_after_the_heads_moved(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """Heads first, then a fresh forward for the trunk's gradient: at heads that have already moved."""
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward(inputs=[*head_a.parameters(), *head_b.parameters()])
    _step(opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward(inputs=list(trunk.parameters()))
    opt_trunk.step()


def without_zero_grad(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


def forgets_head_bs_zero_grad(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    _zero(opt_trunk, opt_a)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


def zero_grad_before_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward()
    _zero(opt_trunk, opt_a, opt_b)
    _step(opt_trunk, opt_a, opt_b)


def never_steps_head_a(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    _zero(opt_trunk, opt_a, opt_b)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward()
    _step(opt_trunk, opt_b)


def manual_weight_decay(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    right_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b)
    with torch.no_grad():
        for param in trunk.parameters():
            param.mul_(0.99)   # "weight decay", outside the optimizer


_optimizers = {}


def one_optimizer_made_once(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """State carried: "one optimizer over everything", as in the worked fix, made on the first call and kept."""
    params = [*trunk.parameters(), *head_a.parameters(), *head_b.parameters()]
    optimizer = _optimizers.setdefault("all", torch.optim.SGD(params, lr=0.1))
    optimizer.zero_grad()
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward()
    optimizer.step()


def smooths_with_the_last_gradient(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """State carried in a function attribute: half of the previous call's trunk gradient added in."""
    right_step_grads_only = [opt_trunk, opt_a, opt_b]
    _zero(*right_step_grads_only)
    loss_a, loss_b = _losses(trunk, head_a, head_b, x, y_a, y_b)
    (weight_a * loss_a + weight_b * loss_b).backward()
    last = getattr(smooths_with_the_last_gradient, "last", {})
    current = {id(p): p.grad.clone() for p in trunk.parameters()}
    for param in trunk.parameters():
        if id(param) in last:
            param.grad += 0.5 * last[id(param)]
    smooths_with_the_last_gradient.last = current
    _step(opt_trunk, opt_a, opt_b)


def logs_accuracy_in_eval_mode(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """Changes state the contract does not mention: the trunk left in eval mode after "logging"."""
    right_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b)
    trunk.eval()
    with torch.no_grad():
        head_b(trunk(x)).argmax(dim=1).eq(y_b).float().mean()


def scales_the_learning_rate(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """Weights as learning rates: changes the optimizers' settings."""
    opt_a.param_groups[0]["lr"] *= weight_a
    opt_b.param_groups[0]["lr"] *= weight_b
    right_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, 1.0, 1.0)


def freezes_head_b_afterwards(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    right_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b)
    head_b.requires_grad_(False)


def puts_every_module_in_training_mode(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a,
                                       weight_b):
    """"A training step trains": .train() on every module, whatever mode it came in."""
    for module in (trunk, head_a, head_b):
        module.train()
    right_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b)


def unfreezes_every_parameter(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """requires_grad_(True) "to be sure every part trains": a layer handed over frozen comes back trainable."""
    for module in (trunk, head_a, head_b):
        module.requires_grad_(True)
    right_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b)


def divides_by_the_notebook_batch(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b):
    """Both losses summed, then divided by the notebook's batch of 12: right only for batches of 12 rows."""
    _zero(opt_trunk, opt_a, opt_b)
    feats = trunk(x)
    loss_a = F.mse_loss(head_a(feats), y_a, reduction="sum") / 12
    loss_b = F.cross_entropy(head_b(feats), y_b, reduction="sum") / 12
    (weight_a * loss_a + weight_b * loss_b).backward()
    _step(opt_trunk, opt_a, opt_b)


OTHER_CORRECT = {
    "multitask_step": [right_step, two_weighted_backward_passes, with_autograd_grad,
                       heads_stepped_before_the_trunks_backward_ends, separate_forward_passes_before_any_step,
                       weighted_losses_with_sum_of_a_list],
}

WRONG_ANSWERS = {
    "multitask_step": [
        (copies_the_worked_fix, "The task weights are missing"),
        (weights_swapped, "weight_a and weight_b are swapped"),
        (weights_applied_twice, "Each task weight was applied twice"),
        (weights_only_on_the_trunk, "Head A is trained by the weighted total too"),
        (normalised_weights, "The weights were normalised"),
        (detach_for_task_b, "loss_b never reached the trunk"),
        (trunk_stepped_per_task, "opt_trunk was stepped 2 times: first with task A's weighted gradient, then with "
                                 "task B's, taken at the trunk the first step had already moved"),
        (per_task_backward_with_retain_graph, "retain_graph=True only keeps those references"),
        (per_task_backward_without_retain_graph, "freed the trunk's part of the graph"),
        (head_b_after_the_trunk_moved, "Head B's gradient of loss_b was taken at the trunk after opt_trunk.step()"),
        (trunk_after_the_heads_moved, "The trunk's gradient was taken after the heads had stepped"),
        (without_zero_grad, "The trunk's gradient still contained the previous step's"),
        (forgets_head_bs_zero_grad, "Head B's gradient still contained the previous step's"),
        (zero_grad_before_step, "The trunk was stepped with an empty gradient"),
        (never_steps_head_a, "opt_a was never stepped"),
        (manual_weight_decay, "The trunk's parameters changed other than through opt_trunk.step()"),
        (one_optimizer_made_once, "opt_trunk was never stepped"),
        (smooths_with_the_last_gradient, "look for something kept from one call to the next"),
        (logs_accuracy_in_eval_mode, "trunk is now in eval mode"),
        (scales_the_learning_rate, "changed opt_a's settings"),
        (freezes_head_b_afterwards, "changed requires_grad (head_b.weight, head_b.bias)"),
        (puts_every_module_in_training_mode, "`trunk` came back in training mode; it was handed to you in eval mode"),
        (unfreezes_every_parameter, "`trunk.0.weight.requires_grad` came back True"),
        (divides_by_the_notebook_batch, "is a batch size written into your code?"),
    ],
}

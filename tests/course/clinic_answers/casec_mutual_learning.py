"""Case 3 (deep mutual learning): other correct answers and plausible wrong ones for ``mutual_step``."""
import warnings

import torch
import torch.nn.functional as F


def _kl(log_p_self, p_other):
    return F.kl_div(log_p_self, p_other, reduction="batchmean")


def _detached_losses(logits1, logits2, y):
    loss1 = F.cross_entropy(logits1, y) + _kl(F.log_softmax(logits1, dim=1), F.softmax(logits2, dim=1).detach())
    loss2 = F.cross_entropy(logits2, y) + _kl(F.log_softmax(logits2, dim=1), F.softmax(logits1, dim=1).detach())
    return loss1, loss2


def _as_written_losses(logits1, logits2, y):
    loss1 = F.cross_entropy(logits1, y) + _kl(F.log_softmax(logits1, dim=1), F.softmax(logits2, dim=1))
    loss2 = F.cross_entropy(logits2, y) + _kl(F.log_softmax(logits2, dim=1), F.softmax(logits1, dim=1))
    return loss1, loss2


# Other correct answers
def detach_and_one_backward(peer1, peer2, opt1, opt2, x, y):
    """Targets detached; one backward of the sum reaches each peer only through its own loss."""
    loss1, loss2 = _detached_losses(peer1(x), peer2(x), y)
    opt1.zero_grad()
    opt2.zero_grad()
    (loss1 + loss2).backward()
    opt1.step()
    opt2.step()


def autograd_grad_per_peer(peer1, peer2, opt1, opt2, x, y):
    """No detach: torch.autograd.grad restricted to each peer's own parameters (the first keeps the graph)."""
    loss1, loss2 = _as_written_losses(peer1(x), peer2(x), y)
    params1, params2 = list(peer1.parameters()), list(peer2.parameters())
    grads1 = torch.autograd.grad(loss1, params1, retain_graph=True)
    grads2 = torch.autograd.grad(loss2, params2)
    for param, grad in zip(params1 + params2, grads1 + grads2):
        param.grad = grad
    opt1.step()
    opt2.step()


def peer2_first_with_log_target(peer1, peer2, opt1, opt2, x, y):
    """Peer 2 stepped first, the KL written with log-probabilities on both sides, targets from a no_grad pass."""
    with torch.no_grad():
        log_target1 = F.log_softmax(peer1(x), dim=1)
        log_target2 = F.log_softmax(peer2(x), dim=1)
    logits2 = peer2(x)
    loss2 = F.cross_entropy(logits2, y) + F.kl_div(F.log_softmax(logits2, dim=1), log_target1,
                                                   reduction="batchmean", log_target=True)
    opt2.zero_grad()
    loss2.backward()
    opt2.step()
    logits1 = peer1(x)
    loss1 = F.cross_entropy(logits1, y) + F.kl_div(F.log_softmax(logits1, dim=1), log_target2,
                                                   reduction="batchmean", log_target=True)
    opt1.zero_grad()
    loss1.backward()
    opt1.step()


def restricted_backward_no_detach(peer1, peer2, opt1, opt2, x, y):
    """Notebook 04's recipe (a): backward(inputs=...) keeps each loss to its own peer, even without a detach."""
    loss1, loss2 = _as_written_losses(peer1(x), peer2(x), y)
    opt1.zero_grad()
    opt2.zero_grad()
    loss1.backward(retain_graph=True, inputs=list(peer1.parameters()))
    loss2.backward(inputs=list(peer2.parameters()))
    opt1.step()
    opt2.step()


def manual_kl_formula(peer1, peer2, opt1, opt2, x, y):
    """The KL written out by hand: sum of p_other * (log p_other - log p_self), averaged over the batch."""
    logits1, logits2 = peer1(x), peer2(x)
    log_p1, log_p2 = F.log_softmax(logits1, dim=1), F.log_softmax(logits2, dim=1)
    kl1 = (log_p2.exp() * (log_p2 - log_p1)).sum(dim=1).mean()        # KL(p2 || p1): gradient only via log_p1...
    kl2 = (log_p1.exp() * (log_p1 - log_p2)).sum(dim=1).mean()
    loss1 = F.cross_entropy(logits1, y) + kl1
    loss2 = F.cross_entropy(logits2, y) + kl2
    opt1.zero_grad()
    opt2.zero_grad()
    loss1.backward(inputs=list(peer1.parameters()), retain_graph=True)   # ...so restrict each to its own peer
    loss2.backward(inputs=list(peer2.parameters()))
    opt1.step()
    opt2.step()


# Wrong answers
def as_written(peer1, peer2, opt1, opt2, x, y):
    loss1, loss2 = _as_written_losses(peer1(x), peer2(x), y)
    opt1.zero_grad()
    loss1.backward()
    opt1.step()
    opt2.zero_grad()
    loss2.backward()
    opt2.step()


def retain_graph_fix(peer1, peer2, opt1, opt2, x, y):
    """The tempting fix: peer 1 steps while loss2's graph still runs through it."""
    loss1, loss2 = _as_written_losses(peer1(x), peer2(x), y)
    opt1.zero_grad()
    loss1.backward(retain_graph=True)
    opt1.step()
    opt2.zero_grad()
    loss2.backward()
    opt2.step()


def retain_graph_steps_last(peer1, peer2, opt1, opt2, x, y):
    """Runs, but each peer is stepped with the gradient of loss1 + loss2."""
    loss1, loss2 = _as_written_losses(peer1(x), peer2(x), y)
    opt1.zero_grad()
    opt2.zero_grad()
    loss1.backward(retain_graph=True)
    loss2.backward()
    opt1.step()
    opt2.step()


def detach_own_logits(peer1, peer2, opt1, opt2, x, y):
    """The detach on the wrong side, each backward restricted to its own peer: the KL term gives nothing."""
    logits1, logits2 = peer1(x), peer2(x)
    loss1 = F.cross_entropy(logits1, y) + _kl(F.log_softmax(logits1.detach(), dim=1), F.softmax(logits2, dim=1))
    loss2 = F.cross_entropy(logits2, y) + _kl(F.log_softmax(logits2.detach(), dim=1), F.softmax(logits1, dim=1))
    opt1.zero_grad()
    opt2.zero_grad()
    loss1.backward(retain_graph=True, inputs=list(peer1.parameters()))
    loss2.backward(inputs=list(peer2.parameters()))
    opt1.step()
    opt2.step()


def detach_whole_kl_term(peer1, peer2, opt1, opt2, x, y):
    """A detach sprinkled on the KL term silences error 1 in the original order, and drops the KL gradient."""
    logits1, logits2 = peer1(x), peer2(x)
    loss1 = F.cross_entropy(logits1, y) + _kl(F.log_softmax(logits1, dim=1), F.softmax(logits2, dim=1)).detach()
    loss2 = F.cross_entropy(logits2, y) + _kl(F.log_softmax(logits2, dim=1), F.softmax(logits1, dim=1)).detach()
    opt1.zero_grad()
    loss1.backward()
    opt1.step()
    opt2.zero_grad()
    loss2.backward()
    opt2.step()


def swapped_kl_arguments(peer1, peer2, opt1, opt2, x, y):
    """kl_div(other, self): the gradient flows through the target, i.e. the reversed KL(p_self || p_other)."""
    logits1, logits2 = peer1(x), peer2(x)
    loss1 = F.cross_entropy(logits1, y) + _kl(F.log_softmax(logits2, dim=1).detach(), F.softmax(logits1, dim=1))
    loss2 = F.cross_entropy(logits2, y) + _kl(F.log_softmax(logits1, dim=1).detach(), F.softmax(logits2, dim=1))
    opt1.zero_grad()
    loss1.backward()
    opt1.step()
    opt2.zero_grad()
    loss2.backward()
    opt2.step()


def detach_own_and_sum(peer1, peer2, opt1, opt2, x, y):
    """Own log-probabilities detached, targets not, one backward of the sum: each peer gets the reversed KL."""
    logits1, logits2 = peer1(x), peer2(x)
    loss1 = F.cross_entropy(logits1, y) + _kl(F.log_softmax(logits1, dim=1).detach(), F.softmax(logits2, dim=1))
    loss2 = F.cross_entropy(logits2, y) + _kl(F.log_softmax(logits2, dim=1).detach(), F.softmax(logits1, dim=1))
    opt1.zero_grad()
    opt2.zero_grad()
    (loss1 + loss2).backward()
    opt1.step()
    opt2.step()


def without_zero_grad(peer1, peer2, opt1, opt2, x, y):
    loss1, loss2 = _detached_losses(peer1(x), peer2(x), y)
    loss1.backward()
    opt1.step()
    loss2.backward()
    opt2.step()


def paper_alternating_schedule(peer1, peer2, opt1, opt2, x, y):
    """Algorithm 1 of the paper: update peer 1, then recompute both predictions, then update peer 2."""
    loss1, _ = _detached_losses(peer1(x), peer2(x), y)
    opt1.zero_grad()
    loss1.backward()
    opt1.step()
    _, loss2 = _detached_losses(peer1(x), peer2(x), y)
    opt2.zero_grad()
    loss2.backward()
    opt2.step()


def peer1_stepped_before_loss2(peer1, peer2, opt1, opt2, x, y):
    """Peer 1's target detached, but loss2 built after peer 1's step on the old, non-detached softmax(logits1)."""
    logits1, logits2 = peer1(x), peer2(x)
    loss1 = F.cross_entropy(logits1, y) + _kl(F.log_softmax(logits1, dim=1), F.softmax(logits2, dim=1).detach())
    opt1.zero_grad()
    loss1.backward(retain_graph=True)
    opt1.step()
    loss2 = F.cross_entropy(logits2, y) + _kl(F.log_softmax(logits2, dim=1), F.softmax(logits1, dim=1))
    opt2.zero_grad()
    loss2.backward()
    opt2.step()


def kl_reduction_mean(peer1, peer2, opt1, opt2, x, y):
    """reduction='mean' divides the KL by batch x classes instead of the batch."""
    warnings.filterwarnings("ignore", message="reduction: 'mean'", category=UserWarning)  # torch warns about it
    logits1, logits2 = peer1(x), peer2(x)
    target1, target2 = F.softmax(logits1, dim=1).detach(), F.softmax(logits2, dim=1).detach()
    loss1 = F.cross_entropy(logits1, y) + F.kl_div(F.log_softmax(logits1, dim=1), target2, reduction="mean")
    loss2 = F.cross_entropy(logits2, y) + F.kl_div(F.log_softmax(logits2, dim=1), target1, reduction="mean")
    opt1.zero_grad()
    opt2.zero_grad()
    (loss1 + loss2).backward()
    opt1.step()
    opt2.step()


def averaged_losses(peer1, peer2, opt1, opt2, x, y):
    loss1, loss2 = _detached_losses(peer1(x), peer2(x), y)
    opt1.zero_grad()
    opt2.zero_grad()
    ((loss1 + loss2) / 2).backward()
    opt1.step()
    opt2.step()


def forgets_peer2_step(peer1, peer2, opt1, opt2, x, y):
    loss1, loss2 = _detached_losses(peer1(x), peer2(x), y)
    opt1.zero_grad()
    opt2.zero_grad()
    (loss1 + loss2).backward()
    opt1.step()


def zero_grad_after_backward(peer1, peer2, opt1, opt2, x, y):
    loss1, loss2 = _detached_losses(peer1(x), peer2(x), y)
    (loss1 + loss2).backward()
    opt1.zero_grad()
    opt2.zero_grad()
    opt1.step()
    opt2.step()


OTHER_CORRECT = {
    "mutual_step": [detach_and_one_backward, autograd_grad_per_peer, peer2_first_with_log_target,
                    restricted_backward_no_detach, manual_kl_formula],
}

WRONG_ANSWERS = {
    "mutual_step": [
        (as_written, "raised Error 1"),
        (retain_graph_fix, "raised Error 2"),
        (retain_graph_steps_last, "gradient of loss1 + loss2"),
        (detach_own_logits, "got only its cross-entropy gradient"),
        (detach_whole_kl_term, "got only its cross-entropy gradient"),
        (swapped_kl_arguments, "the reversed direction"),
        (detach_own_and_sum, "the reversed direction"),
        (without_zero_grad, "gradients pile up"),
        (paper_alternating_schedule, "new forward pass between the two updates"),
        (peer1_stepped_before_loss2, "raised Error 2"),
        (kl_reduction_mean, "reduction='mean'"),
        (averaged_losses, "0.5 times the gradient of loss1"),
        (forgets_peer2_step, "peer 2's optimizer was never stepped"),
        (zero_grad_after_backward, "zero_grad() before backward()"),
    ],
}

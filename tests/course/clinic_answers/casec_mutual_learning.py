"""Case 3 (deep mutual learning, K peers): other correct answers and plausible wrong ones for ``mutual_step``.

The exercise: ``mutual_step(peers, optimizers, x, y)``, peer i's loss = CE + the mean over the other peers of
KL(p_j || p_i), every p_j a fixed target, all from one forward pass of each peer.
"""
import warnings

import torch
import torch.nn.functional as F


def _kl(logits_own, target):
    return F.kl_div(F.log_softmax(logits_own, dim=1), target, reduction="batchmean")


def _loss(i, logits, targets, y):
    others = [j for j in range(len(logits)) if j != i]
    return F.cross_entropy(logits[i], y) + sum(_kl(logits[i], targets[j]) for j in others) / len(others)


# Other correct answers
def all_forwards_then_each_peer(peers, optimizers, x, y):
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    for i, optimizer in enumerate(optimizers):
        optimizer.zero_grad()
        _loss(i, logits, targets, y).backward()
        optimizer.step()


def one_backward_of_the_sum(peers, optimizers, x, y):
    """Targets detached, so one backward of the sum reaches each peer only through its own loss."""
    for optimizer in optimizers:
        optimizer.zero_grad()
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    sum(_loss(i, logits, targets, y) for i in range(len(peers))).backward()
    for optimizer in optimizers:
        optimizer.step()


def targets_from_a_no_grad_pass_reverse_order(peers, optimizers, x, y):
    """Targets (log-probabilities) from a no_grad pass first; then peers updated last to first, log_target=True."""
    with torch.no_grad():
        log_targets = [F.log_softmax(peer(x), dim=1) for peer in peers]
    k = len(peers)
    for i in reversed(range(k)):
        log_p = F.log_softmax(peers[i](x), dim=1)
        kl = torch.stack([F.kl_div(log_p, log_targets[j], reduction="batchmean", log_target=True)
                          for j in range(k) if j != i]).mean()
        optimizers[i].zero_grad()
        (F.cross_entropy(peers[i](x), y) + kl).backward()
        optimizers[i].step()


def autograd_grad_restricted(peers, optimizers, x, y):
    """No detach at all: torch.autograd.grad restricted to each peer's own parameters keeps the losses apart."""
    logits = [peer(x) for peer in peers]
    probs = [F.softmax(out, dim=1) for out in logits]
    trainable = [[p for p in peer.parameters() if p.requires_grad] for peer in peers]   # frozen: no gradient
    grads = []
    for i, params in enumerate(trainable):
        grads.append(torch.autograd.grad(_loss(i, logits, probs, y), params, retain_graph=True))
    for params, optimizer, peer_grads in zip(trainable, optimizers, grads):
        for param, grad in zip(params, peer_grads):
            param.grad = grad
        optimizer.step()


def manual_kl_with_inputs(peers, optimizers, x, y):
    """KL written out by hand, no detach, each backward restricted to its own peer with inputs=."""
    logits = [peer(x) for peer in peers]
    log_p = [F.log_softmax(out, dim=1) for out in logits]
    k = len(peers)
    for optimizer in optimizers:
        optimizer.zero_grad(set_to_none=False)
    for i in range(k):
        kl = sum((log_p[j].exp() * (log_p[j] - log_p[i])).sum(dim=1).mean() for j in range(k) if j != i) / (k - 1)
        trainable = [p for p in peers[i].parameters() if p.requires_grad]
        (F.cross_entropy(logits[i], y) + kl).backward(inputs=trainable, retain_graph=True)
    for optimizer in optimizers:
        optimizer.step()


# Wrong answers
def two_peer_fix_in_a_loop(peers, optimizers, x, y):
    """The worked fix's pairing carried over: each peer learns from its neighbour only."""
    logits = [peer(x) for peer in peers]
    k = len(peers)
    for i in range(k):
        target = F.softmax(logits[(i + 1) % k], dim=1).detach()
        optimizers[i].zero_grad()
        (F.cross_entropy(logits[i], y) + _kl(logits[i], target)).backward()
        optimizers[i].step()


def targets_not_detached_retain_graph_steps_last(peers, optimizers, x, y):
    logits = [peer(x) for peer in peers]
    probs = [F.softmax(out, dim=1) for out in logits]
    for optimizer in optimizers:
        optimizer.zero_grad()
    losses = [_loss(i, logits, probs, y) for i in range(len(peers))]
    for loss in losses:
        loss.backward(retain_graph=True)
    for optimizer in optimizers:
        optimizer.step()


def targets_not_detached(peers, optimizers, x, y):
    logits = [peer(x) for peer in peers]
    probs = [F.softmax(out, dim=1) for out in logits]
    for i, optimizer in enumerate(optimizers):
        optimizer.zero_grad()
        _loss(i, logits, probs, y).backward()
        optimizer.step()


def targets_not_detached_retain_graph(peers, optimizers, x, y):
    logits = [peer(x) for peer in peers]
    probs = [F.softmax(out, dim=1) for out in logits]
    for i, optimizer in enumerate(optimizers):
        optimizer.zero_grad()
        _loss(i, logits, probs, y).backward(retain_graph=True)
        optimizer.step()


def sum_over_the_others(peers, optimizers, x, y):
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    for i, optimizer in enumerate(optimizers):
        kl = sum(_kl(logits[i], targets[j]) for j in range(len(peers)) if j != i)
        optimizer.zero_grad()
        (F.cross_entropy(logits[i], y) + kl).backward()
        optimizer.step()


def mean_over_all_peers(peers, optimizers, x, y):
    """The mean taken over all K predictions, the peer's own (detached) included."""
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    for i, optimizer in enumerate(optimizers):
        kl = torch.stack([_kl(logits[i], target) for target in targets]).mean()
        optimizer.zero_grad()
        (F.cross_entropy(logits[i], y) + kl).backward()
        optimizer.step()


def kl_direction_swapped(peers, optimizers, x, y):
    logits = [peer(x) for peer in peers]
    k = len(peers)
    for i, optimizer in enumerate(optimizers):
        kl = sum(F.kl_div(F.log_softmax(logits[j], dim=1).detach(), F.softmax(logits[i], dim=1),
                          reduction="batchmean") for j in range(k) if j != i) / (k - 1)
        optimizer.zero_grad()
        (F.cross_entropy(logits[i], y) + kl).backward()
        optimizer.step()


def forward_inside_the_loop(peers, optimizers, x, y):
    """Each peer's targets computed in the loop, after the earlier peers have stepped (Algorithm 1, K peers)."""
    k = len(peers)
    for i in range(k):
        with torch.no_grad():
            targets = {j: F.softmax(peers[j](x), dim=1) for j in range(k) if j != i}
        logits = peers[i](x)
        kl = sum(_kl(logits, target) for target in targets.values()) / (k - 1)
        optimizers[i].zero_grad()
        (F.cross_entropy(logits, y) + kl).backward()
        optimizers[i].step()


def own_logits_detached(peers, optimizers, x, y):
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    for i, optimizer in enumerate(optimizers):
        others = [j for j in range(len(peers)) if j != i]
        kl = sum(_kl(logits[i].detach(), targets[j]) for j in others) / len(others)
        optimizer.zero_grad()
        (F.cross_entropy(logits[i], y) + kl).backward()
        optimizer.step()


def without_zero_grad(peers, optimizers, x, y):
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    for i, optimizer in enumerate(optimizers):
        _loss(i, logits, targets, y).backward()
        optimizer.step()


def kl_reduction_mean(peers, optimizers, x, y):
    warnings.filterwarnings("ignore", message="reduction: 'mean'", category=UserWarning)  # torch warns about it
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    k = len(peers)
    for i, optimizer in enumerate(optimizers):
        kl = sum(F.kl_div(F.log_softmax(logits[i], dim=1), targets[j], reduction="mean")
                 for j in range(k) if j != i) / (k - 1)
        optimizer.zero_grad()
        (F.cross_entropy(logits[i], y) + kl).backward()
        optimizer.step()


def losses_averaged_over_peers(peers, optimizers, x, y):
    for optimizer in optimizers:
        optimizer.zero_grad()
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    (sum(_loss(i, logits, targets, y) for i in range(len(peers))) / len(peers)).backward()
    for optimizer in optimizers:
        optimizer.step()


def only_two_peers(peers, optimizers, x, y):
    """Written for the worked fix's two peers: a third peer is never stepped."""
    (p1, p2), (o1, o2) = peers[:2], optimizers[:2]
    l1, l2 = p1(x), p2(x)
    for logits, other, optimizer in ((l1, l2, o1), (l2, l1, o2)):
        optimizer.zero_grad()
        (F.cross_entropy(logits, y) + _kl(logits, F.softmax(other, dim=1).detach())).backward()
        optimizer.step()


_last_targets = {}


def caches_the_targets(peers, optimizers, x, y):
    """State across calls: targets memoised by the input tensor, "to save forward passes"."""
    logits = [peer(x) for peer in peers]
    targets = _last_targets.setdefault((id(x), len(peers)), [F.softmax(out, dim=1).detach() for out in logits])
    for i, optimizer in enumerate(optimizers):
        optimizer.zero_grad()
        _loss(i, logits, targets, y).backward()
        optimizer.step()


def leaves_the_peers_frozen_but_one(peers, optimizers, x, y):
    """Freezes the other peers for each peer's update (a common idiom) and never unfreezes the last ones."""
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    for i, optimizer in enumerate(optimizers):
        for j, peer in enumerate(peers):
            peer.requires_grad_(j == i)
        optimizer.zero_grad()
        _loss(i, logits, targets, y).backward()
        optimizer.step()


def takes_a_peer_out_of_the_list(peers, optimizers, x, y):
    """pop()s from the lists it was given while looping."""
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    i = 0
    while optimizers:
        optimizer = optimizers.pop(0)
        optimizer.zero_grad()
        _loss(i, logits, targets, y).backward()
        optimizer.step()
        i += 1


def divides_by_the_notebook_batch(peers, optimizers, x, y):
    """Both terms summed over the batch, then divided by the notebook's 12 rows: right only for batches of 12."""
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    k = len(peers)
    for i, optimizer in enumerate(optimizers):
        kl = sum(F.kl_div(F.log_softmax(logits[i], dim=1), targets[j], reduction="sum") for j in range(k) if j != i)
        loss = (F.cross_entropy(logits[i], y, reduction="sum") + kl / (k - 1)) / 12
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def unfreezes_every_peer(peers, optimizers, x, y):
    """The freezing idiom undone with requires_grad_(True): a weight handed over frozen comes back trainable."""
    logits = [peer(x) for peer in peers]
    targets = [F.softmax(out, dim=1).detach() for out in logits]
    for i, optimizer in enumerate(optimizers):
        for j, peer in enumerate(peers):
            peer.requires_grad_(j == i)
        optimizer.zero_grad()
        _loss(i, logits, targets, y).backward()
        optimizer.step()
    for peer in peers:
        peer.requires_grad_(True)


def puts_the_peers_in_training_mode(peers, optimizers, x, y):
    for peer in peers:
        peer.train()
    all_forwards_then_each_peer(peers, optimizers, x, y)


OTHER_CORRECT = {
    "mutual_step": [all_forwards_then_each_peer, one_backward_of_the_sum, targets_from_a_no_grad_pass_reverse_order,
                    autograd_grad_restricted, manual_kl_with_inputs],
}

WRONG_ANSWERS = {
    "mutual_step": [
        (two_peer_fix_in_a_loop, "learned nothing from peers["),
        (targets_not_detached_retain_graph_steps_last, "the gradient of every peer's loss"),
        (targets_not_detached, "raised Error 1"),
        (targets_not_detached_retain_graph, "raised Error 2"),
        (sum_over_the_others, "summed over the other peers, not averaged"),
        (mean_over_all_peers, "averaged over all 3 peers, itself included"),
        (kl_direction_swapped, "the reversed direction"),
        (forward_inside_the_loop, "targets came from peers that had already stepped"),
        (own_logits_detached, "got only its cross-entropy gradient"),
        (without_zero_grad, "gradients pile up"),
        (kl_reduction_mean, "reduction='mean'"),
        (losses_averaged_over_peers, "with weight 0.333"),
        (only_two_peers, "optimizers[2] was never stepped"),
        (caches_the_targets, "predictions from an earlier step"),
        (leaves_the_peers_frozen_but_one, "requires_grad changed"),
        (takes_a_peer_out_of_the_list, "changed the lists it was given"),
        (divides_by_the_notebook_batch, "is a batch size written into your code?"),
        (unfreezes_every_peer, "`peers[0].0.weight.requires_grad` came back True"),
        (puts_the_peers_in_training_mode, "came back in training mode; it was handed to you in eval mode"),
    ],
}

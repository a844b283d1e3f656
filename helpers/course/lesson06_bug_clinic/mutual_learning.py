"""Case 3 of notebook 06: deep mutual learning (Zhang et al., 2018), two peer classifiers that teach each other.

Peer k's loss is its cross-entropy plus ``KL(p_other || p_k)``, where ``p_other``, the other peer's prediction,
is a fixed target, like a label::

    F.cross_entropy(logits_k, y) + F.kl_div(F.log_softmax(logits_k, dim=1), p_other, reduction="batchmean")

``F.kl_div(input, target)`` computes ``KL(target || input)``: the gradient must flow through ``input``, the peer's
own log-probabilities, and never through ``target``. This module holds the seeded peers and batch, the correct
(reference) step, and the gradients a step could plausibly give each peer, for the notebook and the checker.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.seeds import fresh
from helpers.tools.gradients import gradients_of, relative_error, same_gradients  # noqa: F401 (notebook)

IN_FEATURES = 8
HIDDEN = 16
CLASSES = 3
BATCH = 12
CPU = torch.device("cpu")

PeerGradients = Tuple[List[torch.Tensor], List[torch.Tensor]]  # (peer 1's gradients, peer 2's), by parameter

# The gradients a step could give each peer (keys of candidate_gradients).
REFERENCE = "its own loss, the other peer's prediction fixed"
MIXED = "loss1 + loss2 (each peer also gets the other's KL term)"
CE_ONLY = "its cross-entropy only (no KL term)"
REVERSED_KL = "its cross-entropy + the reversed KL(own || other)"


def make_peer(seed: int, device: torch.device = CPU) -> nn.Sequential:
    """A tiny classifier ``Linear(8, 16) -> ReLU -> Linear(16, 3)`` from ``seed`` (the global RNG is untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        peer = nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))
    return peer.to(device)


def make_peers(seed: int = 0, device: torch.device = CPU) -> Tuple[nn.Sequential, nn.Sequential]:
    """Peers 1 and 2: different initial weights (as mutual learning needs), the same for the same seed."""
    return make_peer(seed, device), make_peer(seed + 1, device)


def make_batch(seed: int = 0, device: torch.device = CPU) -> Tuple[torch.Tensor, torch.Tensor]:
    """One small fixed batch: inputs ``[12, 8]`` and class labels ``[12]`` in ``0..2``."""
    generator = torch.Generator().manual_seed(fresh(seed + 3000))
    x = torch.randn(BATCH, IN_FEATURES, generator=generator)
    y = torch.randint(0, CLASSES, (BATCH,), generator=generator)
    return x.to(device), y.to(device)


def mimicry_loss(logits: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    """``KL(target_probs || softmax(logits))`` averaged over the batch: the peer learns to match the target."""
    return F.kl_div(F.log_softmax(logits, dim=1), target_probs, reduction="batchmean")


def peer_losses(logits1: torch.Tensor, logits2: torch.Tensor, y: torch.Tensor,
                detach_targets: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(loss1, loss2)``; with ``detach_targets=False`` each loss also reaches the other peer (the broken form)."""
    target1, target2 = F.softmax(logits1, dim=1), F.softmax(logits2, dim=1)
    if detach_targets:
        target1, target2 = target1.detach(), target2.detach()
    loss1 = F.cross_entropy(logits1, y) + mimicry_loss(logits1, target2)
    loss2 = F.cross_entropy(logits2, y) + mimicry_loss(logits2, target1)
    return loss1, loss2




def own_loss_gradients(peer: nn.Module, target_probs: torch.Tensor, x: torch.Tensor,
                       y: torch.Tensor) -> List[torch.Tensor]:
    """The gradient of ``CE(peer(x), y) + KL(target_probs || peer's prediction)``, the target held fixed."""
    with torch.enable_grad():
        logits = peer(x)
        loss = F.cross_entropy(logits, y) + mimicry_loss(logits, target_probs.detach())
        return gradients_of(loss, peer)


def predictions(peer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The peer's predicted class probabilities, as a constant (no graph)."""
    with torch.no_grad():
        return F.softmax(peer(x), dim=1)


def reference_gradients(peer1: nn.Module, peer2: nn.Module, x: torch.Tensor, y: torch.Tensor) -> PeerGradients:
    """What a correct step gives each peer: the gradient of its own loss, the other's prediction fixed, now."""
    return (own_loss_gradients(peer1, predictions(peer2, x), x, y),
            own_loss_gradients(peer2, predictions(peer1, x), x, y))


def candidate_gradients(peer1: nn.Module, peer2: nn.Module, x: torch.Tensor,
                        y: torch.Tensor) -> Dict[str, PeerGradients]:
    """Every gradient a step could plausibly give each peer, at the current parameters, by name.

    REFERENCE is right; MIXED is what ``retain_graph=True`` without a detach gives (both backward passes add into
    both peers); CE_ONLY is what a detach on a peer's own logits (or on the whole KL term) gives; REVERSED_KL is
    what swapped ``kl_div`` arguments give. Nothing here touches ``.grad``.
    """
    with torch.enable_grad():
        logits1, logits2 = peer1(x), peer2(x)
        loss1, loss2 = peer_losses(logits1, logits2, y, detach_targets=False)
        mixed = (gradients_of(loss1 + loss2, peer1), gradients_of(loss1 + loss2, peer2))
        ce_only = (gradients_of(F.cross_entropy(logits1, y), peer1), gradients_of(F.cross_entropy(logits2, y), peer2))
        log_p1, log_p2 = F.log_softmax(logits1, dim=1), F.log_softmax(logits2, dim=1)
        reversed1 = F.kl_div(log_p2.detach(), log_p1, log_target=True, reduction="batchmean")  # KL(p1 || p2)
        reversed2 = F.kl_div(log_p1.detach(), log_p2, log_target=True, reduction="batchmean")  # KL(p2 || p1)
        reversed_kl = (gradients_of(F.cross_entropy(logits1, y) + reversed1, peer1),
                       gradients_of(F.cross_entropy(logits2, y) + reversed2, peer2))
    return {REFERENCE: reference_gradients(peer1, peer2, x, y), MIXED: mixed, CE_ONLY: ce_only,
            REVERSED_KL: reversed_kl}




def received(actual: Sequence[Optional[torch.Tensor]], candidates: Dict[str, PeerGradients], peer_index: int) -> str:
    """Which candidate gradient peer ``peer_index`` (0 or 1) received, or ``"something else"``."""
    for name, per_peer in candidates.items():
        if same_gradients(actual, per_peer[peer_index]):
            return name
    return "something else"




def reference_step(peer1: nn.Module, peer2: nn.Module, opt1: torch.optim.Optimizer, opt2: torch.optim.Optimizer,
                   x: torch.Tensor, y: torch.Tensor, peer2_first: bool = False) -> None:
    """One correct mutual-learning step in plain torch: each peer's target detached, so each loss reaches only its
    own peer, and the per-peer order (zero_grad, backward, step) is free: ``peer2_first`` gives the same result."""
    loss1, loss2 = peer_losses(peer1(x), peer2(x), y, detach_targets=True)
    order = [(opt1, loss1), (opt2, loss2)]
    for optimizer, loss in (reversed(order) if peer2_first else order):
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

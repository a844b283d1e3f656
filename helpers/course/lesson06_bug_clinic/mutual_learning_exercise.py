"""Exercise of notebook 06, case 3: one deep-mutual-learning step in which each peer gets exactly its own gradient.

Fixed contract: ``mutual_step(peer1, peer2, opt1, opt2, x, y) -> None``. Peer k's loss is
``F.cross_entropy(logits_k, y) + F.kl_div(F.log_softmax(logits_k, dim=1), p_other, reduction="batchmean")``,
that is cross-entropy + KL(p_other || p_k), with the other peer's prediction ``p_other`` a fixed target. Both
gradients come from one forward pass, at the parameters the step started with (the simultaneous step; the
paper's Algorithm 1 re-runs the forward pass between the two updates, which this exercise diagnoses separately).
The KL direction is enforced: the swapped one, KL(p_k || p_other), is rejected.

The checker steps the learner's function with optimizers that record the gradient they are stepped with, for
several consecutive steps, and compares those gradients with plain-torch references.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from helpers.course.exercises.compare import added, close, flattened, scale_factor
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson06_bug_clinic.mutual_learning import (
    CE_ONLY,
    CLASSES,
    MIXED,
    REFERENCE,
    REVERSED_KL,
    PeerGradients,
    candidate_gradients,
    make_batch,
    make_peers,
    own_loss_gradients,
    predictions,
    same_gradients,
)
from helpers.course.recording import RecordingSGD

EXERCISE_ID = "mutual_step"
STEPS = 3
LEARNING_RATE = 0.1
SEED = 7

HINTS = (
    "Written the usual way, loss2.backward() fails with 'Trying to backward through the graph a second time', "
    "and retain_graph=True trades that for 'modified by an inplace operation', or, with the steps moved last, for "
    "a silent bug: each peer is also trained by the other peer's loss.",
    "softmax(logits2) is peer 1's target, but as written it is still connected to peer 2: loss1 reaches peer 2 "
    "through it (its backward frees peer 2's graph and adds into peer 2's .grad), and loss2 reaches peer 1 "
    "through softmax(logits1). A target should be a constant.",
    "Each peer's loss uses the other peer's probabilities as its target: make that target a constant with "
    ".detach(), so each loss reaches only its own peer. Then zero, backward and step per peer, in either order.",
)

Peers = Tuple[nn.Module, nn.Module]


_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise
    "inplace-version": (
        "Typically here: a peer was stepped while a later backward still needed its old weights, "
        "because a target softmax(logits) that is not detached connects each loss to the other peer. "
        "Detach each target; then stepping one peer never touches the other loss's graph."
    ),
    "backward-twice": (
        "Typically here: a target softmax(logits) that is not detached connects each loss to the "
        "other peer, so the first backward frees a peer's graph that the second needs again. "
        "retain_graph=True would lead to error 2, or, with the steps moved last, give each peer the "
        "other's KL gradient: detach each peer's target instead."
    ),
}


def _schedule_gradients(before: Peers, after: Peers, x: torch.Tensor, y: torch.Tensor) -> PeerGradients:
    """Each peer's own-loss gradient (at its parameters before the step) against the OTHER peer's prediction after
    its step: what you get by re-running the forward pass between the two updates, as the paper's Algorithm 1."""
    return (own_loss_gradients(before[0], predictions(after[1], x), x, y),
            own_loss_gradients(before[1], predictions(after[0], x), x, y))


def _kl_factor(recorded: Sequence[Optional[torch.Tensor]], cand: Dict[str, PeerGradients],
               index: int) -> Optional[float]:
    """When the recorded gradient is cross-entropy + f x the KL term's gradient, that f; else None."""
    ce, reference = cand[CE_ONLY][index], cand[REFERENCE][index]
    kl_part = [r - c for r, c in zip(reference, ce)]
    recorded_kl = [(torch.zeros_like(c) if g is None else g) - c for g, c in zip(recorded, ce)]
    return scale_factor(flattened(recorded_kl, kl_part), flattened(kl_part, kl_part))


def _diagnose(index: int, recorded: List[Optional[torch.Tensor]], cand: Dict[str, PeerGradients],
              schedule: PeerGradients, previous: Optional[List[Optional[torch.Tensor]]],
              previous_reference: Optional[List[torch.Tensor]], gradient_computed: bool, step: int) -> str:
    peer, other = f"peer {index + 1}", f"peer {2 - index}"
    own, other_loss = f"loss{index + 1}", f"loss{2 - index}"
    logits, other_logits = f"logits{index + 1}", f"logits{2 - index}"
    if all(g is None or not bool(g.abs().sum()) for g in recorded):
        if gradient_computed:
            return (f"On step {step}, a gradient for {peer} was computed, but .grad was empty when its optimizer "
                    "stepped: call zero_grad() before backward(), and step() after it.")
        return (f"On step {step}, {peer} was stepped with no gradient at all. Did a detach cut {logits} out of "
                f"{own}? Detach only the target, softmax({other_logits}).")
    if previous_reference is not None and same_gradients(recorded, previous_reference):
        return f"On step {step}, {peer} was stepped with the previous step's gradient: compute this step's first."
    if same_gradients(recorded, cand[MIXED][index]):
        return (f"On step {step}, {peer} was stepped with the gradient of loss1 + loss2, not of {own} alone: "
                f"{other_loss}'s KL term pushed gradient into {peer} through softmax({logits}), which is "
                f"{other}'s target and should be a constant. That is what retain_graph=True gives when both steps come after both "
                "backward passes, without a detach. "
                f"Detach each target, e.g. F.softmax({other_logits}, dim=1).detach() in {own}.")
    if same_gradients(recorded, cand[CE_ONLY][index]):
        return (f"On step {step}, {peer} got only its cross-entropy gradient: the KL term gave it nothing, so it "
                f"does not learn from {other} at all. A detach cut {peer}'s own log_softmax({logits}) out of the "
                f"KL term (or the whole KL term was detached). Detach only the target, softmax({other_logits}).")
    if same_gradients(recorded, cand[REVERSED_KL][index]):
        return (f"On step {step}, {peer} was trained on KL(p{index + 1} || p{2 - index}), the reversed direction: "
                f"its gradient flowed through the target argument of kl_div. F.kl_div(input, target) computes "
                f"KL(target || input): pass F.log_softmax({logits}, dim=1) as input and the detached "
                f"F.softmax({other_logits}, dim=1) as target (the arguments are swapped, or the detach is on "
                "log_softmax instead of the target).")
    if same_gradients(recorded, schedule[index]):
        return (f"On step {step}, {peer}'s gradient used {other}'s prediction after {other}'s update: you ran a "
                "new forward pass between the two updates (as the paper's Algorithm 1 does). This exercise asks "
                "for the simultaneous step: one forward pass, and both gradients at the parameters the step "
                "started with.")
    if previous is not None and any(same_gradients(recorded, added(cand[name][index], previous))
                                    for name in (REFERENCE, MIXED)):
        return (f"On step {step}, {peer}'s gradient still contained the previous step's: gradients pile up. Call "
                "zero_grad() on each optimizer before its backward, every step.")
    expected = cand[REFERENCE][index]
    factor = scale_factor(flattened(recorded, expected), flattened(expected, expected))
    if factor is not None:
        return (f"On step {step}, {peer} was stepped with {factor:.3g} times the gradient of {own}. "
                "Did you scale or average the losses?")
    kl_factor = _kl_factor(recorded, cand, index)
    if kl_factor is not None:
        why = (f" reduction='mean' averages over the {CLASSES} classes too: use reduction='batchmean'."
               if abs(kl_factor * CLASSES - 1) < 1e-3 else " Use reduction='batchmean' and no weight on the KL term.")
        return (f"On step {step}, the cross-entropy part of {peer}'s gradient is right, but the KL term's part is "
                f"{kl_factor:.3g} times what it should be.{why}")
    return (f"On step {step}, {peer}'s gradient differs from the gradient of {own} = cross-entropy + "
            f"KL(p{2 - index} || p{index + 1}) with {other}'s prediction fixed, at the parameters the step started "
            "with. Use F.cross_entropy and F.kl_div(F.log_softmax(own logits, dim=1), detached other prediction, "
            "reduction='batchmean').")


def _hooks(peers: Peers, computed: set) -> List[Any]:
    """Record, in ``computed``, the index of every peer for which some backward computed a gradient."""
    return [p.register_hook(lambda grad, index=index: computed.add(index))
            for index, peer in enumerate(peers) for p in peer.parameters()]


def _check(step_function: Callable[..., Any]) -> Optional[str]:
    """Run the learner's step for several consecutive steps; the diagnosis, or None if right."""
    peers = make_peers(seed=SEED)
    optimizers = (RecordingSGD(peers[0].parameters(), lr=LEARNING_RATE),
                  RecordingSGD(peers[1].parameters(), lr=LEARNING_RATE))
    previous: List[Optional[List[Optional[torch.Tensor]]]] = [None, None]
    previous_cand: Optional[Dict[str, PeerGradients]] = None
    for step in range(1, STEPS + 1):
        x, y = make_batch(seed=SEED + step)
        cand = candidate_gradients(*peers, x, y)
        before: Peers = (copy.deepcopy(peers[0]), copy.deepcopy(peers[1]))
        counts = [len(optimizer.records) for optimizer in optimizers]
        computed: set = set()
        hooks = _hooks(peers, computed)
        try:
            run_step(step_function, step, *peers, *optimizers, x, y, explanations=_ERROR_EXPLANATIONS)
        finally:
            for hook in hooks:
                hook.remove()
        for index, (optimizer, count) in enumerate(zip(optimizers, counts)):
            calls = len(optimizer.records) - count
            if calls != 1:
                what = "never stepped" if calls == 0 else f"stepped {calls} times"
                return (f"On step {step}, peer {index + 1}'s optimizer was {what}; each call should step each "
                        "optimizer exactly once.")
        for index, optimizer in enumerate(optimizers):
            grads = [torch.zeros_like(b) if g is None else g
                     for b, g in zip(before[index].parameters(), optimizer.records[-1])]
            expected_after = [b.detach() - LEARNING_RATE * g for b, g in zip(before[index].parameters(), grads)]
            if not all(close(p, e) for p, e in zip(peers[index].parameters(), expected_after)):
                return (f"On step {step}, peer {index + 1}'s parameters changed other than through its optimizer's "
                        "step(). Change weights only with opt.step().")
        schedule = _schedule_gradients(before, peers, x, y)
        for index, optimizer in enumerate(optimizers):
            recorded = optimizer.records[-1]
            if not same_gradients(recorded, cand[REFERENCE][index]):
                previous_reference = previous_cand[REFERENCE][index] if previous_cand is not None else None
                return _diagnose(index, recorded, cand, schedule, previous[index], previous_reference,
                                 index in computed, step)
            previous[index] = recorded
        previous_cand = cand
    return None


def check_mutual_step(step_function: Callable[..., Any]) -> CheckResult:
    """Run the learner's step for several consecutive steps and compare each peer's gradient with the reference."""
    diagnosis = _check(step_function)
    if diagnosis is not None:
        return failed(EXERCISE_ID, diagnosis)
    return passed(EXERCISE_ID, f"For {STEPS} consecutive steps, each peer was stepped with exactly the gradient of its "
                               "own loss (cross-entropy + KL(other || own), the other peer's prediction held fixed), "
                               "both taken at the parameters the step started with.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="mutual_step",
    checker=check_mutual_step,
    hints=HINTS,
)

"""Exercise of notebook 06, case 3: deep mutual learning with K peers (the paper's general form), each peer stepped
with exactly its own gradient.

Fixed contract: ``mutual_step(peers, optimizers, x, y) -> None`` with two lists of the same length K >= 2
(``optimizers[i]`` holds ``peers[i]``'s parameters). Peer i's loss is

    F.cross_entropy(logits_i, y) + mean over j != i of F.kl_div(F.log_softmax(logits_i, dim=1), p_j,
                                                                reduction="batchmean")

that is cross-entropy + the mean of KL(p_j || p_i) over the K - 1 other peers, every other peer's prediction
``p_j = softmax(logits_j)`` a fixed target. All gradients come from one forward pass of each peer, at the weights
the step started with (no peer's update may change another peer's targets within the step); each optimizer is
stepped exactly once.

What has to transfer from the worked fix (two peers, two hand-written losses): the detach of every target in a
loop over peers, the mean over the others, and "every forward pass before any step" once there are more than two.

The checker runs sessions of consecutive steps with 3 and with 2 peers, other optimizer kinds, and new data every
step (fresh tensors, or the same tensors refilled in place), records the gradient each ``step()`` was given, and
explains a wrong gradient by fitting it as cross-entropy + a weight per other peer's KL term.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.exercises.compare import added, flattened, same_gradients, scale_factor
from helpers.course.exercises.engine import step_watch
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson06_bug_clinic.mutual_learning import (
    CLASSES,
    gradients_of,
    make_batch,
    make_peer,
    mimicry_loss,
    predictions,
)
from helpers.course.lesson06_bug_clinic.mutual_learning_contract import CONTRACT
from helpers.language import marked, tr

EXERCISE_ID = "mutual_step"
STEPS = 3

Grads = List[torch.Tensor]


@dataclass(frozen=True)
class Session:
    """One run of consecutive steps: the seed, one optimizer kind per peer (so K peers), how new data arrives."""

    seed: int
    kinds: Tuple[str, ...]
    refill_in_place: bool

    def describe(self) -> str:
        return tr("{count} peers", count=len(self.kinds))


SESSIONS = (Session(7, ("SGD", "SGD", "SGD"), False),
            Session(8, ("fused Adam", "AdamW"), True),
            Session(9, ("AdamW", "SGD with momentum", "Adam"), True))

HINTS = (
    marked("With more than two peers, each peer's loss has one KL term per other peer. Written as in the worked fix "
           "but in a loop, the step raises error 1 or 2, or runs and silently trains a peer on another peer's loss, "
           "on predictions from after another peer's update, or with the KL terms summed."),
    marked("Every p_j is a target for the other peers: not detached, it connects peer i's loss to peer j. And a loop "
           "that runs peer j's forward pass after another peer has stepped gives targets from the new weights, not "
           "from the weights the step started with. The KL part is a mean over the K - 1 others."),
    marked("First run every peer's forward pass once and keep each peer's probabilities, detached, as the targets. "
           "Then, for each peer, build its loss from its own logits: cross-entropy plus the average, over the other "
           "peers, of kl_div of its own log_softmax against their target with batchmean reduction. Zero, backward "
           "and step each peer's optimizer, in any order."),
)

_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise
    "inplace-version": marked(
        "A peer was stepped while a later backward still needed its old weights: a target softmax(logits_j) that "
        "is not detached connects the other peers' losses to peer j. Detach every target."
    ),
    "backward-twice": marked(
        "A target softmax(logits_j) that is not detached connects every other peer's loss to peer j, so the first "
        "backward frees peer j's graph that a later one needs. Detach every target (retain_graph=True would lead "
        "to error 2, or to mixed gradients)."
    ),
}


def _kl(logits_own: torch.Tensor, target_logits: torch.Tensor) -> torch.Tensor:
    """KL(p_target || p_own), the target held fixed."""
    return mimicry_loss(logits_own, F.softmax(target_logits, dim=1).detach())


def candidate_gradients(peers: Sequence[nn.Module], x: torch.Tensor, y: torch.Tensor) -> Dict[str, Any]:
    """On copies at the current weights, for each peer i: ``"ce"[i]``, ``"kl"[i][j]`` (the gradient of
    KL(p_j || p_i), p_j fixed; None for j == i), ``"mixed"[i]`` (every loss's gradient that reaches peer i when no
    target is detached), ``"reversed"[i]`` (the reversed KL), ``"right"[i]``; ``"targets"``: every p_j, detached."""
    copies = [copy.deepcopy(peer) for peer in peers]
    k = len(peers)
    with torch.enable_grad():
        logits = [peer(x) for peer in copies]
        ce = [gradients_of(F.cross_entropy(logits[i], y), copies[i]) for i in range(k)]
        kl = [[None if j == i else gradients_of(_kl(logits[i], logits[j]), copies[i]) for j in range(k)]
              for i in range(k)]
        undetached = sum(F.cross_entropy(logits[i], y) + sum(
            F.kl_div(F.log_softmax(logits[i], dim=1), F.softmax(logits[j], dim=1), reduction="batchmean")
            for j in range(k) if j != i) / (k - 1) for i in range(k))
        mixed = [gradients_of(undetached, copies[i]) for i in range(k)]
        reversed_kl = [gradients_of(F.cross_entropy(logits[i], y) + sum(
            F.kl_div(F.log_softmax(logits[j], dim=1).detach(), F.softmax(logits[i], dim=1), reduction="batchmean")
            for j in range(k) if j != i) / (k - 1), copies[i]) for i in range(k)]
    right = [[c + sum(kl[i][j][n] for j in range(k) if j != i) / (k - 1) for n, c in enumerate(ce[i])]
             for i in range(k)]
    return {"ce": ce, "kl": kl, "mixed": mixed, "reversed": reversed_kl, "right": right, "copies": copies,
            "targets": [F.softmax(out, dim=1).detach() for out in logits]}


def fit(recorded: Sequence[Optional[torch.Tensor]], cand: Dict[str, Any], i: int) -> Optional[Dict[Any, float]]:
    """The weights w with ``recorded = w["ce"] * CE_i + sum_j w[j] * KL_ij``, or None when no weights fit."""
    k = len(cand["ce"])
    like = cand["ce"][i]
    columns = [flattened(cand["ce"][i], like).double()]
    labels: List[Any] = ["ce"]
    for j in range(k):
        if j != i:
            columns.append(flattened(cand["kl"][i][j], like).double())
            labels.append(j)
    basis = torch.stack(columns, dim=1)
    target = flattened(recorded, like).double()
    if not bool(torch.isfinite(target).all()):
        return None
    solution = torch.linalg.lstsq(basis, target.unsqueeze(1)).solution.squeeze(1)
    if float((basis @ solution - target).norm()) > 1e-4 * max(float(target.norm()), 1e-12):
        return None
    return {label: float(value) for label, value in zip(labels, solution)}


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-3 * max(abs(b), 1e-2)


def _explain_fit(weights: Dict[Any, float], i: int, k: int, where: str) -> Optional[str]:
    peer = f"peers[{i}]"
    others = [j for j in weights if j != "ce"]
    kl_weights = [weights[j] for j in others]
    if not _near(weights["ce"], 1):
        return tr("{where}, {peer}'s cross-entropy reached it with weight {weight}: the cross-entropy enters each "
                  "peer's loss unweighted (did you scale or average the losses?).", where=where, peer=peer,
                  weight=f"{weights['ce']:.3g}")
    if all(_near(w, 0) for w in kl_weights):
        return tr("{where}, {peer} got only its cross-entropy gradient: the KL terms gave it nothing, so it does "
                  "not learn from the other peers. A detach cut its own log_softmax(logits_{index}) out of the KL "
                  "terms (or the whole KL term was detached). Detach only the targets, the other peers' "
                  "probabilities.", where=where, peer=peer, index=i)
    missing = [j for j in others if _near(weights[j], 0)]
    if missing and not all(_near(weights[j], 0) for j in others):
        names = ", ".join(f"peers[{j}]" for j in missing)
        return tr("{where}, {peer} learned nothing from {names}: each peer's loss has a KL term for every other "
                  "peer ({others} of them here), not only one - a pairing copied from the two-peer fix?",
                  where=where, peer=peer, names=names, others=k - 1)
    if all(_near(w, kl_weights[0]) for w in kl_weights):
        w = kl_weights[0]
        if _near(w, 1) and k > 2:
            return tr("{where}, {peer}'s KL terms were summed over the other peers, not averaged: with {count} peers "
                      "that is {others} times the mean. Divide the sum by K - 1, the number of other peers.",
                      where=where, peer=peer, count=k, others=k - 1)
        if _near(w, 1 / k):
            return tr("{where}, {peer}'s KL terms were averaged over all {count} peers, itself included: the mean is "
                      "over the K - 1 = {others} other peers.", where=where, peer=peer, count=k, others=k - 1)
        if _near(w * (k - 1), 1 / CLASSES):
            return tr("{where}, {peer}'s KL part is 1/{classes} of what it should be: reduction='mean' averages over "
                      "the classes too. Use reduction='batchmean'.", where=where, peer=peer, classes=CLASSES)
        return tr("{where}, {peer}'s KL part has weight {weight} times the mean over the other peers; the contract "
                  "adds the mean of the KL terms, unweighted, with reduction='batchmean'.", where=where, peer=peer,
                  weight=f"{w * (k - 1):.3g}")
    return None


def _diagnose(i: int, recorded: List[Optional[torch.Tensor]], cand: Dict[str, Any],
              leftover: List[Optional[torch.Tensor]], computed: bool, sequential: Grads, earlier: List[Grads],
              where: str) -> str:
    k = len(cand["ce"])
    peer = f"peers[{i}]"
    if all(g is None or not bool(g.abs().sum()) for g in recorded):
        if computed:
            return tr("{where}, a gradient for {peer} was computed, but its .grad was empty when its optimizer "
                      "stepped: zero_grad() before backward(), and step() after it.", where=where, peer=peer)
        return tr("{where}, {peer} was stepped with no gradient at all. Did a detach cut its own logits out of its "
                  "loss? Detach only the targets, the other peers' probabilities.", where=where, peer=peer)
    if any(g is not None and bool(g.abs().sum()) for g in leftover) and same_gradients(
            recorded, added(cand["right"][i], leftover)):
        return tr("{where}, {peer}'s gradient still contained the previous step's: gradients pile up. Call "
                  "zero_grad() on every optimizer before its backward, every step.", where=where, peer=peer)
    if same_gradients(recorded, cand["mixed"][i]):
        return tr("{where}, {peer} was stepped with the gradient of every peer's loss, not of its own alone: the "
                  "other peers' KL terms pushed gradient into {peer} through softmax(logits_{index}), their target, "
                  "which should be a constant. Detach every target: F.softmax(logits_{index}, dim=1).detach() where "
                  "the other peers use it.", where=where, peer=peer, index=i)
    if same_gradients(recorded, cand["reversed"][i]):
        return tr("{where}, {peer} was trained on KL(p_{index} || p_j), the reversed direction: its gradient flowed "
                  "through the target argument of kl_div. F.kl_div(input, target) computes KL(target || input): "
                  "pass the peer's own F.log_softmax(logits_{index}, dim=1) as input and the detached probabilities "
                  "of the other peer as target.", where=where, peer=peer, index=i)
    if same_gradients(recorded, sequential):
        return tr("{where}, {peer}'s targets came from peers that had already stepped: a forward pass ran after "
                  "another peer's update. Every gradient of the step comes from one forward pass of each peer, at "
                  "the weights the step started with: run all forward passes (and keep the detached targets) "
                  "before the first step.", where=where, peer=peer)
    if any(same_gradients(recorded, old) for old in earlier):
        return tr("{where}, {peer}'s targets were predictions from an earlier step: something kept them between "
                  "calls (a cache, a global, a default argument). Compute every target in the step, from this "
                  "step's x.", where=where, peer=peer)
    weights = fit(recorded, cand, i)
    if weights is not None:
        explained = _explain_fit(weights, i, k, where)
        if explained is not None:
            return explained
    expected = cand["right"][i]
    factor = scale_factor(flattened(recorded, expected), flattened(expected, expected))
    if factor is not None:
        return tr("{where}, {peer} was stepped with {factor} times the gradient of its loss: did you scale it?",
                  where=where, peer=peer, factor=f"{factor:.3g}")
    return tr("{where}, {peer}'s gradient differs from that of its loss: cross-entropy + the mean over the other "
              "peers of KL(p_j || p_i), every p_j held fixed, all at the weights the step started with. Use "
              "F.cross_entropy and F.kl_div(F.log_softmax(own logits, dim=1), detached p_j, reduction='batchmean').",
              where=where, peer=peer)


def _sequential_gradients(i: int, cand: Dict[str, Any], peers: Sequence[nn.Module], stepped_before: List[bool],
                          x: torch.Tensor, y: torch.Tensor) -> Grads:
    """Peer i's gradient (at its start weights) when the targets of peers already stepped come from their new
    weights: what a loop that runs each peer's forward pass after the previous peers' steps gives."""
    k = len(peers)
    targets = [predictions(peers[j], x) if stepped_before[j] else cand["targets"][j] for j in range(k)]
    return _own_gradients(cand["copies"][i], [targets[j] for j in range(k) if j != i], x, y)


def _own_gradients(peer: nn.Module, targets: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> Grads:
    with torch.enable_grad():
        logits = peer(x)
        kl = sum(mimicry_loss(logits, target.detach()) for target in targets) / len(targets)
        return gradients_of(F.cross_entropy(logits, y) + kl, peer)


def _hooks(peers: Sequence[nn.Module], computed: set) -> List[Any]:
    """Record, in ``computed``, the index of every peer for which some backward computed a gradient."""
    return [p.register_hook(lambda grad, index=index: computed.add(index))
            for index, peer in enumerate(peers) for p in peer.parameters()]


def _run_session(step_function: Callable[..., Any], session: Session) -> Optional[str]:
    """Run one session of consecutive steps; the diagnosis, or None when every step was right."""
    k = len(session.kinds)
    peers = [make_peer(session.seed * 10 + index) for index in range(k)]
    log: List[str] = []
    optimizers = [step_watch.kind(kind)(peer.parameters()) for kind, peer in zip(session.kinds, peers)]
    records = [step_watch.watch(opt, str(index), log) for index, opt in enumerate(optimizers)]
    peer_list, optimizer_list = list(peers), list(optimizers)
    x, y = make_batch(seed=session.seed * 10)
    earlier_targets: List[List[torch.Tensor]] = []
    for step in range(1, STEPS + 1):
        where = tr("On step {step} ({session})", step=step, session=session.describe())
        if session.refill_in_place:
            x, y = step_watch.fill_in_place((x, y), make_batch(seed=session.seed * 10 + step))
        else:
            x, y = make_batch(seed=session.seed * 10 + step)
        cand = candidate_gradients(peers, x, y)
        start = [[p.detach().clone() for p in peer.parameters()] for peer in peers]
        leftover = [[None if p.grad is None else p.grad.detach().clone() for p in peer.parameters()]
                    for peer in peers]
        counts = [len(record.calls) for record in records]
        named_peers = {f"peers[{index}]": peer for index, peer in enumerate(peers)}
        named_optimizers = {f"optimizers[{index}]": opt for index, opt in enumerate(optimizers)}
        before = step_watch.snapshot({"x": x, "y": y}, named_peers, named_optimizers)
        computed: set = set()
        hooks = _hooks(peers, computed)
        first_event = len(log)
        try:
            run_step(step_function, step, peer_list, optimizer_list, x, y, explanations=_ERROR_EXPLANATIONS)
        finally:
            for hook in hooks:
                hook.remove()
        if peer_list != peers or optimizer_list != optimizers or any(
                a is not b for a, b in zip(peer_list + optimizer_list, peers + optimizers)):
            return tr("{where}, your step changed the lists it was given (peers or optimizers): read them, never "
                      "edit.", where=where)
        calls = [step_watch.calls_in(record, count) for record, count in zip(records, counts)]
        for index, peer in enumerate(peers):
            if not calls[index] and step_watch.moved_outside_step(list(peer.parameters()), start[index], []):
                return tr("{where}, peers[{index}]'s weights changed, but not through optimizers[{index}]: step with "
                          "the optimizers you were given; do not build your own (nor keep one between calls).",
                          where=where, index=index)
            if not calls[index]:
                return tr("{where}, optimizers[{index}] was never stepped; each call steps each optimizer exactly "
                          "once (all of them: the list may have any length).", where=where, index=index)
            if len(calls[index]) != 1:
                return tr("{where}, optimizers[{index}] was stepped {count} times; each call steps each optimizer "
                          "exactly once (all of them: the list may have any length).", where=where, index=index,
                          count=len(calls[index]))
        change = step_watch.changed(before, {"x": x, "y": y}, named_peers, named_optimizers)
        if change is not None:
            return tr("{where}, your step {change}.", where=where, change=change)
        for index, peer in enumerate(peers):
            if step_watch.moved_outside_step(list(peer.parameters()), start[index], calls[index]):
                return tr("{where}, peers[{index}]'s weights changed other than through optimizers[{index}].step(). "
                          "Change weights only with the optimizers you were given.", where=where, index=index)
        events = log[first_event:]
        step_at = {int(event.split(":")[0]): position for position, event in enumerate(events)}
        for index in range(k):
            recorded = calls[index][0].grads
            if same_gradients(recorded, cand["right"][index]):
                continue
            stepped_before = [step_at[j] < step_at[index] for j in range(k)]
            sequential = _sequential_gradients(index, cand, peers, stepped_before, x, y)
            earlier = [_own_gradients(cand["copies"][index], [old[j] for j in range(k) if j != index], x, y)
                       for old in earlier_targets]
            return _diagnose(index, recorded, cand, leftover[index], index in computed, sequential, earlier, where)
        earlier_targets.append(cand["targets"])
    return None


def check_mutual_step(step_function: Callable[..., Any]) -> CheckResult:
    """Run the learner's step in sessions of consecutive steps with 3 and 2 peers; compare each peer's gradient with
    plain torch, and check that nothing else changed."""
    for session in SESSIONS:
        diagnosis = _run_session(step_function, session)
        if diagnosis is not None:
            return failed(EXERCISE_ID, diagnosis)
    return passed(EXERCISE_ID, tr("In {runs} runs of {steps} consecutive steps (3 peers and 2, SGD, Adam, AdamW, new "
                                  "data every step), each peer was stepped once with exactly the gradient of its own "
                                  "loss - cross-entropy + the mean of KL(p_j || p_i) over the other peers, each p_j "
                                  "held fixed - all from one forward pass at the weights the step started with.",
                                  runs=len(SESSIONS), steps=STEPS))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="mutual_step",
    checker=check_mutual_step,
    hints=HINTS,
    contract=CONTRACT,
)

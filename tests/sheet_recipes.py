"""Two-loss training steps on the course's M1 and M2, as the cheat sheet's fixes describe them, run live.

A ``Step`` says how one training step takes its gradients (two backward passes, ``torch.autograd.grad``, a detached
target, a summed loss), which backward passes are restricted with ``inputs=``, whether the first keeps the graph,
where the steps go, and under DDP how the models are wrapped. ``run_step`` runs it on one process; ``ddp_worker`` runs
a list of them on every rank of a process group (``helpers.tools.spawn.run_distributed`` imports it by name, so it
lives here, at the top of a module). What each optimizer was stepped with is recorded at its ``step()``, and
``verdict`` names it: ``"own"`` (M1 got dL1/dM1 and M2 dL2/dM2), ``"joint"`` (each got d(L1 + L2)), ``"other"``,
``"raises <kind>"``, or under DDP ``"ranks differ"``; the references come from ``torch.autograd.grad``.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from helpers.course.models import make_inputs, make_two_models, own_term, two_losses
from helpers.tools.errors import classify

Grads = list[torch.Tensor | None]
Stepped = dict[str, Grads]            # "M1" / "M2" -> the gradient its optimizer was stepped with
METHODS = ("backward", "grad", "detach", "detach_own", "sum")
OPTIMIZERS: dict[str, Callable[[Sequence[torch.Tensor]], torch.optim.Optimizer]] = {
    "SGD": lambda params: torch.optim.SGD(params, lr=0.1),
    "fused AdamW": lambda params: torch.optim.AdamW(params, lr=0.05, fused=True),  # bumps no version on the CPU
}


@dataclass(frozen=True)
class Step:
    """One training step of M1 (trained by L1) and M2 (by L2), both optimizers zeroed first.

    method: ``"backward"`` (L1's backward, then L2's), ``"grad"`` (``torch.autograd.grad`` of each loss for its own
        model, written into ``.grad``), ``"detach"`` (each loss sees the other model's output detached; one backward
        of the sum), ``"detach_own"`` (each loss sees its own model's output detached), ``"sum"`` (``(l1 + l2)
        .backward()``).
    restrict: for ``"backward"``, whether L1's backward has ``inputs=`` M1's parameters, and L2's M2's.
    retain: ``retain_graph=True`` on the first backward (or ``autograd.grad`` call).
    steps: ``"last"`` (both steps after every backward) or ``"between"`` (M1 steps right after L1's backward).
    wrapping: under DDP, ``"per model"`` (one DDP each) or ``"both"`` (one DDP around both models); None: no DDP.
    """

    method: str = "backward"
    restrict: tuple[bool, bool] = (False, False)
    retain: bool = True
    steps: str = "last"
    wrapping: str | None = None

    def describe(self) -> str:
        """A short readable form, for failure messages."""
        parts = [self.method]
        if self.method == "backward":
            parts.append("inputs=" + "/".join("own" if r else "all" for r in self.restrict))
        if self.method in ("backward", "grad"):
            parts.append("retain_graph first" if self.retain else "no retain_graph")
            parts.append(f"steps {self.steps}")
        if self.wrapping:
            parts.append(f"DDP {self.wrapping}")
        return ", ".join(parts)


def _losses(step: Step, o1: torch.Tensor, o2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if step.method == "detach":
        return two_losses(o1, o2.detach())[0], two_losses(o1.detach(), o2)[1]
    if step.method == "detach_own":
        return two_losses(o1.detach(), o2)[0], two_losses(o1, o2.detach())[1]
    return two_losses(o1, o2)


def _record(optimizer: torch.optim.Optimizer, name: str, stepped: Stepped) -> None:
    """At each ``optimizer.step()``, keep the gradient it is about to use."""
    def keep(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        stepped[name] = [None if p.grad is None else p.grad.detach().cpu().clone()
                         for group in opt.param_groups for p in group["params"]]
    optimizer.register_step_pre_hook(keep)


def take_step(step: Step, m1: nn.Module, m2: nn.Module, forward: Callable[[], tuple[torch.Tensor, torch.Tensor]],
              opt1: torch.optim.Optimizer, opt2: torch.optim.Optimizer) -> None:
    """One step as ``step`` describes it; ``forward()`` returns (O1, O2), through DDP wrappers or not."""
    opt1.zero_grad(set_to_none=True)
    opt2.zero_grad(set_to_none=True)
    l1, l2 = _losses(step, *forward())
    p1, p2 = list(m1.parameters()), list(m2.parameters())
    if step.method in ("detach", "detach_own", "sum"):
        (l1 + l2).backward()
        opt1.step()
        opt2.step()
        return

    def backward(loss: torch.Tensor, params: list[torch.Tensor], restricted: bool, retain: bool) -> None:
        if step.method == "grad":
            for param, grad in zip(params, torch.autograd.grad(loss, params, retain_graph=retain)):
                param.grad = grad
        else:
            loss.backward(retain_graph=retain, inputs=params if restricted else None)

    backward(l1, p1, step.restrict[0], step.retain)
    if step.steps == "between":
        opt1.step()
    backward(l2, p2, step.restrict[1], False)
    if step.steps != "between":
        opt1.step()
    opt2.step()


def outcome_of(run: Callable[[], None], stepped: Stepped, final: Callable[[], Stepped]) -> dict[str, Any]:
    """Run ``run``: what it raised (an error kind, or its first line), what each optimizer was stepped with, and
    every ``.grad`` at the end."""
    try:
        run()
        raised = None
    except RuntimeError as error:
        kind = classify(error)
        raised = kind.name if kind else str(error).splitlines()[0]
    return {"raised": raised, "stepped": dict(stepped), "final": final()}


def _grads(model: nn.Module) -> Grads:
    return [None if p.grad is None else p.grad.detach().cpu().clone() for p in model.parameters()]


def run_step(step: Step, optimizer: str = "SGD", seed: int = 0) -> dict[str, Any]:
    """``step`` on one process, on fresh models and the course's inputs, with ``optimizer`` for both models."""
    m1, m2 = make_two_models(seed)
    x1, x2 = make_inputs(seed)
    opt1, opt2 = OPTIMIZERS[optimizer](list(m1.parameters())), OPTIMIZERS[optimizer](list(m2.parameters()))
    stepped: Stepped = {}
    _record(opt1, "M1", stepped)
    _record(opt2, "M2", stepped)
    return outcome_of(lambda: take_step(step, m1, m2, lambda: (m1(x1), m2(x2)), opt1, opt2), stepped,
                      lambda: {"M1": _grads(m1), "M2": _grads(m2)})


def references(x1: torch.Tensor, x2: torch.Tensor, seed: int = 0) -> dict[str, Stepped]:
    """``"own"``: dL1/dM1 and dL2/dM2; ``"joint"``: d(L1 + L2) for each model; at the models' start weights."""
    m1, m2 = make_two_models(seed)
    l1, l2 = two_losses(m1(x1), m2(x2))
    p1, p2 = list(m1.parameters()), list(m2.parameters())
    grad = lambda loss, params: list(torch.autograd.grad(loss, params, retain_graph=True))
    return {"own": {"M1": grad(l1, p1), "M2": grad(l2, p2)},
            "joint": {"M1": grad(l1 + l2, p1), "M2": grad(l1 + l2, p2)}}


def same(a: Grads | None, b: Grads | None) -> bool:
    """Equal gradient lists (None only where both are None), to float32 round-off."""
    if a is None or b is None or len(a) != len(b):
        return False
    return all((x is None and y is None) or (x is not None and y is not None and
                                             torch.allclose(x, y, rtol=1e-4, atol=1e-6)) for x, y in zip(a, b))


def verdict(outcome: dict[str, Any], refs: dict[str, Stepped]) -> str:
    """What a step gave: ``"raises <kind>"``, ``"own"``, ``"joint"`` or ``"other"``."""
    if outcome["raised"]:
        return f"raises {outcome['raised']}"
    for goal in ("own", "joint"):
        if all(same(outcome["stepped"].get(model), refs[goal][model]) for model in ("M1", "M2")):
            return goal
    return "other"


def ddp_verdict(per_rank: Sequence[dict[str, Any]], refs: dict[str, Stepped]) -> str:
    """``verdict`` over the ranks: ``"ranks differ"`` when they were stepped with different gradients."""
    raised = [rank["raised"] for rank in per_rank if rank["raised"]]
    if raised:
        return f"raises {raised[0]}"
    first = per_rank[0]["stepped"]
    if not all(same(rank["stepped"].get(m), first.get(m)) for rank in per_rank[1:] for m in ("M1", "M2")):
        return "ranks differ"
    return verdict(per_rank[0], refs)


def final_grads_differ(per_rank: Sequence[dict[str, Any]]) -> bool:
    """Whether any ``.grad`` left at the end of the step differs between the ranks."""
    return not all(same(rank["final"][m], per_rank[0]["final"][m]) for rank in per_rank[1:] for m in ("M1", "M2"))


# ---------------------------------------------------------------- on every rank of a process group


@functools.cache
def global_references(world_size: int, seed: int = 0) -> dict[str, Stepped]:
    """``references`` on the whole global batch: what DDP's average over equal shards must equal."""
    from helpers.course.lesson08_past_one_machine.recipes import global_batch

    return references(*global_batch(seed, world_size), seed=seed)


def _ddp_step(rank: int, world_size: int, step: Step, group: Any, seed: int = 0) -> dict[str, Any]:
    """``step`` twice on this rank, with SGD, its models wrapped as ``step.wrapping`` says, on this rank's shard:
    what either raised, what the first stepped with, and ``.grad`` at the end."""
    from helpers.course.lesson08_past_one_machine.failures import BothModels
    from helpers.course.lesson08_past_one_machine.recipes import global_batch
    from helpers.course.lesson08_past_one_machine.replicas import rank_device, wrap

    device = rank_device(rank)
    x1, x2 = (x.chunk(world_size)[rank].to(device) for x in global_batch(seed, world_size))
    m1, m2 = (model.to(device) for model in make_two_models(seed))
    if step.wrapping == "both":
        both = wrap(BothModels(m1, m2), rank, process_group=group)
        forward = lambda: both(x1, x2)
    else:
        d1, d2 = wrap(m1, rank, process_group=group), wrap(m2, rank, process_group=group)
        forward = lambda: (d1(x1), d2(x2))
    opt1, opt2 = OPTIMIZERS["SGD"](list(m1.parameters())), OPTIMIZERS["SGD"](list(m2.parameters()))
    stepped: Stepped = {}
    _record(opt1, "M1", stepped)
    _record(opt2, "M2", stepped)
    first: Stepped = {}

    def two_steps() -> None:  # the second step's forward raises when the first left DDP's reduction unfinished
        take_step(step, m1, m2, forward, opt1, opt2)
        first.update(stepped)
        take_step(step, m1, m2, forward, opt1, opt2)

    outcome = outcome_of(two_steps, stepped, lambda: {"M1": _grads(m1), "M2": _grads(m2)})
    return {**outcome, "stepped": first}


def skipped_head(rank: int, world_size: int, group: Any, seed: int = 0) -> dict[str, Any]:
    """A trunk with heads a and b in one DDP with ``find_unused_parameters=True``; two steps of a loss of head a
    only. What it raised, and the first step's gradients (trunk, a, b) on this rank."""
    from helpers.course.lesson08_past_one_machine.failures import TwoHeads
    from helpers.course.lesson08_past_one_machine.recipes import global_batch
    from helpers.course.lesson08_past_one_machine.replicas import rank_device, wrap

    device = rank_device(rank)
    x = global_batch(seed, world_size)[0].chunk(world_size)[rank].to(device)
    heads = TwoHeads(seed)
    model = wrap(heads, rank, find_unused_parameters=True, process_group=group)
    optimizer = OPTIMIZERS["SGD"](list(heads.parameters()))
    first: dict[str, Grads] = {}
    try:
        for step in range(2):
            optimizer.zero_grad(set_to_none=True)
            a, _unused = model(x)
            own_term(a).backward()
            if step == 0:
                first = {name: _grads(part) for name, part in (("trunk", heads.trunk), ("a", heads.a), ("b", heads.b))}
            optimizer.step()
        raised = None
    except RuntimeError as error:
        raised = str(error).splitlines()[0]
    return {"raised": raised, "first": first}


def skipped_head_reference(world_size: int, seed: int = 0) -> dict[str, Grads]:
    """One process, no DDP: head a's loss's gradient for the trunk and head a, on the whole global batch."""
    from helpers.course.lesson08_past_one_machine.failures import TwoHeads
    from helpers.course.lesson08_past_one_machine.recipes import global_batch

    heads = TwoHeads(seed)
    a, _ = heads(global_batch(seed, world_size)[0])
    loss = own_term(a)
    return {name: list(torch.autograd.grad(loss, list(part.parameters()), retain_graph=True))
            for name, part in (("trunk", heads.trunk), ("a", heads.a))}


def averaging_moment(rank: int, world_size: int, group: Any, seed: int = 0) -> dict[str, Grads]:
    """One DDP around both models: M1's ``.grad`` after ``l1.backward(retain_graph=True, inputs=M1)`` and again
    after ``l2.backward(inputs=M2)``, on this rank."""
    from helpers.course.lesson08_past_one_machine.failures import BothModels
    from helpers.course.lesson08_past_one_machine.recipes import global_batch
    from helpers.course.lesson08_past_one_machine.replicas import rank_device, wrap

    device = rank_device(rank)
    x1, x2 = (x.chunk(world_size)[rank].to(device) for x in global_batch(seed, world_size))
    m1, m2 = (model.to(device) for model in make_two_models(seed))
    both = wrap(BothModels(m1, m2), rank, process_group=group)
    l1, l2 = two_losses(*both(x1, x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    after_first = _grads(m1)
    l2.backward(inputs=list(m2.parameters()))
    return {"after L1's backward": after_first, "after L2's backward": _grads(m1)}


def ddp_worker(rank: int, world_size: int, steps: Sequence[Step], with_tour: bool = True) -> dict[str, Any]:
    """Everything the sheet's tests need from DDP, in one process group: notebook 08's tour of DDP's errors
    (``failures.tour``), each of ``steps``, the skipped head and the moment of averaging. Each part runs with
    models wrapped in a process group of its own (a DDP model that raised is never used again)."""
    import torch.distributed as dist

    from helpers.course.lesson08_past_one_machine import failures

    def fresh_group() -> Any:
        dist.barrier()
        return dist.new_group(list(range(world_size)))

    found: dict[str, Any] = {"tour": failures.tour(rank, world_size) if with_tour else None}
    found["steps"] = {step: _ddp_step(rank, world_size, step, fresh_group()) for step in steps}
    found["skipped head"] = skipped_head(rank, world_size, fresh_group())
    found["averaging"] = averaging_moment(rank, world_size, fresh_group())
    dist.barrier()
    return found


def with_wrapping(step: Step, wrapping: str) -> Step:
    """``step`` under DDP, its models wrapped as ``wrapping`` says."""
    return replace(step, wrapping=wrapping)


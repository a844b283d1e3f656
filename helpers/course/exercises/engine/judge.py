"""Running a learner's function and the reference on identical twins, in every generated situation."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import torch
from torch import nn

from helpers.course.exercises.engine.compare import Difference, differences
from helpers.course.exercises.engine.contract import Contract
from helpers.course.exercises.engine.observe import Key, World, observe, restore_globals
from helpers.course.exercises.engine.situations import Situation, describe, generate
from helpers.course.exercises.engine.words import calls_words, explain
from helpers.course.exercises.guard import LearnerError, run_learner
from helpers.course.seeds import fresh


@dataclass
class Finding:
    """What went wrong in one situation: the first difference (or the error raised), on which call."""

    difference: Difference
    call: int
    calls: int
    count: int  # differences in all on that call


def first_layer(module: nn.Module) -> List[nn.Parameter]:
    """The parameters of the first submodule that holds any (a first Linear's weight and bias)."""
    for sub in module.modules():
        own = list(sub.parameters(recurse=False))
        if own:
            return own
    return []


def prepare(world: World, situation: Situation) -> None:
    """Apply the generic axes to the world's modules: frozen weights, eval mode, what ``.grad`` holds."""
    if situation.get("frozen"):
        frozen = world.freezable if world.freezable is not None else [
            param for module in world.modules.values() for param in first_layer(module)]
        for param in frozen:
            param.requires_grad_(False)
    if situation.get("mode") == "eval":
        for module in world.modules.values():
            module.eval()
    grads = situation.get("grads")
    if grads is None:
        return
    generator = torch.Generator().manual_seed(fresh(situation.seed + 7))
    for module in world.modules.values():
        for param in module.parameters():
            if grads == "none" or not param.requires_grad:
                param.grad = None
            elif grads == "zero":
                param.grad = torch.zeros_like(param)
            else:
                param.grad = (0.1 * torch.randn(param.shape, generator=generator)).to(param.device, param.dtype)


def _seeded_call(function: Callable[..., Any], args: tuple, seed: int) -> Any:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return function(*args)


def run_situation(contract: Contract, answer: Callable[..., Any], situation: Situation) -> Optional[Finding]:
    """Build twins, call the learner's function and the reference ``calls`` times; the first difference, or None."""
    mine, theirs = contract.build(situation), contract.build(situation)
    if contract.generic_axes:
        prepare(mine, situation)
        prepare(theirs, situation)
    calls = int(situation.get("calls", 1))
    reference = contract.reference()
    for call in range(1, calls + 1):
        if call > 1:
            for world in (mine, theirs):
                if world.refill is not None:
                    world.refill(call)
        seed = fresh(situation.seed) * 10 + call
        before, reference_before = observe(mine), observe(theirs)
        try:
            returned = _seeded_call(lambda *args: run_learner("Your function", answer, *args), mine.args, seed)
        except LearnerError as error:
            restore_globals(before)
            return Finding(Difference(Key("raised", "raised"), None, None, None, True,
                                      error.diagnosis.replace("Your function ", "", 1)), call, calls, 1)
        after = observe(mine, returned)
        restore_globals(before)
        with torch.enable_grad():
            expected = _seeded_call(reference, theirs.args, seed)
        found: List[Difference] = differences(contract, before, after, observe(theirs, expected), reference_before)
        if found:
            return Finding(found[0], call, calls, len(found))
    return None


def judge(contract: Contract, answer: Callable[..., Any], seed: Optional[int] = None,
          combinations: Optional[int] = None) -> Optional[str]:
    """None when the learner's function matches the reference in every situation; else the diagnosis, from the
    smallest situation that still shows a difference. ``seed`` and ``combinations`` widen the sweep (the mutation
    benchmark's oracle); by default the contract's.

    Under ``contract.sync`` (processes of one distributed group), every process tries the same situations in the
    same order and stops where any process found a difference; a process that found none there returns None.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is faster, and two checks on two cores do not contend
    try:
        return _judge(contract, answer, seed, combinations)
    finally:
        torch.set_num_threads(threads)


def _judge(contract: Contract, answer: Callable[..., Any], seed: Optional[int],
           combinations: Optional[int]) -> Optional[str]:
    sync = contract.sync or (lambda found: found)
    axes = contract.axes
    start = contract.seed if seed is None else seed
    count = contract.combinations if combinations is None else combinations

    def attempt(situation: Situation) -> Tuple[Optional[Finding], bool]:
        finding = run_situation(contract, answer, situation)
        return finding, sync(finding is not None)

    for situation in generate(axes, start, count):
        finding, anywhere = attempt(situation)
        if not anywhere:
            continue
        for axis in axes:  # shrink: back to the notebook's value wherever the difference stays
            if situation[axis.name] == axis.notebook:
                continue
            simpler = situation.with_value(axis.name, axis.notebook)
            simpler_finding, still = attempt(simpler)
            if still:
                situation, finding = simpler, simpler_finding
        return None if finding is None else diagnosis(finding, situation, contract)
    return None


def diagnosis(finding: Finding, situation: Situation, contract: Contract) -> str:
    """"With a batch of 3 rows (the notebook used 32), on the 2nd of 3 calls: ..." in the learner's words."""
    where = describe(situation, contract.axes)
    when = calls_words(finding.call, finding.calls)
    text = explain(finding.difference, situation, contract.axes)
    more = f" ({finding.count - 1} other difference{'s' if finding.count > 2 else ''} too)" if finding.count > 1 else ""
    end = "" if text.endswith((".", "?", "!")) else "."
    return f"{where}{', ' + when if when else ''}: {text}{end}{more}"


def situations_tried(contract: Contract) -> int:
    """How many situations a passing answer is run in."""
    return sum(1 for _ in generate(contract.axes, contract.seed, contract.combinations))

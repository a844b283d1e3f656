"""Running a learner's function and the reference on identical twins, in every generated situation."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn

from helpers.course.exercises.engine.compare import Difference, differences, exactly_equal
from helpers.course.exercises.engine.contract import Contract
from helpers.course.exercises.engine.observe import Key, World, observe, restore_globals
from helpers.course.exercises.engine.situations import Situation, describe, generate
from helpers.course.exercises.engine.words import calls_words, explain
from helpers.course.exercises.guard import LearnerError, NotAttempted, run_learner
from helpers.course.seeds import fresh
from helpers.language import tr


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


def _call_seed(situation: Situation, call: int) -> int:
    return fresh(situation.seed) * 10 + call


@dataclass
class CallRecord:
    """One call of the learner's function, as data: the state before it, and after it (with what it returned, as
    the contract observes a return), or what it raised, or that it is still the stub."""

    before: Dict[Key, Any]
    after: Optional[Dict[Key, Any]] = None
    raised: Optional[str] = None
    not_attempted: bool = False


def learner_calls(contract: Contract, answer: Callable[..., Any], situation: Situation) -> List[CallRecord]:
    """The learner's side of a situation: build its twin, make every call, observe. Needs no reference: in the
    grader this runs in the learner's sandbox, and only the records come back."""
    mine = contract.build(situation)
    if contract.generic_axes:
        prepare(mine, situation)
    records: List[CallRecord] = []
    for call in range(1, int(situation.get("calls", 1)) + 1):
        if call > 1 and mine.refill is not None:
            mine.refill(call)
        before = observe(mine)
        try:
            returned = _seeded_call(lambda *args: run_learner("Your function", answer, *args), mine.args,
                                    _call_seed(situation, call))
        except LearnerError as error:
            restore_globals(before)
            raised = error.diagnosis.replace("Your function ", "", 1) if error.predicate is None else error.predicate
            records.append(CallRecord(before, raised=raised))
            break
        except NotAttempted:
            restore_globals(before)
            records.append(CallRecord(before, not_attempted=True))
            break
        after = observe(mine, contract.observe_return(returned))
        restore_globals(before)
        records.append(CallRecord(before, after))
    return records


class RecordsDiffer(Exception):
    """The records are not of this situation's twin (their first state differs from the grader's build)."""


def compare_calls(contract: Contract, situation: Situation, records: Sequence[CallRecord],
                  elsewhere: bool = False, every_call: bool = False) -> Optional[Finding]:
    """The reference's side: build the other twin, make the reference's calls one by one, and compare each with the
    learner's record of the same call; the first difference, or None. With ``every_call``, the reference's calls
    go on after a difference (processes of one group must make the same collectives).

    With ``elsewhere`` (records made in another process and sent as data), the records' state before the first
    call must be exactly this twin's, and a value the reference observes as a course type made of plain values (a
    NamedTuple such as ``SavedCounts``) is read as that type again.

    Raises:
        NotAttempted: the learner's function is still the stub.
        RecordsDiffer: with ``elsewhere``, the records' state before the first call is not this twin's.
    """
    theirs = contract.build(situation)
    if contract.generic_axes:
        prepare(theirs, situation)
    calls = int(situation.get("calls", 1))
    reference = contract.reference()
    first: Optional[Finding] = None
    for call in range(1, calls + 1):
        if call > 1 and theirs.refill is not None:
            theirs.refill(call)
        reference_before = observe(theirs)
        if call > len(records):
            raise RecordsDiffer(f"{len(records)} calls recorded where the situation makes {calls}")
        record = records[call - 1]
        if elsewhere:
            record = CallRecord(_retyped(record.before, reference_before),
                                None if record.after is None else _retyped(record.after, reference_before),
                                record.raised, record.not_attempted)
        if elsewhere and call == 1 and not _same_state(record.before, reference_before):
            raise RecordsDiffer("the state before the first call is not the one the grader built")
        if record.not_attempted:
            raise NotAttempted()
        if record.raised is not None:
            return first or Finding(Difference(Key("raised", "raised"), None, None, None, True, record.raised), call,
                                    calls, 1)
        if record.after is None:
            raise RecordsDiffer("a call without its state after it")
        with torch.enable_grad():
            expected = _seeded_call(reference, theirs.args, _call_seed(situation, call))
        if first is not None:
            continue
        found: List[Difference] = differences(contract, record.before, record.after,
                                              observe(theirs, contract.observe_return(expected)), reference_before)
        if found:
            first = Finding(found[0], call, calls, len(found))
            if not every_call:
                return first
    return first


def _retyped(seen: Mapping[Key, Any], like: Mapping[Key, Any]) -> Dict[Key, Any]:
    """``seen`` with each plain tuple read as the NamedTuple ``like`` holds under the same key (data carries no
    classes: ``SavedCounts(10, 0, 0)`` arrives as ``(10, 0, 0)``)."""
    found = dict(seen)
    for key, value in seen.items():
        model = like.get(key)
        if type(value) is tuple and isinstance(model, tuple) and hasattr(type(model), "_fields") \
                and len(value) == len(model):
            found[key] = type(model)(*value)
    return found


def _same_state(first: Mapping[Key, Any], second: Mapping[Key, Any]) -> bool:
    return first.keys() == second.keys() and all(exactly_equal(first[key], second[key]) for key in first)


def run_situation(contract: Contract, answer: Callable[..., Any], situation: Situation) -> Optional[Finding]:
    """Build twins, call the learner's function and the reference ``calls`` times; the first difference, or None."""
    return compare_calls(contract, situation, learner_calls(contract, answer, situation))


RecordsFor = Callable[[Situation], Sequence[CallRecord]]


def judge(contract: Contract, answer: Callable[..., Any], seed: Optional[int] = None,
          combinations: Optional[int] = None) -> Optional[str]:
    """None when the learner's function matches the reference in every situation; else the diagnosis, from the
    smallest situation that still shows a difference. ``seed`` and ``combinations`` widen the sweep (the mutation
    benchmark's oracle); by default the contract's.

    Under ``contract.sync`` (processes of one distributed group), every process tries the same situations in the
    same order and stops where any process found a difference; a process that found none there returns None.
    """
    return judge_records(contract, lambda situation: learner_calls(contract, answer, situation), seed, combinations)


def judge_records(contract: Contract, records_for: RecordsFor, seed: Optional[int] = None,
                  combinations: Optional[int] = None, elsewhere: bool = False) -> Optional[str]:
    """``judge``, with the learner's calls made elsewhere: ``records_for(situation)`` gives their records (in the
    grader, from the learner's sandbox, as data). The reference's calls and every comparison run here."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is faster, and two checks on two cores do not contend
    try:
        return _judge(contract, records_for, seed, combinations, elsewhere)
    finally:
        torch.set_num_threads(threads)


def _judge(contract: Contract, records_for: RecordsFor, seed: Optional[int], combinations: Optional[int],
           elsewhere: bool) -> Optional[str]:
    sync = contract.sync or (lambda found: found)
    axes = contract.axes
    start = contract.seed if seed is None else seed
    count = contract.combinations if combinations is None else combinations

    def attempt(situation: Situation) -> Tuple[Optional[Finding], bool]:
        finding = compare_calls(contract, situation, records_for(situation), elsewhere)
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
    found = tr("{where}, {when}: {text}", where=where, when=when, text=text) if when else tr(
        "{where}: {text}", where=where, text=text)
    if not text.endswith((".", "?", "!", "。", "？", "！")):  # English or Chinese
        found = tr("{sentence}.", sentence=found)
    if finding.count == 2:
        return tr("{sentence} (1 other difference too)", sentence=found)
    if finding.count > 2:
        return tr("{sentence} ({count} other differences too)", sentence=found, count=finding.count - 1)
    return found


def situations_tried(contract: Contract) -> int:
    """How many situations a passing answer is run in."""
    return sum(1 for _ in generate(contract.axes, contract.seed, contract.combinations))

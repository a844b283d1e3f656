"""The tools on ten real training codes (tests/tools/real_training_codes.py), each call of each variant.

For every call: build fresh, run the step up to the call, ask ``diagnose`` with the call's own keyword arguments
(and ``record_parameters`` right after the forward where the variant may change weights silently), then make the
call and see what PyTorch did: an error (``classify``), a run, or a run whose gradient differs from the same code's
untouched copy (no change between the forward and the call, no checkpoint, no compile): wrong values.

The verdict must be PyTorch's outcome. "Cannot tell" (``unseen``) is accepted only for a call whose graph runs
through a checkpointed or compiled region (checked on the graph's nodes, never declared alone), and only when the
tool does not also commit to a verdict. Every tool call must leave every parameter, buffer, ``.grad``, version
counter, training flag and the RNG state as it found them.
"""
from __future__ import annotations

import time
import warnings
from functools import lru_cache
from typing import Any, Iterator, List, Optional, Set, Tuple

import pytest
import torch

from helpers.tools import classify, diagnose, draw_graph, draw_saved_graph, record_parameters
from helpers.tools.regions import opaque_region
from tests.tools import real_training_codes as codes
from tests.tools.real_training_codes import RUNS, WRONG_VALUES, Call, Context, Variant
from tests.tools.state_hash import assert_same_state, state_of

CASES = codes.cases()
IDS = [codes.case_id(case) for case in CASES]
COMPILE_SECONDS = 60.0
RELATIVE_TOLERANCE = 1e-4  # compiled vs eager differ by rounding; every silent change here moves far more


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """These models are tiny: one thread is fastest, and far faster on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    """The deprecation of only_inputs and a reentrant checkpoint's "none of the inputs require grad" are the codes'
    own warnings, not the tests'."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


@lru_cache(maxsize=1)
def compile_problem() -> Optional[str]:
    """Why torch.compile cannot be tested here (it fails, or takes over a minute), or None."""
    start = time.perf_counter()
    try:
        torch._dynamo.reset()
        layer = torch.nn.Linear(3, 2)
        torch.compile(lambda x: layer(x).sum(), backend="aot_eager")(torch.randn(4, 3)).backward()
    except Exception as error:  # whatever stops compiling is the reason to skip
        return f"torch.compile(backend='aot_eager') fails here: {type(error).__name__}: {error}"
    seconds = time.perf_counter() - start
    return f"torch.compile took {seconds:.0f} s (over {COMPILE_SECONDS:.0f} s)" if seconds > COMPILE_SECONDS else None


def skip_if_cannot_compile(variant: Variant) -> None:
    if variant.family == "compile":
        reason = compile_problem()
        if reason is not None:
            pytest.skip(reason)


# ---------------------------------------------------------------- what the state is, and what PyTorch did


def tensors_of(call: Optional[Call]) -> List[torch.Tensor]:
    """The tensors a call is given (outputs, inputs, gradients), flattened."""
    if call is None:
        return []
    found: List[torch.Tensor] = []
    for value in (call.outputs, call.inputs, *call.kwargs.values()):
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, torch.Tensor):
                found.append(item)
    return found


def snapshot(ctx: Context, call: Optional[Call] = None) -> dict:
    return state_of(ctx.models.values(), tensors_of(call))


def unchanged(ctx: Context, call: Optional[Call], what: str, tool_call: Any, side_effects: List[str]) -> Any:
    """Run ``tool_call`` and note in ``side_effects`` whatever it changed."""
    before = snapshot(ctx, call)
    result = tool_call()
    try:
        assert_same_state(before, snapshot(ctx, call), what)
    except AssertionError as moved:
        side_effects.append(str(moved))
    return result


def regions_in_graph(outputs: Any) -> Set[str]:
    """The opaque regions among the graph's nodes (read by node type and unpack hooks only)."""
    roots = [t.grad_fn for t in (outputs if isinstance(outputs, (list, tuple)) else [outputs])
             if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    found: Set[str] = set()
    seen: Set[int] = set()
    kept: List[Any] = []  # a node's Python object lives only while referenced: a freed one's id can be reused
    while roots:
        node = roots.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        kept.append(node)
        label = opaque_region(node)
        if label is not None:
            found.add(label)
        roots.extend(child for child, _ in node.next_functions if child is not None)
    return found


def relative_difference(got: List[Optional[torch.Tensor]], reference: List[Optional[torch.Tensor]]) -> float:
    """The largest difference relative to the reference's scale; infinite where a gradient is missing on one side."""
    if len(got) != len(reference):
        return float("inf")
    worst = 0.0
    for a, b in zip(got, reference, strict=True):
        if (a is None) != (b is None):
            return float("inf")
        if a is None or b is None:
            continue
        worst = max(worst, (a - b).abs().max().item() / (b.abs().max().item() + 1e-12))
    return worst


def run_for_real(variant: Variant, index: int, ctx: Context, call: Call) -> Tuple[str, str]:
    """Make the call: (outcome, what happened). The outcome is an error kind's name, ``other: ...`` for an error of
    no kind, ``RUNS``, or ``WRONG_VALUES`` when the gradient differs from the untouched copy's."""
    try:
        result = call.run()
    except Exception as error:  # the outcome under test, whatever it is
        kind = classify(error)
        message = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"
        return (kind.name if kind else f"other: {message}"), message
    got = codes.gradients(ctx, call, result)
    ref_ctx, ref_call = codes.drive(variant, index, reference=True)
    reference = codes.gradients(ref_ctx, ref_call, ref_call.run())
    difference = relative_difference(got, reference)
    if difference > RELATIVE_TOLERANCE:
        return WRONG_VALUES, f"ran; the gradient differs from the untouched copy's (relative {difference:.3g})"
    return RUNS, f"ran; the gradient is the untouched copy's (relative {difference:.1g})"


# ---------------------------------------------------------------- what the tool said


def verdict(report: Any) -> str:
    """The tool's answer in a few words."""
    if report.will_fail is None:
        return f"cannot tell ({'; '.join(getattr(report, 'unseen', ()))})"
    if report.will_fail:
        refusals = getattr(report, "refusals", ())
        return f"fails with {list(report.possible_errors) or list(refusals)}"
    return WRONG_VALUES if report.wrong_values else RUNS


def agrees(report: Any, actual: str) -> bool:
    """True when the tool predicted what PyTorch did."""
    if actual in (RUNS, WRONG_VALUES):
        return report.will_fail is False and report.wrong_values == (actual == WRONG_VALUES)
    if actual.startswith("other: "):  # an error no kind names: the tool must say PyTorch refuses the call
        return report.will_fail is True and not report.possible_errors and bool(getattr(report, "refusals", ()))
    return report.will_fail is True and actual in report.possible_errors


def says_it_cannot_see(report: Any) -> bool:
    """True when the report says it cannot see part of the way, and commits to no verdict of its own."""
    if report.will_fail is True:
        return False
    unseen = getattr(report, "unseen", ())
    return bool(unseen) or any("cannot see" in note.lower() for note in report.notes)


def ask_and_run(variant: Variant, index: int) -> Tuple[Any, str, str, Set[str], List[str]]:
    """(the report, PyTorch's outcome, what happened, the regions in the graph, the tools' side effects)."""
    side_effects: List[str] = []
    recorded: List[Any] = []

    def at_forward(ctx: Context) -> None:
        if variant.record:
            recorded.append(unchanged(ctx, None, "record_parameters", lambda: record_parameters(ctx.models),
                                      side_effects))

    ctx, call = codes.drive(variant, index, at_forward=at_forward)
    regions = unchanged(ctx, call, "looking for opaque regions", lambda: regions_in_graph(call.outputs),
                        side_effects)
    options = dict(call.kwargs, recorded=recorded[0] if recorded else None, autograd_grad=call.autograd_grad)
    report = unchanged(ctx, call, "diagnose",
                       lambda: diagnose(call.outputs, ctx.models, call.inputs, **options), side_effects)
    actual, happened = run_for_real(variant, index, ctx, call)
    return report, actual, happened, regions, side_effects


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_verdict_is_what_pytorch_does_and_asking_changes_nothing(case: Tuple[Variant, int]) -> None:
    variant, index = case
    skip_if_cannot_compile(variant)
    report, actual, happened, regions, side_effects = ask_and_run(variant, index)
    declared = {variant.opaque} if variant.opaque else set()
    # After an earlier backward, a non-reentrant checkpoint's packed tensors are freed and its nodes look plain.
    assert regions == declared or (index > 0 and regions <= declared), \
        f"the graph's opaque regions are {regions}, the variant says {declared}"
    right = agrees(report, actual)
    excused = not right and bool(regions) and says_it_cannot_see(report)
    problems = [] if right or excused else [
        f"the tool said: {verdict(report)}; PyTorch: {actual} ({happened})\n--- the report ---\n{report}"]
    assert not problems + side_effects, "\n".join(problems + side_effects)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_call_does_what_its_variant_is_written_to_show(case: Tuple[Variant, int]) -> None:
    """Guards the codes: each mistake really makes PyTorch raise, or silently differ, as the variant says (no tool
    is asked, so this passes whatever the tools do)."""
    variant, index = case
    skip_if_cannot_compile(variant)
    ctx, call = codes.drive(variant, index)
    actual, happened = run_for_real(variant, index, ctx, call)
    expected = variant.expected_at(index)
    if expected.startswith("message: "):
        assert expected[len("message: "):] in happened, happened
    else:
        assert actual == expected, f"{actual} ({happened})"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_drawings_change_nothing(case: Tuple[Variant, int]) -> None:
    """draw_graph and draw_saved_graph at the moment of the call: nothing they look at moves."""
    variant, index = case
    skip_if_cannot_compile(variant)
    side_effects: List[str] = []
    ctx, call = codes.drive(variant, index)
    unchanged(ctx, call, "draw_graph", lambda: draw_graph(call.outputs, ctx.models), side_effects)
    unchanged(ctx, call, "draw_saved_graph", lambda: draw_saved_graph(call.outputs, None, ctx.models), side_effects)
    assert not side_effects, "\n".join(side_effects)


def test_the_codes_cover_every_family_and_outcome() -> None:
    """Guards the list: if a family or an outcome dropped out, the tests above would prove less."""
    variants = codes.variants()
    families = {variant.family for variant in variants}
    assert families == {"wgan_gp", "sngan", "sac", "vqgan", "byol", "pix2pix", "checkpoint_reentrant",
                        "checkpoint_non-reentrant", "compile", "lora", "gradnorm"}, families
    outcomes = {variant.expected for variant in variants}
    assert {RUNS, WRONG_VALUES, "backward-twice", "inplace-version", "no-grad-fn", "unused-input",
            "input-needs-no-grad", "non-scalar-output"} <= outcomes, outcomes
    keywords = {name for variant in variants for name in _keywords(variant)}
    assert {"gradient", "grad_outputs", "retain_graph", "create_graph", "allow_unused", "materialize_grads",
            "is_grads_batched", "inputs"} <= keywords, keywords
    assert len(CASES) >= 80, len(CASES)


def _keywords(variant: Variant) -> Set[str]:
    """The keyword arguments the variant's calls pass (run once, no tool asked)."""
    found: Set[str] = set()
    for index in range(len(variant.calls)):
        if variant.family == "compile" and compile_problem() is not None:
            continue
        _, call = codes.drive(variant, index)
        found |= set(call.kwargs) | ({"inputs"} if call.inputs is not None and not call.autograd_grad else set())
    return found

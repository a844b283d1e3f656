"""What the cheat sheet's Fix cells (and its habits) recommend, read sentence by sentence, and judged live.

Each row's symptom names the code a learner has (its *scenario*: a ``sheet_recipes.Step``). Each sentence of its Fix
cell, and each of its ``or`` alternatives, is one of:

- a **recipe**: an edit of the scenario, read from what the sentence says (``inputs=`` or "restrict": each backward
  restricted to its own model; ``retain_graph``; "detach"; ``torch.autograd.grad``; ``(l1 + l2).backward()``; "then
  every step"; which DDP wrapping), run on the course's models with SGD and fused AdamW (which bumps no version), in
  every step placement and DDP wrapping the sentence leaves open. Every run must give what the sentence promises
  (each model its own loss's gradient, or with "joint" the sum's), equal on every rank in the DDP row; outside that
  row, a recipe that is wrong under DDP must say so (and then it must really be wrong there);
- a **warning** (it starts with "Never", "Not" or "No", or says "no fix" or "silences"): the recipe it names must be
  wrong in some run, and what it says comes of it ("L1 + L2", "not averaged") must be what happens;
- a **tool** (anomaly mode, ``diagnose``, ``allow_unused=True``, ``find_unused_parameters=True``, ...): matched by
  name, and its own claim checked live.

A sentence that is none of these fails: nothing on the sheet escapes the run. ``problems`` returns what is wrong;
``ddp_steps`` lists the runs it needs from two processes (``sheet_recipes.ddp_worker`` runs them in one start).
"""
from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import torch

from tests.sheet_recipes import (
    OPTIMIZERS,
    Step,
    ddp_verdict,
    final_grads_differ,
    global_references,
    references,
    run_step,
    same,
    skipped_head_reference,
    verdict,
)

PLACEMENTS = ("last", "between")
WRAPPINGS = ("per model", "both")
COPIED_FIX_UNDER_DDP = tuple(Step(wrapping=wrapping) for wrapping in WRAPPINGS)
CODE = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class Scenario:
    """The code a row's symptom comes from; ``ddp``: the row is about DDP (its recipes are judged on 2 ranks)."""

    step: Step
    placements: tuple[str, ...]
    ddp: bool = False


GENERIC = Scenario(Step(), PLACEMENTS)
SCENARIOS_BY_ERROR = {  # the error kind a row quotes -> the learner's code
    "backward-twice": Scenario(Step(retain=False), ("between",)),           # notebook 02's loop
    "inplace-version": Scenario(Step(), ("between",)),                       # the same with retain_graph=True
    "unused-input": Scenario(Step(method="grad"), PLACEMENTS),
    "ddp-ready-twice": Scenario(Step(restrict=(True, False)), PLACEMENTS, ddp=True),  # inputs=M1, then a full one
}
SCENARIOS_BY_SYMPTOM = (  # a "no error" row's symptom -> the learner's code
    (r"copied fix", Scenario(Step(), ("last",))),
    (r"inputs=.*dropped .?retain_graph", Scenario(Step(restrict=(True, True), retain=False), ("last",))),
    (r"fused=True", Scenario(Step(), ("between",))),
    (r"GradScaler", GENERIC),
)


# ---------------------------------------------------------------- reading the sheet


@dataclass(frozen=True)
class Row:
    """One table row (or the habits list, as one row): its symptom, fix and where it stands."""

    where: str
    symptom: str
    fix: str


def _cells(line: str) -> list[str]:
    """A Markdown table line's cells (a ``|`` inside a code span does not split)."""
    spans: list[str] = []
    protected = CODE.sub(lambda m: spans.append(m[0]) or f"\x00{len(spans) - 1}\x00", line.strip().strip("|"))
    return [re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m[1])], cell).strip() for cell in protected.split("|")]


def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert match, f"the sheet has no section '## {heading}'"
    return match[1]


def rows(text: str) -> list[Row]:
    """Both tables' rows, then the habits as one more row."""
    found = []
    for heading in ("Errors you see", "No error, wrong training"):
        lines = [line for line in section(text, heading).splitlines() if line.startswith("|")][2:]
        for number, line in enumerate(lines, 1):
            symptom, _cause, fix, _proof = _cells(line)
            label = re.sub(r"`|RuntimeError: |\*", "", symptom)[:40]
            found.append(Row(f"{heading!r}, row {number} ({label}...)", symptom, fix))
    habits = [line[2:] for line in section(text, "Three habits").splitlines() if line.startswith("- ")]
    found.append(Row("Three habits", "", " ".join(h if h.rstrip().endswith(".") else h + "." for h in habits)))
    return found


def scenario_of(row: Row) -> Scenario | None:
    """The learner's code behind a row's symptom; None when the test does not know it."""
    from helpers.tools.errors import classify

    if row.where == "Three habits":
        return GENERIC
    quoted = re.findall(r"`([A-Z]\w*(?:Error|Exception): [^`]+)`", row.symptom)
    if quoted:
        kind = classify(RuntimeError(re.sub(r"\b[NMi]\b", "1", quoted[0].split(": ", 1)[1])))
        return SCENARIOS_BY_ERROR.get(kind.name, GENERIC) if kind else None
    return next((scenario for pattern, scenario in SCENARIOS_BY_SYMPTOM if re.search(pattern, row.symptom)), None)


def sentences(fix: str) -> list[str]:
    """A Fix cell's sentences, then each sentence's ``or`` alternatives; code spans stay whole, emphasis goes."""
    spans: list[str] = []
    text = CODE.sub(lambda m: spans.append(m[0]) or f"\x00{len(spans) - 1}\x00", fix)
    text = re.sub(r"\*+", "", text)
    parts = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        for alternative in re.split(r",?\s+\bor\s+(?![^()]*\))", sentence):
            alternative = re.sub(r"^[\s,;]*(?:\([a-e]\)\s*)?(?:or\b[\s,]*)?", "", alternative, flags=re.IGNORECASE).strip()
            if alternative.strip(" .,;"):
                parts.append(re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m[1])], alternative))
    return parts


# ---------------------------------------------------------------- what a sentence recommends

FEATURES = {  # the recipe words a sentence can hold (lower case, code spans included)
    "inputs": r"inputs=|(?<!un)restrict|own model",
    "retain": r"retain_graph",
    "detach": r"\bdetach",
    "grad": r"autograd\.grad",
    "sum": r"\(l1 \+ l2\)\.backward\(\)|summed loss",
    "backward": r"backward",
    "step": r"\bsteps?\b",
    "ddp": r"\bddp\b",
    "zero": r"zero_grad|\bzero\b",
}
STEPS_LAST = (r"then (?:all |every |both |the )?steps?\b|before any step|step after the last|after every backward"
              r"|steps? (?:go |moved )?last\b")
WARNING = r"^\W*(?:never|not|no)\b|\bno fix\b|\bsilenc"
OWN_OUTPUT = r"detach (?:its|the) own|the one (?:a|the|its) loss trains|the one you train"


def features(part: str) -> set[str]:
    """Which recipe words ``part`` holds."""
    lowered = part.lower()
    return {name for name, pattern in FEATURES.items() if re.search(pattern, lowered)}


@dataclass(frozen=True)
class Recipe:
    """A sentence read as an edit of its row's scenario: every run it allows, and what it promises."""

    text: str
    runs: tuple[Step, ...]             # without wrapping; the DDP runs add each wrapping in ``wrappings``
    wrappings: tuple[str, ...]
    goal: str                          # "own" or "joint"
    warning: bool
    mentions_ddp: bool


def read_recipe(part: str, scenario: Scenario) -> Recipe:
    """What ``part`` recommends (or warns against), applied to ``scenario``."""
    lowered = part.lower()
    found = features(part)
    step = scenario.step
    if "grad" in found:
        step = replace(step, method="grad")
    elif "detach" in found:
        own = re.search(OWN_OUTPUT, lowered) and not re.search(r"\bother\b", lowered)
        step = replace(step, method="detach_own" if own else "detach")
    elif "sum" in found:
        step = replace(step, method="sum")
    if step.method == "backward" and "inputs" in found:
        step = replace(step, restrict=(True, not re.search(r"`l2\.backward\(\)`|full backward", lowered)))
    if re.search(r"(?:drop|without|no) `?retain_graph", lowered):
        step = replace(step, retain=False)
    elif "retain_graph=true" in lowered:
        step = replace(step, retain=True)
    placements = ("last",) if re.search(STEPS_LAST, lowered) else scenario.placements
    if step.method not in ("backward", "grad"):
        placements = ("last",)        # one backward: where the steps go changes nothing
    wrappings = WRAPPINGS
    if re.search(r"\bddp per model|its own ddp", lowered):
        wrappings = ("per model",)
    elif re.search(r"one ddp around both", lowered):
        wrappings = ("both",)
    return Recipe(part, tuple(replace(step, steps=placement) for placement in placements), wrappings,
                  "joint" if re.search(r"\bjoint\b", lowered) else "own", bool(re.search(WARNING, lowered)),
                  "ddp" in found)


# ---------------------------------------------------------------- tools, each with its own live check


@dataclass(frozen=True)
class Tool:
    """Advice that is not a two-loss recipe, named by ``pattern``; ``check(part)`` returns a problem, or None."""

    name: str
    pattern: str
    check: Callable[[str], str | None]
    allows: frozenset[str] = frozenset()   # recipe words the sentence may hold besides the tool
    ddp_check: Callable[[str, Ddp], str | None] | None = None   # what it says of DDP, judged on 2 ranks
    ddp_steps: tuple[Step, ...] = ()                            # the DDP runs that judgement needs


def _models() -> tuple[Any, Any, torch.Tensor, torch.Tensor]:
    from helpers.course.models import make_inputs, make_two_models

    return (*make_two_models(0), *make_inputs(0))


def _raised(run: Callable[[], Any]) -> str | None:
    """The course error kind ``run`` raises (or its message), None when it raises nothing."""
    from helpers.tools.errors import classify

    try:
        run()
    except RuntimeError as error:
        kind = classify(error)
        return kind.name if kind else str(error)
    return None


def _check_no_grad_write(part: str) -> str | None:
    m1, *_ = _models()
    before = m1[2].weight.detach().clone()

    def write() -> None:
        with torch.no_grad():
            m1[2].weight.add_(0.01)
    raised = _raised(write)
    if raised or torch.equal(before, m1[2].weight):
        return f"a write under torch.no_grad() should change the weight and raise nothing (raised {raised})"
    return None


def _misordered(optimizer: str = "Adam") -> tuple[Any, Any, torch.Tensor, torch.Tensor]:
    """M2 steps between L2's backward and L1's: (m1, m2, l1, l2), L1's backward not run yet."""
    m1, m2, x1, x2 = _models()
    from helpers.course.models import two_losses

    opt2 = (torch.optim.Adam(m2.parameters(), lr=1e-3) if optimizer == "Adam"
            else OPTIMIZERS[optimizer](list(m2.parameters())))
    l1, l2 = two_losses(m1(x1), m2(x2))
    l2.backward(retain_graph=True)
    opt2.step()
    return m1, m2, l1, l2


def _check_anomaly(part: str) -> str | None:
    forward_too = bool(re.search(r"both passes|forward and (?:the )?backward|around (?:the )?forward", part.lower()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if forward_too:
            with torch.autograd.set_detect_anomaly(True):
                _m1, _m2, l1, _l2 = _misordered()
                _raised(l1.backward)
        else:
            _m1, _m2, l1, _l2 = _misordered()
            with torch.autograd.set_detect_anomaly(True):
                _raised(l1.backward)
    if not any("Traceback of forward call" in str(w.message) for w in caught):
        return ("anomaly mode as the sentence places it finds no forward line: it must be on during the forward pass "
                "too (torch then says 'No forward pass information available')")
    return None


def _check_diagnose(part: str) -> str | None:
    from helpers.tools import diagnose, named_parameters

    m1, m2, l1, _l2 = _misordered()
    report = diagnose(l1, named_parameters(M1=m1, M2=m2))
    if report.prediction != "inplace-version" or _raised(l1.backward) != "inplace-version":
        return f"diagnose should predict error 2 before the backward raises it (predicted {report.prediction})"
    return None


def _check_diagnose_record(part: str) -> str | None:
    from helpers.course.models import two_losses
    from helpers.tools import diagnose, named_parameters, record_parameters

    inline = bool(re.search(r"recorded=record_parameters\(", part))
    if not inline and not re.search(r"after the forward", part.lower()):
        return "say when the record is taken: right after the forward pass"
    m1, m2, x1, x2 = _models()
    params = named_parameters(M1=m1, M2=m2)
    opt2 = OPTIMIZERS["fused AdamW"](list(m2.parameters()))
    l1, l2 = two_losses(m1(x1), m2(x2))
    record = None if inline else record_parameters(params)
    l2.backward(retain_graph=True)
    opt2.step()                                   # no version bump: error 2 cannot be seen
    report = diagnose(l1, params, recorded=record_parameters(params) if inline else record)
    if [change.parameter for change in report.silent_changes] != ["M2.2.weight"]:
        return ("diagnose, with the record taken where the sentence takes it, does not see the fused step's change "
                f"(it found {[c.parameter for c in report.silent_changes]})")
    return None


def _check_bumps_exercise(part: str) -> str | None:
    from helpers.course.exercises.registry import exercises
    from helpers.course.lesson03_inplace_version.exercise import measure_bumps

    fused = measure_bumps(lambda p: torch.optim.Adam(p, lr=0.1, fused=True))
    plain = measure_bumps(lambda p: torch.optim.Adam(p, lr=0.1))
    if "bumps_per_step" not in exercises() or fused == plain:
        return "measuring bumps per step must tell fused Adam from Adam, in exercise bumps_per_step"
    return None


def _check_grad_on(part: str) -> str | None:
    from helpers.course.models import two_losses

    m1, m2, x1, x2 = _models()
    with torch.no_grad():
        off = two_losses(m1(x1), m2(x2))[0]
    on = two_losses(m1(x1), m2(x2))[0]
    if _raised(off.backward) != "no-grad-fn" or _raised(on.backward) is not None:
        return "a loss computed under no_grad must raise error no-grad-fn, and with grad on backward must run"
    return None


def _check_allow_unused(part: str) -> str | None:
    from helpers.course.models import own_term

    m1, m2, x1, _ = _models()
    grads = torch.autograd.grad(own_term(m1(x1)), list(m2.parameters()), allow_unused=True)
    return None if all(g is None for g in grads) else "allow_unused=True should give None for unreached parameters"


def _check_reached_only(part: str) -> str | None:
    from helpers.course.models import own_term

    m1, m2, x1, _ = _models()
    o1 = m1(x1)
    reached = _raised(lambda: torch.autograd.grad(own_term(o1), list(m1.parameters()), retain_graph=True))
    unreached = _raised(lambda: torch.autograd.grad(own_term(o1), list(m2.parameters())))
    if reached is not None or unreached != "unused-input":
        return f"asking only for reached parameters should run ({reached}), the others raise ({unreached})"
    return None


def _check_unet_again(part: str) -> str | None:
    from helpers.course.lesson05_chained_amp.chain import (
        chain_losses,
        make_batch,
        make_tenc,
        make_unet,
    )
    from helpers.course.lesson05_chained_amp.without_retain import run_unet_twice
    from helpers.tools import gradients_of

    x, target, mask = make_batch(0)
    tenc, unet = make_tenc(0), make_unet(1)
    loss_tenc, loss_unet = chain_losses(unet(tenc(x)), target, mask)
    ref_tenc, ref_unet = gradients_of(loss_tenc, tenc), gradients_of(loss_unet, unet)
    raised = _raised(lambda: run_unet_twice(tenc, unet, x, target, mask, chain_losses, use_autocast=False))
    if raised or not (same([p.grad for p in tenc.parameters()], list(ref_tenc))
                      and same([p.grad for p in unet.parameters()], list(ref_unet))):
        return f"running unet again on the detached hidden state should give each module its own gradient ({raised})"
    return None


def unet_gradient_ratio(update_between_steps: bool, inf: bool = True) -> float:
    """unet's stepped gradient over its true gradient, when tenc's gradient is inf (so the scale halves), or, without
    ``inf``, when the scale grows after every good step (so it doubles)."""
    from helpers.course.lesson05_chained_amp.chain import (
        chain_losses,
        make_batch,
        make_tenc,
        make_unet,
    )

    x, target, mask = make_batch(0)
    tenc, unet = make_tenc(0), make_unet(1)
    opt_tenc = torch.optim.SGD(tenc.parameters(), lr=0.1)
    opt_unet = torch.optim.SGD(unet.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1 if not inf else 2000)
    loss_tenc, loss_unet = chain_losses(unet(tenc(x)), target, mask)
    reference = torch.autograd.grad(loss_unet, list(unet.parameters()), retain_graph=True)
    scaler.scale(loss_tenc).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    if inf:
        next(tenc.parameters()).grad[0, 0] = float("inf")
    scaler.step(opt_tenc)
    if update_between_steps:
        scaler.update()
    scaler.step(opt_unet)
    scaler.update()
    ratios = [(p.grad.norm() / r.norm()).item() for p, r in zip(unet.parameters(), reference)]
    assert max(ratios) - min(ratios) < 1e-4
    return ratios[0]


def _check_scaler(part: str) -> str | None:
    if not re.search(r"once, last", part):
        return "say that scaler.update() runs once, after every scaler.step"
    ratio = unet_gradient_ratio(update_between_steps=False)
    return None if abs(ratio - 1.0) < 1e-4 else f"one update, last, should step unet with its true gradient ({ratio})"


def _check_compare(part: str) -> str | None:
    refs = references(*_models()[2:])
    copied, right = verdict(run_step(Step()), refs), verdict(run_step(Step(restrict=(True, True))), refs)
    if (copied, right) != ("joint", "own"):
        return f"comparing with autograd.grad should tell the copied fix ({copied}) from recipe (a) ({right})"
    return None


def _ddp_leaves_a_gradient_unaveraged(part: str, ddp: Ddp) -> str | None:
    if "ddp" not in part.lower():
        return None
    runs = [ddp.steps[step] for step in COPIED_FIX_UNDER_DDP]
    if any(rank["raised"] for run in runs for rank in run) or not all(map(final_grads_differ, runs)):
        return "says DDP can leave a gradient unaveraged without a word, but the copied fix raised or was averaged"
    return None


def _check_no_error_no_proof(part: str) -> str | None:
    refs = references(*_models()[2:])
    silent = verdict(run_step(Step(steps="between"), "fused AdamW"), refs)
    m1, *_ = _models()
    version = m1[0].weight._version
    m1[0].weight.data.mul_(0.99)
    if silent != "other" or m1[0].weight._version != version:
        return f"a fused step before a backward should raise nothing and give a wrong gradient ({silent})"
    return None


TOOLS: tuple[Tool, ...] = (
    Tool("a write under no_grad", r"torch\.no_grad\(\)", _check_no_grad_write),
    Tool("anomaly mode", r"set_detect_anomaly", _check_anomaly, frozenset({"backward"})),
    Tool("diagnose with a record", r"recorded=", _check_diagnose_record),
    Tool("diagnose", r"\bdiagnose\b", _check_diagnose, frozenset({"backward"})),
    Tool("exercise bumps_per_step", r"bumps_per_step", _check_bumps_exercise, frozenset({"step"})),
    Tool("grad mode", r"with grad on", _check_grad_on),
    Tool("allow_unused", r"allow_unused=True", _check_allow_unused),
    Tool("only reached parameters", r"parameters (?:the|each|its) loss reaches", _check_reached_only),
    Tool("find_unused_parameters", r"find_unused_parameters=True", lambda part: None, frozenset({"ddp"}),
         lambda part, ddp: _judge_skipped_head(ddp)),
    Tool("run unet again", r"unet again", _check_unet_again, frozenset({"detach"})),
    Tool("one GradScaler", r"scaler\.update\(\)", _check_scaler, frozenset({"backward", "step"})),
    Tool("compare with a reference", r"compare `?\.grad`? with", _check_compare, frozenset({"grad", "retain"})),
    Tool("no error is no proof", r"never trust", _check_no_error_no_proof, frozenset({"step", "ddp"}),
         _ddp_leaves_a_gradient_unaveraged, COPIED_FIX_UNDER_DDP),
)


@functools.cache
def _tool_problem(tool: Tool, part: str) -> str | None:
    return tool.check(part)


def tool_of(part: str) -> Tool | None:
    """The first tool ``part`` names, or None."""
    return next((tool for tool in TOOLS if re.search(tool.pattern, part, flags=re.IGNORECASE)), None)


# ---------------------------------------------------------------- judging


@dataclass
class Ddp:
    """What the two processes gave back: each Step's per-rank outcome, and the skipped head's."""

    steps: dict[Step, list[dict[str, Any]]]
    skipped_head: list[dict[str, Any]]
    world_size: int = 2

    def verdict(self, step: Step) -> str:
        return ddp_verdict(self.steps[step], global_references(self.world_size))


def recommendations(text: str) -> Iterator[tuple[Row, Scenario | None, str]]:
    """Every (row, its scenario, sentence) of the sheet's Fix cells and habits."""
    for row in rows(text):
        scenario = scenario_of(row)
        for part in sentences(row.fix):
            yield row, scenario, part


def ddp_runs(recipe: Recipe) -> list[Step]:
    """Every DDP run of ``recipe``: each of its runs under each wrapping it allows."""
    return [replace(run, wrapping=wrapping) for run in recipe.runs for wrapping in recipe.wrappings]


def ddp_steps(text: str) -> set[Step]:
    """The DDP runs that judging ``text`` needs."""
    needed: set[Step] = set()
    for _row, scenario, part in recommendations(text):
        tool = tool_of(part)
        if tool is not None:
            needed.update(tool.ddp_steps)
        elif scenario is not None and features(part):
            needed.update(ddp_runs(read_recipe(part, scenario)))
    return needed


@functools.cache
def one_process_verdict(step: Step, optimizer: str) -> str:
    """``verdict`` of ``step`` run on one process with ``optimizer`` (each run once per test session)."""
    return verdict(run_step(step, optimizer), references(*_models()[2:]))


def _judge_recipe(recipe: Recipe, scenario: Scenario, ddp: Ddp) -> str | None:
    """What is wrong with one recipe sentence, or None."""
    single = {f"{run.describe()}, {optimizer}": one_process_verdict(run, optimizer)
              for run in recipe.runs for optimizer in OPTIMIZERS}
    on_ranks = {run.describe(): ddp.verdict(run) for run in ddp_runs(recipe)}
    ddp_wrong = {name: got for name, got in on_ranks.items() if got != recipe.goal}
    if recipe.warning:
        scope = on_ranks if scenario.ddp else single
        if all(got == recipe.goal for got in scope.values()):
            return f"warns against a recipe that is right in every run: {scope}"
        if re.search(r"l1 \+ l2", recipe.text.lower()) and set(single.values()) != {"joint"}:
            return f"says it gives L1 + L2, but it gives {single}"
        if re.search(r"not averaged|unaveraged", recipe.text.lower()):
            clean = [run for run in ddp_runs(recipe) if not ddp.steps[run][0]["raised"]]
            if not clean or not all(final_grads_differ(ddp.steps[run]) for run in clean):
                return "says a gradient is not averaged, but every rank ends with the same .grad"
        if re.search(r"nothing raises|raises nothing|silently", recipe.text.lower()):
            ddp_errors = {name: got for name, got in on_ranks.items() if got.startswith("raises ddp-")}
            if ddp_errors:
                return f"says DDP raises nothing, but {ddp_errors}"
        return None
    wrong = {name: got for name, got in single.items() if got != recipe.goal}
    if wrong:
        return f"recommends a recipe that does not give the {recipe.goal} gradient: {wrong}"
    if scenario.ddp and ddp_wrong:
        return f"recommends, for DDP, a recipe that is wrong on 2 ranks: {ddp_wrong}"
    if not scenario.ddp and ddp_wrong and not recipe.mentions_ddp:
        return f"recommends a recipe that is wrong under DDP without saying so: {ddp_wrong}"
    if not scenario.ddp and recipe.mentions_ddp and not ddp_wrong:
        return f"warns about DDP, but the recipe is right on 2 ranks: {on_ranks}"
    return None


def _judge_skipped_head(ddp: Ddp) -> str | None:
    ranks = ddp.skipped_head
    reference = skipped_head_reference(ddp.world_size)
    if any(rank["raised"] for rank in ranks):
        return f"find_unused_parameters=True with a skipped head raised {ranks[0]['raised']}"
    for rank in ranks:
        if not all(same(rank["first"][part], reference[part]) for part in ("trunk", "a")):
            return "with find_unused_parameters=True the used parameters' gradients are not the averaged reference"
        if any(g is not None for g in rank["first"]["b"]):
            return "the skipped head got a gradient"
    return None


class Problem(NamedTuple):
    """What is wrong with one sentence of the sheet."""

    where: str
    part: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where} | {self.part!r}: {self.problem}"


def problems(text: str, ddp: Ddp) -> list[Problem]:
    """Everything wrong with what ``text`` recommends, one per sentence (empty: every fix holds, live)."""
    found = []
    for row, scenario, part in recommendations(text):
        tool = tool_of(part)
        if tool is not None:
            extra = features(part) - tool.allows - {"ddp" if scenario and scenario.ddp else ""}
            problem = (f"mixes recipe words {sorted(extra)} into the {tool.name} sentence: one recommendation each"
                       if extra else _tool_problem(tool, part))
            if problem is None and tool.ddp_check is not None:
                problem = tool.ddp_check(part, ddp)
        elif scenario is None:
            problem = "a row whose symptom names no scenario the test knows"
        elif not features(part):
            problem = "a sentence the test cannot map to a recipe or a tool"
        else:
            problem = _judge_recipe(read_recipe(part, scenario), scenario, ddp)
        if problem:
            found.append(Problem(row.where, part, problem))
    return found


def dump(text: str) -> Sequence[str]:
    """How the test reads ``text``: one line per sentence (for debugging a failing sheet)."""
    lines = []
    for row, scenario, part in recommendations(text):
        tool = tool_of(part)
        if tool:
            lines.append(f"{row.where[:30]} | tool {tool.name} | {part}")
        elif scenario and features(part):
            recipe = read_recipe(part, scenario)
            lines.append(f"{row.where[:30]} | {'warning' if recipe.warning else 'recipe'} {recipe.goal} "
                         f"{[r.describe() for r in recipe.runs]} {recipe.wrappings} | {part}")
        else:
            lines.append(f"{row.where[:30]} | unmapped | {part}")
    return lines

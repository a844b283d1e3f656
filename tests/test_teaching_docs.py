"""The teaching documents in docs/ stay true to torch and to the course.

- cheatsheet.md quotes each error line exactly as torch raises it (reproduced live here), and its claims hold;
- every fix the sheet recommends is run live on the course's models (and under DDP on 2 gloo processes) and gives the
  gradient it promises: ``tests/sheet_fixes.py`` reads each Fix sentence, ``tests/sheet_recipes.py`` runs it;
- cheatsheet.html is built from the current cheatsheet.md, and prints on one A4 sheet, both sides (two pages);
- workshop.md names only sections and exercises that exist, covers every notebook and exercise, and its plans add up.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable, Dict, List, Optional, Set, Tuple

import nbformat
import pytest
import torch

from helpers.course.exercises.registry import exercises
from helpers.course.lesson03_inplace_version.exercise import measure_bumps
from helpers.course.lesson05_chained_amp.chain import chain_losses, make_batch, make_tenc, make_unet
from helpers.course.models import make_inputs, make_two_models, own_term, shared_term, two_losses
from helpers.tools import State, classify, named_parameters, saved_tensors
from tests.paths import FIXTURES, ROOT
from tests.sheet_fixes import COPIED_FIX_UNDER_DDP, Ddp, ddp_steps, problems, sentences, unet_gradient_ratio
from tests.sheet_recipes import ddp_worker, same

DOCS = ROOT / "docs"
CHEATSHEET = DOCS / "cheatsheet.md"
WORKSHOP = DOCS / "workshop.md"
CHROMIUM = Path("/usr/bin/chromium")

NOTEBOOK_ID = re.compile(r"\b(0\d_[a-z0-9_]+)\b")
HEADING_QUOTE = re.compile(r'"(##? [^"\n]+)"')
EXERCISE_MENTION = re.compile(r"[Ee]xercise `([A-Za-z0-9_]+)`")
ERROR_QUOTE = re.compile(r"`([A-Z]\w*(?:Error|Exception): [^`]+)`")
PLACEHOLDER = re.compile(r"\b([NMi])\b")  # the sheet writes N, M and i where torch prints numbers


# ---------------------------------------------------------------- reading the course and the docs


def solution_headings() -> Dict[str, Set[str]]:
    """Notebook id (``02_backward_twice``) -> every markdown heading line in its solved notebook."""
    headings: Dict[str, Set[str]] = {}
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        cells = nbformat.read(str(path), as_version=4).cells
        headings[path.stem] = {line.strip() for cell in cells if cell.cell_type == "markdown"
                               for line in cell.source.splitlines() if line.startswith("#")}
    return headings


def section_numbers(headings: Set[str]) -> Set[int]:
    """The numbers of a notebook's ``## N. ...`` sections."""
    return {int(match[1]) for heading in headings if (match := re.match(r"## (\d+)\. ", heading))}


def load_builder() -> ModuleType:
    """docs/build_cheatsheet.py, imported from its path (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("build_cheatsheet", DOCS / "build_cheatsheet.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torch_version() -> Tuple[int, int]:
    """(major, minor) of the installed torch."""
    major, minor = re.match(r"(\d+)\.(\d+)", torch.__version__).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def sheet_torch_version(text: str) -> Tuple[int, int]:
    """The torch release whose wording the sheet says it quotes."""
    match = re.search(r"how torch (\d+)\.(\d+)'s message begins, word for word", text)
    assert match, "cheatsheet.md must say which torch release its error lines come from"
    return int(match[1]), int(match[2])


def quoted_error_lines(text: str) -> List[str]:
    """Every ``ExceptionType: message`` code span in the sheet."""
    return ERROR_QUOTE.findall(text)


WORDING_CONDITIONS = {"older": r"Before torch \d+\.\d+:", "cuda": r"On a CUDA GPU:"}


def other_wordings(text: str) -> Dict[str, List[Tuple[str, str]]]:
    """The "Other wordings" paragraph's (other fragment, the sheet's fragment) pairs, by when they apply.

    ``"older"``: on torch releases before the one the sheet quotes; ``"cuda"``: for errors raised on a CUDA GPU.
    """
    paragraph = next((p for p in text.split("\n\n") if p.startswith("**Other wordings.**")), "")
    parts = re.split("(" + "|".join(WORDING_CONDITIONS.values()) + ")", paragraph)
    groups: Dict[str, List[Tuple[str, str]]] = {name: [] for name in WORDING_CONDITIONS}
    for marker, body in zip(parts[1::2], parts[2::2]):
        name = next(name for name, pattern in WORDING_CONDITIONS.items() if re.fullmatch(pattern, marker))
        groups[name] += re.findall(r"`([^`]+)` for `([^`]+)`", body)
    return groups


def quote_pattern(quote: str, substitutions: Tuple[Tuple[str, str], ...] = ()) -> re.Pattern:
    """A regex for a quoted line: literal text, with N, M and i standing for numbers.

    ``substitutions`` are (replacement, original) fragment pairs applied first, for other torch wordings.
    """
    for replacement, original in substitutions:
        quote = quote.replace(original, replacement)
    parts = PLACEHOLDER.split(quote)
    regex = "".join(r"\d+" if index % 2 else re.escape(part) for index, part in enumerate(parts))
    return re.compile(regex)


def describe(error: BaseException) -> str:
    """``Type: message``, as a traceback's last line shows it."""
    return f"{type(error).__name__}: {error}"


# ---------------------------------------------------------------- the errors, reproduced with the course's models


def _backward_twice() -> None:
    m1, m2 = make_two_models(seed=0)
    x1, x2 = make_inputs(seed=0)
    l1, l2 = two_losses(m1(x1), m2(x2))
    l1.backward()
    l2.backward()


def _inplace_version() -> None:
    m1, m2 = make_two_models(seed=0)
    x1, x2 = make_inputs(seed=0)
    opt2 = torch.optim.Adam(m2.parameters(), lr=1e-3)
    l1, l2 = two_losses(m1(x1), m2(x2))
    l2.backward(retain_graph=True)
    opt2.step()                      # M2's head changes before L1's backward, which passes through M2
    l1.backward()


def _leaf_inplace() -> None:
    m1, _ = make_two_models(seed=0)
    m1[2].weight.add_(0.01)


def _no_grad_fn() -> None:
    m1, m2 = make_two_models(seed=0)
    x1, x2 = make_inputs(seed=0)
    with torch.no_grad():
        l1, _ = two_losses(m1(x1), m2(x2))
    l1.backward()


def _unused_input() -> None:
    m1, m2 = make_two_models(seed=0)
    x1, _ = make_inputs(seed=0)
    torch.autograd.grad(own_term(m1(x1)), list(m2.parameters()))


def _scaler_without_step() -> None:
    model, _ = make_two_models(seed=0)
    x1, _ = make_inputs(seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale(own_term(model(x1))).backward()
    optimizer.step()                 # bypasses the scaler
    scaler.update()


@functools.lru_cache(maxsize=None)
def _ddp_run() -> tuple:
    """Everything these tests need from DDP, in one start of 2 gloo processes: notebook 08's tour of DDP's errors,
    every DDP run that judging the sheet (and the sheets that must fail) needs, the skipped head, the averaging."""
    from helpers.tools.spawn import run_distributed

    steps = set(COPIED_FIX_UNDER_DDP).union(*(ddp_steps(text) for text in judged_sheets()))
    return tuple(run_distributed(ddp_worker, world_size=2, args=(sorted(steps, key=repr),), backend="gloo",
                                 timeout_s=300))


def _ddp_tour() -> tuple:
    """Notebook 08's DDP scenarios, on 2 processes: what each raised on each rank."""
    return tuple(run["tour"] for run in _ddp_run())


def ddp_results() -> Ddp:
    """The DDP runs, as ``sheet_fixes.problems`` reads them."""
    runs = _ddp_run()
    return Ddp({step: [run["steps"][step] for run in runs] for step in runs[0]["steps"]},
               [run["skipped head"] for run in runs])


def _ddp_ready_twice() -> None:
    from helpers.course.lesson08_past_one_machine import failures
    failures.reraise(list(_ddp_tour()), "one DDP around both models; inputs=M1, then l2.backward()")


def _ddp_unfinished_reduction() -> None:
    from helpers.course.lesson08_past_one_machine import failures
    failures.reraise(list(_ddp_tour()), "two heads, one loss: find_unused_parameters=False")


REPRODUCERS: Dict[str, Callable[[], None]] = {
    "backward twice": _backward_twice,
    "in-place version": _inplace_version,
    "leaf in-place": _leaf_inplace,
    "no grad_fn": _no_grad_fn,
    "unused input": _unused_input,
    "scaler update without step": _scaler_without_step,
    "DDP ready twice": _ddp_ready_twice,
    "DDP unfinished reduction": _ddp_unfinished_reduction,
}


def raised_by(reproduce: Callable[[], None]) -> BaseException:
    """The exception ``reproduce`` raises; fails the test when it raises none."""
    try:
        reproduce()
    except Exception as error:  # the error under test, whatever its type
        return error
    pytest.fail(f"{getattr(reproduce, '__name__', reproduce)} raised nothing")


def matching_quotes(error: BaseException, text: str, device: str = "cpu") -> List[str]:
    """The sheet's quoted lines that ``error`` (raised on ``device``) matches, in this torch's wording.

    On the torch release the sheet quotes (or newer) the quote itself counts; on older releases the sheet's older
    wordings may stand in for fragments, and for an error raised on CUDA its GPU wordings too.
    """
    line = describe(error)
    variants: List[Tuple[Tuple[str, str], ...]] = [()]
    if torch_version() < sheet_torch_version(text):
        variants.append(tuple(other_wordings(text)["older"]))
    if device == "cuda":
        variants += [tuple(other_wordings(text)["cuda"]) + variant for variant in variants]
    return [quote for quote in quoted_error_lines(text)
            if any(quote_pattern(quote, subs).match(line) for subs in variants)]


# ---------------------------------------------------------------- cheat sheet: error lines


@pytest.mark.parametrize("name", list(REPRODUCERS))
def test_each_reproduced_error_matches_exactly_one_quoted_line(name: str) -> None:
    """What torch really raises starts with exactly one line quoted on the sheet (N, M, i as numbers)."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    error = raised_by(REPRODUCERS[name])
    found = matching_quotes(error, text)
    assert len(found) == 1, (f"{name}: torch {torch.__version__} raised\n  {describe(error)}\n"
                             f"which matches {len(found)} quoted lines on the cheat sheet: {found}")


def test_each_quoted_error_line_is_reproduced_here() -> None:
    """No line on the sheet escapes the live check: each one is raised by a reproducer above."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    quotes = quoted_error_lines(text)
    assert len(quotes) >= 6, quotes
    errors = [raised_by(reproduce) for reproduce in REPRODUCERS.values()]
    reproduced = {quote for error in errors for quote in matching_quotes(error, text)}
    assert set(quotes) == reproduced, f"quoted but not reproduced: {sorted(set(quotes) - reproduced)}"


def test_the_version_error_quote_is_the_course_setup_s_head_weight() -> None:
    """Error 2's quote names the [64, 1] saved head weight that the course's two-model loop really reports."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    (quote,) = [q for q in quoted_error_lines(text) if "inplace operation" in q]
    assert "[torch.FloatTensor [64, 1]]" in quote and "is at version N; expected version M instead." in quote
    error = raised_by(_inplace_version)
    numbers = re.search(r"is at version (\d+); expected version (\d+)", str(error))
    assert numbers and int(numbers[1]) == int(numbers[2]) + 1, "one Adam step bumps the saved weight once"


OLDER_CPU_VERSION_ERROR = RuntimeError(  # error 2 as torch 2.4 to 2.12 words it on the CPU
    "one of the variables needed for gradient computation has been modified by an inplace operation: "
    "[torch.FloatTensor [64, 1]], which is output 0 of AsStridedBackward0, is at version 2; expected version 1 "
    "instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
    "torch.autograd.set_detect_anomaly(True)."
)


def test_older_wordings_apply_on_older_torch_and_gpu_wordings_only_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU error from torch 2.4 matches error 2's quote through the older wordings, without the GPU ones."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "torch_version", lambda: (2, 4))
    assert len(matching_quotes(OLDER_CPU_VERSION_ERROR, text)) == 1
    cuda_error = RuntimeError(str(OLDER_CPU_VERSION_ERROR).replace("torch.FloatTensor", "torch.cuda.FloatTensor"))
    assert matching_quotes(cuda_error, text) == []
    assert len(matching_quotes(cuda_error, text, device="cuda")) == 1
    monkeypatch.setattr(sys.modules[__name__], "torch_version", lambda: sheet_torch_version(text))
    assert matching_quotes(OLDER_CPU_VERSION_ERROR, text) == [], "on the quoted release the older wording is wrong"


def test_other_wordings_on_the_sheet_come_from_real_messages() -> None:
    """Each older or GPU fragment appears in a real message in the fixtures, and replaces text the sheet quotes."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    groups = other_wordings(text)
    assert len(groups["older"]) >= 2 and len(groups["cuda"]) >= 1, groups
    pairs = [pair for group in groups.values() for pair in group]
    samples = json.loads((FIXTURES / "error_messages.json").read_text())["samples"]
    messages = [sample["message"] for sample in samples]
    quotes = " ".join(quoted_error_lines(text))
    for other, original in pairs:
        assert original in quotes, f"`{original}` is not in any quoted error line"
        assert any(other in message for message in messages), f"`{other}` is in no real message in the fixtures"


def test_sheet_proof_references_name_existing_sections() -> None:
    """Every "NN §k" in a Proof cell is a numbered section of that solved notebook."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    by_number = {notebook[:2]: section_numbers(headings) for notebook, headings in solution_headings().items()}
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| Symptom")]
    assert len(rows) >= 9, "both tables have rows"
    for row in rows:
        proof = row.rstrip(" |").rsplit("|", 1)[1]
        notebook: Optional[str] = None
        references = 0
        for match in re.finditer(r"\b(0\d)\b|§(\d+)", proof):
            if match[1]:
                notebook = match[1]
                assert notebook in by_number, f"no notebook {notebook} for {proof.strip()!r}"
            else:
                assert notebook is not None, f"a section without a notebook in {proof.strip()!r}"
                assert int(match[2]) in by_number[notebook], f"{notebook} has no section {match[2]}"
                references += 1
        assert references, f"no proof in row {row[:60]!r}..."


# ---------------------------------------------------------------- cheat sheet: silent failures it states


def test_sheet_version_bump_counts_are_what_cpu_optimizers_do() -> None:
    """The sheet's "0 bumps per step, against 1 for Adam and 2 for AdamW (default weight decay)" is measured, fused
    on the CPU included."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    match = re.search(r"(\d+) bumps per step, against (\d+) for Adam and (\d+) for AdamW \(default weight decay\)",
                      text)
    assert match, "the sheet states the bump counts"
    fused, adam, adamw = (int(group) for group in match.groups())
    assert measure_bumps(lambda p: torch.optim.Adam(p, lr=0.1)) == adam
    assert measure_bumps(lambda p: torch.optim.AdamW(p, lr=0.1)) == adamw
    for optimizer in (torch.optim.AdamW, torch.optim.Adam, torch.optim.SGD):
        assert measure_bumps(lambda p: optimizer(p, lr=0.1, fused=True)) == fused, optimizer.__name__


def test_sheet_claim_update_after_each_step_doubles_the_second_gradient() -> None:
    """update() between two scaler.step calls: when the scale changes (by the default factors), the second
    optimizer's gradient is off by 2x: twice too large after a halving, half after a doubling."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    assert "off by 2× (default factors) whenever the scale changes" in text
    assert unet_gradient_ratio(update_between_steps=False) == pytest.approx(1.0, rel=1e-4)
    assert unet_gradient_ratio(update_between_steps=True) == pytest.approx(2.0, rel=1e-4)
    assert unet_gradient_ratio(update_between_steps=False, inf=False) == pytest.approx(1.0, rel=1e-4)
    assert unet_gradient_ratio(update_between_steps=True, inf=False) == pytest.approx(0.5, rel=1e-4)


def _states(outputs: object, params: object, leave_out: Set[int] = frozenset()) -> Set[State]:
    """The states of the tensors saved behind ``outputs``, except those of the nodes in ``leave_out`` (ids)."""
    return {saved.state for saved in saved_tensors(outputs, params) if id(saved.node) not in leave_out}


def test_sheet_claim_a_backward_frees_what_its_path_saved_and_nothing_else() -> None:
    """Error 1: a plain L1 backward frees the shared term and both models. Restricted to M1 (`inputs=`, or
    `torch.autograd.grad` for M1), it frees the shared term and M1, not M2, and L2's backward still fails on the shared
    term. In the chain, the path to tenc runs through unet, so unet's saved tensors go too."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    assert "all along its way: the shared term **and both models** (`torch.autograd.grad` frees its way too)" in text
    assert "`l1.backward(inputs=M1)` frees the shared term and M1, not M2; L2 needs the shared term" in text
    assert "In a chain (tenc → unet) the path to tenc runs through unet" in text
    for way in ("backward()", "backward(inputs=M1)", "autograd.grad for M1"):
        m1, m2 = make_two_models(seed=0)
        params = named_parameters(M1=m1, M2=m2)
        x1, x2 = make_inputs(seed=0)
        o1, o2 = m1(x1), m2(x2)
        shared, own2 = shared_term(o1, o2), own_term(o2)
        l1, l2 = shared + own_term(o1), shared + own2
        in_models = saved_tensors([o1, o2], params)          # held, so that the nodes' ids stay theirs
        models = {id(saved.node) for saved in in_models}
        if way == "autograd.grad for M1":
            torch.autograd.grad(l1, list(m1.parameters()))
        else:
            l1.backward(inputs=list(m1.parameters()) if way == "backward(inputs=M1)" else None)
        assert _states(o1, params) == {State.FREED} and _states(shared, params, models) == {State.FREED}, way
        assert _states(o2, params) == ({State.FREED} if way == "backward()" else {State.ALIVE}), way
        assert _states(own2, params, models) == {State.ALIVE}
        kind = classify(raised_by(functools.partial(l2.backward, inputs=list(m2.parameters()))))
        assert kind is not None and kind.name == "backward-twice"
    x, target, mask = make_batch(0)
    tenc, unet = make_tenc(0), make_unet(1)
    hidden = tenc(x)
    prediction = unet(hidden)
    loss_tenc, _ = chain_losses(prediction, target, mask)
    loss_tenc.backward(inputs=list(tenc.parameters()))
    chain_params = named_parameters(tenc=tenc, unet=unet)
    assert _states(prediction, chain_params, {id(s.node) for s in saved_tensors(hidden, chain_params)}) == {State.FREED}


def test_sheet_claim_under_autocast_groupnorm_saves_its_float32_weight() -> None:
    """Autocast does not protect against a misordered step: unet's GroupNorm saves its float32 weight itself."""
    text = CHEATSHEET.read_text(encoding="utf-8")
    assert "GroupNorm saves its float32 weight as it is" in text
    x, _, _ = make_batch(0)
    tenc, unet = make_tenc(0), make_unet(1)
    norm = next(name for name, module in unet.named_modules() if isinstance(module, torch.nn.GroupNorm))
    with torch.autocast("cpu"):
        prediction = unet(tenc(x).detach())
    saved = {s.parameter for s in saved_tensors(prediction, named_parameters(unet=unet)) if s.parameter}
    assert f"unet.{norm}.weight" in saved and unet.get_submodule(norm).weight.dtype == torch.float32


# ---------------------------------------------------------------- cheat sheet: every fix, judged live

OLD_SHEET = FIXTURES / "cheatsheet_before_issue25.md"
MUTANTS: Dict[str, Tuple[str, str]] = {  # a wrong fix a later edit could bring back -> (the sheet's text, the edit)
    "error 1 silenced by retain_graph alone": (
        "Restrict each backward to its own model (`inputs=`), `retain_graph=True` on all but the last, then step.",
        "`retain_graph=True` on every backward but the last."),
    "error 2 silenced by moving the steps": (
        "Restrict each backward to its own model (`inputs=`), then step. Forward",
        "Run every backward first, then every step. Forward"),
    "DDP: restricted backward passes, a step between them": (
        "Restrict every backward to its own model, `retain_graph=True` on the first, then step.",
        "Restrict every backward to its own model, `retain_graph=True` on the first."),
    "DDP: one wrapper per model as the fix": (
        "Restrict every backward to its own model, `retain_graph=True` on the first, then step.",
        "Wrap each model in its own DDP."),
    "autograd.grad without its DDP caveat": (
        "(b) `torch.autograd.grad` per model (DDP never averages it).", "(b) `torch.autograd.grad` per model."),
    "the summed loss for separate goals": (
        "(d) `(l1 + l2).backward()` for a joint goal.", "(d) `(l1 + l2).backward()`."),
    "a DDP caveat on a recipe DDP averages": (
        "(c) Detach the other output, one backward.", "(c) Detach the other output, one backward (not under DDP)."),
    "a warning against a right recipe": (
        "Never detach the one a loss trains.", "Never detach the other model's output."),
    "the habit that silences error 2": (
        "every backward restricted to what it should train (`inputs=`); then every step",
        "every backward; then every step"),
    "a sentence nothing checks": (
        "Measure your optimizer (exercise `bumps_per_step`).", "Use a smaller learning rate."),
    "a record taken after the step": (
        "`record = record_parameters(params)` after the forward, then "
        "`diagnose(loss, params, recorded=record)`",
        "`diagnose(loss, params, recorded=record_parameters(params))`"),
    "anomaly mode on during the backward only": ("run both passes under `with", "run the backward under `with"),
    "a recipe inside a tool sentence": (
        "Predict it: `helpers.tools.diagnose`.", "Predict it: `helpers.tools.diagnose`, then `retain_graph=True`."),
}
# What the sheet said before issue 25, sentence by sentence: the ones that must fail (the rest held).
OLD_WRONG = {
    "`retain_graph=True` on every backward except the last one through the shared part.",
    "Zero both optimizers, run all backward passes, then all steps.",
    "To find the forward line: `with torch.autograd.set_detect_anomaly(True):`.",
    "Ask each loss only for its own model's parameters.",
    "`inputs=` on every backward",
    "one DDP per model.",
    "`torch.autograd.grad` per model.",
    "The error 2 order: all backward passes, then all steps.",
    "To catch it: `diagnose(loss, params, recorded=record_parameters(params))`.",
    "One forward pass, then every backward pass, then every step.",
    "Zero both optimizers first.",
    "Count version bumps; check gradients against a reference.",
}


def mutant(name: str) -> str:
    """The sheet with one fix edited as ``MUTANTS[name]`` says."""
    original, edit = MUTANTS[name]
    text = CHEATSHEET.read_text(encoding="utf-8")
    assert text.count(original) == 1, f"{name}: the sheet no longer says {original!r}; update MUTANTS"
    return text.replace(original, edit)


def judged_sheets() -> List[str]:
    """Every sheet these tests judge: this one, the one before issue 25, and each mutant."""
    return [CHEATSHEET.read_text(encoding="utf-8"), OLD_SHEET.read_text(encoding="utf-8"), *map(mutant, MUTANTS)]


def test_every_fix_on_the_sheet_gives_the_gradient_it_promises() -> None:
    """Each Fix sentence (and habit) is a recipe run live, on one process with SGD and fused AdamW and, where DDP is
    concerned, on 2 processes in each wrapping, or a tool checked live; none is wrong, none unread."""
    found = problems(CHEATSHEET.read_text(encoding="utf-8"), ddp_results())
    assert not found, "\n".join(map(str, found))


def test_the_judge_fails_the_fixes_the_sheet_had_before_issue_25() -> None:
    """The sheet before issue 25 fails exactly where its fixes were wrong: the silencers of errors 1 and 2, one DDP
    per model, autograd.grad with no word on DDP, anomaly mode without the forward, a record taken after the step."""
    found = problems(OLD_SHEET.read_text(encoding="utf-8"), ddp_results())
    assert {problem.part for problem in found} == OLD_WRONG, "\n".join(map(str, found))


@pytest.mark.parametrize("name", list(MUTANTS))
def test_the_judge_fails_a_wrong_fix_written_into_the_sheet(name: str) -> None:
    """One fix edited into a known mistake: the judge fails that sentence, and only that one."""
    found = problems(mutant(name), ddp_results())
    edited = sentences(MUTANTS[name][1])
    assert found, f"{name}: the judge let {MUTANTS[name][1]!r} through"
    assert all(any(part in problem.part for part in edited) for problem in found), "\n".join(map(str, found))


def test_sheet_claim_ddp_averages_a_wrapper_once_all_its_parameters_have_a_gradient() -> None:
    """One DDP around both models: after L1's backward restricted to M1, M1's .grad still differs across the ranks;
    L2's backward completes the wrapper, and M1's .grad is then averaged. The copied fix, in either wrapping: L1's
    backward completes the averaging, and each rank adds its own L2 gradient on top, with nothing raised."""
    from helpers.course.lesson08_past_one_machine.recipes import shard_gradients
    from tests.sheet_recipes import global_references

    text = CHEATSHEET.read_text(encoding="utf-8")
    assert "DDP averages a wrapper's gradients when all its parameters have one, into `.grad` at the end of" in text
    assert "Under DDP, L1's backward completes the averaging; L2's is not averaged: replicas drift." in text
    runs = _ddp_run()
    first, second = ([run["averaging"][moment] for run in runs]
                     for moment in ("after L1's backward", "after L2's backward"))
    assert not same(first[0], first[1]), "M1's .grad was averaged before its wrapper had every gradient"
    assert all(same(grads, global_references(2)["own"]["M1"]) for grads in second)
    shards = [shard_gradients(rank, 2) for rank in (0, 1)]
    for step in COPIED_FIX_UNDER_DDP:
        for rank, outcome in enumerate(run["steps"][step] for run in runs):
            for model in ("M1", "M2"):
                names = [name for name in shards[0]["L1"] if name.startswith(model + ".")]
                expected = [(shards[0]["L1"][n] + shards[1]["L1"][n]) / 2 + shards[rank]["L2"][n] for n in names]
                assert outcome["raised"] is None and same(outcome["stepped"][model], expected), (step, rank, model)


# ---------------------------------------------------------------- cheat sheet: the printable page


SHEETS = {"cheatsheet.md": "cheatsheet.html", "cheatsheet.zh-CN.md": "cheatsheet.zh-CN.html"}  # both languages


@pytest.mark.parametrize("markdown, page", SHEETS.items())
def test_cheatsheet_html_is_built_from_current_markdown(markdown: str, page: str) -> None:
    """Each HTML sheet is exactly what build_cheatsheet.py makes of its Markdown now."""
    builder = load_builder()
    committed = (DOCS / page).read_text(encoding="utf-8")
    assert committed == builder.build(DOCS / markdown), f"{page} is stale: run python docs/build_cheatsheet.py"


@pytest.mark.parametrize("page", SHEETS.values())
def test_cheatsheet_html_has_a4_print_css(page: str) -> None:
    """The page asks the printer for A4 and carries its own compact print style."""
    html = (DOCS / page).read_text(encoding="utf-8")
    assert re.search(r"@page\s*\{[^}]*size:\s*A4", html)
    assert "<table>" in html and "RuntimeError: Trying to backward through the graph a second time" in html


def pdf_page_count(pdf: bytes) -> int:
    """Pages in a PDF: its /Page objects, which must agree with the page tree's /Count."""
    pages = len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", pdf))
    counts = [int(n) for n in re.findall(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)", pdf, flags=re.DOTALL)]
    counts += [int(n) for n in re.findall(rb"/Count\s+(\d+)[^>]*?/Type\s*/Pages\b", pdf, flags=re.DOTALL)]
    assert pages, "no page objects found: compressed object streams? count pages another way"
    assert not counts or max(counts) == pages, f"{pages} /Page objects but the page tree says {counts}"
    return pages


def chromium() -> Optional[str]:
    """The Chromium to print with: /usr/bin/chromium, else one on PATH, else None."""
    return str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")


def print_to_pdf(browser: str, html: Path, out_dir: Path) -> bytes:
    """Print ``html`` with headless Chromium, as a browser's Print dialog would, and return the PDF."""
    pdf = out_dir / "x.pdf"
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={out_dir / 'profile'}", "--no-pdf-header-footer", f"--print-to-pdf={pdf}",
               html.resolve().as_uri()]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert pdf.exists(), f"chromium wrote no PDF (exit {result.returncode}):\n{result.stderr[-2000:]}"
    return pdf.read_bytes()


@pytest.mark.kernel  # prints with headless Chromium
@pytest.mark.parametrize("page", SHEETS.values())
def test_cheatsheet_html_prints_on_one_sheet_both_sides(tmp_path: Path, page: str) -> None:
    """Printed by Chromium, each sheet is two pages: the tables on the front, the pictures on the back."""
    browser = chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but /usr/bin/chromium is missing: install it to check the printed page")
        pytest.skip("no /usr/bin/chromium to print the cheat sheet with")
    pages = pdf_page_count(print_to_pdf(browser, DOCS / page, tmp_path))
    assert pages == 2, f"{page} prints on {pages} pages, not one sheet's two sides; shorten its Markdown"


@pytest.mark.parametrize("markdown, page", SHEETS.items())
def test_cheatsheet_pictures_are_the_course_figures_inlined(markdown: str, page: str) -> None:
    """Page 2 shows every figure the notebooks show, from the package's own files, inlined so the page stands alone."""
    from helpers.course.figures import FIGURES, figure_path

    text = (DOCS / markdown).read_text(encoding="utf-8")
    html = (DOCS / page).read_text(encoding="utf-8")
    language = "zh_CN" if "zh-CN" in markdown else ""  # the Chinese sheet shows the figures drawn in Chinese
    for name in FIGURES:
        link = f"../helpers/course/figures/images/{language + '/' if language else ''}{name}.svg"
        assert link in text and (DOCS / link).resolve() == figure_path(name, "svg", language), name
    assert html.count('src="data:image/svg+xml;base64,') == len(FIGURES)
    before_first_picture = text[: text.index("\n![")]
    heading = re.findall(r"^## (.+)$", before_first_picture, flags=re.MULTILINE)[-1]
    assert html.count('<h2 class="new-page">') == 1 and f'<h2 class="new-page">{heading}</h2>' in html


# ---------------------------------------------------------------- workshop guide


def workshop_lines() -> List[str]:
    """The guide's lines."""
    return WORKSHOP.read_text(encoding="utf-8").splitlines()


def test_workshop_headings_exist_in_the_named_solution_notebooks() -> None:
    """Each quoted "## ..." heading is, word for word, a heading of the notebook named before it on its line."""
    headings = solution_headings()
    checked = 0
    for number, line in enumerate(workshop_lines(), 1):
        for match in HEADING_QUOTE.finditer(line):
            named = [m for m in NOTEBOOK_ID.finditer(line[:match.start()])]
            assert named, f"line {number}: heading {match[1]!r} without a notebook before it"
            notebook = named[-1][1]
            assert notebook in headings, f"line {number}: no notebook {notebook} in solutions/"
            assert match[1] in headings[notebook], f"line {number}: {notebook} has no heading {match[1]!r}"
            checked += 1
    assert checked >= 30, f"only {checked} headings referenced"


def test_workshop_exercise_ids_exist_and_sit_in_their_notebooks() -> None:
    """Each "exercise `id`" is a registered exercise; on a line naming notebooks, its own notebook is among them."""
    mentioned = 0
    for number, line in enumerate(workshop_lines(), 1):
        notebooks = set(NOTEBOOK_ID.findall(line))
        for exercise_id in EXERCISE_MENTION.findall(line):
            known = exercises()
            assert exercise_id in known, f"line {number}: no exercise {exercise_id!r}; known: {sorted(known)}"
            if notebooks:
                notebook = known[exercise_id].notebook
                assert notebook in notebooks, f"line {number}: {exercise_id} is not in {notebooks}"
            mentioned += 1
    assert mentioned >= len(exercises())


def test_workshop_covers_every_notebook_and_exercise() -> None:
    """A notebook or exercise added to the course must find its place in the guide (and in the skip list)."""
    text = WORKSHOP.read_text(encoding="utf-8")
    assert set(solution_headings()) <= set(NOTEBOOK_ID.findall(text)), "a solved notebook is missing from the guide"
    skip_list = text.split("## Exercises to skip when short of time", 1)[1]
    assert set(EXERCISE_MENTION.findall(skip_list)) == set(exercises()), "the skip list must rank every exercise"


def plans(text: str) -> Dict[int, List[int]]:
    """Stated minutes of each "## Plan ..." section -> the minutes of its table's blocks."""
    found: Dict[int, List[int]] = {}
    for match in re.finditer(r"^## (Plan [^\n]*)$", text, flags=re.MULTILINE):
        stated = re.search(r"(\d+) minutes", match[1])
        assert stated, f"{match[1]!r} must state its length in minutes"
        body = text[match.end():].split("\n## ", 1)[0]
        rows = [line for line in body.splitlines() if line.startswith("|")][2:]  # after the header and the rule
        found[int(stated[1])] = [int(row.split("|")[1]) for row in rows]
    return found


def test_workshop_plan_blocks_add_up_to_the_stated_minutes() -> None:
    """The 90-minute plan's blocks add up to 90, the half-day's (at most 4 hours) to what it states."""
    found = plans(WORKSHOP.read_text(encoding="utf-8"))
    short, half_day = sorted(found)
    assert short == 90 and 180 <= half_day <= 240, f"expected a 90-minute and a half-day plan, found {sorted(found)}"
    for stated, blocks in found.items():
        assert len(blocks) >= 5 and sum(blocks) == stated, f"the {stated}-minute plan's blocks add up to {sum(blocks)}"


# ---------------------------------------------------------------- all three documents


@pytest.mark.parametrize("name", ["workshop.md", "hosting.md", "cheatsheet.md"])
def test_docs_relative_links_point_at_files(name: str) -> None:
    """Every relative Markdown link in the teaching docs opens a file of this repository."""
    text = (DOCS / name).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not re.match(r"[a-z]+:", target):
            assert (DOCS / target).resolve().exists(), f"{name} links to missing {target}"

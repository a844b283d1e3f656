"""What must be true of a notebook after Run All in JupyterLab; each check returns the problems it found.

A check returns a list of sentences, empty when all is well, so a test can assert ``not problems`` and
print every problem at once, and the negative test can assert that a broken notebook produces some.
"""
from __future__ import annotations

import os
import re
from typing import ContextManager, List
from unittest import mock

from helpers.course.exercises.result import CheckResult, Status
from helpers.language import LANGUAGE_VARIABLE, tr, translated
from helpers.tools.errors import get_kind
from tests.browser.lab_page import NotebookRun
from tests.browser.notebook_expectations import NotebookExpectations

STDERR_MIME = "application/vnd.jupyter.stderr"
_CUT = "\x00"  # a field value to cut a message at


def speaking(language: str) -> ContextManager[object]:
    """The helpers' language while the checks work out what the page should say: the notebook's."""
    return mock.patch.dict(os.environ, {LANGUAGE_VARIABLE: language})


def _start(message: str, **values: object) -> str:
    """``message`` in the helpers' language, up to its first field given as ``_CUT``."""
    return tr(message, **values).split(_CUT)[0]


def error_card_title() -> str:
    """What every expected-error card's title starts with, in the helpers' language."""
    return _start("Expected error reproduced - {name}", name=_CUT).rstrip(" -")


def hint_button_prefix() -> str:
    """The start of the hint widget's first button label ("Show hint 1 of")."""
    return _start("Show hint {number} of {count}", number=1, count=_CUT).rstrip()


def answer_marker(language: str = "") -> str:
    """Text a predict card shows once a click was answered ("You chose"), in ``language``."""
    with speaking(language):
        return _start("You chose {choice}; this run: {answer}.", choice=_CUT, answer=_CUT).strip()


PREDICT_ANSWER_MARKER = answer_marker()  # for the English notebooks


def predict_answer_start(label: str) -> str:
    """How a predict card's answer starts after a click on ``label`` ("You chose <label>")."""
    return _start("You chose {choice}; this run: {answer}.", choice=label, answer=_CUT).rstrip(" ;:；：")


def _excerpt(text: str, limit: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit // 2] + " [...] " + text[-limit // 2:]


def structure_problems(run: NotebookRun, expected: NotebookExpectations) -> List[str]:
    """The browser shows the notebook we read, with every cell in the DOM, and Run All ended."""
    problems = []
    if run.path != run.requested_path:
        problems.append(f"the page showed {run.path!r} when it was read, not {run.requested_path!r}")
    if run.windowing_mode != "none":
        problems.append(f"notebook windowing is {run.windowing_mode!r}, not 'none': cells may be missing from the DOM")
    if run.open_documents != run.tabs_expected:
        problems.append(f"JupyterLab has {run.open_documents} documents open, not {run.tabs_expected}"
                        + (" (just this notebook)" if run.tabs_expected == 1 else " (the tabs left open and this one)"))
    if len(run.cells) != expected.cell_count:
        problems.append(f"JupyterLab shows {len(run.cells)} cells, the file has {expected.cell_count}")
    if not run.finished:
        problems.append(f"Run All did not finish in time (kernel {run.kernel_status})")
    return problems


def unfinished_cells(run: NotebookRun, expected: NotebookExpectations) -> List[str]:
    """Code cells without a numeric execution count after Run All (not run, or still running)."""
    problems = []
    for index in expected.code_cells:
        cell = run.cell(index)
        if not isinstance(cell.execution_count, int):
            problems.append(f"cell {index} did not run (prompt {cell.prompt or '[ ]'}): {_excerpt(cell.source, 120)}")
    return problems


def unexpected_errors(run: NotebookRun) -> List[str]:
    """Error outputs, and stderr holding a traceback, in the notebook model or in the page."""
    problems = []
    for cell in run.cells:
        for output in cell.outputs:
            if output.get("output_type") == "error":
                traceback = "\n".join(output.get("traceback", []))
                problems.append(f"cell {cell.index} raised {output.get('ename')}: {output.get('evalue')}\n"
                                f"{_excerpt(_strip_ansi(traceback))}")
            elif output.get("output_type") == "stream" and output.get("name") == "stderr":
                text = "".join(output.get("text", ""))
                if "Traceback" in text:
                    problems.append(f"cell {cell.index} printed a traceback to stderr:\n{_excerpt(text)}")
        for rendered in cell.rendered:
            if rendered["mime"] == STDERR_MIME and "Traceback" in (rendered["text"] or ""):
                problems.append(f"cell {cell.index} shows a traceback in the page:\n{_excerpt(rendered['text'])}")
    return problems


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def missing_error_explanations(run: NotebookRun, expected: NotebookExpectations) -> List[str]:
    """Every displayed expect_error shows its card; a course error kind also its explanation and notebook."""
    with speaking(expected.language):
        return _missing_error_explanations(run, expected)


def _missing_error_explanations(run: NotebookRun, expected: NotebookExpectations) -> List[str]:
    problems = []
    title = error_card_title()
    for index in sorted({card.cell_index for card in expected.error_cards}):
        cards = [card for card in expected.error_cards if card.cell_index == index]
        shown = run.cell(index).shown_text
        if shown.count(title) < len(cards):
            problems.append(f"cell {index} shows {shown.count(title)} '{title}' "
                            f"card(s), its source displays {len(cards)}; it shows:\n{_excerpt(shown)}")
            continue
        for card in cards:
            if card.kind is None and card.exception_name is None:
                if _start("Covered in notebook {notebook}.", notebook=_CUT).strip() not in shown:
                    problems.append(f"cell {index}: the card names no course notebook; it shows:\n{_excerpt(shown)}")
                continue
            if card.kind is None:
                if card.exception_name.rsplit(".", 1)[-1] not in shown:
                    problems.append(f"cell {index}: the card does not name {card.exception_name}")
                continue
            kind = get_kind(card.kind)
            covered = [tr("Covered in notebook {notebook}.", notebook=kind.notebook)] if kind.notebook else []
            for line in [translated(kind.title), *translated(kind.explanation).splitlines(), *covered]:
                if line not in shown:
                    problems.append(f"cell {index} ({card.kind}): missing {line!r}; it shows:\n{_excerpt(shown)}")
    return problems


def exercise_card_title(status: Status, exercise_id: str) -> str:
    """The title a check result card shows, e.g. ``Correct - exercise two_grads`` (its text form's first line)."""
    return str(CheckResult(exercise_id, status, "")).splitlines()[0]


def missing_exercise_cards(run: NotebookRun, expected: NotebookExpectations, status: Status) -> List[str]:
    """Every ``exercises.check`` cell shows its card, and its result has ``status`` (passed, not attempted yet)."""
    problems = []
    for index, exercise_id in sorted(expected.exercise_checks.items()):
        cell = run.cell(index)
        with speaking(expected.language):
            title = exercise_card_title(status, exercise_id)
        if title not in cell.shown_text:
            problems.append(f"cell {index}: no {title!r} card; it shows:\n{_excerpt(cell.shown_text)}")
        plain = "".join("".join(output.get("data", {}).get("text/plain", "")) for output in cell.outputs)
        if repr(status.value) not in plain:
            problems.append(f"cell {index}: the check result is not {status.value!r}: {_excerpt(plain)}")
    return problems


def missing_graph_pictures(run: NotebookRun, expected: NotebookExpectations) -> List[str]:
    """Every drawn graph shows as an SVG image that decoded and has a visible size."""
    problems = []
    for index in sorted(expected.graph_cells):
        cell = run.cell(index)
        svgs = [image for image in cell.images if image.mime == "image/svg+xml"]
        if not svgs:
            problems.append(f"cell {index}: no SVG picture; it shows:\n{_excerpt(cell.shown_text)}")
        problems += [f"cell {index}: the SVG picture did not render ({image})" for image in svgs if not image.drawn]
    return problems


def missing_widgets(run: NotebookRun, expected: NotebookExpectations) -> List[str]:
    """Every predict widget shows one button per choice; every hint widget its first button."""
    problems = []
    for question in expected.predict_questions:
        buttons = run.cell(question.cell_index).buttons
        if not buttons or (question.choice_count is not None and len(buttons) != question.choice_count):
            problems.append(f"cell {question.cell_index}: predict widget shows buttons {buttons}, "
                            f"expected {question.choice_count or 'some'}")
    with speaking(expected.language):
        prefix = hint_button_prefix()
    for index, exercise_id in sorted(expected.hint_cells.items()):
        buttons = run.cell(index).buttons
        if not any(label.startswith(prefix) for label in buttons):
            problems.append(f"cell {index}: no '{prefix} ...' button for {exercise_id}; "
                            f"buttons: {buttons}")
    return problems


def _answer_start(expected: NotebookExpectations, label: str) -> str:
    with speaking(expected.language):
        return predict_answer_start(label)


def unanswered_clicks(run: NotebookRun, expected: NotebookExpectations) -> List[str]:
    """A click on each predict widget's first choice revealed the answer, naming the choice clicked."""
    problems = []
    clicked = {click.cell_index: click for click in run.clicks}
    for question in expected.predict_questions:
        click = clicked.get(question.cell_index)
        if click is None:
            problems.append(f"cell {question.cell_index}: no predict button to click")
        elif click.answer_text is None:
            problems.append(f"cell {question.cell_index}: clicking {click.label!r} revealed no answer")
        elif _answer_start(expected, click.label) not in click.answer_text:
            problems.append(f"cell {question.cell_index}: clicked {click.label!r}, the answer says:\n"
                            f"{_excerpt(click.answer_text)}")
    return problems

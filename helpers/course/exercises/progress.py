"""``exercises.summary(notebook)``: where you are in a notebook, as its last code cell shows it.

Each of the notebook's exercises: passed, failed (with the first line of its diagnosis) or not attempted, from the
checks run in this kernel; then what to do next, and that this notebook's kernel can now be shut down.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from helpers.course.exercises.registry import exercises, notebook_names
from helpers.course.exercises.result import CheckResult, Status
from helpers.language import chosen_language, marked, tr, translated
from helpers.tools.display import card_html

# The last result of each exercise checked in this kernel (exercises.check records it).
LAST_RESULTS: Dict[str, CheckResult] = {}

# Colour-blind safe (Okabe-Ito) and marked in text too, so the card reads in grey.
_MARKS = {Status.PASSED: ("✓", marked("passed"), "#009E73"), Status.FAILED: ("✗", marked("failed"), "#D55E00"),
          Status.NOT_ATTEMPTED: ("…", marked("not attempted yet"), "#999999")}


def record(result: CheckResult) -> None:
    """Remember ``result`` as the latest of its exercise."""
    LAST_RESULTS[result.exercise_id] = result


# Every open notebook keeps a kernel of 200 to 400 MiB (docs/hosting.md): on Binder, a few too many and the session
# restarts. The course's launch configuration shuts idle kernels down after 30 minutes; this says how to do it now.
SHUT_DOWN_LINE = marked("Done here? Kernel → Shut Down Kernel frees this notebook's memory; your code and answers stay, "
                  "and Kernel → Restart Kernel and Run All Cells brings it back.")


@dataclass(frozen=True)
class NotebookSummary:
    """The exercises of one notebook with their latest status, and the next step."""

    notebook: str
    rows: List[Tuple[str, Status, str]]  # (exercise id, status, one line of diagnosis)
    next_step: str

    @property
    def all_passed(self) -> bool:
        return bool(self.rows) and all(status is Status.PASSED for _, status, _ in self.rows)

    def _lines(self) -> List[str]:
        lines = []
        for exercise_id, status, line in self.rows:
            mark, word, _ = _MARKS[status]
            lines.append(f"{mark} {exercise_id}: {translated(word)}" + (f" - {line}" if line else ""))
        return (lines or [tr("(this notebook has no exercises)")]) + [self.next_step, translated(SHUT_DOWN_LINE)]

    def __str__(self) -> str:
        return "\n".join([tr("Where you are in {notebook}:", notebook=self.notebook), *self._lines()])

    def __repr__(self) -> str:
        return str(self)

    def _ipython_display_(self) -> None:
        """The card, then (where it can be done safely) a button that shuts this notebook's kernel down."""
        from IPython.display import display

        from helpers.course.kernel_shutdown import shutdown_button

        display({"text/plain": str(self), "text/html": self._repr_html_()}, raw=True)
        button = shutdown_button()
        if button is not None:
            display(button)

    def _repr_html_(self) -> str:
        rows = []
        for exercise_id, status, line in self.rows:
            mark, word, colour = _MARKS[status]
            detail = f" - {html.escape(line)}" if line else ""
            rows.append(f"<div><b style='color:{colour}'>{mark} {html.escape(translated(word))}</b> <code>{html.escape(exercise_id)}</code>"
                        f"{detail}</div>")
        body = "".join(rows) + f"<div style='margin-top:4px'>{html.escape(self.next_step)}</div>" + (
            f"<div style='margin-top:4px'>{html.escape(translated(SHUT_DOWN_LINE))}</div>")
        return card_html(tr("Where you are in {notebook}", notebook=self.notebook), body, accent="#0072B2")


def _first_line(message: str, limit: int = 160) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


_FOLDERS = {"zh_CN": "notebooks/zh-CN"}  # the learners' copies in each language but English (notebooks/)


def notebook_folder() -> str:
    """The folder of the learners' copies in the chosen language."""
    return _FOLDERS.get(chosen_language(), "notebooks")


def next_step(notebook: str) -> str:
    """What to open after ``notebook``."""
    names = notebook_names()
    if notebook in names and names.index(notebook) + 1 < len(names):
        return tr("Next: open {path}.", path=f"{notebook_folder()}/{names[names.index(notebook) + 1]}.ipynb")
    return tr("This is the last notebook. docs/cheatsheet.html has the whole course on one sheet.")


def make_summary(notebook: str, results: Optional[Dict[str, CheckResult]] = None) -> NotebookSummary:
    """The summary of ``notebook`` from ``results`` (default: the checks run in this kernel)."""
    results = LAST_RESULTS if results is None else results
    rows = []
    for exercise_id, exercise in exercises().items():
        if exercise.notebook != notebook:
            continue
        result = results.get(exercise_id)
        if result is None or result.status is Status.NOT_ATTEMPTED:
            rows.append((exercise_id, Status.NOT_ATTEMPTED, "" if result else tr("its check cell has not run")))
        elif result.passed:
            rows.append((exercise_id, Status.PASSED, ""))
        else:
            rows.append((exercise_id, Status.FAILED, _first_line(result.message)))
    return NotebookSummary(notebook, rows, next_step(notebook))

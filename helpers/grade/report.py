"""grades.csv (one row per notebook and exercise) and grades.html (learners x exercises, and the room's
diagnoses counted per exercise, most common first)."""
from __future__ import annotations

import csv
import html
import re
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from helpers.course.exercises.registry import exercises
from helpers.grade.grading import STATUSES, Row
from helpers.grade.submissions import natural_key

CSV_COLUMNS = ("notebook", "exercise", "status", "message")
# Okabe-Ito colours (colour-blind safe), each with its own text mark, so the table also reads in grey.
MARKS: Dict[str, Tuple[str, str, str]] = {
    "passed": ("✓", "#009E73", "#ffffff"), "failed": ("✗", "#D55E00", "#ffffff"),
    "error": ("!", "#CC79A7", "#000000"), "not attempted": ("…", "#E0E0E0", "#000000"),
}
RANK = {"passed": 3, "failed": 2, "error": 1, "not attempted": 0}


def write_csv(rows: Sequence[Row], path: Path) -> None:
    """``notebook, exercise, status, message``, one line per row."""
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow((row.notebook, row.exercise, row.status, row.message))


def diagnosis_of(message: str) -> str:
    """The part of a message that names the mistake: its first sentence, without the notes the grader added."""
    text = message.split(" (Note:")[0]
    if text.startswith("Fresh inputs exposed it"):
        text = text.split(" show that it is wrong. ", 1)[-1]
    first = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    return first if len(first) <= 200 else first[:197] + "..."


def _group_key(diagnosis: str) -> str:
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", diagnosis)


def diagnoses(rows: Sequence[Row]) -> Dict[str, List[Tuple[int, int, str]]]:
    """exercise -> [(count, checked, diagnosis)], most common first: the failed answers' diagnoses, out of the
    answers checked (passed or failed)."""
    by_exercise: Dict[str, Counter] = {}
    examples: Dict[Tuple[str, str], str] = {}
    graded: Counter = Counter()
    for row in rows:
        if not row.exercise or row.status not in ("passed", "failed"):
            continue
        graded[row.exercise] += 1
        if row.status == "passed":
            continue
        diagnosis = diagnosis_of(row.message)
        key = _group_key(diagnosis)
        examples.setdefault((row.exercise, key), diagnosis)
        by_exercise.setdefault(row.exercise, Counter())[key] += 1
    return {exercise: [(count, graded[exercise], examples[(exercise, key)])
                       for key, count in sorted(counter.items(), key=lambda item: (-item[1], item[0]))]
            for exercise, counter in by_exercise.items()}


def _cell(rows: List[Row]) -> str:
    if not rows:
        return "<td class='none' title='no notebook with this exercise'>–</td>"
    best = max(rows, key=lambda row: RANK[row.status])
    mark, colour, text = MARKS[best.status]
    copies = f" <small>({len(rows)} copies)</small>" if len(rows) > 1 else ""
    exposed = " <small>fresh</small>" if best.own_check_passed and best.status == "failed" else ""
    title = html.escape(f"{best.notebook}: {best.status}. {best.message}", quote=True)
    return (f"<td style='background:{colour};color:{text}' title=\"{title}\"><b>{mark}</b> {html.escape(best.status)}"
            f"{exposed}{copies}</td>")


STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#111}
table{border-collapse:collapse;margin:12px 0}
th,td{border:1px solid #999;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0} td.none{color:#777;text-align:center}
.legend span{display:inline-block;padding:2px 8px;margin-right:6px;border:1px solid #999}
li{margin:4px 0} .other{color:#444}
"""


def write_html(rows: Sequence[Row], path: Path, title_line: str, warnings: Sequence[str]) -> None:
    """The learners x exercises table, the room's diagnoses, and the notebooks that could not be graded."""
    order = list(exercises())
    columns = [exercise for exercise in order if any(row.exercise == exercise for row in rows)]
    learners: "OrderedDict[str, Dict[str, List[Row]]]" = OrderedDict()
    for row in sorted(rows, key=lambda row: natural_key(row.learner or row.notebook)):
        cells = learners.setdefault(row.learner or row.notebook, {})
        if row.exercise:
            cells.setdefault(row.exercise, []).append(row)
    legend = "".join(f"<span style='background:{colour};color:{text}'><b>{mark}</b> {status}</span>"
                     for status, (mark, colour, text) in MARKS.items())
    head = "".join(f"<th>{html.escape(exercise)}<br><small>{html.escape(exercises()[exercise].notebook)}</small></th>"
                   for exercise in columns)
    body = "".join(f"<tr><th>{html.escape(learner)}</th>" + "".join(_cell(cells.get(exercise, []))
                                                                     for exercise in columns) + "</tr>"
                   for learner, cells in learners.items() if cells)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Grades</title>"
             f"<style>{STYLE}</style></head><body><h1>Grades</h1><p>{html.escape(title_line)}</p>"]
    parts += [f"<p><b>Warning:</b> {html.escape(warning)}</p>" for warning in warnings]
    parts.append(f"<p class='legend'>{legend} <small>Hover over a cell for the diagnosis; grades.csv has every "
                 "message. <b>fresh</b>: the notebook's own check passed this answer; the grader's fresh inputs "
                 "exposed it.</small></p>")
    parts.append(f"<table><thead><tr><th>learner</th>{head}</tr></thead><tbody>{body}</tbody></table>")
    parts.append("<h2>What the room got wrong, per exercise</h2>")
    found = diagnoses(rows)
    if not found:
        parts.append("<p>Nothing: every answer checked passed.</p>")
    for exercise in columns:
        if exercise not in found:
            continue
        items = "".join(f"<li><b>{count} of {graded}</b> answers checked: {html.escape(text)}</li>"
                        for count, graded, text in found[exercise])
        parts.append(f"<h3>{html.escape(exercise)}</h3><ul>{items}</ul>")
    stopped: "OrderedDict[str, List[str]]" = OrderedDict()
    for row in rows:
        if row.exercise and row.status == "error":
            reasons = stopped.setdefault(row.notebook, [])
            if row.message not in reasons:
                reasons.append(row.message)
    if stopped:
        items = "".join(f"<li>{html.escape(notebook)}: {html.escape(' / '.join(reasons))}</li>"
                        for notebook, reasons in stopped.items())
        parts.append(f"<h2>Notebooks stopped or not graded</h2><ul class='other'>{items}</ul>")
    others = [row for row in rows if not row.exercise]
    if others:
        items = "".join(f"<li>{html.escape(row.notebook)}: {html.escape(row.message)}</li>" for row in others)
        parts.append(f"<h2>Files not graded</h2><ul class='other'>{items}</ul>")
    parts.append("</body></html>")
    path.write_text("".join(parts), encoding="utf-8")


def summary_line(rows: Sequence[Row], notebooks: int, seconds: float) -> str:
    """``Graded 12 notebooks in 95 s: 20 passed, 5 failed, 3 not attempted, 1 error (2 exposed by fresh inputs).``"""
    counts = Counter(row.status for row in rows)
    exposed = sum(1 for row in rows if row.own_check_passed and row.status == "failed")
    parts = ", ".join(f"{counts.get(status, 0)} {status}" for status in STATUSES)
    extra = f" ({exposed} exposed by fresh inputs)" if exposed else ""
    return f"Graded {notebooks} notebooks in {seconds:.0f} s: {parts}{extra}."

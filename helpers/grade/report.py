"""grades.csv (one row per notebook and exercise) and grades.html (learners x exercises, and the room's
diagnoses counted per exercise, most common first).

Names and messages come from the learners' files and code: every text written (and printed, through
:func:`clean_text`) loses its control characters and terminal escape sequences, and a CSV cell that a spreadsheet
would read as a formula is written with a leading ``'`` (OWASP's rule against CSV injection).
"""
from __future__ import annotations

import csv
import html
import re
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from helpers.course.exercises.registry import exercises
from helpers.grade.rows import STATUSES, Row
from helpers.grade.submissions import natural_key
from helpers.language import chosen_language, marked, tr, translated

CSV_COLUMNS = ("notebook", "exercise", "status", "message")
# Okabe-Ito colours (colour-blind safe), each with its own text mark, so the table also reads in grey.
MARKS: Dict[str, Tuple[str, str, str]] = {
    "passed": ("✓", "#009E73", "#ffffff"), "failed": ("✗", "#D55E00", "#ffffff"),
    "error": ("!", "#CC79A7", "#000000"), "not attempted": ("…", "#E0E0E0", "#000000"),
}
RANK = {"passed": 3, "failed": 2, "error": 1, "not attempted": 0}
# Each status as the report words it, and a count of it ("3 failed"): the statuses themselves stay English (the
# CSV's status column is read by programs).
STATUS_WORDS = {"passed": marked("passed"), "failed": marked("failed"), "error": marked("error"),
                "not attempted": marked("not attempted")}
COUNTED = {"passed": marked("{count} passed"), "failed": marked("{count} failed"), "error": marked("{count} error"),
           "not attempted": marked("{count} not attempted")}
# What the grader puts before a diagnosis that only its fresh inputs found, and after a message that has notes.
EXPOSED = marked("Fresh inputs exposed it: the same sweep on the notebook's own seeds passed this answer, but the "
                 "grader's inputs, made from a salt the notebook's cells never saw, show that it is wrong. ")
NOTED = marked("{message} (Note: {notes}.)")

# Terminal escape sequences, whole: CSI (ESC [ or 0x9B ... final byte), OSC/DCS/SOS/PM/APC strings up to their
# terminator (BEL or ST), and the two-byte ESC sequences. What is left of an unterminated one loses its ESC below.
ESCAPES = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
                     r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x90\x98\x9c-\x9f]*(?:\x07|\x1b\\|\x9c)"
                     r"|\x1b[ -/]*[0-~]")
# Line breaks and tabs become one space; every other C0/C1 control, DEL, and the invisible bidirectional
# overrides (which reorder what a reader sees) go; a lone surrogate (a file name that is not UTF-8) becomes U+FFFD,
# so that writing the text as UTF-8 cannot fail.
BREAKS = re.compile(r"\r\n|[\t\n\v\f\r\x85\u2028\u2029]")
CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
SURROGATES = re.compile(r"[\ud800-\udfff]")
# What makes a spreadsheet read a cell as a formula (OWASP), and the full-width forms some spreadsheets accept.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def clean_text(text: str) -> str:
    """``text`` safe to write or print: no terminal escape sequence, no control character, on one line."""
    text = ESCAPES.sub("", str(text))
    return SURROGATES.sub("\ufffd", CONTROLS.sub("", BREAKS.sub(" ", text)))


def csv_cell(text: str) -> str:
    """One cleaned CSV cell; one a spreadsheet would take for a formula (``=``, ``+``, ``-``, ``@``, tab or carriage
    return first, also after spaces, before or after cleaning) starts with ``'``."""
    cleaned = clean_text(text)
    formula = any(str(value).lstrip(" ").startswith(FORMULA_STARTS) for value in (text, cleaned.lstrip()))
    return "'" + cleaned if formula else cleaned


def write_csv(rows: Sequence[Row], path: Path) -> None:
    """``notebook, exercise, status, message``, one line per row; every cell cleaned (:func:`csv_cell`)."""
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow([csv_cell(value) for value in (row.notebook, row.exercise, row.status, row.message)])


def _html(text: str) -> str:
    return html.escape(clean_text(text), quote=True)


def status_word(status: str) -> str:
    """``status`` as the report words it."""
    return translated(STATUS_WORDS[status]) if status in STATUS_WORDS else status


def counted(status: str, count: int) -> str:
    """``3 failed``, in the chosen language."""
    return translated(COUNTED[status], count=count) if status in COUNTED else f"{count} {status}"


def with_notes(message: str, notes: Sequence[str]) -> str:
    """``message (Note: a; b.)``."""
    return translated(NOTED, message=message, notes="; ".join(notes))


def _translated_diagnosis(text: str) -> str:
    """What :func:`diagnosis_of` takes away, as the chosen language words it: the notes, the exposed prefix."""
    noted = translated(NOTED)
    note = noted.split("{message}", 1)[-1].split("{notes}", 1)[0].strip() if noted.startswith("{message}") else ""
    text = text.split(note)[0] if note else text
    exposed = translated(EXPOSED)
    return text[len(exposed):] if text.startswith(exposed) else text


def diagnosis_of(message: str) -> str:
    """The part of a message that names the mistake: its first sentence, without the notes the grader added."""
    text = message.split(" (Note:")[0]
    if text.startswith("Fresh inputs exposed it"):
        text = text.split(" show that it is wrong. ", 1)[-1]
    ends = r"(?<=[.!?])\s"
    if chosen_language():
        text, ends = _translated_diagnosis(text), ends + r"|(?<=[。！？])"
    first = re.split(ends, text.strip(), maxsplit=1)[0]
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
        return f"<td class='none' title='{_html(tr('no notebook with this exercise'))}'>–</td>"
    best = max(rows, key=lambda row: RANK[row.status])
    mark, colour, text = MARKS[best.status]
    copies = f" <small>{_html(tr('({count} copies)', count=len(rows)))}</small>" if len(rows) > 1 else ""
    exposed = f" <small>{_html(tr('fresh'))}</small>" if best.own_check_passed and best.status == "failed" else ""
    word = status_word(best.status)
    title = _html(tr("{notebook}: {status}. {message}", notebook=best.notebook, status=word, message=best.message))
    return (f"<td style='background:{colour};color:{text}' title=\"{title}\"><b>{mark}</b> {_html(word)}"
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
    legend = "".join(f"<span style='background:{colour};color:{text}'><b>{mark}</b> {_html(status_word(status))}</span>"
                     for status, (mark, colour, text) in MARKS.items())
    head = "".join(f"<th>{_html(exercise)}<br><small>{_html(exercises()[exercise].notebook)}</small></th>"
                   for exercise in columns)
    body = "".join(f"<tr><th>{_html(learner)}</th>" + "".join(_cell(cells.get(exercise, []))
                                                                     for exercise in columns) + "</tr>"
                   for learner, cells in learners.items() if cells)
    grades = _html(tr("Grades"))
    parts = [f"<!DOCTYPE html><html lang='{(chosen_language() or 'en').replace('_', '-')}'><head>"
             f"<meta charset='utf-8'><title>{grades}</title><style>{STYLE}</style></head><body><h1>{grades}</h1>"
             f"<p>{_html(title_line)}</p>"]
    parts += [f"<p><b>{_html(tr('Warning:'))}</b> {_html(warning)}</p>" for warning in warnings]
    legend_text = tr("Hover over a cell for the diagnosis; grades.csv has every message. {fresh}: the notebook's own "
                     "check passed this answer; the grader's fresh inputs exposed it.",
                     fresh=f"<b>{_html(tr('fresh'))}</b>")
    parts.append(f"<p class='legend'>{legend} <small>{legend_text}</small></p>")
    parts.append(f"<table><thead><tr><th>{_html(tr('learner'))}</th>{head}</tr></thead><tbody>{body}</tbody>"
                 "</table>")
    parts.append(f"<h2>{_html(tr('What the room got wrong, per exercise'))}</h2>")
    found = diagnoses(rows)
    if not found:
        parts.append(f"<p>{_html(tr('Nothing: every answer checked passed.'))}</p>")
    for exercise in columns:
        if exercise not in found:
            continue
        items = "".join("<li>" + tr("<b>{count} of {checked}</b> answers checked: {diagnosis}", count=count,
                                    checked=graded, diagnosis=_html(text)) + "</li>"
                        for count, graded, text in found[exercise])
        parts.append(f"<h3>{_html(exercise)}</h3><ul>{items}</ul>")
    stopped: "OrderedDict[str, List[str]]" = OrderedDict()
    for row in rows:
        if row.exercise and row.status == "error":
            reasons = stopped.setdefault(row.notebook, [])
            if row.message not in reasons:
                reasons.append(row.message)
    if stopped:
        items = "".join(f"<li>{_html(notebook)}: {_html(' / '.join(reasons))}</li>"
                        for notebook, reasons in stopped.items())
        parts.append(f"<h2>{_html(tr('Notebooks stopped or not graded'))}</h2><ul class='other'>{items}</ul>")
    others = [row for row in rows if not row.exercise]
    if others:
        items = "".join(f"<li>{_html(row.notebook)}: {_html(row.message)}</li>" for row in others)
        parts.append(f"<h2>{_html(tr('Files not graded'))}</h2><ul class='other'>{items}</ul>")
    parts.append("</body></html>")
    path.write_text("".join(parts), encoding="utf-8")


def summary_line(rows: Sequence[Row], notebooks: int, seconds: float) -> str:
    """``Graded 12 notebooks in 95 s: 20 passed, 5 failed, 3 not attempted, 1 error (2 exposed by fresh inputs).``"""

    counts = Counter(row.status for row in rows)
    exposed = sum(1 for row in rows if row.own_check_passed and row.status == "failed")
    parts = tr(", ").join(counted(status, counts.get(status, 0)) for status in STATUSES)
    if exposed:
        return tr("Graded {notebooks} notebooks in {seconds} s: {counts} ({exposed} exposed by fresh inputs).",
                  notebooks=notebooks, seconds=f"{seconds:.0f}", counts=parts, exposed=exposed)
    return tr("Graded {notebooks} notebooks in {seconds} s: {counts}.", notebooks=notebooks, seconds=f"{seconds:.0f}",
              counts=parts)

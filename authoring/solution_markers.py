"""Solution markers inside notebook cells, and the stubs that replace them in student copies.

A region::

    # BEGIN SOLUTION
    ...the answer...
    # END SOLUTION

becomes ``# YOUR CODE HERE`` plus ``raise NotImplementedError`` (inside a function) or ``...`` (at top level).
A line ending in ``# SOLUTION`` keeps its assignment target: ``answer = 42  # SOLUTION`` -> ``answer = ...``.
Each cell with markers names its exercise on a line ``# EXERCISE: exercise_id``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from helpers.course.exercises.solutions import STUB_MESSAGE

STUB_COMMENT = "# YOUR CODE HERE"
_REGION = re.compile(r"^(?P<indent>\s*)#\s*(?P<which>BEGIN|END)\s+SOLUTION\b(?P<rest>.*)$")
_SUFFIX = re.compile(r"^(?P<code>.*?)\s*#\s*SOLUTION\s*$")
_ASSIGNMENT = re.compile(r"^(?P<indent>\s*)(?P<target>[A-Za-z_][\w.\[\]'\", ]*?)\s*=(?!=)\s*\S")
_EXERCISE = re.compile(r"^#\s*EXERCISE:\s*(?P<id>\S*)\s*$")
_VALID_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOOSE_REGION = re.compile(r"#\s*(BEGIN|END)\s*SOLUTION", re.IGNORECASE)


class MarkerError(ValueError):
    """A malformed solution marker; the message names the file, the cell and the line."""

    def __init__(self, where: str, line_number: int, problem: str) -> None:
        super().__init__(f"{where}, line {line_number}: {problem}")


@dataclass(frozen=True)
class SplitCell:
    """A cell's student source, and its solution when it has markers."""

    student_source: str
    solution_source: Optional[str]
    exercise_id: Optional[str]


def _stub(indent: str) -> List[str]:
    if indent:
        return [f"{indent}{STUB_COMMENT}", f'{indent}raise NotImplementedError("{STUB_MESSAGE}")']
    return [f"{STUB_COMMENT}", "..."]


def _suffix_stub(code: str) -> str:
    assignment = _ASSIGNMENT.match(code)
    if assignment:
        target = assignment["target"].rstrip()
        value = ", ".join(["..."] * (target.count(",") + 1)) if "[" not in target else "..."
        return f"{assignment['indent']}{target} = {value}  {STUB_COMMENT}"
    indent = code[: len(code) - len(code.lstrip())]
    if indent:  # inside a function: a bare `...` would make it return None and look like a wrong answer
        return f'{indent}raise NotImplementedError("{STUB_MESSAGE}")  {STUB_COMMENT}'
    return f"{indent}...  {STUB_COMMENT}"


def _check_compiles(source: str, where: str, which: str) -> None:
    """Raise MarkerError when ``source`` (IPython magics allowed) is not valid Python."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        compile(TransformerManager().transform_cell(source), where, "exec")
    except SyntaxError as error:
        raise MarkerError(where, error.lineno or 1, f"the {which} of this cell does not compile: {error.msg}") from None


def split_cell(source: str, where: str) -> SplitCell:
    """Make the student source of one code cell.

    Args:
        source: the cell's source in solutions/.
        where: "file, cell N", for error messages.

    Raises:
        MarkerError: an unclosed, nested or stray marker, or markers without an ``# EXERCISE:`` line.
    """
    student: List[str] = []
    solution: List[str] = []
    region_start: Optional[Tuple[int, str]] = None
    found_marker = False
    exercise_id = None
    for number, line in enumerate(source.split("\n"), 1):
        exercise = _EXERCISE.match(line.strip())
        if exercise:
            if not _VALID_ID.match(exercise["id"]):
                raise MarkerError(where, number, f"exercise ids use letters, digits and _ only: {exercise['id']!r}")
            if exercise_id is not None:
                raise MarkerError(where, number, "a second '# EXERCISE:' line in one cell")
            exercise_id = exercise["id"]
        region = _REGION.match(line)
        if region:
            found_marker = True
            if region["rest"].strip():
                raise MarkerError(where, number, f"unexpected text after the marker: {line.strip()!r}")
            if region["which"] == "BEGIN":
                if region_start is not None:
                    raise MarkerError(where, number, f"nested BEGIN SOLUTION (the region opened on line {region_start[0]} is not closed)")
                region_start = (number, region["indent"])
                student.extend(_stub(region["indent"]))
            else:
                if region_start is None:
                    raise MarkerError(where, number, "END SOLUTION without a BEGIN SOLUTION")
                region_start = None
            continue
        suffix = _SUFFIX.match(line)
        if suffix:
            found_marker = True
            if region_start is not None:
                raise MarkerError(where, number, "a '# SOLUTION' line inside a BEGIN/END SOLUTION region")
            student.append(_suffix_stub(suffix["code"]))
            solution.append(suffix["code"])
            continue
        if _LOOSE_REGION.search(line):
            raise MarkerError(where, number, f"malformed solution marker: {line.strip()!r}")
        solution.append(line)
        if region_start is None:
            student.append(line)
    if region_start is not None:
        raise MarkerError(where, region_start[0], "BEGIN SOLUTION is never closed by END SOLUTION")
    if not found_marker:
        return SplitCell(source, None, None)
    if exercise_id is None:
        raise MarkerError(where, 1, "a cell with solution markers needs a line '# EXERCISE: exercise_id'")
    student_source, solution_source = "\n".join(student), "\n".join(solution)
    _check_compiles(student_source, where, "student copy")
    _check_compiles(solution_source, where, "solution")
    return SplitCell(student_source, solution_source, exercise_id)


def has_marker_text(source: str) -> bool:
    """True when a (markdown) cell mentions a solution marker, which only code cells may carry."""
    return any(_LOOSE_REGION.search(line) or _SUFFIX.match(line) for line in source.split("\n"))

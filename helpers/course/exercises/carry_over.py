"""Carrying a learner's answers to a new version of the course: where each exercise lives now, and what changed.

    python -m helpers.course.exercises.carry_over ~/my-course-work

reads every notebook in that folder (or the notebooks named), finds the cells that start with
``# EXERCISE: <id>``, and says for each one the notebook that holds the exercise in this version, whether the cell
holds an answer or only the stub, and whether the exercise asks for something else now (its function's signature
changed, or the id is gone). It only reads; it never writes a notebook.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

import nbformat

from helpers.course.exercises.solutions import STUB_MESSAGE, recorded_solutions
from helpers.language import tr

EXERCISE_LINE = re.compile(r"^#\s*EXERCISE:\s*(?P<id>\w+)")
# Exercises whose id changed between versions of the course: old id -> new id.
RENAMED: Dict[str, str] = {"distill_step": "online_distill_step"}


@dataclass(frozen=True)
class CarriedCell:
    """One exercise cell of the learner's old notebook, and where it goes now."""

    old_notebook: str
    exercise_id: str
    answered: bool
    new_notebook: Optional[str]
    new_id: Optional[str]
    old_signature: Optional[str]
    new_signature: Optional[str]

    def describe(self) -> str:
        """One line for the learner."""
        where = f"{self.old_notebook}: {self.exercise_id}"
        if not self.answered:
            return tr("{where}: not answered (still the stub), nothing to carry.", where=where)
        if self.new_notebook is None:
            return tr("{where}: this exercise is no longer in the course; keep your answer for reference.",
                      where=where)
        target = f"notebooks/{self.new_notebook}.ipynb"
        old, new, new_id = self.old_signature, self.new_signature, self.new_id
        renamed = new_id != self.exercise_id
        if old != new and renamed:
            return tr("{where} (now called {new_id}) -> {target}. The exercise changed: it was {old}, it is now {new}. "
                      "Read its new text before you paste your answer.", where=where, new_id=new_id, target=target,
                      old=old, new=new)
        if old != new:
            return tr("{where} -> {target}. The exercise changed: it was {old}, it is now {new}. Read its new text "
                      "before you paste your answer.", where=where, target=target, old=old, new=new)
        if renamed:
            return tr("{where} (now called {new_id}) -> {target}: paste your answer into its `# EXERCISE: {new_id}` "
                      "cell.", where=where, new_id=new_id, target=target)
        return tr("{where} -> {target}: paste your answer into its `# EXERCISE: {new_id}` cell.", where=where,
                  target=target, new_id=new_id)


def signature(source: str) -> Optional[str]:
    """``name(arg, ...)`` of the first function a cell defines, or None (a cell that only assigns)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            return f"{node.name}({', '.join(arg.arg for arg in node.args.args)})"
    return None


def is_stub(source: str) -> bool:
    """Whether an exercise cell still holds the generated stub, not an answer."""
    return STUB_MESSAGE in source and "NotImplementedError" in source


def exercise_cells(path: Path) -> Dict[str, str]:
    """exercise id -> source of each ``# EXERCISE:`` cell of one notebook."""
    cells = nbformat.read(str(path), as_version=4).cells
    found: Dict[str, str] = {}
    for cell in cells:
        match = EXERCISE_LINE.match(cell.source.lstrip()) if cell.cell_type == "code" else None
        if match:
            found[match["id"]] = cell.source
    return found


def carry(paths: Iterable[Path]) -> List[CarriedCell]:
    """Every exercise cell of the notebooks at ``paths``, matched with this version of the course."""
    solutions = recorded_solutions()
    carried = []
    for path in paths:
        for exercise_id, source in exercise_cells(path).items():
            new_id = RENAMED.get(exercise_id, exercise_id)
            entry = solutions.get(new_id)
            carried.append(CarriedCell(
                old_notebook=path.name, exercise_id=exercise_id, answered=not is_stub(source),
                new_notebook=str(entry["notebook"]) if entry else None, new_id=new_id if entry else None,
                old_signature=signature(source), new_signature=signature(str(entry["source"])) if entry else None))
    return carried


def notebook_paths(arguments: Sequence[str]) -> List[Path]:
    """The notebooks named, and every ``.ipynb`` inside the folders named."""
    paths: List[Path] = []
    for argument in arguments:
        path = Path(argument).expanduser()
        paths += sorted(path.glob("*.ipynb")) if path.is_dir() else [path]
    return paths


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print one line per exercise cell found; 1 when no notebook or no exercise cell was found."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help=tr("your saved notebooks, or the folder that holds them"))
    paths = notebook_paths(parser.parse_args(argv).paths)
    carried = carry(path for path in paths if path.suffix == ".ipynb" and path.exists())
    for cell in carried:
        print(cell.describe())
    if not carried:
        print(tr("No exercise cells found: name your saved notebooks, or the folder that holds them."),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The notebooks in a grading folder: which course notebook each one is, its exercises, and what is odd about it.

Nothing here runs a notebook. A notebook is recognised by its ``# EXERCISE: <id>`` cells (cell metadata does not
survive an old nbformat), else by its file name; one that is neither is reported, never run.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import nbformat

from helpers.course.exercises.carry_over import EXERCISE_LINE, RENAMED, is_stub
from helpers.course.exercises.registry import exercises, notebook_names

OUTPUT_NAMES = ("grades.csv", "grades.html")
SKIPPED_PARTS = (".ipynb_checkpoints", "__MACOSX")


@dataclass
class Submission:
    """One notebook file of the folder.

    Attributes:
        path: the file.
        name: its path inside the folder, as the report shows it.
        learner: whose it is: the first folder under DIR, else the file name without the course notebook's name.
        notebook: the course notebook it is (``04_whose_gradient``), or None.
        exercise_ids: the exercises of that notebook, in course order (all of them, found in the file or not).
        found_ids: the exercises whose cell the file holds.
        notes: odd but harmless things, for the report.
        problem: why it is not run (unreadable, not a course notebook), or None.
        node: the notebook as read (version 4), when readable.
    """

    path: Path
    name: str
    learner: str
    notebook: Optional[str] = None
    exercise_ids: List[str] = field(default_factory=list)
    found_ids: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    problem: Optional[str] = None
    node: Optional[nbformat.NotebookNode] = None
    code_hash: str = ""
    untouched: bool = True


def find_notebooks(folder: Path) -> List[Path]:
    """Every ``.ipynb`` under ``folder``, in name order, leaving out checkpoints."""
    return sorted(path for path in folder.rglob("*.ipynb")
                  if path.is_file() and not any(part in SKIPPED_PARTS for part in path.parts))


def _learner(relative: Path, notebook: Optional[str]) -> str:
    if len(relative.parts) > 1:
        return relative.parts[0]
    stem = relative.stem
    if notebook and notebook in stem:
        stem = stem.replace(notebook, "").strip(" _-.()") or stem
    return stem


def _exercise_cells(node: nbformat.NotebookNode) -> Dict[str, str]:
    found: Dict[str, str] = {}
    for cell in node.cells:
        if cell.cell_type != "code":
            continue
        match = EXERCISE_LINE.match(cell.source.lstrip())
        if match:
            found.setdefault(match["id"], cell.source)
    return found


def _notebook_by_name(stem: str) -> Optional[str]:
    for name in notebook_names():
        if name in stem:
            return name
    return None


def read_submission(path: Path, folder: Path) -> Submission:
    """Read one file and recognise it; never raises for what the file holds."""
    relative = path.relative_to(folder)
    submission = Submission(path=path, name=relative.as_posix(), learner=_learner(relative, None))
    try:
        raw = nbformat.reader.reads(path.read_text(encoding="utf-8"))
        version = nbformat.reader.get_version(raw)[0]
        node = nbformat.convert(raw, 4)
        node.cells  # noqa: B018 - a JSON file that is not a notebook fails here
    except Exception as error:  # malformed JSON, not UTF-8, a file that is not a notebook, an unknown version
        first_line = str(error).strip().splitlines()[0][:160] if str(error).strip() else ""
        submission.problem = f"unreadable ({type(error).__name__}: {first_line})"
        return submission
    if version != 4:
        submission.notes.append(f"nbformat {version}, read as version 4")
    submission.node = node
    cells = _exercise_cells(node)
    known = exercises()
    found = [RENAMED.get(exercise_id, exercise_id) for exercise_id in cells]
    gone = [exercise_id for exercise_id in cells if RENAMED.get(exercise_id, exercise_id) not in known]
    if gone:
        submission.notes.append(f"holds exercises this version of the course does not have: {', '.join(gone)}")
    notebooks = sorted({known[exercise_id].notebook for exercise_id in found if exercise_id in known})
    if not notebooks:
        by_name = _notebook_by_name(path.stem)
        if by_name is None:
            submission.problem = ("not a course notebook: no '# EXERCISE:' cell of this course, and its name matches "
                                  "none of the course's notebooks")
            return submission
        notebooks = [by_name]
    if len(notebooks) > 1:
        submission.notes.append(f"holds exercises of several notebooks: {', '.join(notebooks)}")
    submission.notebook = notebooks[0]
    if notebooks[0] not in path.stem:
        submission.notes.append(f"renamed: it holds the exercises of {notebooks[0]}")
    submission.exercise_ids = [exercise_id for exercise_id, exercise in known.items() if exercise.notebook in notebooks]
    submission.found_ids = [exercise_id for exercise_id in found if exercise_id in known]
    submission.learner = _learner(relative, notebooks[0])
    code = "\n\x00".join(cell.source.strip() for cell in node.cells if cell.cell_type == "code")
    submission.code_hash = hashlib.sha256(code.encode()).hexdigest()
    submission.untouched = all(is_stub(source) for source in cells.values())
    return submission


def read_folder(folder: Path) -> List[Submission]:
    """Every notebook under ``folder``, recognised; files with the same code are noted as duplicates of each other."""
    submissions = [read_submission(path, folder) for path in find_notebooks(folder)]
    by_hash: Dict[str, List[Submission]] = {}
    for submission in submissions:
        if submission.code_hash and not submission.untouched:
            by_hash.setdefault(submission.code_hash, []).append(submission)
    for group in by_hash.values():
        for submission in group if len(group) > 1 else []:
            others = ", ".join(other.name for other in group if other is not submission)
            submission.notes.append(f"the same code as {others}")
    return submissions


def natural_key(text: str) -> List[object]:
    """Sort key that puts learner2 before learner10."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]

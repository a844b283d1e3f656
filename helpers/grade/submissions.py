"""The notebooks in a grading folder: which course notebook each one is, its exercises, and what is odd about it.

Nothing here runs a notebook. A notebook is recognised by its ``# EXERCISE: <id>`` cells (cell metadata does not
survive an old nbformat), else by its file name; one that is neither is reported, never run.
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import nbformat

from helpers.course.exercises.carry_over import RENAMED, is_stub
from helpers.course.exercises.registry import exercises, notebook_names
from helpers.grade.cells import exercise_marker
from helpers.language import tr

OUTPUT_NAMES = ("grades.csv", "grades.html")
SKIPPED_PARTS = (".ipynb_checkpoints", "__MACOSX")
MAX_NOTEBOOK_BYTES = 20 * 2**20  # the course's notebooks are 0.2 MiB; one with many plots a few MiB
# carry_over.EXERCISE_LINE, tolerant: any case, any spacing around the '#' and the ':'.


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


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _walk(folder: Path) -> Tuple[List[Path], Dict[Path, str]]:
    found: List[Path] = []
    problems: Dict[Path, str] = {}
    real_folder = os.path.realpath(folder)

    def unreadable(error: OSError) -> None:
        if error.filename is not None:
            problems[Path(os.fsdecode(error.filename))] = tr("a folder the grader cannot read ({error})",
                                                             error=f"{type(error).__name__}: {error.strerror}")

    for top, folders, files in os.walk(folder, onerror=unreadable, followlinks=False):
        relative = Path(top).relative_to(folder)
        if any(part in SKIPPED_PARTS for part in relative.parts):
            folders[:] = []
            continue
        for name in folders:
            path = Path(top, name)
            if name.endswith(".ipynb"):
                found.append(path)
            elif path.is_symlink() and not _inside(os.path.realpath(path), real_folder):
                problems[path] = tr("a symbolic link to the folder {target}, outside the folder: not followed",
                                    target=_link_target(path))
        found.extend(Path(top, name) for name in files if name.endswith(".ipynb"))
    return found, problems


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, tr("a folder")), (stat.S_ISFIFO, tr("a named pipe")),
                       (stat.S_ISSOCK, tr("a socket")), (stat.S_ISCHR, tr("a device")), (stat.S_ISBLK, tr("a device"))):
        if test(mode):
            return kind
    return tr("not a regular file")


def _read_bytes(path: Path, folder: Path) -> Tuple[Optional[bytes], Optional[str]]:
    """The file's bytes, or why they are not read: never follows a link out of ``folder``, never reads past
    ``MAX_NOTEBOOK_BYTES``, never blocks on a pipe."""
    try:
        info = os.lstat(path)
    except OSError as error:
        return None, tr("unreadable ({error})", error=f"{type(error).__name__}: {error.strerror}")
    real = str(path)
    if stat.S_ISLNK(info.st_mode):
        real = os.path.realpath(path)
        if not _inside(real, os.path.realpath(folder)):
            return None, tr("a symbolic link to {target}, outside the folder: not followed", target=_link_target(path))
        try:
            info = os.stat(real)
        except OSError:
            return None, tr("a symbolic link to {target}, which does not exist", target=_link_target(path))
    if not stat.S_ISREG(info.st_mode):
        return None, tr("not a notebook file: {kind}", kind=_file_kind(info.st_mode))
    try:
        descriptor = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        return None, tr("unreadable ({error})", error=f"{type(error).__name__}: {error.strerror}")
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, tr("not a notebook file: {kind}", kind=_file_kind(info.st_mode))
        data = file.read(MAX_NOTEBOOK_BYTES + 1) if info.st_size <= MAX_NOTEBOOK_BYTES else b""
    if info.st_size > MAX_NOTEBOOK_BYTES or len(data) > MAX_NOTEBOOK_BYTES:
        size = max(info.st_size, len(data))
        return None, tr("too big to be a notebook ({size} MiB; the grader reads notebooks of up to {limit} MiB)",
                        size=f"{size / 2**20:.1f}", limit=MAX_NOTEBOOK_BYTES >> 20)
    return data, None


def _shape_problem(node: object) -> Optional[str]:
    """What the grader needs of a version 4 notebook and this one lacks, or None."""
    if not isinstance(node, dict):
        return tr("not a notebook (its JSON is not an object)")
    if not isinstance(node.get("metadata"), dict):
        return tr("not a valid notebook: its metadata is missing or not an object")
    cells = node.get("cells")
    if not isinstance(cells, list):
        return tr("not a valid notebook: its cells are missing or not a list")
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            return tr("not a valid notebook: cell {number} is not an object", number=number)
        kind = cell.get("cell_type")
        if not isinstance(kind, str):
            return tr("not a valid notebook: cell {number} has no cell type", number=number)
        if "source" not in cell:
            return tr("not a valid notebook: {kind} cell {number} has no source", kind=kind, number=number)
        if not isinstance(cell.get("source"), str):
            return tr("not a valid notebook: {kind} cell {number} has a source that is not text", kind=kind,
                      number=number)
        if not isinstance(cell.get("metadata", {}), dict):
            return tr("not a valid notebook: the metadata of cell {number} is not an object", number=number)
    return None


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
        exercise_id = exercise_marker(cell.source)
        if exercise_id:
            found.setdefault(exercise_id, cell.source)
    return found


def _notebook_by_name(stem: str) -> Optional[str]:
    for name in notebook_names():
        if name in stem:
            return name
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:160]}" if text else type(error).__name__


def read_submission(path: Path, folder: Path) -> Submission:
    """Read one file and recognise it; never raises for what the file (or whatever has its name) holds."""
    relative = path.relative_to(folder)
    submission = Submission(path=path, name=relative.as_posix(), learner=_learner(relative, None))
    try:
        return _recognise(submission, path, relative, folder)
    except Exception as error:  # whatever the checks below missed: this file is reported, the others are read
        submission.problem = tr("unreadable ({error})", error=_first_line(error))
        submission.node, submission.notebook = None, None
        return submission


def _recognise(submission: Submission, path: Path, relative: Path, folder: Path) -> Submission:
    data, problem = _read_bytes(path, folder)
    if data is None:
        submission.problem = problem
        return submission
    try:
        raw = nbformat.reader.reads(data.decode("utf-8-sig"))
        version = nbformat.reader.get_version(raw)[0]
        node = nbformat.convert(raw, 4)
    except Exception as error:  # malformed JSON, not UTF-8, a file that is not a notebook, an unknown version
        submission.problem = tr("unreadable ({error})", error=_first_line(error))
        return submission
    problem = _shape_problem(node)
    if problem:
        submission.problem = problem
        return submission
    if version != 4:
        submission.notes.append(tr("nbformat {version}, read as version 4", version=version))
    submission.node = node
    cells = _exercise_cells(node)
    known = exercises()
    found = [RENAMED.get(exercise_id, exercise_id) for exercise_id in cells]
    gone = [exercise_id for exercise_id in cells if RENAMED.get(exercise_id, exercise_id) not in known]
    if gone:
        submission.notes.append(tr("holds exercises this version of the course does not have: {exercises}",
                                   exercises=", ".join(gone)))
    notebooks = sorted({known[exercise_id].notebook for exercise_id in found if exercise_id in known})
    if not notebooks:
        by_name = _notebook_by_name(path.stem)
        if by_name is None:
            submission.problem = tr("not a course notebook: no '# EXERCISE:' cell of this course, and its name "
                                    "matches none of the course's notebooks")
            return submission
        notebooks = [by_name]
    if len(notebooks) > 1:
        submission.notes.append(tr("holds exercises of several notebooks: {notebooks}", notebooks=", ".join(notebooks)))
    submission.notebook = notebooks[0]
    if notebooks[0] not in path.stem:
        submission.notes.append(tr("renamed: it holds the exercises of {notebook}", notebook=notebooks[0]))
    submission.exercise_ids = [exercise_id for exercise_id, exercise in known.items() if exercise.notebook in notebooks]
    submission.found_ids = [exercise_id for exercise_id in found if exercise_id in known]
    submission.learner = _learner(relative, notebooks[0])
    code = "\n\x00".join(cell.source.strip() for cell in node.cells if cell.cell_type == "code")
    submission.code_hash = hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()
    submission.untouched = all(is_stub(source) for source in cells.values())
    return submission


def read_folder(folder: Path) -> List[Submission]:
    """Every notebook under ``folder``, recognised; files with the same code are noted as duplicates of each other.

    Never raises for what the folder holds: a file that cannot be read as a notebook (or a folder, a link out of the
    folder, a file too big) is one Submission with ``problem`` set, and the others are read."""
    paths, problems = _walk(folder)
    submissions: List[Submission] = []
    for path in sorted(set(paths) | set(problems), key=lambda path: path.relative_to(folder).as_posix()):
        if path in problems:
            relative = path.relative_to(folder)
            submissions.append(Submission(path=path, name=relative.as_posix(), learner=_learner(relative, None),
                                          problem=problems[path]))
        else:
            submissions.append(read_submission(path, folder))
    by_hash: Dict[str, List[Submission]] = {}
    for submission in submissions:
        if submission.code_hash and not submission.untouched:
            by_hash.setdefault(submission.code_hash, []).append(submission)
    for group in by_hash.values():
        for submission in group if len(group) > 1 else []:
            others = ", ".join(other.name for other in group if other is not submission)
            submission.notes.append(tr("the same code as {others}", others=others))
    return submissions


def natural_key(text: str) -> List[object]:
    """Sort key that puts learner2 before learner10."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]

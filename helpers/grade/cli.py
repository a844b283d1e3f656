"""``python -m helpers.grade DIR``: grade every notebook under DIR; write DIR/grades.csv and DIR/grades.html."""
from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import psutil

from helpers.grade import sandbox
from helpers.grade.grading import Limits, grade
from helpers.grade.processes import become_subreaper, kill_tree
from helpers.grade.report import clean_text, counted, summary_line, write_csv, write_html
from helpers.grade.rows import Row
from helpers.grade.submissions import OUTPUT_NAMES, Submission, read_folder
from helpers.grade.workdirs import clean_stale, new_run_folder, remove_tree
from helpers.language import LANGUAGE_VARIABLE, tr

GIB = 2**30
MEMORY_PER_SLOT = int(1.5 * GIB)  # notebook 08 with its 2 workers peaks near 1 GiB; a check adds about 0.35 GiB
BAR_WIDTH = 20
MAX_CELLS = 10**6


def default_jobs() -> int:
    """One notebook at a time per core, as far as the free memory allows."""
    return max(1, min(os.cpu_count() or 1, psutil.virtual_memory().available // MEMORY_PER_SLOT))


def bar(done: int, total: int) -> str:
    """``[##########----------] 18/36 cells`` (numbers from a sandbox: kept within 0 <= done <= total <= 10**6)."""
    total = min(max(0, int(total)), MAX_CELLS)
    done = min(max(0, int(done)), total)
    filled = BAR_WIDTH * done // max(1, total)
    return tr("[{bar}] {done}/{total} cells", bar="#" * filled + "-" * (BAR_WIDTH - filled), done=done, total=total)


class Progress:
    """A bar per notebook: redrawn in place on a terminal, and one finished line per notebook everywhere."""

    def __init__(self, total: int, stream=sys.stdout) -> None:
        self.total, self.stream = total, stream
        self.live = stream.isatty()
        self.finished = 0
        self.lock = threading.Lock()

    def cell(self, name: str, done: int, total: int) -> None:
        if self.live:
            with self.lock:
                self.stream.write(f"\r\033[K  {bar(done, total)}  {clean_text(name)[-50:]}")  # bar clamps
                self.stream.flush()

    def done(self, name: str, rows: Sequence[Row], cells: Tuple[int, int], seconds: float) -> None:
        counts: Dict[str, int] = {}
        for row in rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        verdict = tr(", ").join(counted(status, count) for status, count in counts.items())
        with self.lock:
            self.finished += 1
            prefix = "\r\033[K" if self.live else ""
            shown = bar(*cells) if cells[1] else tr("(not run: see its line in the report)")
            self.stream.write(f"{prefix}{self.finished:>3}/{self.total} {shown} {seconds:5.1f} s  {clean_text(name)}: "
                              f"{verdict}\n")
            self.stream.flush()


def folder_state(folder: Path) -> Dict[str, Tuple[int, int]]:
    """(mtime, size) of every file under ``folder`` but the grader's own outputs."""
    state = {}
    for path in folder.rglob("*"):
        if path.is_file() and path.name not in OUTPUT_NAMES:
            stat = path.stat()
            state[str(path.relative_to(folder))] = (stat.st_mtime_ns, stat.st_size)
    return state


def parse_arguments(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    # The description is the module docstring's first line, as the teacher reads it.
    parser = argparse.ArgumentParser(prog="python -m helpers.grade", description=tr(
        "``python -m helpers.grade DIR``: grade every notebook under DIR; write DIR/grades.csv and DIR/grades.html."))
    parser.add_argument("folder", type=Path, help=tr("the folder of collected notebooks (searched recursively)"))
    parser.add_argument("--jobs", type=int, default=None, help=tr("notebooks run at once (default: the cores, as far "
                                                                  "as free memory allows, 1.5 GiB each)"))
    parser.add_argument("--timeout", type=int, default=300, help=tr("seconds one notebook may run (default 300)"))
    parser.add_argument("--cell-timeout", type=int, default=120, help=tr("seconds one cell may run (default 120)"))
    parser.add_argument("--check-timeout", type=int, default=120, help=tr("seconds the check of one notebook's "
                                                                           "answers may run (default 120)"))
    parser.add_argument("--memory", type=float, default=3.0, help=tr("GiB all processes of one notebook may use "
                                                                      "(default 3)"))
    parser.add_argument("--salt", type=int, default=None, help=tr("shift of the checkers' seeds (default: random; "
                                                                  "give one to grade again with the same inputs)"))
    parser.add_argument("--keep", action="store_true", help=tr("keep each notebook's private folder and logs"))
    parser.add_argument("--without-sandbox", action="store_true",
                        help=tr("grade even where bubblewrap cannot run (macOS, no user namespaces): each notebook "
                                "then runs as a plain process that can see and change what you can"))
    return parser.parse_args(argv)


def isolated_again(argv: Optional[Sequence[str]]) -> None:
    """Start again as ``python -I``, unless already: no sys.path entry from the working folder, PYTHONPATH or the
    user's site-packages, so nothing in a graded folder can stand in for the grader's own modules."""
    if sys.flags.isolated:
        return
    arguments = list(sys.argv[1:] if argv is None else argv)
    os.execv(sys.executable, [sys.executable, "-I", "-m", "helpers.grade", *arguments])


def command_maker(args: argparse.Namespace) -> Optional[Callable[..., List[str]]]:
    """How a notebook's runner is started: inside bubblewrap, or (with --without-sandbox) as it is; None when the
    sandbox cannot run and the teacher did not accept the weaker mode."""
    isolation = sandbox.isolation()
    if isolation.available:
        print(tr("Each notebook runs in its own sandbox ({how}).", how=isolation.reason), flush=True)
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            print(tr("Warning: grading as root. Each notebook's sandbox still reads what root can read of the folders "
                     "it sees (the system and the Python installation); run the grader as an ordinary user."),
                  flush=True)
        return lambda command, root, replaced=(), writable_bytes=None: sandbox.sandboxed(
            command, root, env=sandbox_environment(root), replaced=replaced, writable_bytes=writable_bytes)
    if not args.without_sandbox:
        print(tr("The sandbox cannot run here: {why}.\nWithout it a notebook can see and change what you can. "
                 "Install bubblewrap (apt install bubblewrap), or pass --without-sandbox to grade anyway.",
                 why=isolation.reason), file=sys.stderr)
        return None
    print(tr("Grading without a sandbox ({why}): each notebook can see and change what you can.",
             why=isolation.reason), flush=True)
    return lambda command, root, replaced=(), writable_bytes=None: command


def sandbox_environment(root: Path) -> Dict[str, str]:
    """The few variables a runner gets inside its sandbox; COURSE_LANGUAGE as the grader has it, so that what the
    runner says for the report is in the report's language (the notebook's kernel does not get it)."""
    language = {LANGUAGE_VARIABLE: os.environ[LANGUAGE_VARIABLE]} if os.environ.get(LANGUAGE_VARIABLE) else {}
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"), "CUDA_VISIBLE_DEVICES": "",
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", **language}


def write_reports(folder: Path, rows: Sequence[Row], line: str, salt: int, warnings: Sequence[str]) -> None:
    """grades.csv and grades.html, each written to a new file and then moved in place (a link in the folder is
    replaced, never followed)."""
    for name, write in (("grades.csv", lambda path: write_csv(rows, path)),
                        ("grades.html", lambda path: write_html(rows, path, tr("{summary} Seed salt {salt}.",
                                                                                summary=line, salt=salt), warnings))):
        handle, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
        os.close(handle)
        write(Path(temporary))
        os.replace(temporary, folder / name)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Grade the folder; 0 when the reports were written (whatever the grades), 2 when the folder is not one or the
    sandbox cannot run (without --without-sandbox)."""
    isolated_again(argv)
    args = parse_arguments(argv)
    folder = args.folder.expanduser().resolve()
    if not folder.is_dir():
        print(tr("{folder} is not a folder", folder=folder), file=sys.stderr)
        return 2
    command_for = command_maker(args)
    if command_for is None:
        return 2
    started = time.monotonic()
    try:
        for stale in clean_stale():
            print(tr("Removed what an earlier grading run left behind: {folder}", folder=stale), flush=True)
    except Exception as error:  # a folder that cannot be removed is said, and grading goes on
        print(tr("Could not remove what an earlier grading run left behind ({error}).",
                 error=f"{type(error).__name__}: {clean_text(str(error))[:200]}"), file=sys.stderr)
    work = new_run_folder()
    os.chdir(work)
    submissions = read_folder(folder)
    salt = args.salt if args.salt is not None else 10**6 + secrets.randbelow(10**9)
    limits = Limits(timeout_s=args.timeout, cell_timeout_s=args.cell_timeout, memory_bytes=int(args.memory * GIB),
                    check_timeout_s=args.check_timeout)
    jobs = args.jobs or default_jobs()
    print(tr("Grading {count} notebooks in {folder}, {jobs} at a time (seed salt {salt}).", count=len(submissions),
             folder=clean_text(str(folder)), jobs=jobs, salt=salt), flush=True)
    before = folder_state(folder)
    become_subreaper()
    progress = Progress(len(submissions))
    done: Dict[int, List[Row]] = {}
    lock = threading.Lock()

    def partial() -> None:
        with lock:
            rows = [row for index in sorted(done) for row in done[index]]
            line = tr("Partial report: {done} of {count} notebooks graded so far ({seconds} s).", done=len(done),
                      count=len(submissions), seconds=f"{time.monotonic() - started:.0f}")
            write_reports(folder, rows, line, salt, [])

    def one(indexed: Tuple[int, Submission]) -> List[Row]:
        index, submission = indexed
        cells = [0, 0]

        def on_cell(count: int, total: int) -> None:
            cells[:] = [count, total]
            progress.cell(submission.name, count, total)

        begun = time.monotonic()
        try:
            rows = grade(submission, limits, salt, work, on_cell, command_for, keep=args.keep)
        except Exception as error:  # whatever happened to one notebook, it still gets its row
            rows = [Row(submission.name, "", "error", tr("The grader failed on it ({error}).",
                                                         error=type(error).__name__), submission.learner)]
        with lock:
            done[index] = rows
        for report in (lambda: progress.done(submission.name, rows, (cells[0], cells[1]), time.monotonic() - begun),
                       partial):
            try:
                report()
            except Exception as error:  # a line or a partial report lost; never the run
                print(tr("(could not write a progress line or the partial report: {error})",
                         error=type(error).__name__), file=sys.stderr)
        return rows

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, enumerate(submissions)))
    finally:
        kill_tree()
        os.chdir(folder)
        if not args.keep:
            remove_tree(work)
    rows = [row for index in range(len(submissions)) for row in done.get(index, [Row(
        submissions[index].name, "", "error", tr("Not graded: the run ended before it."), submissions[index].learner)])]
    after = folder_state(folder)
    changed = sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
    warnings = ([tr("files under the folder changed while grading: {files}", files=clean_text(", ".join(changed[:5])))]
                if changed else [])
    line = summary_line(rows, len(submissions), time.monotonic() - started)
    write_reports(folder, rows, line, salt, warnings)
    for warning in warnings:
        print(tr("Warning: {warning}", warning=warning))
    print(line)
    print(tr("Wrote {csv} and {html}.", csv=clean_text(str(folder / "grades.csv")),
             html=clean_text(str(folder / "grades.html"))))
    if args.keep:
        print(tr("Each notebook's private folder and logs: {folder}", folder=work))
    return 0

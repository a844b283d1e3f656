"""``python -m helpers.grade DIR``: grade every notebook under DIR; write DIR/grades.csv and DIR/grades.html."""
from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import psutil

from helpers.grade.grading import Checker, Limits, Row, grade
from helpers.grade.processes import become_subreaper, kill_tree
from helpers.grade.report import summary_line, write_csv, write_html
from helpers.grade.submissions import OUTPUT_NAMES, Submission, read_folder

GIB = 2**30
MEMORY_PER_SLOT = int(1.5 * GIB)  # notebook 08 with its 2 workers peaks near 1 GiB; a check adds about 0.35 GiB
BAR_WIDTH = 20


def default_jobs() -> int:
    """One notebook at a time per core, as far as the free memory allows."""
    return max(1, min(os.cpu_count() or 1, psutil.virtual_memory().available // MEMORY_PER_SLOT))


def bar(done: int, total: int) -> str:
    """``[##########----------] 18/36 cells``."""
    filled = BAR_WIDTH * done // max(1, total)
    return f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done}/{total} cells"


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
                self.stream.write(f"\r\033[K  {bar(done, total)}  {name[-50:]}")
                self.stream.flush()

    def done(self, name: str, rows: Sequence[Row], cells: Tuple[int, int], seconds: float) -> None:
        counts: Dict[str, int] = {}
        for row in rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        verdict = ", ".join(f"{count} {status}" for status, count in counts.items())
        with self.lock:
            self.finished += 1
            prefix = "\r\033[K" if self.live else ""
            shown = bar(*cells) if cells[1] else "(not run: see its line in the report)"
            self.stream.write(f"{prefix}{self.finished:>3}/{self.total} {shown} {seconds:5.1f} s  {name}: {verdict}\n")
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
    parser = argparse.ArgumentParser(prog="python -m helpers.grade", description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the folder of collected notebooks (searched recursively)")
    parser.add_argument("--jobs", type=int, default=None, help="notebooks run at once (default: the cores, as far "
                                                               "as free memory allows, 1.5 GiB each)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds one notebook may run (default 300)")
    parser.add_argument("--cell-timeout", type=int, default=120, help="seconds one cell may run (default 120)")
    parser.add_argument("--check-timeout", type=int, default=120, help="seconds the check of one notebook's answers "
                                                                        "may run (default 120)")
    parser.add_argument("--memory", type=float, default=3.0, help="GiB all processes of one notebook may use "
                                                                   "(default 3)")
    parser.add_argument("--salt", type=int, default=None, help="shift of the checkers' seeds (default: random; "
                                                               "give one to grade again with the same inputs)")
    parser.add_argument("--keep", action="store_true", help="keep each notebook's private folder and logs")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Grade the folder; 0 when the reports were written (whatever the grades), 2 when the folder is not one."""
    args = parse_arguments(argv)
    folder = args.folder.expanduser().resolve()
    if not folder.is_dir():
        print(f"{folder} is not a folder", file=sys.stderr)
        return 2
    started = time.monotonic()
    submissions = read_folder(folder)
    salt = args.salt if args.salt is not None else 10**6 + secrets.randbelow(10**9)
    limits = Limits(timeout_s=args.timeout, cell_timeout_s=args.cell_timeout, memory_bytes=int(args.memory * GIB),
                    check_timeout_s=args.check_timeout)
    jobs = args.jobs or default_jobs()
    print(f"Grading {len(submissions)} notebooks in {folder}, {jobs} at a time (seed salt {salt}).", flush=True)
    before = folder_state(folder)
    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="course-grade-"))
    checker = Checker(work)
    progress = Progress(len(submissions))

    def one(submission: Submission) -> List[Row]:
        cells = [0, 0]

        def on_cell(done: int, total: int) -> None:
            cells[:] = [done, total]
            progress.cell(submission.name, done, total)

        begun = time.monotonic()
        rows = grade(submission, checker, limits, salt, work, on_cell)
        progress.done(submission.name, rows, (cells[0], cells[1]), time.monotonic() - begun)
        return rows

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            rows = [row for result in pool.map(one, submissions) for row in result]
    finally:
        checker.close()
        kill_tree()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    after = folder_state(folder)
    changed = sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
    warnings = ([f"files under the folder changed while grading, by a notebook's code: {', '.join(changed[:5])}"]
                if changed else [])
    line = summary_line(rows, len(submissions), time.monotonic() - started)
    write_csv(rows, folder / "grades.csv")
    write_html(rows, folder / "grades.html", f"{line} Seed salt {salt}.", warnings)
    for warning in warnings:
        print(f"Warning: {warning}")
    print(line)
    print(f"Wrote {folder / 'grades.csv'} and {folder / 'grades.html'}.")
    if args.keep:
        print(f"Each notebook's private folder and logs: {work}")
    return 0

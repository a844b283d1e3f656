"""Time and peak memory of each notebook, run as the tests run it (a benchmark, not a test).

Usage, from the repository root::

    python -m authoring.bench                 # every notebook in solutions/
    python -m authoring.bench notebooks/00_start_here.ipynb
    python -m authoring.bench --checks        # each exercise's check on its solution, and its mutation score
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence, Tuple

import nbformat

from helpers.course.exercises.api import STRICT_VARIABLE

TIME_TARGET_S = 20.0
CHECK_TARGET_S = {"ddp_two_loss_step": 15.0}  # seconds a check may take on a 2-core CPU; the others 3 s
MEMORY_TARGET_MIB = 1024.0
_PEAK_CODE = "import resource, sys\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 if sys.platform != 'darwin' else 1024))"


def run_notebook(path: Path, strict: bool) -> Tuple[float, float]:
    """Execute ``path`` in a fresh kernel; return (seconds running cells, kernel peak RSS in MiB)."""
    from nbclient import NotebookClient

    notebook = nbformat.read(str(path), as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(_PEAK_CODE))
    previous = os.environ.get(STRICT_VARIABLE)
    os.environ[STRICT_VARIABLE] = "1" if strict else "0"  # the kernel inherits it, as under pytest
    try:
        client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        with client.setup_kernel():
            started = time.perf_counter()
            for index, cell in enumerate(notebook.cells[:-1]):
                client.execute_cell(cell, index)
            seconds = time.perf_counter() - started
            client.execute_cell(notebook.cells[-1], len(notebook.cells) - 1)
    finally:
        if previous is None:
            os.environ.pop(STRICT_VARIABLE, None)
        else:
            os.environ[STRICT_VARIABLE] = previous
    peak_kib = float(notebook.cells[-1].outputs[0]["text"].strip())
    return seconds, peak_kib / 1024


def bench_checks() -> int:
    """One line per exercise: the seconds its check takes on the solution, then its mutation score."""
    from authoring.mutants import main as mutation_scores
    from helpers.course.exercises.api import evaluate, ids
    from helpers.course.exercises.engine.contract import solution_function
    from helpers.course.exercises.registry import get_exercise

    for exercise_id in ids():
        answer = solution_function(exercise_id, get_exercise(exercise_id).answer_name)
        started = time.perf_counter()
        result = evaluate(exercise_id, answer)
        seconds = time.perf_counter() - started
        target = CHECK_TARGET_S.get(exercise_id, 3.0)
        flag = "" if seconds <= target and result.passed else "  OVER TARGET" if result.passed else "  FAILED"
        print(f"benchmark: check {exercise_id}: {seconds:.2f} s (target {target:.0f} s){flag}")
    return mutation_scores()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: print one row per notebook."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: solutions/*.ipynb)")
    parser.add_argument("--checks", action="store_true", help="time each exercise's check; mutation scores")
    args = parser.parse_args(argv)
    if args.checks:
        return bench_checks()
    from authoring.generate import default_root, is_solution_notebook

    paths = args.paths or sorted((default_root() / "solutions").glob("*.ipynb"))
    print(f"{'notebook':40} {'seconds':>8} {'peak MiB':>9}  (targets: {TIME_TARGET_S:.0f} s, {MEMORY_TARGET_MIB:.0f} MiB)")
    for path in paths:
        seconds, peak = run_notebook(path, strict=is_solution_notebook(path))
        flag = "  OVER TARGET" if seconds > TIME_TARGET_S or peak > MEMORY_TARGET_MIB else ""
        print(f"{path.name:40} {seconds:8.1f} {peak:9.0f}{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

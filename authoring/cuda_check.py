"""The course on a CUDA GPU: every solved notebook strictly, then the tests with a CUDA branch, and a short report.

Usage, from the repository root, on a machine with a CUDA GPU::

    python -m authoring.cuda_check                       # writes test-artifacts/cuda/report.txt
    python -m authoring.cuda_check --report PATH

Per notebook: passed or the first failing cell, seconds, and the kernel's peak GPU memory
(``torch.cuda.max_memory_allocated``). Then ``pytest`` on the test files that have a CUDA branch. Without CUDA it
says so and exits with status 2, having run nothing.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import nbformat

from helpers.course.exercises.api import STRICT_VARIABLE

ROOT = Path(__file__).resolve().parents[1]
CUDA_TESTS = ("tests/course/test_device_and_models.py", "tests/course/test_clinic_gan.py", "tests/grade/test_wire.py",
              "tests/tools/test_read_only.py")  # the files with a CUDA branch (device choice, CUDA tensors, RNG)
_PEAK_CODE = ("import torch\nprint(torch.cuda.max_memory_allocated() / 2**20 "
              "if torch.cuda.is_available() and torch.cuda.is_initialized() else 0.0)")


def cuda_device() -> Optional[str]:
    """The first CUDA device's name, or None without CUDA."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def run_notebook(path: Path, timeout_s: int = 600) -> Tuple[str, float, float]:
    """(outcome, seconds, peak GPU MiB) of ``path`` run strictly in a fresh kernel: "passed" or the failing cell."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(str(path), as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(_PEAK_CODE))
    os.environ[STRICT_VARIABLE] = "1"  # the kernel inherits it: a check that does not pass raises
    client = NotebookClient(notebook, timeout=timeout_s, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    outcome, started = "passed", time.perf_counter()
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells[:-1]):
            try:
                client.execute_cell(cell, index)
            except CellExecutionError as error:
                first = (cell.source.strip().splitlines() or [""])[0][:60]
                outcome = f"failed at cell {index} ({first}): {error.ename}: {str(error.evalue)[:120]}"
                break
        seconds = time.perf_counter() - started
        client.execute_cell(notebook.cells[-1], len(notebook.cells) - 1)
    try:
        peak = float(notebook.cells[-1].outputs[0]["text"].strip())
    except (IndexError, KeyError, ValueError):
        peak = float("nan")
    return outcome, seconds, peak


def main(argv: Optional[Sequence[str]] = None) -> int:
    """0 when every notebook and test passed, 1 when one failed, 2 without CUDA."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", type=Path, default=ROOT / "test-artifacts" / "cuda" / "report.txt")
    args = parser.parse_args(argv)
    device = cuda_device()
    if device is None:
        print("No CUDA GPU here (torch.cuda.is_available() is False): nothing was run. Run this on a CUDA machine.")
        return 2
    lines: List[str] = [f"CUDA check on {device}"]
    failed = False
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        outcome, seconds, peak = run_notebook(path)
        failed |= outcome != "passed"
        lines.append(f"{path.name:38} {outcome if outcome == 'passed' else outcome[:150]:8} {seconds:6.1f} s  "
                     f"peak GPU {peak:7.1f} MiB")
        print(lines[-1], flush=True)
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *CUDA_TESTS],
                           cwd=ROOT, capture_output=True, text=True)
    summary = (tests.stdout.strip().splitlines() or ["(no output)"])[-1]
    failed |= tests.returncode != 0
    lines.append(f"tests with a CUDA branch ({', '.join(CUDA_TESTS)}): {summary}")
    print(lines[-1])
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"Wrote {args.report}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

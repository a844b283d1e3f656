"""Runs one learner's notebook in a fresh, limited kernel and brings its answers back.

    python -m helpers.grade.runner JOB.json

JOB.json (written by the grader) names the notebook, the answer names to bring back, a private folder to work in,
and the limits. Progress goes to stdout as JSON lines; the result goes to ``RESULT.json`` in the private folder.
The kernel runs in a copy of the notebook's folder with its own HOME, temporary and Jupyter folders, under a memory
limit, with a write guard (kernel_start.py); cells run as "Run All" runs them, stopping at the first error. At the
end every process the notebook started is ended, however it was started.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from helpers.course.exercises.carry_over import EXERCISE_LINE
from helpers.grade.cells import extraction_cell, without_checks
from helpers.grade.processes import TreeWatch, become_subreaper, kill_tree

KERNEL_START = Path(__file__).resolve().with_name("kernel_start.py")
PRIVATE_FOLDERS = ("home", "tmp", "runtime", "ipython", "matplotlib", "cache", "config", "data")
MAX_PROCESSES = 24


def _print(record: Dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


def copy_folder(notebook: Path, work: Path) -> None:
    """The notebook and the files beside it (not other notebooks, not subfolders) into ``work``."""
    work.mkdir(parents=True)
    for path in notebook.parent.iterdir():
        if path.is_file() and (path == notebook or path.suffix != ".ipynb") and not path.name.startswith("grades."):
            shutil.copy2(path, work / path.name)


def kernel_environment(root: Path, threads: int) -> Dict[str, str]:
    """The kernel's environment: the grader's, less Jupyter's and the course's own settings, with private folders."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("JPY_", "JUPYTER_", "COURSE_"))}
    env.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
               IPYTHONDIR=str(root / "ipython"), MPLCONFIGDIR=str(root / "matplotlib"),
               XDG_CACHE_HOME=str(root / "cache"), XDG_CONFIG_HOME=str(root / "config"),
               XDG_DATA_HOME=str(root / "data"), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               TMP=str(root / "tmp"), TEMP=str(root / "tmp"), TORCHINDUCTOR_CACHE_DIR=str(root / "cache" / "inductor"),
               TRITON_CACHE_DIR=str(root / "cache" / "triton"),
               PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="module://matplotlib_inline.backend_inline")
    return env


def limited_kernel_manager(memory_bytes: int, write_log: Path, allowed_root: Path) -> AsyncKernelManager:
    """A kernel manager that always starts Python 3 through kernel_start.py, whatever kernel the notebook names."""

    class LimitedKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments: Optional[List[str]] = None) -> List[str]:
            command = super().format_kernel_cmd(extra_arguments)
            return [sys.executable, str(KERNEL_START), str(memory_bytes), str(write_log), str(allowed_root),
                    *command[command.index("-f"):]]

    return LimitedKernelManager(kernel_name="python3")


def _first_line(cell: nbformat.NotebookNode) -> str:
    line = next((text.strip() for text in cell.source.splitlines() if text.strip()), "")
    return line if len(line) <= 60 else line[:57] + "..."


def _run_cells(client: NotebookClient, code_cells: int, stopped: Dict[str, Any], lock: threading.Lock,
               progress: Dict[str, int]) -> None:
    """Execute the cells as Run All does, up to the first error, then the extraction cell; ``progress["cell"]`` is
    the cell running, ``progress["ran"]`` the last one that ran to its end."""
    for index, cell in enumerate(client.nb.cells):
        last = index == len(client.nb.cells) - 1
        if stopped and not last:
            continue  # Run All stops at an error; the answers defined before it are still taken
        if not last:
            progress["cell"] = index + 1
            _print({"cell": index + 1, "of": code_cells})
        try:
            client.execute_cell(cell, index)
        except CellExecutionError as error:
            if last:
                raise
            evalue = str(error.evalue).splitlines()[0][:200] if str(error.evalue).strip() else ""
            with lock:
                stopped.setdefault("reason", f"code cell {index + 1} ({_first_line(cell)}) raised {error.ename}"
                                             + (f": {evalue}" if evalue else ""))
                stopped.setdefault("cell", index + 1)
            continue
        if not last:
            progress["ran"] = index + 1


def run(job: Dict[str, Any]) -> Dict[str, Any]:
    """Run the notebook of ``job``; the result names where it stopped and why, and holds the answers."""
    started = time.monotonic()
    root = Path(job["root"])
    notebook = Path(job["notebook"])
    for name in PRIVATE_FOLDERS:
        (root / name).mkdir(parents=True, exist_ok=True)
    work = root / "work"
    copy_folder(notebook, work)
    node = nbformat.convert(nbformat.reader.reads(notebook.read_text(encoding="utf-8")), 4)
    node.metadata.pop("kernelspec", None)
    exercise_cells: Dict[str, int] = {}
    code_cells = [cell for cell in node.cells if cell.cell_type == "code"]
    for number, cell in enumerate(code_cells, start=1):
        match = EXERCISE_LINE.match(cell.source.lstrip())
        if match:
            exercise_cells.setdefault(match["id"], number)
        cell.source, _ = without_checks(cell.source)
        cell.outputs = []
    node.cells = list(code_cells)
    answers_path = root / "answers.json"
    node.cells.append(nbformat.v4.new_code_cell(extraction_cell(job["answer_names"], str(answers_path))))
    write_log = root / "writes.jsonl"
    write_log.touch()
    stopped: Dict[str, Any] = {}
    lock = threading.Lock()

    def stop(reason: str) -> None:
        with lock:
            if not stopped:
                stopped.update(reason=reason, cell=None)
        kill_tree()

    watch = TreeWatch(job["memory_bytes"], MAX_PROCESSES, stop)
    deadline = threading.Timer(job["timeout_s"], stop, args=(f"it ran past the time limit ({job['timeout_s']} s)",))
    deadline.daemon = True
    progress = {"cell": 0, "ran": 0}
    kernel_pid: Optional[int] = None
    watch.start()
    deadline.start()
    for attempt in (1, 2):
        client = NotebookClient(copy.deepcopy(node), km=limited_kernel_manager(job["memory_bytes"] * 2 // 3,
                                                                                write_log, root),
                                timeout=job["cell_timeout_s"], allow_errors=False, kernel_name="python3",
                                startup_timeout=120, resources={"metadata": {"path": str(work)}})
        kernel_ready = False
        try:
            with client.setup_kernel(env=kernel_environment(root, job.get("threads", 1)), cwd=str(work)):
                kernel_ready = True
                process = getattr(getattr(client.km, "provisioner", None), "process", None)
                kernel_pid = getattr(process, "pid", None)
                _run_cells(client, len(code_cells), stopped, lock, progress)
        except CellTimeoutError:
            stop(f"code cell {progress['cell']} ran past the time limit for one cell ({job['cell_timeout_s']} s)")
        except DeadKernelError:
            stop("its kernel died (memory exhausted, or the notebook ended its own process)")
        except Exception as error:  # the kernel could not start, the client lost it: the notebook's result is unknown
            if not kernel_ready and attempt == 1 and not stopped:
                kill_tree()  # a kernel that died while starting (kernels started at once can race for a port)
                continue
            first_line = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
            stop(f"the grader could not run it ({type(error).__name__}: {first_line})")
        break
    deadline.cancel()
    watch.stop()
    leftovers = kill_tree(keep_pid=kernel_pid)
    writes = [json.loads(line) for line in write_log.read_text(encoding="utf-8").splitlines()[:20]
              if line.startswith("{")]
    answers = json.loads(answers_path.read_text(encoding="utf-8")) if answers_path.exists() else {}
    return {"stopped": stopped or None, "ran_cells": progress["ran"], "code_cells": len(code_cells),
            "exercise_cells": exercise_cells, "answers": answers, "writes": writes, "leftovers": leftovers,
            "peak_mib": watch.peak_bytes >> 20, "seconds": round(time.monotonic() - started, 1)}


def main() -> int:
    job = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    become_subreaper()
    result = run(job)
    Path(job["root"], "RESULT.json").write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

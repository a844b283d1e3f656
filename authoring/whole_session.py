"""A learner's whole session, measured: one JupyterLab, every notebook run in order in its own tab, tabs left open.

The server starts with the course's launch configuration (``helpers/jupyter_config``, as ``python -m helpers.lab``
and ``binder/start`` give it). Its culling timeout is shortened so that the session fits in a test; everything
else comes from the course's configuration. Memory is the proportional set size (PSS) of the server and all its
kernels and their children, summed: shared pages counted once, as a container's memory limit counts them.

Usage, from the repository root::

    python -m authoring.whole_session                      # run it, print the figures
    python -m authoring.whole_session --python build/binder-venv/bin/python --write docs/whole_session.json

The second form records the figures docs/hosting.md sizes a room from, and rewrites that block of hosting.md.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import nbformat

from authoring import sizing
from authoring.kernel_socket import KernelGone, KernelTab, run_in_own_loop
from authoring.lab_server import LabServer, start_lab_server, stop_lab_server
from authoring.process_memory import MIB, MemorySampler, kernel_count, total_pss, tree_memory
from helpers.course.exercises.api import STRICT_VARIABLE
from helpers.lab import CONFIG_PATH_VARIABLE, launch_environment

ROOT = Path(__file__).resolve().parent.parent
# The course's times, scaled 1:150 so that a session fits in a test: a learner spends at least 15 minutes on a
# notebook (6 s here: a notebook that runs faster is followed by a pause) and the server culls kernels idle for
# 30 minutes (12 s here). So, as in class, the kernels of the last notebook or two are still alive.
TIME_SCALE = 150
LEARNER_PACE_S = 15 * 60 / TIME_SCALE
TEST_CULL_IDLE_TIMEOUT_S = 30 * 60 / TIME_SCALE
TEST_CULL_INTERVAL_S = 1
CULLED_LINE = re.compile(r"Culling '(\w+)' kernel .*\(([0-9a-f-]{36})\)")
_PROBE = "import sys, torch\nprint(sys.executable, torch.__version__)"
KERNEL_STOPPED = "the kernel was stopped while the cell ran"


@dataclass
class NotebookFigures:
    """One notebook of the session: how long its cells ran, and memory right after."""

    notebook: str
    seconds: float
    kernel_pss_mib: float       # this notebook's kernel, just after its last cell
    total_pss_mib: float        # the server and every kernel still alive then
    kernels_alive: int


@dataclass
class SessionReport:
    """Everything the whole-session test asserts on, and the figures docs/hosting.md quotes."""

    python: str
    torch: str
    machine: str
    cull_idle_timeout_s: float
    learner_pace_s: float = LEARNER_PACE_S
    server_alone_mib: float = 0.0
    peak_mib: float = 0.0
    most_kernels_alive: int = 0
    notebooks: List[NotebookFigures] = field(default_factory=list)
    failed_cells: List[str] = field(default_factory=list)          # "notebook: cell N: error"
    culled: Dict[str, str] = field(default_factory=dict)           # kernel id -> the state it was culled in
    busy_kernel_survived: Optional[bool] = None
    kernel_python: str = ""                                        # sys.executable in the first kernel

    @property
    def without_culling_mib(self) -> float:
        """The server plus every notebook's kernel as each notebook left it: nobody shuts anything down."""
        return self.server_alone_mib + sum(row.kernel_pss_mib for row in self.notebooks)

    def lines(self) -> List[str]:
        """The figures as benchmark lines."""
        rows = [f"  {row.notebook:34} {row.seconds:5.1f} s  kernel {row.kernel_pss_mib:4.0f} MiB  "
                f"server + {row.kernels_alive} kernel(s) {row.total_pss_mib:5.0f} MiB" for row in self.notebooks]
        return [
            f"benchmark: whole session on {self.machine}, torch {self.torch} ({self.python}), a notebook every "
            f"{self.learner_pace_s:.0f} s or more, culling after {self.cull_idle_timeout_s:.0f} s idle: "
            f"peak {self.peak_mib:.0f} MiB PSS with up to "
            f"{self.most_kernels_alive} kernels; the server alone {self.server_alone_mib:.0f} MiB; "
            f"without culling it would reach {self.without_culling_mib:.0f} MiB",
            *rows,
        ]


def course_notebooks(folder: Path) -> List[Path]:
    """The course's notebooks in ``folder``, in course order."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def code_cells(path: Path) -> List[str]:
    """The sources of ``path``'s code cells, in order."""
    notebook = nbformat.read(str(path), as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def culled_kernels(server: LabServer) -> Dict[str, str]:
    """Kernel id -> execution state, for every kernel the server's log says it culled."""
    return {match.group(2): match.group(1) for match in CULLED_LINE.finditer(server.log_tail(10_000_000))}


def notebook_session(notebook: str) -> Dict[str, Any]:
    """The body JupyterLab posts to /api/sessions when it opens ``notebook`` with a Python kernel."""
    return {"path": notebook, "name": notebook, "type": "notebook", "kernel": {"name": "python3"}}


async def _open_tab(server: LabServer, notebook: str) -> KernelTab:
    """What opening a notebook in JupyterLab does: a session (with a new kernel), then a websocket to it."""
    session = server.api("POST", "/api/sessions", timeout=120, body=notebook_session(notebook))
    return await KernelTab.open(server.base_url, server.token, session["kernel"]["id"])


async def _session(server: LabServer, notebooks: Sequence[Path], report: SessionReport, busy_check: bool) -> None:
    sampler_pid = server.process.pid
    tabs: List[KernelTab] = []
    try:
        for number, path in enumerate(notebooks):
            started = time.perf_counter()
            tab = await _open_tab(server, path.name)
            tabs.append(tab)
            if number == 0:
                probe = await tab.run(_PROBE)
                report.kernel_python, report.torch = (probe.output.split() + ["?", "?"])[:2]
            try:
                runs = await tab.run_all(code_cells(path))
            except KernelGone:
                report.failed_cells.append(f"{path.name}: {KERNEL_STOPPED}")
                continue
            for index, run in enumerate(runs):
                if run.status != "ok":
                    report.failed_cells.append(f"{path.name}: code cell {index}: {run.error}")
            seconds = time.perf_counter() - started
            tree = tree_memory(sampler_pid)
            kernel = [p for p in tree.values() if tab.kernel_id in p.command]
            alive = kernel_count(tree)
            report.notebooks.append(NotebookFigures(path.name, seconds, sum(p.pss for p in kernel) / MIB,
                                                    total_pss(tree) / MIB, alive))
            report.most_kernels_alive = max(report.most_kernels_alive, alive)
            await asyncio.sleep(max(0.0, report.learner_pace_s - seconds))  # the learner reads on
        if busy_check:
            # A cell that runs longer than the culling timeout: the kernel must not be culled under it.
            wait = report.cull_idle_timeout_s + 4 * TEST_CULL_INTERVAL_S
            try:
                run = await tabs[-1].run(f"import time\ntime.sleep({wait})")
                report.busy_kernel_survived = run.status == "ok"
            except KernelGone:
                report.busy_kernel_survived = False
    finally:
        for tab in tabs:
            tab.close()


def start_session_server(course: Path, state: Path, python: Optional[str],
                         cull_idle_timeout_s: float = TEST_CULL_IDLE_TIMEOUT_S) -> LabServer:
    """JupyterLab on ``course``: the course's launch configuration, strict, culling after ``cull_idle_timeout_s``."""
    environment = {STRICT_VARIABLE: "1", CONFIG_PATH_VARIABLE: launch_environment()[CONFIG_PATH_VARIABLE]}
    return start_lab_server(course, state, environment, python=python, extra_args=[
        f"--MappingKernelManager.cull_idle_timeout={cull_idle_timeout_s:g}",
        f"--MappingKernelManager.cull_interval={TEST_CULL_INTERVAL_S}",
    ])


def run_session(notebooks: Sequence[Path], python: Optional[str] = None,
                cull_idle_timeout_s: float = TEST_CULL_IDLE_TIMEOUT_S, busy_check: bool = True,
                work_dir: Optional[Path] = None, learner_pace_s: float = LEARNER_PACE_S) -> SessionReport:
    """Run ``notebooks`` in order in one JupyterLab started with the course's launch configuration; measure it.

    Args:
        notebooks: the notebooks, copied into a fresh folder first (the server serves the copy).
        python: the Python whose JupyterLab and kernel to use (default: this one), e.g. the Binder venv's.
        cull_idle_timeout_s: the culling timeout for this run (the course's other culling settings apply as they are).
        busy_check: finish with a cell that runs longer than the timeout, in the last notebook's kernel.
        work_dir: where to put the copy and the server's state (default: a temporary folder, removed after).
        learner_pace_s: the least time between opening one notebook and the next.
    """
    python = str(Path(python).absolute()) if python else None  # absolute, not resolved: a venv's python is a link
    owned = work_dir is None
    work = Path(tempfile.mkdtemp(prefix="whole-session-")) if owned else work_dir
    course = work / "notebooks"
    course.mkdir(parents=True, exist_ok=True)
    for path in notebooks:
        shutil.copy(path, course / path.name)
    server = start_session_server(course, work / "state", python, cull_idle_timeout_s)
    try:
        report = SessionReport(python or sys.executable, "", machine(), cull_idle_timeout_s, learner_pace_s)
        time.sleep(1.0)
        report.server_alone_mib = total_pss(tree_memory(server.process.pid)) / MIB
        with MemorySampler(server.process.pid) as sampler:
            run_in_own_loop(lambda: _session(server, [course / path.name for path in notebooks], report, busy_check))
            sampler.sample()
        report.peak_mib = sampler.peak / MIB
        report.most_kernels_alive = max(report.most_kernels_alive, sampler.most_kernels)
        report.culled = culled_kernels(server)
        return report
    finally:
        stop_lab_server(server)
        if owned:
            shutil.rmtree(work, ignore_errors=True)


def machine() -> str:
    """This machine, as the benchmark lines name it."""
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: run the session, print its figures, optionally write them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", help="the Python to run JupyterLab and the kernels with (default: this one)")
    parser.add_argument("--folder", type=Path, default=ROOT / "solutions", help="the notebooks (default: solutions/)")
    parser.add_argument("--write", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    report = run_session(course_notebooks(args.folder), python=args.python)
    print("\n".join(report.lines()))
    if report.failed_cells:
        print("cells that failed:\n" + "\n".join(report.failed_cells))
    if args.write and not report.failed_cells:
        figures = asdict(report) | {"without_culling_mib": report.without_culling_mib}
        args.write.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        if args.write.resolve() == sizing.FIGURES:
            sizing.update_hosting(figures)
            print(f"wrote {args.write} and the sizing block of {sizing.HOSTING.relative_to(ROOT)}")
    return 1 if report.failed_cells else 0


if __name__ == "__main__":
    sys.exit(main())

"""The solved course as one learner's session in real JupyterLab, driven in Chromium: one run, many guarantees.

One server with the course's launch configuration (``helpers/jupyter_config``; in the Binder venv when it is built,
always on CI), its culling timeout scaled down as in ``authoring.whole_session``, and one JupyterLab page, as a
learner has it. Per solved notebook, in course order, in a JupyterLab tab of its own that stays open:

1. Run All in a fresh kernel, strict (COURSE_STRICT=1); what the page shows is read and a screenshot taken
   (the per-notebook checks of tests/browser/checks.py read it);
2. the memory of the server and every kernel right after, and which kernels are alive;
3. Run All again in the same kernel, without a restart: every code cell runs a second time, after the whole
   notebook ran once (``run_all_again``; ``second_run_problems`` says what went wrong);
4. after the first notebook, a cell that runs longer than the culling timeout, in its kernel, while the learner
   reads on: it must not be culled while busy.

Memory is sampled all along. At the end the first notebook's tab, left open, meets its culled kernel as a learner
back from a break does: the steps its summary line names must bring it back (``comeback_problems``).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from authoring.lab_server import LabServer, stop_lab_server
from authoring.process_memory import MIB, MemorySampler, kernel_count, total_pss, tree_memory
from authoring.whole_session import (
    LEARNER_PACE_S,
    TEST_CULL_IDLE_TIMEOUT_S,
    TEST_CULL_INTERVAL_S,
    NotebookFigures,
    SessionReport,
    culled_kernels,
    machine,
    start_session_server,
)
from helpers.course.exercises.progress import SHUT_DOWN_LINE
from helpers.course.kernel_shutdown import LABEL
from tests.browser import checks
from tests.browser.lab_page import (
    APP_TIMEOUT_MS,
    KERNEL_ID_JS,
    RUN_ALL_DONE_JS,
    RUN_ALL_TIMEOUT_MS,
    START_RUN_ALL_JS,
    TAG_CELLS_JS,
    VIEWPORT,
    LiveCell,
    NotebookRun,
    activate_notebook,
    open_notebook,
    read_cells,
    run_all_and_wait,
    run_all_result,
    run_in_page,
)
from tests.browser.notebook_expectations import NotebookExpectations, read_expectations

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

BUSY_CELL_S = TEST_CULL_IDLE_TIMEOUT_S + 4 * TEST_CULL_INTERVAL_S
START_BUSY_CELL_JS = """
(code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  window.__courseBusy = {settled: false, status: null};
  kernel.requestExecute({code, stop_on_error: true}).done.then(
    (reply) => { window.__courseBusy = {settled: true, status: reply.content.status}; },
    (error) => { window.__courseBusy = {settled: true, status: 'error: ' + error}; },
  );
}
"""
BUSY_SETTLED_JS = "() => window.__courseBusy.settled"
# The tab knows that its session and kernel are gone (JupyterLab's session poll tells it within ~10 s).
SESSION_GONE_JS = "() => !window.jupyterapp.shell.currentWidget.sessionContext.session"
CLEAR_OUTPUTS_JS = "() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')"


@dataclass(frozen=True)
class SecondRun:
    """Run All again, in the kernel of the first Run All: whether it ended, what it resolved to, the cells after it."""

    finished: bool
    result: Optional[str]
    path: str                  # the notebook the page read
    cells: List[LiveCell]


@dataclass
class SolvedNotebook:
    """One solved notebook of the session: its expectations, the first Run All, and the second."""

    name: str
    expected: NotebookExpectations
    run: NotebookRun
    second: Optional[SecondRun] = None


@dataclass
class SolvedSession:
    """Everything the solved-course tests assert on."""

    notebooks: Dict[str, SolvedNotebook]
    report: SessionReport
    server_python: str
    comeback_problems: List[str] = field(default_factory=list)


def _torch_version(python: str) -> str:
    """torch's version in ``python``'s environment, without importing torch."""
    found = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                           capture_output=True, text=True, timeout=60)
    return found.stdout.strip() or "?"


def _kernel_ids(server: LabServer) -> List[str]:
    return [kernel["id"] for kernel in server.api("GET", "/api/kernels")]


def _figures(server: LabServer, name: str, kernel_id: Optional[str], seconds: float) -> NotebookFigures:
    tree = tree_memory(server.process.pid)
    kernel = [process for process in tree.values() if kernel_id and kernel_id in process.command]
    alive = kernel_count(tree)
    return NotebookFigures(name, seconds, sum(p.pss for p in kernel) / MIB, total_pss(tree) / MIB, alive)


def _kernel_python(server: LabServer, kernel_id: Optional[str]) -> str:
    """The Python a kernel runs: the first word of its command line."""
    for process in tree_memory(server.process.pid).values():
        if kernel_id and kernel_id in process.command and "ipykernel_launcher" in process.command:
            return process.command.split()[0]
    return ""


def run_all_again(page: Page) -> SecondRun:
    """Step 3: Run All once more in the page's kernel, as it is after the first; then what the page shows."""
    finished = run_all_and_wait(page)
    result = run_all_result(page)
    page.evaluate(TAG_CELLS_JS)
    live = read_cells(page)
    return SecondRun(finished, result, live["path"], [LiveCell.from_js(cell) for cell in live["cells"]])


def second_run_problems(path: str, code_cells: Sequence[int], first: Sequence[LiveCell],
                        second: Optional[SecondRun]) -> List[str]:
    """What went wrong when Run All ran again on the notebook at ``path`` after ``first``: it must end, no cell may
    raise, and every code cell must have run again (Run All stops at a cell that raises, so the cells after it keep
    their first count)."""
    if second is None:
        return ["Run All did not finish, so nothing was run again"]
    if second.path != path:
        return [f"the page read {second.path!r}, not {path!r}"]
    problems = []
    if not second.finished:
        problems.append("Run All, run again, did not finish")
    elif second.result != "true":
        problems.append(f"Run All, run again, resolved to {second.result!r}, not 'true': a cell raised, or the run "
                        "stopped")
    last_first = max((first[index].execution_count or 0) for index in code_cells) if code_cells else 0
    not_again = [index for index in code_cells
                 if not (isinstance(second.cells[index].execution_count, int)
                         and second.cells[index].execution_count > last_first)]
    if not_again:
        problems.append(f"cells that did not run again: {not_again}")
    again = NotebookRun(path="", windowing_mode="", finished=second.finished, run_all_result=second.result,
                        kernel_status="", open_documents=1, seconds=0.0, cells=second.cells)
    return problems + checks.unexpected_errors(again)


def _executed(page: Page) -> List[Optional[int]]:
    return [cell["execution_count"] for cell in read_cells(page)["cells"] if cell["cell_type"] == "code"]


def _wait(condition, timeout_s: float, interval_s: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    return False


def comeback(page: Page, server: LabServer, name: str, kernel_id: str) -> List[str]:
    """The first notebook's open tab after its kernel was culled: what its summary line says must work."""
    if not activate_notebook(page, name):
        return [f"the tab of {name} is no longer open"]
    shown = " ".join(output["text"] or "" for cell in read_cells(page)["cells"] for output in cell["rendered"])
    problems = []
    if SHUT_DOWN_LINE.split(";")[0] not in shown:
        problems.append("the summary cell does not say how to shut the kernel down")
    if not _wait(lambda: kernel_id not in _kernel_ids(server), 60):
        return problems + [f"the idle kernel of the open tab {name} was not culled"]
    page.wait_for_function(SESSION_GONE_JS, timeout=APP_TIMEOUT_MS)  # as a learner back from a break sees it
    page.evaluate(CLEAR_OUTPUTS_JS)
    if set(_executed(page)) != {None}:
        problems.append("clearing the outputs left execution counts")
    # Kernel > Restart Kernel and Run All Cells, as the summary line says.
    page.evaluate(START_RUN_ALL_JS, "notebook:restart-run-all")
    page.wait_for_function(RUN_ALL_DONE_JS, timeout=RUN_ALL_TIMEOUT_MS, polling=250)
    counts = _executed(page)
    if None in counts or counts != sorted(counts) or counts[0] != 1:
        problems.append(f"Restart Kernel and Run All Cells did not run every cell from the top: {counts}")
    restarted = page.evaluate(KERNEL_ID_JS)
    if restarted is None or restarted not in _kernel_ids(server):
        return problems + ["no kernel runs for the tab after the restart"]
    page.evaluate(TAG_CELLS_JS)  # this notebook's cells only: the other tabs' summaries have the same button
    button = page.locator("[data-course-cell]").get_by_role("button", name=LABEL)  # it shuts this kernel down
    button.wait_for(state="visible", timeout=APP_TIMEOUT_MS)
    button.click()
    if not _wait(lambda: restarted not in _kernel_ids(server), 30):
        return problems + ["the summary's button did not shut the kernel down"]
    page.wait_for_function(SESSION_GONE_JS, timeout=APP_TIMEOUT_MS)
    open_notebook(page, server.notebook_url(name), name)  # reopened later (a new workspace: this tab alone)
    if not run_all_and_wait(page):
        return problems + ["Run All after reopening did not finish"]
    counts = _executed(page)
    if None in counts or counts[0] != 1:
        problems.append(f"execution counts after reopening: {counts}")
    return problems


def run_solved_session(chromium: Browser, notebooks: Sequence[Path], work: Path, screenshots: Path,
                       python: Optional[str]) -> SolvedSession:
    """The session described above, on copies of ``notebooks`` under ``work``; screenshots into ``screenshots``."""
    course = work / "solutions"
    course.mkdir(parents=True)
    for path in notebooks:
        shutil.copy(path, course / path.name)
    server = start_session_server(course, work / "state", python)
    context = chromium.new_context(viewport=VIEWPORT)
    report = SessionReport(python or sys.executable, _torch_version(python or sys.executable), machine(),
                           TEST_CULL_IDLE_TIMEOUT_S)
    solved: Dict[str, SolvedNotebook] = {}
    first: Optional[tuple] = None
    try:
        time.sleep(1.0)
        report.server_alone_mib = total_pss(tree_memory(server.process.pid)) / MIB
        with MemorySampler(server.process.pid) as sampler:
            page = context.new_page()
            for number, path in enumerate(notebooks):
                started = time.monotonic()
                expected = read_expectations(course / path.name)
                url = server.notebook_url(path.name)
                run = run_in_page(  # the first loads JupyterLab; each later one opens in a new tab of it
                    page, url, path.name,
                    widget_cells=[q.cell_index for q in expected.predict_questions] + sorted(expected.hint_cells),
                    predict_cells=[q.cell_index for q in expected.predict_questions],
                    answer_marker=checks.PREDICT_ANSWER_MARKER, screenshot=screenshots / f"solutions_{path.stem}.jpg",
                    in_loaded_app=number > 0, tabs=number + 1)
                kernel_id = page.evaluate(KERNEL_ID_JS)
                figures = _figures(server, path.name, kernel_id, time.monotonic() - started)
                if number == 0:
                    report.kernel_python = _kernel_python(server, kernel_id)
                report.most_kernels_alive = max(report.most_kernels_alive, figures.kernels_alive)
                solved[path.name] = SolvedNotebook(path.name, expected, run)
                if run.finished:
                    solved[path.name].second = run_all_again(page)
                figures.seconds = time.monotonic() - started
                report.notebooks.append(figures)
                if number == 0:
                    first = (path.name, kernel_id)
                    page.evaluate(START_BUSY_CELL_JS, f"import time\ntime.sleep({BUSY_CELL_S:g})")
                time.sleep(max(0.0, LEARNER_PACE_S - (time.monotonic() - started)))  # the learner reads on
            if first is not None:
                settled = _wait(lambda: page.evaluate(BUSY_SETTLED_JS), BUSY_CELL_S + 30)
                report.busy_kernel_survived = settled and page.evaluate("() => window.__courseBusy.status") == "ok"
            sampler.sample()
        report.peak_mib = sampler.peak / MIB
        report.most_kernels_alive = max(report.most_kernels_alive, sampler.most_kernels)
        report.culled = culled_kernels(server)
        session = SolvedSession(solved, report, python or sys.executable)
        if first is not None:
            session.comeback_problems = comeback(page, server, *first)
        return session
    finally:
        context.close()
        stop_lab_server(server)

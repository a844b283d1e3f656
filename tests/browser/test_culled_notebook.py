"""A notebook whose kernel the course's culling shut down comes back, in real JupyterLab.

The server starts with the course's launch configuration, its timeout shortened to seconds. The learner's tab stays
open while the kernel is culled. What the summary line says then must work: Kernel > Restart Kernel and Run All
Cells runs every cell again, from the top. Then the summary's own button shuts the kernel down, and the notebook,
reopened later, runs with Run All.

Seen with JupyterLab 4.6: for up to ~10 s after the cull the tab may still think its kernel exists ("dead"); then
Restart asks for confirmation and fails silently. JupyterLab's session poll clears that within seconds, so a
learner coming back from a break finds the tab without a kernel, and there the command works. The test waits for
that state, as a returning learner meets it.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Iterator, List, Optional

import pytest

from authoring.lab_server import LabServer, start_lab_server, stop_lab_server
from helpers.course.exercises.api import STRICT_VARIABLE
from helpers.course.exercises.progress import SHUT_DOWN_LINE
from helpers.course.kernel_shutdown import LABEL
from helpers.lab import CONFIG_PATH_VARIABLE, launch_environment
from tests.browser.conftest import REPO_ROOT
from tests.browser.lab_page import (
    APP_TIMEOUT_MS,
    RUN_ALL_DONE_JS,
    RUN_ALL_TIMEOUT_MS,
    VIEWPORT,
    open_notebook,
    read_cells,
    run_all_and_wait,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

NOTEBOOK = "00_start_here.ipynb"
CULL_AFTER_S = 6
# The tab knows that its session and kernel are gone (JupyterLab's session poll tells it within ~10 s).
SESSION_GONE_JS = "() => !window.jupyterapp.shell.currentWidget.sessionContext.session"
# Forget the first run's outputs and execution counts, so that only a new run can fill them in again.
CLEAR_OUTPUTS_JS = "() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')"
RESTART_AND_RUN_ALL_JS = """
() => {
  window.__courseRunAll = {settled: false, result: null};
  window.jupyterapp.commands.execute('notebook:restart-run-all').then(
    (value) => { window.__courseRunAll = {settled: true, result: String(value)}; },
    (error) => { window.__courseRunAll = {settled: true, result: 'error: ' + error}; },
  );
}
"""


@pytest.fixture(scope="module")
def culling_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab with the course's launch configuration, culling kernels idle for CULL_AFTER_S seconds."""
    root = tmp_path_factory.mktemp("culled-course")
    (root / NOTEBOOK).write_bytes((REPO_ROOT / "notebooks" / NOTEBOOK).read_bytes())
    environment = {STRICT_VARIABLE: "0", CONFIG_PATH_VARIABLE: launch_environment()[CONFIG_PATH_VARIABLE]}
    server = start_lab_server(root, tmp_path_factory.mktemp("culled-state"), environment, extra_args=[
        f"--MappingKernelManager.cull_idle_timeout={CULL_AFTER_S}", "--MappingKernelManager.cull_interval=1"])
    try:
        yield server
    finally:
        stop_lab_server(server)


def wait_until_culled(server: LabServer, timeout_s: float = 60.0) -> bool:
    """True once the server runs no kernel any more (culled, or shut down)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.api("GET", "/api/kernels"):
            return True
        time.sleep(0.5)
    return False


def executed(page: Page) -> List[Optional[int]]:
    """Each code cell's execution count as the browser shows it (None: not run)."""
    return [cell["execution_count"] for cell in read_cells(page)["cells"] if cell["cell_type"] == "code"]


def test_a_culled_notebook_comes_back_as_its_summary_says(chromium: Browser, culling_server: LabServer) -> None:
    context = chromium.new_context(viewport=VIEWPORT)
    page = context.new_page()
    try:
        open_notebook(page, culling_server.notebook_url(NOTEBOOK), NOTEBOOK)
        assert run_all_and_wait(page), "the first Run All did not finish"
        shown = " ".join(output["text"] for cell in read_cells(page)["cells"] for output in cell["rendered"])
        assert SHUT_DOWN_LINE.split(";")[0] in shown, "the summary cell does not say how to shut the kernel down"

        assert wait_until_culled(culling_server), "the idle kernel of an open tab was not culled"
        assert "Culling 'idle' kernel" in culling_server.log_tail(20_000)
        page.wait_for_function(SESSION_GONE_JS, timeout=APP_TIMEOUT_MS)  # as a learner back from a break sees it
        page.evaluate(CLEAR_OUTPUTS_JS)
        assert set(executed(page)) == {None}

        # The tab stayed open. Kernel > Restart Kernel and Run All Cells, as the summary line says.
        page.evaluate(RESTART_AND_RUN_ALL_JS)
        page.wait_for_function(RUN_ALL_DONE_JS, timeout=RUN_ALL_TIMEOUT_MS, polling=250)
        counts = executed(page)
        assert None not in counts and counts == sorted(counts) and counts[0] == 1, f"execution counts: {counts}"
        assert culling_server.api("GET", "/api/kernels"), "no kernel runs after the restart"

        # The summary's button shuts this kernel down; the notebook, reopened later (a new page), runs again.
        button = page.get_by_role("button", name=LABEL)
        button.wait_for(state="visible", timeout=APP_TIMEOUT_MS)
        button.click()
        assert wait_until_culled(culling_server, timeout_s=30), "the button did not shut the kernel down"
        page.wait_for_function(SESSION_GONE_JS, timeout=APP_TIMEOUT_MS)
        open_notebook(page, culling_server.notebook_url(NOTEBOOK), NOTEBOOK)
        assert run_all_and_wait(page), "Run All after reopening did not finish"
        counts = executed(page)
        assert None not in counts and counts[0] == 1, f"execution counts after reopening: {counts}"
    finally:
        context.close()

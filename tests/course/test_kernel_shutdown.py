"""The summary's shut-down button: offered only in a kernel a reachable Jupyter server runs, and it really ends it."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nbformat
import pytest

from authoring.kernel_socket import KernelGone, KernelTab, run_in_own_loop
from authoring.lab_server import LabServer, start_lab_server, stop_lab_server
from authoring.whole_session import notebook_session
from helpers.course import kernel_shutdown


def test_outside_a_kernel_nothing_is_offered():
    assert kernel_shutdown.own_kernel_id() is None
    assert kernel_shutdown.find_own_session() is None
    assert kernel_shutdown.shutdown_button() is None


def test_a_kernel_no_server_started_gets_no_button():
    """nbclient, VS Code and Colab start kernels without a Jupyter server this code can ask: no button."""
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from helpers.course import kernel_shutdown\n"
        "print(kernel_shutdown.shutdown_button())")])
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    assert notebook.cells[0].outputs[0]["text"].split() == ["None"]


@pytest.fixture()
def server(tmp_path: Path):
    nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "any.ipynb"))
    running = start_lab_server(tmp_path, tmp_path / "state", {})
    try:
        yield running
    finally:
        stop_lab_server(running)


async def _click_in_kernel(server: LabServer) -> str:
    session = server.api("POST", "/api/sessions", body=notebook_session("any.ipynb"))
    tab = await KernelTab.open(server.base_url, server.token, session["kernel"]["id"])
    try:
        found = await tab.run(
            "from helpers.course import kernel_shutdown\n"
            "button = kernel_shutdown.shutdown_button()\n"
            "print(type(button).__name__, kernel_shutdown.find_own_session().session_id)")
        try:  # what a click in the browser does; the kernel may be gone before it answers
            await tab.run("button.children[0].children[0].click()", timeout_s=5)
        except (KernelGone, asyncio.TimeoutError):
            pass
        return found.output
    finally:
        tab.close()


def test_in_a_servers_kernel_the_button_ends_exactly_that_session(server: LabServer):
    other = server.api("POST", "/api/sessions", body=notebook_session("other.ipynb"))
    printed = run_in_own_loop(lambda: _click_in_kernel(server))
    kind, session_id = printed.split()
    assert kind == "VBox"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(s["id"] == session_id for s in server.api("GET", "/api/sessions")):
        time.sleep(0.25)
    sessions = server.api("GET", "/api/sessions")
    assert [s["id"] for s in sessions] == [other["id"]], "the clicked notebook's session should be gone, only it"
    assert [k["id"] for k in server.api("GET", "/api/kernels")] == [other["kernel"]["id"]]

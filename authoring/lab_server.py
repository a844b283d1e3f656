"""Start and stop a private ``jupyter lab`` server, for the browser tests and the whole-session test.

Each server serves a temporary folder on 127.0.0.1 with a random token, and keeps its settings,
workspaces, runtime files and config inside a temporary folder too, so the user's own JupyterLab set-up is
neither used nor changed.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

# User settings the tests need: every cell in the DOM (no windowing), no empty space after the last cell (the
# screenshot is as tall as the notebook), and no toasts asking about news or updates (they would reach for the
# internet and cover the screenshots).
LAB_SETTINGS: Dict[str, Dict[str, Any]] = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none", "scrollPastEnd": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}
STARTUP_TIMEOUT_S = 90.0
SHUTDOWN_TIMEOUT_S = 30.0
START_ATTEMPTS = 3


@dataclass
class LabServer:
    """A running ``jupyter lab``: where it is, how to log in, and its process."""

    root_dir: Path
    state_dir: Path
    port: int
    token: str
    process: subprocess.Popen
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def notebook_url(self, relative_path: str) -> str:
        """The address that opens ``relative_path`` (relative to the root) in JupyterLab, logged in.

        Each address names a new workspace, so JupyterLab does not reopen (and start kernels for) the
        notebooks an earlier page had open.
        """
        workspace = f"course-test-{secrets.token_hex(6)}"
        return f"{self.base_url}/lab/workspaces/{workspace}/tree/{relative_path}?token={self.token}"

    def log_tail(self, characters: int = 4000) -> str:
        """The end of the server's log, for failure messages."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-characters:]
        except OSError:
            return "(no server log)"

    def api(self, method: str, path: str, timeout: float = 30.0, body: Optional[Any] = None) -> Any:
        """Call the server's REST API (``body``, if given, sent as JSON); the decoded JSON answer, or None."""
        headers = {"Authorization": f"token {self.token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(f"{self.base_url}{path}", method=method, headers=headers,
                                         data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_lab_settings(settings_dir: Path, settings: Mapping[str, Mapping[str, Any]] = LAB_SETTINGS) -> None:
    """Write JupyterLab user settings files into ``settings_dir``."""
    for relative_path, values in settings.items():
        path = settings_dir / relative_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values, indent=2), encoding="utf-8")


def server_environment(state_dir: Path, extra: Mapping[str, str]) -> Dict[str, str]:
    """This process's environment with Jupyter's config, data and runtime folders moved into ``state_dir``.

    The kernels inherit it, so ``extra`` (e.g. COURSE_STRICT) reaches the notebooks' code.
    """
    environment = dict(os.environ)
    for variable, folder in (
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("IPYTHONDIR", "ipython"),
    ):
        (state_dir / folder).mkdir(parents=True, exist_ok=True)
        environment[variable] = str(state_dir / folder)
    environment.update(extra)
    return environment


def lab_command(root_dir: Path, state_dir: Path, port: int, token: str, python: Optional[str] = None,
                extra_args: Sequence[str] = ()) -> List[str]:
    """The ``jupyter lab`` command line, run with ``python`` (default: this one), whose environment the kernels use.

    ``extra_args`` come last, so they override the same settings from config files.
    """
    return [
        python or sys.executable, "-m", "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root_dir}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.terminals_enabled=False",
        "--ServerApp.allow_root=True",  # CI runs as root
        f"--LabApp.user_settings_dir={state_dir / 'settings'}",
        f"--LabApp.workspaces_dir={state_dir / 'workspaces'}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=None",
        "--LabApp.extension_manager=readonly",  # no extension searches on PyPI
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        *extra_args,
    ]


def start_lab_server(root_dir: Path, state_dir: Path, environment: Mapping[str, str], python: Optional[str] = None,
                     extra_args: Sequence[str] = ()) -> LabServer:
    """Start ``jupyter lab`` serving ``root_dir``; return once its API answers.

    A server that exits at start (another process took its port between ``free_port`` and its start, which can
    happen with tests running in parallel) is started again on another port, up to START_ATTEMPTS times.

    Args:
        root_dir: the folder the server shows (a temporary copy of the notebooks).
        state_dir: a private folder for settings, workspaces, config, runtime files and the log.
        environment: extra environment variables for the server and its kernels.
        python: the Python whose JupyterLab and kernels to run (default: this one).
        extra_args: more command-line settings for the server.

    Raises:
        RuntimeError: when the server exits or does not answer within STARTUP_TIMEOUT_S (with its log).
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    write_lab_settings(state_dir / "settings")
    (state_dir / "workspaces").mkdir(exist_ok=True)
    attempt = 1
    while True:
        server = _launch(root_dir, state_dir, environment, python, extra_args)
        try:
            wait_until_answering(server)
            return server
        except ServerExited:
            stop_lab_server(server)
            if attempt >= START_ATTEMPTS:
                raise
            attempt += 1
        except BaseException:
            stop_lab_server(server)
            raise


def _launch(root_dir: Path, state_dir: Path, environment: Mapping[str, str], python: Optional[str],
            extra_args: Sequence[str]) -> LabServer:
    """Start the ``jupyter lab`` process on a free port, logging into ``state_dir``."""
    port, token = free_port(), secrets.token_hex(24)
    log_path = state_dir / "jupyter-lab.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            lab_command(root_dir, state_dir, port, token, python, extra_args),
            cwd=root_dir,
            env=server_environment(state_dir, environment),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a stop reaches every helper it started
        )
    return LabServer(root_dir, state_dir, port, token, process, log_path)


class ServerExited(RuntimeError):
    """``jupyter lab`` exited before it answered."""


def wait_until_answering(server: LabServer, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    """Poll the server's /api/status until it answers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise ServerExited(f"jupyter lab exited with code {server.process.returncode}:\n{server.log_tail()}")
        try:
            server.api("GET", "/api/status", timeout=5)
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.25)
    raise RuntimeError(f"jupyter lab did not answer within {timeout_s:.0f} s:\n{server.log_tail()}")


def shut_down_kernels(server: LabServer) -> None:
    """Delete every session and kernel on ``server`` (each deletion waits for its kernel to stop)."""
    if server.process.poll() is not None:
        return
    try:
        for session in server.api("GET", "/api/sessions"):
            server.api("DELETE", f"/api/sessions/{session['id']}")
        for kernel in server.api("GET", "/api/kernels"):
            server.api("DELETE", f"/api/kernels/{kernel['id']}")
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        pass  # the server is going away: stop_lab_server's safety net deals with the kernels


def stop_lab_server(server: LabServer) -> str:
    """Stop the kernels, then the server; kill whatever of ours is still running after that.

    Returns the command lines of the kernels that had to be killed ("" when there were none).
    """
    shut_down_kernels(server)
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)  # jupyter_server shuts its kernels down on SIGTERM
        try:
            server.process.wait(timeout=SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _kill_process_group(server.process.pid)
            server.process.wait(timeout=SHUTDOWN_TIMEOUT_S)
    _kill_process_group(server.process.pid)
    leftovers = leftover_kernel_pids(server.state_dir)
    description = describe_processes(leftovers)
    for pid in leftovers:
        _kill(pid)
    return description


def leftover_kernel_pids(state_dir: Path) -> List[int]:
    """Processes whose command line names a file in this server's private runtime folder: its kernels.

    Kernels run in their own sessions, so killing the server's process group does not reach them.
    Linux only (reads /proc); elsewhere an empty list.
    """
    runtime = str(state_dir / "runtime")
    pids = []
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc").is_dir() else []:
        try:
            command_line = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if runtime in command_line and int(entry.name) != os.getpid():
            pids.append(int(entry.name))
    return pids


def _kill_process_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def describe_processes(pids: Optional[List[int]]) -> str:
    """Command lines of ``pids``, for a failure message."""
    lines = []
    for pid in pids or []:
        try:
            command_line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            lines.append(f"{pid}: {command_line}")
        except OSError:
            lines.append(f"{pid}: (gone)")
    return "\n".join(lines)

"""A button, under a notebook's summary, that shuts this notebook's kernel down: its memory back, nothing else lost.

It is offered only where that is safe and sure to work: this code runs in a kernel that a Jupyter server on this
machine started (JupyterLab, Binder, a JupyterHub), and that server, asked with its own credentials, lists this
kernel in one of its sessions. Elsewhere (Colab, VS Code, a plain script) ``shutdown_button`` returns None and the
summary's text line says how to do it by hand.

The click asks the server to end the notebook's session, exactly as closing it with Kernel > Shut Down Kernel does:
the tab keeps its code and outputs, and Kernel > Restart Kernel and Run All Cells brings the kernel back.
"""
from __future__ import annotations

import html
import json
import os
import re
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from helpers.language import marked, tr, translated

LABEL = marked("Shut down this notebook's kernel")
DONE = marked("Kernel shut down. Your code and outputs stay; Kernel → Restart Kernel and Run All Cells brings it back.")
_KERNEL_FILE = re.compile(r"kernel-([0-9a-f-]{36})\.json$")
_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class OwnSession:
    """Where this kernel's session lives: the server's address, how to authenticate, the session's id."""

    base_url: str
    headers: Dict[str, str]
    session_id: str


def own_kernel_id() -> Optional[str]:
    """This kernel's id, from its connection file's name (kernel-<id>.json), or None outside such a kernel."""
    try:
        from ipykernel.connect import get_connection_file

        match = _KERNEL_FILE.search(get_connection_file())
    except Exception:  # noqa: BLE001 - not in an ipykernel, or one without a connection file
        return None
    return match.group(1) if match else None


def _running_servers() -> List[Dict[str, Any]]:
    """The info files of Jupyter servers running on this machine (jpserver-*.json in Jupyter's runtime folder)."""
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        folder = Path(jupyter_runtime_dir())
    except Exception:  # noqa: BLE001
        return []
    servers = []
    for path in sorted(folder.glob("jpserver-*.json")):
        try:
            servers.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return servers


def _get(url: str, headers: Dict[str, str]) -> Any:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
        return json.loads(response.read() or b"null")


def find_own_session() -> Optional[OwnSession]:
    """The server session this kernel belongs to, confirmed by asking the server; None when there is none."""
    kernel_id = own_kernel_id()
    if kernel_id is None:
        return None
    for info in _running_servers():
        token = info.get("token") or os.environ.get("JUPYTERHUB_API_TOKEN", "")
        headers = {"Authorization": f"token {token}"} if token else {}
        base_url = str(info.get("url", "")).rstrip("/")
        if not base_url.startswith("http"):
            continue
        try:
            sessions = _get(f"{base_url}/api/sessions", headers)
        except (urllib.error.URLError, OSError, ValueError):
            continue
        for session in sessions or []:
            if (session.get("kernel") or {}).get("id") == kernel_id:
                return OwnSession(base_url, headers, session["id"])
    return None


def end_session(session: OwnSession) -> None:
    """Ask the server to end ``session`` and its kernel (this process), from a thread, so the reply can go first."""
    def ask() -> None:
        request = urllib.request.Request(f"{session.base_url}/api/sessions/{session.session_id}", method="DELETE",
                                         headers=session.headers)
        try:
            urllib.request.urlopen(request, timeout=30).close()
        except (urllib.error.URLError, OSError):
            pass  # the kernel is gone before the answer came back, or the server said no: nothing to do either way

    threading.Thread(target=ask, name="shut-down-own-kernel", daemon=True).start()


def shutdown_button() -> Optional[Any]:
    """An ipywidgets button that shuts this notebook's kernel down, or None where that cannot be done safely."""
    session = find_own_session()
    if session is None:
        return None
    try:
        import ipywidgets
    except ImportError:
        return None
    button = ipywidgets.Button(description=translated(LABEL), icon="power-off", layout=ipywidgets.Layout(width="auto"),
                               tooltip=tr("Frees this notebook's memory. Nothing in the notebook is lost."))
    status = ipywidgets.HTML()

    def on_click(_: Any) -> None:
        button.disabled = True
        status.value = html.escape(translated(DONE))
        end_session(session)

    button.on_click(on_click)
    return ipywidgets.VBox([ipywidgets.HBox([button]), status])  # in a row, the button keeps its own width

"""Run code in a Jupyter server's kernel the way JupyterLab does: over the server's websocket, one open per tab.

A learner's tab keeps one websocket to its kernel open for as long as the tab is open; the server counts it as a
connection (which matters to its culling settings) and relays every message through it. ``KernelTab`` does the
same from Python, so a test can run notebooks "in tabs" and leave them open.
"""
from __future__ import annotations

import asyncio
import json
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, List, Optional, TypeVar

from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

PROTOCOL_VERSION = "5.3"
MAX_MESSAGE_BYTES = 1 << 30
CELL_TIMEOUT_S = 600.0


T = TypeVar("T")


def run_in_own_loop(make: Callable[[], Awaitable[T]]) -> T:
    """``asyncio.run(make())`` in a thread of its own, so it works where an event loop already runs (Playwright's
    sync API keeps one running in a pytest worker that also ran browser tests)."""
    outcome: Dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(make())
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread below
            outcome["error"] = error

    thread = threading.Thread(target=target, name="kernel-socket-loop")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class KernelGone(RuntimeError):
    """The websocket closed while a cell ran: the kernel was stopped (or the server went away)."""


@dataclass
class CellRun:
    """How one cell ended: its execute_reply status and, on an error, the exception's name and value."""

    status: str
    error: str = ""
    output: str = ""  # what the cell printed (stdout and stderr)


class KernelTab:
    """One open "tab": a websocket to one kernel of a Jupyter server."""

    def __init__(self, connection: WebSocketClientConnection, kernel_id: str, session_id: str) -> None:
        self.connection = connection
        self.kernel_id = kernel_id
        self.session_id = session_id

    @classmethod
    async def open(cls, base_url: str, token: str, kernel_id: str) -> KernelTab:
        """Connect to ``kernel_id``'s channels on the server at ``base_url`` (http://host:port)."""
        session_id = uuid.uuid4().hex
        address = base_url.replace("http://", "ws://", 1)
        request = HTTPRequest(f"{address}/api/kernels/{kernel_id}/channels?session_id={session_id}",
                              headers={"Authorization": f"token {token}"})
        connection = await websocket_connect(request, max_message_size=MAX_MESSAGE_BYTES)
        return cls(connection, kernel_id, session_id)

    def _request(self, code: str) -> Dict[str, Any]:
        return {
            "header": {"msg_id": uuid.uuid4().hex, "username": "learner", "session": self.session_id, "date": "",
                       "msg_type": "execute_request", "version": PROTOCOL_VERSION},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True},
        }

    async def run(self, code: str, timeout_s: float = CELL_TIMEOUT_S) -> CellRun:
        """Execute ``code``; return once the kernel replied and went idle again.

        Raises:
            KernelGone: when the websocket closes before that.
            asyncio.TimeoutError: when no message comes for ``timeout_s`` seconds.
        """
        request = self._request(code)
        msg_id = request["header"]["msg_id"]
        await self.connection.write_message(json.dumps(request))
        reply: Optional[CellRun] = None
        idle = False
        printed: List[str] = []
        while reply is None or not idle:
            message = await asyncio.wait_for(self.connection.read_message(), timeout_s)
            if message is None:
                raise KernelGone(f"kernel {self.kernel_id} went away while running:\n{code[:300]}")
            if isinstance(message, bytes):
                continue  # a message with binary buffers (widgets): never one of ours
            decoded = json.loads(message)
            if decoded.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = decoded["msg_type"], decoded["content"]
            if kind == "execute_reply":
                error = f"{content.get('ename', '')}: {content.get('evalue', '')}" if content["status"] != "ok" else ""
                reply = CellRun(content["status"], error)
            elif kind == "stream":
                printed.append(content["text"])
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
        reply.output = "".join(printed)
        return reply

    async def run_all(self, sources: List[str]) -> List[CellRun]:
        """Run each source in order, as Run All does: stop at the first cell that does not end "ok"."""
        runs = []
        for source in sources:
            runs.append(await self.run(source))
            if runs[-1].status != "ok":
                break
        return runs

    def close(self) -> None:
        """Close the tab (the kernel keeps running)."""
        self.connection.close()

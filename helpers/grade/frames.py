"""The frames a sandboxed runner and the grader exchange over a pipe: ``KIND LENGTH\\n`` then LENGTH bytes.

A frame is ``progress`` or ``result`` (a JSON object) or ``records`` (bytes in ``helpers.grade.wire``'s format, which
cannot execute on load). The grader reads every frame with a cap on its size and gives up on anything malformed:
what comes out of a sandbox is data, and a runner that writes anything else only loses its own notebook.
"""
from __future__ import annotations

import json
import re
from typing import Any, BinaryIO, Dict, Tuple

KINDS = ("progress", "result", "records", "request")
MAX_JSON_BYTES = 4 * 2**20
MAX_RECORDS_BYTES = 64 * 2**20  # the course's records are a few MB at most
_HEADER = re.compile(rb"^(progress|result|records|request) (\d{1,10})\n$")


class FrameError(ValueError):
    """A frame that is not one: the other side broke the protocol (or was made to)."""


def write_frame(stream: BinaryIO, kind: str, payload: bytes) -> None:
    """Write one frame and flush."""
    if kind not in KINDS:
        raise ValueError(kind)
    stream.write(f"{kind} {len(payload)}\n".encode() + payload)
    stream.flush()


def write_json(stream: BinaryIO, kind: str, value: Dict[str, Any]) -> None:
    write_frame(stream, kind, json.dumps(value).encode())


def read_frame(stream: BinaryIO) -> Tuple[str, bytes]:
    """The next frame's kind and payload.

    Raises:
        EOFError: the stream ended before a frame began.
        FrameError: anything else that is not a well-formed frame within the caps.
    """
    header = stream.readline(64)
    if not header:
        raise EOFError("the other side closed the pipe")
    found = _HEADER.match(header)
    if found is None:
        raise FrameError(f"not a frame header: {header[:40]!r}")
    kind, length = found.group(1).decode(), int(found.group(2))
    if length > (MAX_RECORDS_BYTES if kind == "records" else MAX_JSON_BYTES):
        raise FrameError(f"a {kind} frame of {length} bytes, over the cap")
    payload = stream.read(length)
    if len(payload) != length:
        raise FrameError(f"a {kind} frame cut short ({len(payload)} of {length} bytes)")
    return kind, payload


def json_payload(payload: bytes) -> Dict[str, Any]:
    """A JSON object from a frame, or FrameError."""
    try:
        value = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise FrameError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise FrameError("not a JSON object")
    return value

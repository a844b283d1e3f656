"""The learner's call records (``engine.judge.CallRecord``) as bytes in ``helpers.grade.wire``'s format, and back.

The bytes hold only data: each call's state before and after (``Key -> value``, tensors and plain values), what it
raised, as text, or that it is the stub. Decoding them runs no code of the learner's.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from helpers.course.exercises.engine.judge import CallRecord
from helpers.course.exercises.engine.observe import Key
from helpers.grade import wire

MAX_CALLS = 16
MAX_TEXT = 2000


class RecordsError(ValueError):
    """Bytes that are not well-formed records."""


def _state(seen: Optional[Mapping[Key, Any]]) -> Optional[List[List[Any]]]:
    return None if seen is None else [[key.path, key.kind, value] for key, value in seen.items()]


def records_data(records: Sequence[CallRecord]) -> List[Dict[str, Any]]:
    """The records as plain data (lists, dicts, tensors), for ``wire.encode``."""
    return [{"before": _state(r.before), "after": _state(r.after), "raised": r.raised,
             "not_attempted": bool(r.not_attempted)} for r in records]


def encode_records(records: Sequence[CallRecord]) -> bytes:
    """The records as wire bytes."""
    return wire.encode(records_data(records))


def _read_state(value: Any) -> Optional[Dict[Key, Any]]:
    if value is None:
        return None
    if not isinstance(value, list):
        raise RecordsError("a state that is not a list")
    seen: Dict[Key, Any] = {}
    for entry in value:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                and isinstance(entry[1], str)):
            raise RecordsError("a state entry that is not [path, kind, value]")
        key = Key(entry[0], entry[1])
        if key in seen:
            raise RecordsError(f"a state that names {key} twice")
        seen[key] = entry[2]
    return seen


def decode_records(data: bytes) -> List[CallRecord]:
    """Records from wire bytes. Raises RecordsError (or wire.WireError) on anything malformed."""
    return records_from_data(wire.decode(data))


def records_from_data(value: Any) -> List[CallRecord]:
    """Records from decoded data. Raises RecordsError on anything malformed."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_CALLS:
        raise RecordsError("not a list of 1 to 16 call records")
    records = []
    for entry in value:
        if not isinstance(entry, dict) or set(entry) != {"before", "after", "raised", "not_attempted"}:
            raise RecordsError("a call record without exactly its four fields")
        raised = entry["raised"]
        if raised is not None and not isinstance(raised, str):
            raise RecordsError("a raised error that is not text")
        if not isinstance(entry["not_attempted"], bool):
            raise RecordsError("not_attempted that is not a bool")
        before = _read_state(entry["before"])
        if before is None:
            raise RecordsError("a call record without its state before the call")
        records.append(CallRecord(before, _read_state(entry["after"]),
                                  None if raised is None else raised[:MAX_TEXT], entry["not_attempted"]))
    return records

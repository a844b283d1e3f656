"""Reading what anomaly mode (``torch.autograd.set_detect_anomaly(True)``) reports about a failed backward."""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

from helpers.language import marked, tr, translated
from helpers.tools.display import card_html, pre_html
from helpers.tools.frames import is_library_frame

_HEADER = re.compile(r"Error detected in (?P<node>\w+)\. Traceback of forward call that caused the error:")
NO_STACK = "This node kept no forward stack"  # how ForwardTrace.full starts when there was none (compared)
_NO_STACK_FULL = marked("This node kept no forward stack: run the forward pass inside "
                        "torch.autograd.set_detect_anomaly(True) to see where it was created.")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')


@dataclass(frozen=True)
class ForwardTrace:
    """Where the failing node was created in the forward pass.

    Attributes:
        node: the backward node that failed, e.g. ``AddmmBackward0``.
        learner_lines: the forward-pass lines of your own code, outermost first.
        full: anomaly mode's whole report.
    """

    node: str
    learner_lines: List[str]
    full: str

    def _full_shown(self) -> str:
        """``full`` for the reader: anomaly mode's report as PyTorch wrote it, or this module's own note."""
        return translated(self.full) if self.full == _NO_STACK_FULL else self.full

    def __str__(self) -> str:
        lines = [tr("Backward fails in {node}, created in the forward pass at:", node=self.node)]
        found = [f"  {line}" for line in self.learner_lines] or [
            "  " + tr("(no line of your own code: {details})", details=self._full_shown())
            if self.full.startswith(NO_STACK) else "  " + tr("(no line of your own code in the trace)")]
        return "\n".join(lines + found)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        body = pre_html("\n".join(self.learner_lines) or tr("(no line of your own code in the trace)"))
        if self.full.startswith(NO_STACK):
            return card_html(tr("Backward fails in {node}", node=self.node), pre_html(self._full_shown()),
                             accent="#8e44ad")
        summary = tr("Anomaly mode's full report")
        body += f"<details><summary>{summary}</summary>{pre_html(self.full)}</details>"
        return card_html(tr("Backward fails in {node}, created in the forward pass at", node=self.node), body,
                         accent="#8e44ad")


def forward_trace(source: Any, params: Any = None, inputs: Any = None) -> Optional[ForwardTrace]:
    """Where in the forward pass the node a backward fails on was created; None when there is none.

    Args:
        source: either the warnings recorded while anomaly mode was on during a failing backward
            (``warnings.catch_warnings(record=True)``), or the loss(es) you are about to call backward on, when
            their forward pass ran under ``torch.autograd.set_detect_anomaly(True)``: anomaly mode keeps each node's
            forward stack, so the failing node's line is found without running backward.
        params, inputs: as for ``diagnose``, when ``source`` is the loss(es).

    Never raises.
    """
    try:
        if _is_warning_list(source):
            return _from_warnings(source)
        return _from_graph(source, params, inputs)
    except Exception:  # an unreadable source is "no trace", never a failing cell
        return None


def _is_warning_list(source: Any) -> bool:
    return isinstance(source, (list, tuple)) and all(isinstance(item, warnings.WarningMessage) for item in source)


def _learner_lines(frames_text: str) -> List[str]:
    learner_lines = []
    lines = frames_text.splitlines()
    for index, line in enumerate(lines):
        frame = _FRAME.match(line)
        if frame and not is_library_frame(frame["file"]):
            following = lines[index + 1] if index + 1 < len(lines) else ""
            code = "" if _FRAME.match(following) else following.strip()
            code = code.rstrip(": ")
            learner_lines.append(tr("line {number}: {code}", number=frame["line"], code=code) if code else
                                 tr("line {number}", number=frame["line"]))
    return learner_lines


def _from_warnings(caught: Sequence[warnings.WarningMessage]) -> Optional[ForwardTrace]:
    for warning in caught:
        text = str(warning.message)
        header = _HEADER.search(text)
        if header is not None:
            return ForwardTrace(header["node"], _learner_lines(text), text)
    return None


def _from_graph(outputs: Any, params: Any, inputs: Any) -> Optional[ForwardTrace]:
    from helpers.tools.diagnosis import first_failing_node  # diagnosis shows traces too: imported when used

    node = first_failing_node(outputs, params, inputs)
    if node is None:
        return None
    stack = (getattr(node, "metadata", None) or {}).get("traceback_")
    name = type(node).__name__
    if not stack:
        return ForwardTrace(name, [], _NO_STACK_FULL)
    text = "".join(stack) if isinstance(stack, (list, tuple)) else str(stack)
    return ForwardTrace(name, _learner_lines(text), text)

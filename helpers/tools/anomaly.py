"""Reading what anomaly mode (``torch.autograd.set_detect_anomaly(True)``) reports about a failed backward."""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import List, Optional, Sequence

from helpers.tools.display import card_html, pre_html
from helpers.tools.frames import is_library_frame

_HEADER = re.compile(r"Error detected in (?P<node>\w+)\. Traceback of forward call that caused the error:")
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

    def __str__(self) -> str:
        lines = [f"Backward failed in {self.node}, created in the forward pass at:"]
        return "\n".join(lines + [f"  {line}" for line in self.learner_lines])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        body = pre_html("\n".join(self.learner_lines) or "(no line of your own code in the trace)")
        body += f"<details><summary>Anomaly mode's full report</summary>{pre_html(self.full)}</details>"
        return card_html(f"Backward failed in {self.node}, created in the forward pass at", body, accent="#8e44ad")


def forward_trace(caught: Sequence[warnings.WarningMessage]) -> Optional[ForwardTrace]:
    """The forward trace from warnings recorded while anomaly mode was on, or None if there is none."""
    for warning in caught:
        text = str(warning.message)
        header = _HEADER.search(text)
        if header is None:
            continue
        learner_lines = []
        lines = text.splitlines()
        for index, line in enumerate(lines):
            frame = _FRAME.match(line)
            if frame and not is_library_frame(frame["file"]):
                code = lines[index + 1].strip() if index + 1 < len(lines) else ""
                learner_lines.append(f"line {frame['line']}: {code}")
        return ForwardTrace(header["node"], learner_lines, text)
    return None

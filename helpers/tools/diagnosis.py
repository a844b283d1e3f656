"""Predict, before calling backward, whether it will fail, and why."""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence

import torch

from helpers.tools.display import card_html
from helpers.tools.errors import KINDS
from helpers.tools.saved import Outputs, SavedTensor, State, iter_problems, saved_tensors

_KIND_OF_STATE = {State.FREED: "backward-twice", State.STALE: "inplace-version"}


@dataclass(frozen=True)
class Diagnosis:
    """What a backward pass from these outputs would meet.

    Attributes:
        problems: the saved tensors it would fail on, nearest the outputs first.
        prediction: the error kind it would raise first (``"backward-twice"``, ``"inplace-version"``) or None.
    """

    problems: List[SavedTensor]
    prediction: Optional[str]

    @property
    def will_fail(self) -> bool:
        return self.prediction is not None

    def _lines(self) -> List[str]:
        if not self.will_fail:
            return ["backward() will run: every saved tensor it needs is alive and unchanged."]
        kind = KINDS[self.prediction]
        lines = [f"backward() will fail with {kind.title}."]
        freed = [p for p in self.problems if p.state is State.FREED]
        stale = [p for p in self.problems if p.state is State.STALE]
        if freed:
            lines.append(f"{len(freed)} saved tensor(s) were freed by an earlier backward, e.g. {freed[0].where}.")
        for saved in stale:
            owner = f", saved from {saved.parameter}," if saved.parameter else ""
            lines.append(f"{saved.where}{owner} was saved at version {saved.version_saved} "
                         f"and is now at version {saved.version_now}.")
        return lines

    def __str__(self) -> str:
        return "\n".join(self._lines())

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        body = "<br>".join(html.escape(line) for line in self._lines())
        accent = "#c0392b" if self.will_fail else "#27ae60"
        return card_html("Diagnosis before backward()", f"<div>{body}</div>", accent=accent)


def diagnose(
    outputs: Outputs,
    params: Optional[Mapping[str, torch.Tensor]] = None,
    inputs: Optional[Sequence[torch.Tensor]] = None,
) -> Diagnosis:
    """Look at every tensor the graph behind ``outputs`` saved, without running backward.

    Args:
        outputs: the loss (or losses) you are about to call backward on.
        params: parameters by name (``named_parameters(M1=m1, M2=m2)``) so stale weights are named.
        inputs: what you will pass as ``backward(inputs=...)``; only the nodes on the way to them count.
    """
    problems = list(iter_problems(saved_tensors(outputs, params, inputs)))
    prediction = _KIND_OF_STATE[problems[0].state] if problems else None
    return Diagnosis(problems, prediction)

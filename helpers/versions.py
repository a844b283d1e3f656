"""A version timeline: each parameter's and each saved tensor's version counter, moment by moment."""
from __future__ import annotations

import html
from typing import Dict, List, Mapping, Optional

import torch

from helpers.display import card_html
from helpers.saved import Outputs, saved_tensors


class VersionTimeline:
    """Record ``tensor._version`` of named parameters, and the state of saved weights, at named moments.

    Example::

        timeline = VersionTimeline(named_parameters(M1=m1, M2=m2))
        timeline.record("after forward", losses)
        l2.backward(retain_graph=True); timeline.record("after L2.backward", losses)
    """

    def __init__(self, params: Mapping[str, torch.Tensor]) -> None:
        self.params = dict(params)
        self.moments: List[str] = []
        self.rows: Dict[str, List[str]] = {}

    def _cell(self, row: str, moment_index: int, value: str) -> None:
        column = self.rows.setdefault(row, [])
        column.extend([""] * (moment_index - len(column)))
        column.append(value)

    def record(self, moment: str, outputs: Optional[Outputs] = None) -> None:
        """Add a column: every parameter's version, and every saved parameter's state in ``outputs``' graph."""
        index = len(self.moments)
        self.moments.append(moment)
        for name, param in self.params.items():
            self._cell(name, index, f"v{param._version}")
        if outputs is not None:
            for saved in saved_tensors(outputs, self.params):
                if saved.parameter is not None:
                    self._cell(f"saved {saved.where} ({saved.parameter})", index, saved.state_label)

    def value(self, row: str, moment: str) -> str:
        """The entry of ``row`` at ``moment`` (empty when not recorded)."""
        column = self.rows[row]
        index = self.moments.index(moment)
        return column[index] if index < len(column) else ""

    def _table(self) -> List[List[str]]:
        header = ["tensor", *self.moments]
        body = [[row, *(cells + [""] * (len(self.moments) - len(cells)))] for row, cells in self.rows.items()]
        return [header, *body]

    def __str__(self) -> str:
        table = self._table()
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in table)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        header, *body = self._table()
        head = "".join(f"<th style='text-align:left;padding-right:10px'>{html.escape(h)}</th>" for h in header)
        rows = "".join(
            "<tr>" + "".join(f"<td style='text-align:left;padding-right:10px'><code>{html.escape(c)}</code></td>"
                             for c in row) + "</tr>"
            for row in body
        )
        return card_html("Version timeline", f"<table><tr>{head}</tr>{rows}</table>", accent="#2980b9")

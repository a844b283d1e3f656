"""A version timeline: each parameter's version counter and each saved tensor's state, moment by moment."""
from __future__ import annotations

import dataclasses
import html
from typing import Any, Dict, List, Mapping, Tuple

import torch

from helpers.language import tr
from helpers.tools.arguments import read_outputs, read_parameters
from helpers.tools.display import card_html
from helpers.tools.saved import SavedTensor, graph_nodes, model_of_nodes, saved_tensors


class VersionTimeline:
    """Record ``tensor._version`` of named parameters, and the state of every saved tensor, at named moments.

    Example::

        timeline = VersionTimeline(named_parameters(M1=m1, M2=m2))
        timeline.record("forward", {"L1": l1, "L2": l2}, {"M1": o1, "M2": o2})
        l2.backward(retain_graph=True); timeline.record("L2.backward", {"L1": l1, "L2": l2})
    """

    def __init__(self, params: Any = None) -> None:
        """``params``: a module, modules by name, ``model.named_parameters()``, or a dict of tensors."""
        named = read_parameters(params)
        self.params = named.tensors
        self.notes: List[str] = list(named.notes)
        self.moments: List[str] = []
        self.rows: Dict[str, List[str]] = {}
        self._saved_rows: Dict[Tuple[int, str], str] = {}  # (node id, attribute) -> row label
        self._saved_names: Dict[str, str] = {}  # a saved tensor's row label -> what follows "saved " in it
        self._saved_cells: Dict[Tuple[str, int], SavedTensor] = {}  # (row, moment index) -> the state shown there
        self._places: Dict[int, str] = {}  # node id -> "M1", or the losses that reach it, e.g. "L1 & L2"
        # Older torch makes a new Python object for a graph node each time it is reached, unless one is alive:
        # holding the nodes keeps their ids, and so the rows, stable from one record to the next.
        self._nodes: Dict[int, Any] = {}

    def _cell(self, row: str, moment_index: int, value: str) -> None:
        column = self.rows.setdefault(row, [])
        column.extend([""] * (moment_index - len(column)))
        column.append(value)

    def _row_of(self, saved: SavedTensor) -> str:
        """A stable, unique row label for a saved tensor, fixed when it is first seen."""
        key = (id(saved.node), saved.attribute)
        if key not in self._saved_rows:
            shape = f" {list(saved.shape)}" if saved.shape is not None else ""
            where = saved.parameter or self._places.get(id(saved.node))
            name = f"{saved.where}{shape}" + (f" ({where})" if where else "")
            taken = set(self._saved_rows.values())
            unique, number = name, 2
            while f"saved {unique}" in taken:
                unique, number = f"{name} #{number}", number + 1
            self._saved_rows[key] = f"saved {unique}"
            self._saved_names[f"saved {unique}"] = unique
        return self._saved_rows[key]

    def _learn_places(self, losses: Mapping[str, torch.Tensor], model_outputs: Mapping[str, torch.Tensor]) -> None:
        reached_by: Dict[int, List[str]] = {}
        for name, loss in losses.items():
            for node in graph_nodes(loss):
                reached_by.setdefault(id(node), []).append(name)
        places = {node: " & ".join(names) for node, names in reached_by.items()}
        places.update(model_of_nodes(graph_nodes(list(losses.values())), model_outputs))
        for node, place in places.items():
            self._places.setdefault(node, place)

    def record(self, moment: str, losses: Any = None, model_outputs: Any = None) -> None:
        """Add a column: every parameter's version, and the state of every tensor the losses' graph saved.

        Args:
            moment: the column's title, e.g. ``"opt2.step"``.
            losses: the graph's outputs: a tensor, a list, or by name (``{"L1": l1, "L2": l2}``).
            model_outputs: each model's output (``{"M1": o1, ...}``), to say which model a saved activation is in.

        Never raises: what it cannot read becomes a note under the table.
        """
        index = len(self.moments)
        self.moments.append(str(moment))
        for name, param in self.params.items():
            self._cell(name, index, f"v{param._version}")
        if losses is None:
            return
        try:
            named_losses = read_outputs(losses)
            self.notes += [note for note in named_losses.notes if note not in self.notes]
            tensors = named_losses.tensors
            self._nodes.update((id(node), node) for node in graph_nodes(list(tensors.values())))
            self._learn_places(tensors, read_outputs(model_outputs).tensors if model_outputs is not None else {})
            for saved in saved_tensors(list(tensors.values()), self.params):
                row = self._row_of(saved)
                self._cell(row, index, saved.state_label)
                self._saved_cells[(row, index)] = dataclasses.replace(saved, node=None)  # holds no graph
        except Exception as error:  # a graph this tool cannot read: say so under the table
            self.notes.append(tr("{moment}: could not read the graph ({error_type}: {error})", moment=moment,
                                 error_type=type(error).__name__, error=error))

    def value(self, row: str, moment: str) -> str:
        """The entry of ``row`` at ``moment`` (empty when not recorded)."""
        column = self.rows[row]
        index = self.moments.index(moment)
        return column[index] if index < len(column) else ""

    def _table(self) -> List[List[str]]:
        """The table as shown: ``rows`` (English: ``value`` reads them) in the learner's language."""
        header = [tr("tensor"), *self.moments]
        body = [[self._shown_row(row), *(self._shown_cell(row, index, cell) for index, cell in enumerate(cells)),
                 *[""] * (len(self.moments) - len(cells))] for row, cells in self.rows.items()]
        return [header, *body]

    def _shown_row(self, row: str) -> str:
        return tr("saved {tensor}", tensor=self._saved_names[row]) if row in self._saved_names else row

    def _shown_cell(self, row: str, index: int, cell: str) -> str:
        saved = self._saved_cells.get((row, index))
        return saved.shown_state_label if saved is not None else cell

    def __str__(self) -> str:
        table = self._table()
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in table]
        return "\n".join(lines + self.notes)

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
        notes = "".join(f"<div>{html.escape(note)}</div>" for note in self.notes)
        return card_html(tr("Version timeline"), f"<table><tr>{head}</tr>{rows}</table>{notes}", accent="#2980b9")

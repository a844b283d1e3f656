"""Reading exercise cells out of the course notebooks, for the tests."""
from __future__ import annotations

from typing import Any, Dict

import nbformat
import torch

from authoring.solution_markers import split_cell
from tests.paths import ROOT


def exercise_cells(folder: str) -> Dict[str, str]:
    """exercise id -> the source of its cell, in solutions/ (markers stripped) or notebooks/ (stubs)."""
    cells: Dict[str, str] = {}
    for path in sorted((ROOT / folder).glob("*.ipynb")):
        for index, cell in enumerate(nbformat.read(str(path), as_version=4).cells, 1):
            if cell.cell_type != "code":
                continue
            split = split_cell(cell.source, f"{path.name}, cell {index}")
            if folder == "solutions" and split.exercise_id:
                cells[split.exercise_id] = split.solution_source
            elif folder == "notebooks" and "# EXERCISE:" in cell.source:
                exercise_id = cell.source.split("# EXERCISE:", 1)[1].split()[0]
                cells[exercise_id] = cell.source
    return cells


def load_answer(source: str, name: str) -> Any:
    """Execute an exercise cell (it may use torch and nn) and return what it defines as ``name``."""
    namespace: Dict[str, Any] = {"torch": torch, "nn": torch.nn}
    exec(compile(source, f"<exercise cell {name}>", "exec"), namespace)  # noqa: S102 - our own notebook cell
    return namespace[name]

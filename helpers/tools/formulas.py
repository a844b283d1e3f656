"""Backward formulas this build of PyTorch does not have: a node that raises when a backward runs it.

A gradient penalty (``create_graph=True``) records the backward pass itself, so the penalty's own backward runs the
backward of each backward formula. Some have none: ``torch.cdist``'s backward (``_cdist_backward``) is not
differentiable, and the penalty's backward raises ``the derivative for '_cdist_backward' is not implemented``.
PyTorch lists such formulas as ``not_implemented(...)`` in its ``derivatives.yaml``, a copy of which every torch
wheel ships inside ``torchgen``; this module reads that copy (never imports ``torchgen``) and names each node class
after it as PyTorch's code generator does. Two more node classes always raise: ``Error`` (the outputs of a custom
Function's backward marked ``@once_differentiable``) and ``NotImplemented``.

A formula missing for one input raises only when that input's gradient is needed: an edge to a node the backward
runs, or to what it differentiates for. Where the table cannot be read or a node cannot be matched to one entry, the
answer is "cannot tell", never "will run".
"""
from __future__ import annotations

import importlib.util
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

_NOT_IMPLEMENTED = re.compile(r"""not_implemented(?:_list)?\(\s*"([^"]*)\"""")
_ALWAYS_RAISING = {
    "Error": "trying to differentiate twice a function that was marked with @once_differentiable",
    # An op with no formula at all: PyTorch's message names it ("derivative for aten::<op> is not implemented"),
    # but the node does not say which from Python.
    "NotImplemented": "derivative for aten::<an op this node does not name> is not implemented",
}


@dataclass(frozen=True)
class Formula:
    """One backward node class PyTorch generates, and which of its inputs have no formula.

    Attributes:
        node: the class name, e.g. ``CdistBackwardBackward0``.
        arguments: the inputs it passes gradients to, in the order of its ``next_functions``.
        missing: the inputs whose formula is ``not_implemented``, with the name PyTorch's message gives.
        lists: an input is a list of tensors, so edges cannot be matched to inputs by position.
    """

    node: str
    arguments: Tuple[str, ...]
    missing: Mapping[str, str]
    lists: bool


@dataclass(frozen=True)
class Missing:
    """A node on the way that raises when run: which one, and PyTorch's message."""

    node: Any
    message: str


def _table_path() -> Optional[Path]:
    spec = importlib.util.find_spec("torchgen")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "packaged" / "autograd" / "derivatives.yaml"
    return path if path.is_file() else None


def _prefix(name: str) -> str:
    """The class-name prefix PyTorch's generator gives an op (``_cdist_backward`` -> ``CdistBackwardBackward``)."""
    return ("".join(part.title() for part in name.split("_")) + "Backward").replace("ForwardBackward", "Backward")


def _signature(name: str) -> Tuple[str, List[Tuple[str, bool]]]:
    """The op's base name and its arguments as (name, is a list of tensors), from a schema string."""
    head, _, rest = name.partition("(")
    depth, end = 1, len(rest)
    for index, char in enumerate(rest):  # the argument list ends at the parenthesis that closes the first
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            end = index
            break
    parsed = []
    for argument in rest[:end].replace("*,", "").split(","):
        words = argument.split("=")[0].split()
        if len(words) >= 2:
            parsed.append((words[-1], "[]" in words[0] and "Tensor" in words[0]))
    return head.split(".")[0], parsed


def _formulas(entry: Mapping[str, Any], arguments: List[Tuple[str, bool]]
              ) -> Optional[Tuple[Tuple[str, ...], Dict[str, str], bool]]:
    """(inputs with a formula in edge order, those not implemented, any list input), or None when none has one."""
    names = {name for name, _ in arguments}
    differentiable: Set[str] = set()
    missing: Dict[str, str] = {}
    for key, formula in entry.items():
        keys = [k.strip() for k in str(key).split(",")]
        if not all(k in names for k in keys) or str(formula).strip().lower() == "non_differentiable":
            continue  # forward-mode formulas (keyed by outputs), non-differentiable inputs
        differentiable.update(keys)
        found = _NOT_IMPLEMENTED.search(str(formula))
        if found:
            missing.update({k: found.group(1) for k in keys})
    ordered = tuple(name for name, _ in arguments if name in differentiable)
    if not ordered:
        return None
    lists = any(is_list for name, is_list in arguments if name in differentiable)
    return ordered, missing, lists


@lru_cache(maxsize=1)
def table() -> Optional[Dict[str, Formula]]:
    """Every generated node class with an input that has no formula, by class name; None when unreadable."""
    path = _table_path()
    if path is None:
        return None
    try:
        import yaml  # PyYAML: torchgen reads this file with it too

        entries = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception:  # no PyYAML, or a file this reader does not understand: the caller says "cannot tell"
        return None
    counters: Counter = Counter()
    found: Dict[str, Formula] = {}
    for entry in entries:
        base, arguments = _signature(str(entry.get("name", "")))
        per_key = entry.get("dispatch") or {"Default": entry}
        for key, formulas in per_key.items():
            prefix = _prefix(base) + ("" if key == "Default" else key)
            read = _formulas({k: v for k, v in formulas.items()
                              if k not in ("name", "dispatch", "output_differentiability")}, arguments)
            if read is None:
                continue
            node = f"{prefix}{counters[prefix]}"
            counters[prefix] += 1
            ordered, missing, lists = read
            if missing:
                found[node] = Formula(node, ordered, missing, lists)
    return found


def _message(name: str) -> str:
    return f"the derivative for '{name}' is not implemented."


def on_the_way(running: Sequence[Any], targets: Sequence[Any], with_inputs: bool) -> Tuple[List[Missing], List[str]]:
    """The nodes among ``running`` that raise for want of a formula, and those the tool cannot judge (sentences).

    Args:
        running: the nodes the backward runs (``traversal.nodes_backward_runs``).
        targets: the nodes of what it differentiates for (``traversal.input_nodes``); only with ``with_inputs``.
        with_inputs: the call passes inputs, so only edges to running nodes or targets are needed.
    """
    needed = {id(node) for node in running} | {id(node) for node in targets}
    raising: List[Missing] = []
    unjudged: List[str] = []
    known = None
    for node in running:
        name = type(node).__name__
        if name in _ALWAYS_RAISING:
            raising.append(Missing(node, _ALWAYS_RAISING[name]))
            continue
        if "BackwardBackward" not in name and not name.endswith(("Backward0", "Backward1", "Backward2")):
            continue
        known = table() if known is None else known
        if known is None:
            if "BackwardBackward" in name:
                unjudged.append(f"{name}: the backward of a backward formula; this build's table of formulas "
                                "(torchgen's derivatives.yaml) could not be read, so whether it has one is not known.")
            continue
        formula = known.get(name)
        if formula is None:
            continue
        edges = list(getattr(node, "next_functions", ()))
        used = [i for i, (child, _) in enumerate(edges)
                if child is not None and (not with_inputs or id(child) in needed)]
        if formula.lists or len(edges) != len(formula.arguments):
            if used:
                unjudged.append(f"{name}: PyTorch has no formula for some of its inputs ("
                                f"{', '.join(sorted(formula.missing))}); which of its edges they are is not "
                                "visible here.")
            continue
        hit = [formula.arguments[i] for i in used if formula.arguments[i] in formula.missing]
        if hit:
            raising.append(Missing(node, _message(formula.missing[hit[0]])))
    return raising, unjudged

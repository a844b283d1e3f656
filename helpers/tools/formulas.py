"""Backward formulas this build of PyTorch does not have: a node that raises when a backward runs it.

A gradient penalty (``create_graph=True``) records the backward pass itself, so the penalty's own backward runs the
backward of each backward formula. Some have none: on torch 2.13, ``torch.cdist``'s backward (``_cdist_backward``)
is not differentiable, and a backward that reaches that node raises ``the derivative for '_cdist_backward' is not
implemented`` (torch 2.15 has that formula). PyTorch lists such formulas as ``not_implemented(...)`` in its
``derivatives.yaml``, a copy of which torch's wheels ship beside ``torch`` inside ``torchgen``; this module reads
that copy (never imports ``torchgen``), only when it sits beside the ``torch`` imported and names only classes this
build has, and names each node class after it as PyTorch's code generator does. Other nodes that always raise:
``Error`` (the outputs of a custom Function's backward marked ``@once_differentiable``, or of an operator whose
autograd is not implemented), ``NotImplemented``, and a custom Function that defines no ``backward`` (nor ``vjp``).

A formula missing for one input raises only when that input's gradient is needed: an edge to a node the backward
runs, or to what it differentiates for. Where the table cannot be read, the nodes of the ops known to lack one (as
of torch 2.13) and every backward of a backward are "cannot tell"; so is a node that cannot be matched to its
entry. Not visible at all: the op an in-place change of a view wraps (``CopySlices``); a note says so.
"""
from __future__ import annotations

import importlib.util
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from helpers.language import marked, tr

_NOT_IMPLEMENTED = re.compile(r"""not_implemented(?:_list)?\(\s*"([^"]*)\"""")
# The classes of torch 2.13's table: without a readable table these are "cannot tell", not "will run".
KNOWN_WITHOUT_FORMULA = frozenset((
    "AcoshBackward1", "AsinhBackward1", "AtanhBackward1", "BatchNormBackwardBackward0", "CdistBackwardBackward0",
    "ChunkBackward0", "CudnnBatchNormBackwardBackward0", "CudnnRnnBackwardBackward0", "EmbeddingBagBackwardBackward0",
    "EmbeddingBagDenseBackwardBackward0", "EmbeddingRenormBackward0", "GeqrfBackward0", "IgammaBackward0",
    "IgammacBackward0", "MiopenBatchNormBackwardBackward0", "NativeBatchNormBackwardBackward0",
    "NativeDropoutBackwardBackward0", "NativeLayerNormBackwardBackward0", "PdistBackwardBackward0",
    "SpecialZetaBackward0", "SpecialZetaBackward2", "StandardGammaGradBackward0", "Unique2Backward0",
    "UniqueBackward0", "UniqueConsecutiveBackward0", "UniqueDimBackward0", "UniqueDimConsecutiveBackward0"))
NO_BACKWARD_METHOD = "You must implement either the backward or vjp method for your custom autograd.Function"
_ALWAYS_RAISING = {
    # Its message is its own: "trying to differentiate twice a function that was marked with @once_differentiable",
    # or "Autograd not implemented for <op>" (torch._higher_order_ops); which one is not visible from Python.
    "Error": marked("the error this node was made with (a backward marked @once_differentiable, differentiated "
                    "again, or an operator whose autograd is not implemented)"),
    # An op with no formula at all: PyTorch's message names it ("derivative for aten::<op> is not implemented"),
    # but the node does not say which from Python.
    "NotImplemented": marked("'derivative for aten::<op> is not implemented' (the node does not say which op)"),
}


@dataclass(frozen=True)
class Formula:
    """One backward node class PyTorch generates, and which of its inputs have no formula.

    Attributes:
        node: the class name, e.g. ``CdistBackwardBackward0``.
        arguments: the inputs it passes gradients to, in the order of its ``next_functions``.
        missing: the inputs whose formula is ``not_implemented``, with the name PyTorch's message gives.
        lists: an input is a list of tensors, so edges cannot be matched to inputs by position.
        op: the op's name in derivatives.yaml (``_cdist_backward``, ``acosh_``).
    """

    node: str
    arguments: Tuple[str, ...]
    missing: Mapping[str, str]
    lists: bool
    op: str = ""


@dataclass(frozen=True)
class Missing:
    """A node on the way that raises when run: which one, and PyTorch's message."""

    node: Any
    message: str
    exact: bool = True  # PyTorch's own words; False where only what they say is known


def _table_path() -> Optional[Path]:
    """The yaml of the torchgen installed beside the ``torch`` imported (never another copy on ``sys.path``)."""
    import torch

    spec = importlib.util.find_spec("torchgen")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).resolve().parent
    if folder.parent != Path(torch.__file__).resolve().parent.parent:
        return None  # a torchgen of some other checkout or release: not this build's table
    path = folder / "packaged" / "autograd" / "derivatives.yaml"
    return path if path.is_file() else None


def _of_this_build(found: Mapping[str, Formula]) -> bool:
    """Every class the table names exists in this build (when the build lists its node classes)."""
    import torch

    classes = set(dir(getattr(torch._C, "_functions", None)))
    return not classes or all(name in classes for name in found)


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
                found[node] = Formula(node, ordered, missing, lists, base)
    return found if _of_this_build(found) else None


def _message(name: str) -> str:
    return f"the derivative for '{name}' is not implemented."


def _custom_without_backward(node: Any) -> bool:
    """A custom autograd.Function's node whose class defines neither ``backward`` nor ``vjp``."""
    import torch

    function = getattr(type(node), "_forward_cls", None)
    if not isinstance(function, type) or not issubclass(function, torch.autograd.Function):
        return False
    base = torch.autograd.Function
    return all(getattr(function, name, None) is getattr(base, name, None) for name in ("backward", "vjp"))


def in_place_without_formula() -> List[str]:
    """The in-place ops with a missing formula for ``self``: those the table lists (``acosh_``) and the in-place
    variants of the ops it lists (``igamma_``, which uses igamma's formula)."""
    import torch

    found = set()
    for formula in (table() or {}).values():
        if formula.op.endswith("_"):
            found.add(formula.op)
        elif "self" in formula.missing and hasattr(torch.Tensor, formula.op + "_"):
            found.add(formula.op + "_")
    return sorted(found)


def on_the_way(running: Sequence[Any], targets: Sequence[Any], with_inputs: bool
               ) -> Tuple[List[Missing], List[str], List[str]]:
    """The nodes among ``running`` that raise for want of a formula; those the tool cannot judge (sentences); and
    notes on what it cannot see at all (an in-place op on a view).

    Args:
        running: the nodes the backward runs (``traversal.nodes_backward_runs``).
        targets: the nodes of what it differentiates for (``traversal.input_nodes``); only with ``with_inputs``.
        with_inputs: the call passes inputs, so only edges to running nodes or targets are needed.
    """
    needed = {id(node) for node in running} | {id(node) for node in targets}
    raising: List[Missing] = []
    unjudged: List[str] = []
    notes: List[str] = []
    known = table()
    for node in running:
        name = type(node).__name__
        if name in _ALWAYS_RAISING:
            raising.append(Missing(node, _ALWAYS_RAISING[name], exact=False))
            continue
        if _custom_without_backward(node):
            raising.append(Missing(node, NO_BACKWARD_METHOD + " ..."))
            continue
        if name == "CopySlices" and not notes:
            in_place = in_place_without_formula() if known is not None else ["acosh_", "asinh_", "atanh_", "igamma_",
                                                                             "igammac_"]
            notes.append(tr("{node}: an in-place op on a view; which op it wraps is not visible from Python. If it "
                            "is one PyTorch has no formula for ({ops}), backward raises 'derivative for ... is not "
                            "implemented'.", node=name, ops=", ".join(in_place)))
        if known is None:
            if "BackwardBackward" in name or name in KNOWN_WITHOUT_FORMULA:
                unjudged.append(tr("{node}: this build's table of backward formulas (torchgen's derivatives.yaml, "
                                   "beside torch) could not be read, so whether it has a formula for it is not "
                                   "known.", node=name))
            continue
        formula = known.get(name)
        if formula is None:
            continue
        edges = list(getattr(node, "next_functions", ()))
        used = [i for i, (child, _) in enumerate(edges)
                if child is not None and (not with_inputs or id(child) in needed)]
        if formula.lists or len(edges) != len(formula.arguments):
            if used:
                unjudged.append(tr("{node}: PyTorch has no formula for some of its inputs ({inputs}); which of its "
                                   "edges they are is not visible here.", node=name,
                                   inputs=", ".join(sorted(formula.missing))))
            continue
        hit = [formula.arguments[i] for i in used if formula.arguments[i] in formula.missing]
        if hit:
            raising.append(Missing(node, _message(formula.missing[hit[0]])))
    return raising, unjudged, notes

"""Which module call each autograd node belongs to, read from the graph alone (no hooks, no second forward).

The rule, for boxes named after the first ``depth`` parts of the parameter names (``G.main.3.weight`` at depth 2
is ``G.main``):

1. A node that reads a parameter (its ``AccumulateGrad`` leaf is one of its inputs) belongs to that module.
2. Another node belongs to module M when it lies between nodes of M: M feeds it and it feeds M (through nodes
   that belong to no module), or M feeds it and it feeds a child of M (``A`` feeds it, it feeds ``A.out_proj``).
   An activation, norm or reshape (``Relu``, ``Tanh``, ``View``, ...) fed by M alone, or a residual ``x + f(x)``
   (f in M, x feeding M too), belongs to M: it is drawn with the layer before it. A pad or a reshape that feeds
   one node of M alone belongs to M.
3. The nodes of one module that are connected make one call: a GAN's D run on real and on fake images gives two
   calls, two boxes.
4. The rest (``torch.cat``, ``+`` in a forward, the losses) are ops: an op that feeds only one other op shares
   its box, so a box is a run of ops, named after the output it ends in (``d_loss``) or else after its ops.
5. A reentrant checkpoint's or a compiled region's node (``helpers.tools.regions``) is a box of its own, named
   after the region's kind, whatever parameters it reads; a box holding nodes of a non-reentrant checkpoint lists
   that kind in ``regions``.

Limits: a module fed its own output straight back (an unrolled RNN cell) shows its calls as one box, and one
whose parameters are read by unconnected nodes (two inputs through two separate layers) as several; a module
without parameters (``nn.ReLU()``) has no box of its own; a residual add after an in-place activation can show as
an op box of its own; the layers of parameters not passed join the op boxes; models passed as a list have
clashing names (``main.0.weight#2``) and share boxes: pass them by name, ``{"G": netG, "D": netD}``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

import torch
from torch import nn

from helpers.tools.regions import NON_REENTRANT_CHECKPOINT, opaque_region
from helpers.tools.traversal import Node, children, graph_nodes, post_order

# Parameterless ops that a layer's forward often ends with: fed by one module alone, they join its box.
ATTACHED_OPS = frozenset({
    "Relu", "LeakyRelu", "Tanh", "Sigmoid", "Silu", "Gelu", "Elu", "Softplus", "Hardtanh", "Hardswish", "Mish",
    "Softmax", "LogSoftmax", "View", "Reshape", "UnsafeView", "Unsqueeze", "Squeeze", "Permute", "Transpose",
    "ReshapeAlias", "Select", "Slice", "Clone", "Expand", "Alias", "AsStrided", "T", "CopySlices",
    "NativeBatchNorm", "NativeGroupNorm", "NativeLayerNorm",  # a norm without affine parameters (InstanceNorm2d)
})
MAX_BOXES = 40
RESIDUAL_OPS = frozenset({"Add", "Mul"})  # x + f(x), x * gate(x)
# Parameterless ops that often start a layer's forward: feeding one node of a module, they join its box.
LEADING_OPS = ATTACHED_OPS | {"ReflectionPad1D", "ReflectionPad2D", "ReplicationPad2D", "ConstantPadNd"}


@dataclass
class Box:
    """One box of the module view: a module call, a run of ops, or a leaf that is no parameter."""

    key: str
    kind: str  # "module", "ops", "input" or "region" (a reentrant checkpoint's or a compiled region's node)
    name: str  # the module's qualified name, the outputs it ends in, the ops' names, or the region's kind
    nodes: List[Node] = field(default_factory=list)
    call: int = 1
    calls: int = 1
    outputs: List[str] = field(default_factory=list)
    ops: str = ""  # its ops' names, e.g. ``BinaryCrossEntropy x2, Add``
    regions: List[str] = field(default_factory=list)  # the opaque regions its nodes belong to
    reads: List[str] = field(default_factory=list)  # a region box: the modules whose parameters it reads


@dataclass
class ModuleCalls:
    """The module view of a graph: its boxes, the edges between them (forward direction), and each node's box."""

    boxes: List[Box]
    edges: List[Tuple[str, str]]
    box_of: Dict[int, str]
    depth: int
    node_count: int
    nodes: List[Node] = field(repr=False, default_factory=list)  # held so that node ids stay valid


def op_name(node: Node) -> str:
    """``ReluBackward0`` -> ``Relu``."""
    return re.sub(r"Backward\d*$", "", type(node).__name__)


def module_of(parameter_name: str, depth: int) -> str:
    """``G.main.3.weight`` at depth 2 -> ``G.main``; a bare name (``w``) is its own module."""
    parts = parameter_name.split(".")[:-1] or parameter_name.split(".")
    return ".".join(parts[:max(depth, 1)])


def deepest_depth(param_names: Mapping[int, str]) -> int:
    """The most parts a module name has among these parameters (1 when there are none)."""
    return max((len(module_of(name, 10_000).split(".")) for name in param_names.values()), default=1)


def _union_find(keys: List[int], pairs: List[Tuple[int, int]]) -> Dict[int, int]:
    parent = {key: key for key in keys}

    def root(key: int) -> int:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for a, b in pairs:
        parent[root(a)] = root(b)
    return {key: root(key) for key in keys}


def _parameter_of(node: Node, param_names: Mapping[int, str]) -> Optional[str]:
    variable = getattr(node, "variable", None)
    return param_names.get(id(variable)) if variable is not None else None


def _label_nodes(order: List[Node], param_names: Mapping[int, str], depth: int,
                 sealed: Set[int]) -> Dict[int, Optional[str]]:
    """Each node's module name (rules 1 and 2 of the module docstring), or None; None for the ``sealed`` nodes
    (reentrant checkpoint and compiled nodes, rule 5)."""
    inputs_of = {id(node): [c for c in children(node) if _parameter_of(c, param_names) is None] for node in order}
    consumers_of: Dict[int, List[Node]] = {id(node): [] for node in order}
    for node in order:
        for child in inputs_of[id(node)]:
            consumers_of[id(child)].append(node)
    anchors: Dict[int, str] = {}
    for node in order:
        owned = [name for child in children(node) if (name := _parameter_of(child, param_names))]
        if owned and id(node) not in sealed:
            anchors[id(node)] = module_of(owned[0], depth)
    feeds: Dict[int, Set[str]] = {id(node): set() for node in order}  # the modules a node feeds, nearest first
    for node in reversed(order):
        passed = {anchors[id(node)]} if id(node) in anchors else feeds[id(node)]
        for child in inputs_of[id(node)]:
            feeds[id(child)] |= passed
    labels: Dict[int, Optional[str]] = {}
    fed_by: Dict[int, Set[str]] = {}  # the modules that feed a node, nearest first
    for node in order:
        inputs = inputs_of[id(node)]
        fed_by[id(node)] = set().union(*[{labels[id(c)]} if labels[id(c)] else fed_by[id(c)] for c in inputs])
        direct = {labels[id(c)] for c in inputs if labels[id(c)]}
        between = sorted(_enclosing(fed_by[id(node)], feeds[id(node)]))
        if id(node) in sealed:
            labels[id(node)] = None
        elif id(node) in anchors:
            labels[id(node)] = anchors[id(node)]
        elif between:
            labels[id(node)] = between[0]
        elif len(direct) == 1 and _ends_module(node, inputs, direct, labels, consumers_of):
            labels[id(node)] = next(iter(direct))
        else:
            labels[id(node)] = None
        if labels[id(node)]:
            fed_by[id(node)] = {labels[id(node)]}
    for node in reversed(order):  # a pad or a reshape that feeds one node, of a module: drawn in it
        consumers = consumers_of[id(node)]
        if labels[id(node)] is None and op_name(node) in LEADING_OPS and len(consumers) == 1 \
                and id(consumers[0]) not in sealed:
            labels[id(node)] = labels[id(consumers[0])]
    return labels


def _enclosing(before: Set[str], after: Set[str]) -> Set[str]:
    """The modules that hold a node fed by ``before`` and feeding ``after``: one in both, or one that holds the
    other as a direct child (``A`` feeds it and it feeds ``A.out_proj``, or the reverse: the node is in ``A``)."""
    def parent_of(outer: str, inner: str) -> bool:
        return inner.startswith(outer + ".") and inner.count(".") == outer.count(".") + 1

    return {a if len(a) <= len(b) else b for a in before for b in after if a == b or parent_of(a, b) or parent_of(b, a)}


def _ends_module(node: Node, inputs: List[Node], direct: Set[Optional[str]], labels: Mapping[int, Optional[str]],
                 consumers_of: Mapping[int, List[Node]]) -> bool:
    """An op after module M that ends M's forward: an activation or reshape of M's output, or a residual
    ``x + f(x)``, whose other inputs also feed M."""
    if op_name(node) in ATTACHED_OPS:
        return all(labels[id(c)] for c in inputs)
    if op_name(node) not in RESIDUAL_OPS:
        return False
    def feeds_module(tensor_node: Node) -> bool:  # directly, or through one pad or reshape
        users = consumers_of[id(tensor_node)]
        return any(labels.get(id(user)) in direct or (op_name(user) in LEADING_OPS and len(consumers_of[id(user)]) == 1
                                                        and labels.get(id(consumers_of[id(user)][0])) in direct)
                   for user in users)

    return all(labels[id(c)] in direct or feeds_module(c) for c in inputs)


def _ops_name(nodes: List[Node]) -> str:
    counts: Dict[str, int] = {}
    for node in nodes:
        counts[op_name(node)] = counts.get(op_name(node), 0) + 1
    names = [name if count == 1 else f"{name} x{count}" for name, count in counts.items()]
    return ", ".join(names[:3]) + (f", +{len(names) - 3} more" if len(names) > 3 else "")


def module_calls(outputs: Mapping[str, torch.Tensor], param_names: Mapping[int, str],
                 depth: Optional[int] = None, _kinds: Optional[Dict[int, str]] = None) -> ModuleCalls:
    """Group the graph behind ``outputs`` into module calls and op runs (the rule in this module's docstring).

    Args:
        outputs: the graph's outputs by name, e.g. ``{"d_loss": d_loss, "g_loss": g_loss}``.
        param_names: ``id(parameter)`` -> its qualified name, e.g. ``G.main.3.weight``.
        depth: how many parts of a parameter's name name its box; None: the deepest with at most MAX_BOXES boxes.
    """
    if depth is None:  # the deepest that still fits a screen's worth of boxes
        every = graph_nodes(list(outputs.values()))
        kinds = {id(node): kind for node in every if (kind := opaque_region(node)) is not None}
        for depth in range(deepest_depth(param_names), 0, -1):
            calls = module_calls(outputs, param_names, depth, kinds)
            if len(calls.boxes) <= MAX_BOXES or depth == 1:
                return calls
    depth = max(int(depth), 1)
    nodes = graph_nodes(list(outputs.values()))
    order = post_order(nodes)  # inputs before the nodes they feed
    position = {id(node): index for index, node in enumerate(order)}
    drawn = [node for node in order if _parameter_of(node, param_names) is None]
    inputs_of = {id(node): [c for c in children(node) if _parameter_of(c, param_names) is None] for node in drawn}
    kinds = _kinds if _kinds is not None else {
        id(node): kind for node in drawn if (kind := opaque_region(node)) is not None}
    sealed = {key for key, kind in kinds.items() if kind != NON_REENTRANT_CHECKPOINT}
    labels = _label_nodes(order, param_names, depth, sealed)
    fed: Dict[int, int] = {}  # how many nodes each node feeds
    for node in drawn:
        for child in inputs_of[id(node)]:
            fed[id(child)] = fed.get(id(child), 0) + 1
    same_box = [(id(node), id(child)) for node in drawn for child in inputs_of[id(node)]
                if labels[id(child)] == labels[id(node)] and getattr(child, "variable", None) is None
                and id(node) not in sealed and id(child) not in sealed
                and (labels[id(node)] is not None or fed[id(child)] == 1)]  # ops: chains only, so no box loops
    roots = _union_find([id(node) for node in drawn], same_box)
    members: Dict[int, List[Node]] = {}
    for node in drawn:
        members.setdefault(roots[id(node)], []).append(node)
    output_names: Dict[int, List[str]] = {}
    for name, tensor in outputs.items():
        if tensor.grad_fn is not None:
            output_names.setdefault(id(tensor.grad_fn), []).append(name)
    boxes: List[Box] = []
    for group in sorted(members.values(), key=lambda group: position[id(group[0])]):
        label, key = labels[id(group[0])], f"box{len(boxes)}"
        ends_in = [name for node in group for name in output_names.get(id(node), [])]
        if id(group[0]) in sealed:
            reads = sorted({module_of(name, depth) for child in children(group[0])
                            if (name := _parameter_of(child, param_names))})
            boxes.append(Box(key, "region", kinds[id(group[0])], group, outputs=ends_in, reads=reads))
        elif label is not None:
            boxes.append(Box(key, "module", label, group, outputs=ends_in))
        elif getattr(group[0], "variable", None) is not None:
            boxes.append(Box(key, "input", f"leaf {list(group[0].variable.shape)}", group))
        else:
            ops = _ops_name(group)
            boxes.append(Box(key, "ops", ", ".join(ends_in) or ops, group, outputs=ends_in, ops=ops))
    for box in boxes:
        box.regions = sorted({kinds[id(node)] for node in box.nodes if id(node) in kinds})
    _number_calls(boxes)
    box_of = {id(node): box.key for box in boxes for node in box.nodes}
    edges: Dict[Tuple[str, str], None] = {}  # a dict keeps the order edges were found in
    for node in drawn:
        for child in inputs_of[id(node)]:
            if box_of[id(child)] != box_of[id(node)]:
                edges[(box_of[id(child)], box_of[id(node)])] = None
    return ModuleCalls(boxes, list(edges), box_of, depth, len(nodes), nodes)


def _number_calls(boxes: List[Box]) -> None:
    by_module: Dict[str, List[Box]] = {}
    for box in boxes:
        if box.kind == "module":
            by_module.setdefault(box.name, []).append(box)
    for calls in by_module.values():
        for number, box in enumerate(calls, 1):
            box.call, box.calls = number, len(calls)


def module_types(params: Any, prefix: str = "") -> Dict[str, str]:
    """``{"G.main.3": "ConvTranspose2d", ...}`` from a module or modules by name (``{"G": netG}``); else empty."""
    if isinstance(params, nn.Module):
        return {(prefix + name).rstrip(".") or type(params).__name__: type(module).__name__
                for name, module in params.named_modules()}
    if isinstance(params, Mapping):
        found: Dict[str, str] = {}
        for key, value in params.items():
            if isinstance(value, (nn.Module, Mapping)):
                found.update(module_types(value, f"{prefix}{key}."))
        return found
    return {}

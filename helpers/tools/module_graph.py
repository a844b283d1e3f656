"""Drawing the module view (one box per module call) and the inside of one module, as graphviz source and text.

Which node goes in which box is decided in ``module_calls.py``; this module only draws. Every text is at least
``MIN_FONT_PT`` points at the picture's natural size (no graph ``size``: graphviz never shrinks it).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from helpers.tools.module_calls import Box, ModuleCalls

MIN_FONT_PT = 9
FONT = dict(fontname="monospace", fontsize="10")
MODEL_FILLS = ("#e8f1fb", "#eaf5e4", "#fbeee0", "#f3e8f7", "#fdf6d8")
OPS_STYLE = dict(shape="box", style="filled", fillcolor="#eeeeee", color="#777777", **FONT)
OUTPUT_FILL = "darkolivegreen1"
PARAMETER_FILL = "lightblue"
GRAPH_STYLE = dict(ranksep="0.3", nodesep="0.25", labelloc="t", labeljust="l", fontsize="10", fontname="monospace")


def box_title(box: Box, types: Mapping[str, str]) -> str:
    """``G.main.3 (ConvTranspose2d), call 2 of 3``; an op run's names; ``leaf [3, 4]``."""
    if box.kind != "module":
        return box.name
    title = f"{box.name} ({types[box.name]})" if box.name in types else box.name
    return title + (f", call {box.call} of {box.calls}" if box.calls > 1 else "")


def module_text(calls: ModuleCalls, types: Mapping[str, str]) -> str:
    """The module view as numbered lines: each box and the boxes that feed it."""
    numbers = {box.key: index for index, box in enumerate(calls.boxes, 1)}
    fed_by: Dict[str, List[str]] = {box.key: [] for box in calls.boxes}
    for source, target in calls.edges:
        fed_by[target].append(f"[{numbers[source]}]")
    lines = []
    for box in calls.boxes:
        ends = f"  (output {', '.join(box.outputs)})" if box.outputs and box.kind == "module" else ""
        feeds = f"  <- {', '.join(fed_by[box.key])}" if fed_by[box.key] else ""
        lines.append(f"[{numbers[box.key]}] {box_title(box, types)}, {len(box.nodes)} node(s){ends}{feeds}")
    return "\n".join(lines) if lines else "(no graph: these tensors have no grad_fn)"


def _fill(name: str, models: List[str]) -> str:
    model = name.split(".")[0]
    if model not in models:
        models.append(model)
    return MODEL_FILLS[models.index(model) % len(MODEL_FILLS)]


def module_digraph(calls: ModuleCalls, types: Mapping[str, str], title: Optional[str] = None) -> Any:
    """The module view as a ``graphviz.Digraph``: module calls as rounded boxes, op runs grey, outputs green."""
    import graphviz

    digraph = graphviz.Digraph(graph_attr=dict(GRAPH_STYLE, label=title or ""), node_attr=FONT, edge_attr=FONT)
    models: List[str] = []
    for box in calls.boxes:
        label = box_title(box, types).replace(" (", "\n(", 1).replace(", call", "\ncall", 1)
        if box.kind == "module":
            digraph.node(box.key, f"{label}\n{len(box.nodes)} autograd nodes", shape="box", style="rounded,filled",
                         fillcolor=_fill(box.name, models), fontsize="11")
            for output in box.outputs:
                digraph.node(f"{box.key}_{output}", output, shape="box", style="filled", fillcolor=OUTPUT_FILL)
                digraph.edge(box.key, f"{box.key}_{output}")
        elif box.kind == "input":
            digraph.node(box.key, label, shape="box", style="filled", fillcolor=PARAMETER_FILL)
        else:
            ops = f"\n({box.ops})" if box.ops != box.name else ""
            digraph.node(box.key, label + ops, **dict(OPS_STYLE, fillcolor=OUTPUT_FILL if box.outputs else "#eeeeee"))
    for source, target in calls.edges:
        digraph.edge(source, target)
    return digraph


def inside_digraph(calls: ModuleCalls, module: str, param_names: Mapping[int, str], title: str) -> Any:
    """Every autograd node of ``module``'s calls (one cluster per call), its parameters, and the boxes around it."""
    import graphviz

    digraph = graphviz.Digraph(graph_attr=dict(GRAPH_STYLE, label=title), node_attr=dict(FONT, shape="box"),
                               edge_attr=FONT)
    inside = [box for box in calls.boxes if box.name == module and box.kind == "module"]
    members = {id(node) for box in inside for node in box.nodes}
    titles = {box.key: box_title(box, {}) for box in calls.boxes}
    for box in inside:
        with digraph.subgraph(name=f"cluster_{box.key}") as cluster:
            cluster.attr(label=f"{module}, call {box.call} of {box.calls}", style="rounded,filled",
                         fillcolor=MODEL_FILLS[0], color="#555555")
            for node in box.nodes:
                cluster.node(str(id(node)), type(node).__name__, style="filled", fillcolor="lightgrey")
    for box in inside:
        for node in box.nodes:
            for child, _ in getattr(node, "next_functions", ()):
                if child is None:
                    continue
                variable = getattr(child, "variable", None)
                if id(child) in members:
                    digraph.edge(str(id(child)), str(id(node)))
                elif variable is not None and id(variable) in param_names:
                    digraph.node(str(id(child)), f"{param_names[id(variable)]}\n{list(variable.shape)}",
                                 style="filled", fillcolor=PARAMETER_FILL)
                    digraph.edge(str(id(child)), str(id(node)))
                elif id(child) in calls.box_of:
                    source = calls.box_of[id(child)]
                    digraph.node(f"from_{source}", f"from {titles[source]}", style="dashed")  # once per box
                    digraph.edge(f"from_{source}", str(id(node)), style="dashed")
    for box in calls.boxes:
        if box.name == module and box.kind == "module":
            continue
        for node in box.nodes:
            for child, _ in getattr(node, "next_functions", ()):
                if child is not None and id(child) in members:
                    digraph.node(f"to_{box.key}", f"to {box_title(box, {})}", style="dashed")
                    digraph.edge(str(id(child)), f"to_{box.key}", style="dashed")
    return digraph

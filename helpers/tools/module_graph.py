"""Drawing the module view (one box per module call) and the inside of one module, as graphviz source and text;
and the opaque regions every drawing shows as one labelled box.

Which node goes in which box is decided in ``module_calls.py``; this module only draws. Every text is at least
``MIN_FONT_PT`` points at the picture's natural size (no graph ``size``: graphviz never shrinks it).

Opaque regions (``helpers.tools.regions.opaque_region``, read without unpacking anything): a
``CheckpointFunctionBackward`` or ``CompiledFunctionBackward`` node is a box of its own; the nodes of a
non-reentrant checkpoint (ordinary nodes whose saved tensors the checkpoint packs) that are connected to each other
make one box. A node of such a block that saved nothing (``TBackward0`` of a weight) cannot be told from a node
outside it, and is drawn outside; once a backward freed the block's saved tensors, their hooks are gone and its
nodes are drawn as ordinary nodes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from helpers.language import marked, space, translated, translated_if
from helpers.tools.arguments import ToolsName
from helpers.tools.module_calls import Box, ModuleCalls
from helpers.tools.regions import (
    COMPILED,
    NON_REENTRANT_CHECKPOINT,
    REENTRANT_CHECKPOINT,
    opaque_region,
    regions_on_the_way,
)
from helpers.tools.traversal import children

# What the tools know about each kind of region, said in the box under its kind (in the learner's language where the
# picture can draw it; the text forms of draw_graph and draw_saved_graph translate it, the module view's stays English).
REGION_NOTES = {
    REENTRANT_CHECKPOINT: marked("recomputed in the backward;\nthe nodes and parameters inside are not in this graph"),
    NON_REENTRANT_CHECKPOINT: marked(
        "recomputed in the backward;\nits saved tensors are not read (reading recomputes)"),
    COMPILED: marked("one compiled node;\nwhat it saved is inside the compiled graph"),
}
REGION_STYLE = dict(shape="box", style="filled,rounded,bold,dashed", color="#b35900", fillcolor="#ffe6cc",
                    fontname="monospace", fontsize="10")


@dataclass
class RegionBox:
    """One opaque region: its key in a drawing, its kind (a label of ``regions``) and its nodes."""

    key: str
    kind: str
    nodes: List[Any] = field(default_factory=list)

    def label(self, translate: bool = False) -> str:
        """``checkpoint (use_reentrant=False)`` / what the tools know / the nodes it holds; ``translate``: in the
        learner's language."""
        counts: Dict[str, int] = {}
        for node in self.nodes:
            counts[type(node).__name__] = counts.get(type(node).__name__, 0) + 1
        names = [name if count == 1 else f"{name} x{count}" for name, count in counts.items()]
        held = ", ".join(names[:3])
        if len(names) > 3:
            held = translated_if(translate, marked("{names}, +{count} more"), names=held, count=len(names) - 3)
        nodes = translated_if(translate, marked("{count} autograd node(s): {names}"), count=len(self.nodes),
                              names=held)
        return f"{region_kind(self.kind, translate)}\n{_note(self.kind, translate)}\n{nodes}"


def region_boxes(nodes: Sequence[Any]) -> Dict[int, RegionBox]:
    """``id(node)`` -> the region box it is drawn in, for every opaque node among ``nodes`` (a whole graph)."""
    kinds = {id(node): kind for node in nodes if (kind := opaque_region(node)) is not None}
    parent = {key: key for key in kinds}

    def root(key: int) -> int:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for node in nodes:
        if kinds.get(id(node)) != NON_REENTRANT_CHECKPOINT:
            continue
        for child in children(node):
            if kinds.get(id(child)) == NON_REENTRANT_CHECKPOINT:
                parent[root(id(child))] = root(id(node))
    for region in regions_on_the_way(nodes):  # one block's packed nodes, joined through nodes that save nothing
        members = [id(member) for member in region.nodes if id(member) in kinds]  # (a skip connection's add)
        for key in members[1:]:
            parent[root(key)] = root(members[0])
    boxes: Dict[int, RegionBox] = {}
    found: Dict[int, RegionBox] = {}
    for node in nodes:
        if id(node) not in kinds:
            continue
        top = root(id(node))
        if top not in boxes:
            boxes[top] = RegionBox(f"region{len(boxes)}", kinds[id(node)])
        boxes[top].nodes.append(node)
        found[id(node)] = boxes[top]
    return found


# A box's extra lines (e.g. its saved tensors' states) and graphviz attributes that override its style; its second
# argument: True for the learner's language (a picture that can draw it), False for English (the module view's text).
Annotate = Callable[[Box, bool], Tuple[List[str], Dict[str, str]]]

MIN_FONT_PT = 9
FONT = dict(fontname="monospace", fontsize="10")
MODEL_FILLS = ("#e8f1fb", "#eaf5e4", "#fbeee0", "#f3e8f7", "#fdf6d8")
OPS_STYLE = dict(shape="box", style="filled", fillcolor="#eeeeee", color="#777777", **FONT)
OUTPUT_FILL = "darkolivegreen1"
PARAMETER_FILL = "lightblue"
GRAPH_STYLE = dict(ranksep="0.3", nodesep="0.25", labelloc="t", labeljust="l", fontsize="10", fontname="monospace")


def _note(kind: str, translate: bool) -> str:
    return translated_if(translate, REGION_NOTES[kind])


def region_kind(kind: str, translate: bool = False) -> str:
    """A region's kind as a picture or text form shows it (``torch.compile region``; the checkpoints' are code)."""
    return translated_if(translate, kind)


def region_line(kind: str, translate: bool = False) -> str:
    """``kind: what the tools know about it`` on one line; ``translate``: in the learner's language."""
    note = _note(kind, translate).replace("\n", space() if translate else " ")
    return translated_if(translate, marked("{kind}: {note}"), kind=region_kind(kind, translate), note=note)


def output_label(name: str, translate: bool = False) -> str:
    """An output's name as a picture draws it: a name the tools gave (``output``, ``output 2``: a ``ToolsName``) in
    the learner's language when ``translate``; a name the learner gave as written."""
    if not translate or not isinstance(name, ToolsName):
        return name
    numbered = re.fullmatch(r"output (\d+)", name)
    if numbered:
        return translated(marked("output {number}"), number=numbered.group(1))
    return translated(marked("output")) if name == "output" else name


def _call_line(box: Box, translate: bool) -> str:
    return translated_if(translate, marked("call {call} of {calls}"), call=box.call, calls=box.calls)


def box_title(box: Box, types: Mapping[str, str], translate: bool = False) -> str:
    """``G.main.3 (ConvTranspose2d), call 2 of 3``; an op run's names; ``leaf [3, 4]``; a region's kind.
    ``translate``: in the learner's language (a picture that can draw it), else English (the module view's text)."""
    if box.kind == "region":
        return region_line(box.name, translate)
    if box.kind == "input" and translate:  # "leaf [3, 4]"
        return translated(marked("leaf {shape}"), shape=list(box.nodes[0].variable.shape))
    if box.kind != "module":  # a run of ops: named after the outputs it makes, if any
        return ", ".join(output_label(output, translate) for output in box.outputs) if box.outputs else box.name
    title = f"{box.name} ({types[box.name]})" if box.name in types else box.name
    if box.calls <= 1:
        return title
    return translated_if(translate, marked("{module}, call {call} of {calls}"), module=title, call=box.call,
                         calls=box.calls)


def _region_lines(box: Box, translate: bool = False) -> List[str]:
    """What a box says about the opaque regions in it: the parameters a region node reads, a checkpoint's nodes.
    ``translate``: in the learner's language."""
    if box.kind == "region":
        if not box.reads:
            return []
        return [translated_if(translate, marked("reads the parameters of {modules}"), modules=", ".join(box.reads))]
    return [region_line(kind, translate) for kind in box.regions]


def module_text(calls: ModuleCalls, types: Mapping[str, str], annotate: Optional[Annotate] = None) -> str:
    """The module view as numbered lines: each box and the boxes that feed it. In English, like the picture: the
    notebooks read these lines."""
    numbers = {box.key: index for index, box in enumerate(calls.boxes, 1)}
    fed_by: Dict[str, List[str]] = {box.key: [] for box in calls.boxes}
    for source, target in calls.edges:
        fed_by[target].append(f"[{numbers[source]}]")
    lines = []
    for box in calls.boxes:
        ends = f"  (output {', '.join(box.outputs)})" if box.outputs and box.kind == "module" else ""
        feeds = f"  <- {', '.join(fed_by[box.key])}" if fed_by[box.key] else ""
        title = f"{box_title(box, types)}, {len(box.nodes)} node(s)"
        lines.append(f"[{numbers[box.key]}] {title}{ends}{feeds}")
        extra = _region_lines(box) + (annotate(box, False)[0] if annotate is not None else [])
        lines += [f"      {line}" for line in extra]
    return "\n".join(lines) if lines else tr("(no graph: these tensors have no grad_fn)")


def _fill(name: str, models: List[str]) -> str:
    model = name.split(".")[0]
    if model not in models:
        models.append(model)
    return MODEL_FILLS[models.index(model) % len(MODEL_FILLS)]


def _module_label(box: Box, types: Mapping[str, str], translate: bool) -> str:
    """A module call's box: its name, its type, which call it is."""
    lines = [box.name] + ([f"({types[box.name]})"] if box.name in types else [])
    lines += [_call_line(box, translate)] if box.calls > 1 else []
    lines.append(translated_if(translate, marked("{count} autograd nodes"), count=len(box.nodes)))
    return "\n".join(lines)


def module_digraph(calls: ModuleCalls, types: Mapping[str, str], title: Optional[str] = None,
                   annotate: Optional[Annotate] = None, translate: bool = False) -> Any:
    """The module view as a ``graphviz.Digraph``: module calls as rounded boxes, op runs grey, outputs green,
    opaque regions (checkpointed, compiled) orange and dashed; ``annotate`` adds lines and style to a box;
    ``translate``: its words in the learner's language."""
    import graphviz

    digraph = graphviz.Digraph(graph_attr=dict(GRAPH_STYLE, label=title or ""), node_attr=FONT, edge_attr=FONT)
    models: List[str] = []
    for box in calls.boxes:
        extra, style = annotate(box, translate) if annotate is not None else ([], {})
        lines = "".join(f"\n{line}" for line in _region_lines(box, translate) + extra)
        dashed = dict(style="filled,bold,dashed", color=REGION_STYLE["color"]) if box.regions else {}
        if box.kind == "region":
            count = translated_if(translate, marked("{count} autograd node(s)"), count=len(box.nodes))
            label = f"{region_kind(box.name, translate)}\n{_note(box.name, translate)}\n{count}{lines}"
            digraph.node(box.key, label, **{**REGION_STYLE, **style})
        elif box.kind == "module":
            base = dict(shape="box", style="rounded,filled", fillcolor=_fill(box.name, models), fontsize="11")
            dashed = dict(dashed, style="rounded,filled,bold,dashed") if dashed else {}
            digraph.node(box.key, _module_label(box, types, translate) + lines, **{**base, **dashed, **style})
        elif box.kind == "input":
            digraph.node(box.key, box_title(box, types, translate) + lines,
                         **{"shape": "box", "style": "filled", "fillcolor": PARAMETER_FILL, **style})
        else:
            ops = f"\n({box.ops})" if box.ops != box.name else ""
            fill = OUTPUT_FILL if box.outputs else "#eeeeee"
            digraph.node(box.key, box_title(box, types, translate) + ops + lines,
                         **{**OPS_STYLE, "fillcolor": fill, **dashed, **style})
        if box.kind in ("module", "region"):
            for output in box.outputs:
                digraph.node(f"{box.key}_{output}", output_label(output, translate), shape="box", style="filled",
                             fillcolor=OUTPUT_FILL)
                digraph.edge(box.key, f"{box.key}_{output}")
    for source, target in calls.edges:
        digraph.edge(source, target)
    return digraph


def inside_digraph(calls: ModuleCalls, module: str, param_names: Mapping[int, str], title: str,
                   translate: bool = False) -> Any:
    """Every autograd node of ``module``'s calls (one cluster per call), its parameters, and the boxes around it;
    ``translate``: its words in the learner's language."""
    import graphviz

    digraph = graphviz.Digraph(graph_attr=dict(GRAPH_STYLE, label=title), node_attr=dict(FONT, shape="box"),
                               edge_attr=FONT)
    inside = [box for box in calls.boxes if box.name == module and box.kind == "module"]
    members = {id(node) for box in inside for node in box.nodes}
    titles = {box.key: box_title(box, {}, translate) for box in calls.boxes}
    for box in inside:
        with digraph.subgraph(name=f"cluster_{box.key}") as cluster:
            label = translated_if(translate, marked("{module}, call {call} of {calls}"), module=module, call=box.call,
                                  calls=box.calls)
            cluster.attr(label=label, style="rounded,filled",
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
                    digraph.node(f"from_{source}", translated_if(translate, marked("from {box}"), box=titles[source]),
                                 style="dashed")  # once per box
                    digraph.edge(f"from_{source}", str(id(node)), style="dashed")
    for box in calls.boxes:
        if box.name == module and box.kind == "module":
            continue
        for node in box.nodes:
            for child, _ in getattr(node, "next_functions", ()):
                if child is not None and id(child) in members:
                    digraph.node(f"to_{box.key}", translated_if(translate, marked("to {box}"), box=titles[box.key]),
                                 style="dashed")
                    digraph.edge(str(id(child)), f"to_{box.key}", style="dashed")
    return digraph

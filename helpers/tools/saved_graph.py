"""Drawing a graph with the state of every saved tensor: alive, freed, or stale.

``torchviz.make_dot(show_saved=True)`` raises on a graph whose buffers were freed; this drawing keeps
torchviz's look (boxes in monospace, blue parameters, green outputs) and marks each saved tensor instead.
Nodes are colored by the model and the loss they belong to, and the three states differ by line style
and label too, so the picture reads without color and in print. A big graph is drawn as the module view, each box
with its saved tensors counted by state; a checkpointed or compiled region is one box whose saved tensors are not
read (reading a non-reentrant checkpoint's would recompute the block).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import torch

from helpers.language import comma, marked, tr, translated, translated_if
from helpers.tools.arguments import read_outputs, read_parameters
from helpers.tools.graph import (
    FULL_DRAWING_MAX_NODES,
    INSTALL_GRAPHVIZ,
    GraphPicture,
    _draw_modules,
    _missing_graphviz,
    _undrawable,
    both,
    dot_available,
    draw_saved_graph_mistake,
    graph_as_text,
)
from helpers.tools.module_calls import Box
from helpers.tools.module_graph import REGION_STYLE, output_label, region_boxes
from helpers.tools.picture_language import PictureWords, picture_words
from helpers.tools.regions import opaque_region
from helpers.tools.saved import SavedTensor, State, _saved_tensors_of, graph_nodes, model_of_nodes

# Each model is a labelled box (a cluster), so models read without color; each node's fill says which losses reach it.
MODEL_TINTS = ("#e8f1fb", "#eaf5e4", "#fbeee0", "#f3e8f7")
NO_LOSS_FILL = "lightgrey"
LOSS_FILLS = ("#e1d5e7", "#ffe0c2", "#d9ead3")  # only in the first, second, third loss
SHARED_FILL = "#fff1a0"
PARAMETER_FILL = "lightblue"
NODE_STYLE = dict(style="filled", shape="box", align="left", fontsize="10", height="0.2", fontname="monospace")
SAVED_STYLES: Dict[State, Dict[str, str]] = {
    State.ALIVE: dict(style="filled", fillcolor="white", color="black", shape="note"),
    State.FREED: dict(style="filled,dashed", fillcolor="#eeeeee", color="#777777", fontcolor="#555555", shape="note"),
    State.STALE: dict(style="filled,bold", fillcolor="#f4a6a6", color="#b00000", shape="note", peripheries="2"),
    State.UNSEEN: dict(style="filled,dotted", fillcolor="white", color="#777777", fontcolor="#555555", shape="note"),
}


def _losses_of(nodes: Sequence[Any], losses: Mapping[str, torch.Tensor]) -> Dict[int, List[str]]:
    subgraphs = {name: {id(n) for n in graph_nodes(loss)} for name, loss in losses.items()}
    return {id(node): [name for name, members in subgraphs.items() if id(node) in members] for node in nodes}


def _saved_label(saved: SavedTensor, translate: bool = False) -> str:
    """A saved tensor's lines; ``translate``: its state in the learner's language."""
    lines = [saved.attribute]
    if saved.shape is not None:
        lines[0] += f" {list(saved.shape)}"
    if saved.parameter:
        lines.append(saved.parameter)
    lines.append(saved.shown_state_label if translate else saved.state_label)
    return "\n".join(lines)


STATE_COUNTS = {State.ALIVE: marked("{count} alive"), State.FREED: marked("{count} freed"),
                State.STALE: marked("{count} stale"), State.UNSEEN: marked("{count} unseen")}
LEGEND_STATES = {State.ALIVE: marked("saved: alive vN"), State.FREED: marked("saved: freed"),
                 State.STALE: marked("saved: stale vM->vN"), State.UNSEEN: marked("saved: not read (a hook packed it)")}


def _loss_fill(losses: List[str], loss_names: List[str]) -> str:
    if len(losses) > 1:
        return SHARED_FILL
    return LOSS_FILLS[loss_names.index(losses[0]) % len(LOSS_FILLS)] if losses else NO_LOSS_FILL


def _add_legend(digraph: Any, model_names: List[str], loss_names: List[str], regions: bool = False,
                unseen: bool = False, translate: bool = False) -> None:
    """The legend: fills, boxes and saved tensors' states; ``translate``: in the learner's language."""
    def say(message: str, **fields: object) -> str:
        return translated_if(translate, message, **fields)

    with digraph.subgraph(name="cluster_legend") as legend:
        legend.attr(label=say(marked("legend")), fontsize="10", style="dashed", color="#999999", bgcolor="white")
        entries = [(say(marked("only in {loss}"), loss=output_label(name, translate)), _loss_fill([name], loss_names))
                   for name in loss_names]
        if len(loss_names) > 1:
            entries.append((say(marked("in more than one loss")), SHARED_FILL))
        if model_names:
            entries.append((say(marked("a box: one model's nodes")), "white"))
        entries.append((say(marked("parameter")), PARAMETER_FILL))
        names = []
        for index, (text, fill) in enumerate(entries):
            names.append(f"legend_node_{index}")
            legend.node(names[-1], text, fillcolor=fill, **NODE_STYLE)
        if regions:
            names.append("legend_region")
            legend.node(names[-1], say(marked("checkpointed or compiled region:\nits saved tensors not read")),
                        **REGION_STYLE)
        for state, style in SAVED_STYLES.items():
            if state is State.UNSEEN and not unseen:
                continue
            names.append(f"legend_{state.value}")
            legend.node(names[-1], say(LEGEND_STATES[state]), fontsize="9", fontname="monospace", **style)
        for index in range(len(names) - 1):  # invisible edges stack the legend in one narrow column
            legend.edge(names[index], names[index + 1], style="invis")


def draw_saved_graph(
    losses: Any, model_outputs: Any = None, params: Any = None, show_saved: bool = True, full: Optional[bool] = None
) -> GraphPicture:
    """Draw the graph behind ``losses`` with every saved tensor's state.

    Args:
        losses: the graph's outputs: a tensor, a list, or by name, e.g. ``{"L1": l1, "L2": l2}``.
        model_outputs: each model's output by model name, e.g. ``{"M1": o1, "M2": o2}``, to box nodes by model.
        params: to label leaves and saved weights: a module, modules by name (``{"M1": m1, "M2": m2}``),
            ``model.named_parameters()`` or a dict of tensors.
        show_saved: draw the saved tensors (default True).
        full: True draws every node; False the module view (one box per module call, ``draw_module_graph``) with
            each box's saved tensors counted by state; None (default) every node up to ``FULL_DRAWING_MAX_NODES``
            nodes, the module view above, as ``draw_graph`` does.

    A checkpointed or compiled region is one labelled box, and its saved tensors are not read (reading a
    non-reentrant checkpoint's recomputes the block). Never raises: arguments in the wrong roles (``draw_graph``'s
    order, the models second) are refused, the picture says why and shows the right call; without graphviz it
    returns the text form; a graph it cannot read, a note.
    """
    mistake = draw_saved_graph_mistake(losses, model_outputs, params)
    if mistake is not None:
        return GraphPicture.refused(mistake)
    words = picture_words()
    try:
        named_losses = read_outputs(losses).tensors
        node_count = len(graph_nodes(list(named_losses.values())))
        if full is False or (full is None and node_count > FULL_DRAWING_MAX_NODES):
            return _draw_saved_modules(named_losses, params, show_saved, node_count, full, words)
        return _draw_saved_graph(named_losses, read_outputs(model_outputs).tensors
                                 if model_outputs is not None else {}, read_parameters(params).tensors, show_saved,
                                 words)
    except Exception as error:  # a graph this tool cannot read: say so rather than stop the lesson
        return GraphPicture(None, tr("(no graph)"), _undrawable(error))


def _readable_saved(node: Any, params: Mapping[str, torch.Tensor], names: Mapping[int, str]) -> List[SavedTensor]:
    """``node``'s saved tensors with their states; none for a node of an opaque region (never unpacked)."""
    return [] if opaque_region(node) is not None else _saved_tensors_of(node, params, names)


def _draw_saved_modules(losses: Dict[str, torch.Tensor], params: Any, show_saved: bool, node_count: int,
                        full: Optional[bool], words: PictureWords) -> GraphPicture:
    """The module view, each box with how many of its saved tensors are alive, freed and stale."""
    named = read_parameters(params).tensors
    names = {id(tensor): name for name, tensor in named.items()}

    def annotate(box: Box, translate: bool) -> Tuple[List[str], Dict[str, str]]:
        """A box's lines: its saved tensors counted by state, its stale ones; ``translate``: in the learner's
        language (else English)."""
        if not show_saved:
            return [], {}
        saved = [entry for node in box.nodes for entry in _readable_saved(node, named, names)]
        if not saved:
            return [], {}
        counts = {state: sum(1 for entry in saved if entry.state is state) for state in State}
        line = translated_if(translate, marked("saved: {counts}"), counts=comma(translate).join(
            translated_if(translate, STATE_COUNTS[state], count=count) for state, count in counts.items() if count))
        stale = [f"{entry.parameter or entry.where} {entry.shown_state_label if translate else entry.state_label}"
                 for entry in saved if entry.state is State.STALE]
        more = len(stale) - 3
        more_line = translated_if(translate, marked("+{count} more stale"), count=more)
        lines = [line] + [f"  {text}" for text in stale[:3]] + ([f"  {more_line}"] if more > 0 else [])
        return lines, (dict(color=SAVED_STYLES[State.STALE]["color"], penwidth="3") if stale else {})

    note = None if full is False else both(marked(
        "{count} autograd nodes: drawn one box per module call, with its saved tensors counted. To draw every "
        "node: draw_saved_graph(..., full=True), {count} boxes that graphviz may take seconds to lay out"),
        words.translate, count=node_count)
    return _draw_modules(losses, params, None, None, note, words, annotate)


def _draw_saved_graph(losses: Dict[str, torch.Tensor], model_outputs: Dict[str, torch.Tensor],
                      params: Dict[str, torch.Tensor], show_saved: bool, words: PictureWords) -> GraphPicture:
    nodes = graph_nodes(list(losses.values()))
    model_of = model_of_nodes(nodes, model_outputs)
    losses_of = _losses_of(nodes, losses)
    param_names = {id(p): name for name, p in params.items()}
    regions = region_boxes(nodes)
    saved_by_node = {id(node): _readable_saved(node, params, param_names) for node in nodes} if show_saved else {}
    tags = {id(n): output_label(model_of.get(id(n)) or "", True)
            or " & ".join(output_label(name, True) for name in losses_of[id(n)]) or "?" for n in nodes}
    text = graph_as_text(
        losses, params, tag=lambda node: tags[id(node)],
        notes=lambda node: [tr("saved {tensor}", tensor=_saved_label(s, translate=True).replace(chr(10), ", "))
                            for s in saved_by_node.get(id(node), [])],
    )
    try:
        import graphviz
    except ImportError:
        return GraphPicture(None, text, _missing_graphviz())

    digraph = graphviz.Digraph(node_attr=NODE_STYLE, graph_attr=dict(size="9.5,12", ranksep="0.15"))
    clusters = {name: graphviz.Digraph(name=f"cluster_{name}") for name in model_outputs}
    for index, (name, cluster) in enumerate(clusters.items()):
        cluster.attr(label=output_label(name, words.translate), fontsize="14", style="filled,rounded",
                     color="#555555", fillcolor=MODEL_TINTS[index % len(MODEL_TINTS)])
    keys = {id(node): regions[id(node)].key if id(node) in regions else str(id(node)) for node in nodes}
    loss_names = list(losses)
    for name, loss in losses.items():
        digraph.node(f"loss_{name}", f"{output_label(name, words.translate)}\n{list(loss.shape)}",
                     fillcolor="darkolivegreen1", **NODE_STYLE)
        if loss.grad_fn is not None:
            digraph.edge(keys[id(loss.grad_fn)], f"loss_{name}")
    drawn: Set[str] = set()
    edges: Dict[Tuple[str, str], None] = {}
    for node in nodes:
        key = keys[id(node)]
        model = model_of.get(id(node))
        home = clusters[model] if model is not None else digraph
        variable = getattr(node, "variable", None)
        if key in drawn:
            pass
        elif id(node) in regions:
            home.node(key, regions[id(node)].label(words.translate), **REGION_STYLE)
        elif variable is not None:
            name = param_names.get(id(variable)) or translated_if(words.translate, marked("leaf"))
            label = f"{name}\n{list(variable.shape)}"
            home.node(key, label, fillcolor=PARAMETER_FILL, **NODE_STYLE)
        else:
            fill = _loss_fill(losses_of[id(node)], loss_names)
            home.node(key, type(node).__name__, fillcolor=fill, **NODE_STYLE)
        drawn.add(key)
        for child, _ in node.next_functions:
            if child is not None and keys[id(child)] != key:
                edges[(keys[id(child)], key)] = None
        for index, saved in enumerate(saved_by_node.get(id(node), [])):
            saved_id = f"{id(node)}_saved_{index}"
            home.node(saved_id, _saved_label(saved, words.translate), fontsize="9", fontname="monospace",
                      **SAVED_STYLES[saved.state])
            digraph.edge(saved_id, key, style="dotted", arrowhead="none")
    for source, target in edges:
        digraph.edge(source, target)
    for cluster in clusters.values():
        digraph.subgraph(cluster)
    unseen = any(saved.state is State.UNSEEN for entries in saved_by_node.values() for saved in entries)
    _add_legend(digraph, list(model_outputs), loss_names, bool(regions), unseen, words.translate)
    return GraphPicture(digraph, text, None if dot_available() else translated(INSTALL_GRAPHVIZ))

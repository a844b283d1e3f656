"""Drawing an autograd graph in torchviz's look, never crashing on a graph, and the module view for big graphs.

The walk is our own (``graph_digraph``): torchviz reads a custom node's ``saved_tensors``, which raises once a
backward freed them (a checkpoint's or a compiled region's node), and reading a non-reentrant checkpoint's saved
tensors would recompute the block. A checkpointed or compiled region is drawn as one labelled box.
torchviz itself stays importable for the lessons that show it: torchviz 0.0.3 does ``from distutils.version import
LooseVersion``, and Python 3.12 removed distutils: we lend it a tiny stand-in for the length of the import.
Without the graphviz ``dot`` program we show the same graph as text, with how to install graphviz.

Readable at any size: a picture is never shrunk, neither by graphviz (no graph ``size``) nor by JupyterLab
(``unconfined`` metadata: the output scrolls instead), so its text stays at its font size, at least 9 pt.
Above ``FULL_DRAWING_MAX_NODES`` nodes ``draw_graph`` draws the module view, which stays small and fast.
"""
from __future__ import annotations

import contextlib
import functools
import html
import importlib
import re
import shutil
import subprocess
import sys
import types
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from helpers.language import marked, tr, translated, translated_if
from helpers.tools.arguments import read_outputs, read_parameters
from helpers.tools.display import card_html, pre_html
from helpers.tools.module_calls import Box, module_calls, module_types
from helpers.tools.module_graph import (
    REGION_STYLE,
    inside_digraph,
    module_digraph,
    module_text,
    output_label,
    region_boxes,
    region_line,
)
from helpers.tools.picture_language import PictureWords, picture_words
from helpers.tools.regions import opaque_region
from helpers.tools.traversal import children, graph_nodes

INSTALL_GRAPHVIZ = marked(
    "Install graphviz's `dot` program to see pictures: "
    "`sudo apt-get install graphviz` (Debian/Ubuntu, Colab), `brew install graphviz` (macOS), "
    "or `conda install -c conda-forge graphviz`. Then restart the kernel."
)

# Above this many autograd nodes draw_graph shows the module view: the full drawing gets slow (graphviz's time grows
# faster than the node count: about 0.2 s at 470 nodes, 2 s at 870 on two cores) and is too big to read.
FULL_DRAWING_MAX_NODES = 300

Outputs = Union[torch.Tensor, Sequence[torch.Tensor], Mapping[str, torch.Tensor]]
# A note of the module view: as the picture draws it (in English where it cannot draw the learner's language), and
# translated, where it is shown beside the picture.
Note = Tuple[str, str]


def both(message: str, translate: bool, **fields: Any) -> Note:
    """``message`` (marked) with its fields filled, as the picture draws it (``translate``: in the learner's language,
    else English) and translated (beside it)."""
    return translated_if(translate, message, **fields), translated(message, **fields)


def _missing_graphviz() -> str:
    return tr("The graphviz Python package is missing: pip install graphviz")


def _unreadable(error: Exception) -> str:
    return tr("could not read this graph ({error_type}: {error}).", error_type=type(error).__name__, error=error)


def _undrawable(error: Exception) -> str:
    return tr("could not draw this graph ({error_type}: {error}).", error_type=type(error).__name__, error=error)


class _LooseVersion:
    """Just enough of distutils' LooseVersion for torchviz's one comparison."""

    def __init__(self, text: str) -> None:
        self.parts = tuple(int(p) if p.isdigit() else p for p in re.findall(r"\d+|[a-zA-Z]+", text))

    def _key(self) -> Tuple:
        return tuple((0, p) if isinstance(p, int) else (1, p) for p in self.parts)

    def __lt__(self, other: "_LooseVersion") -> bool:
        return self._key() < other._key()


@contextlib.contextmanager
def _distutils_stand_in() -> Iterator[None]:
    """Make ``distutils.version.LooseVersion`` importable while inside, then put sys.modules back."""
    names = ("distutils", "distutils.version")
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    package = types.ModuleType("distutils")
    version = types.ModuleType("distutils.version")
    version.LooseVersion = _LooseVersion  # type: ignore[attr-defined]
    package.version = version  # type: ignore[attr-defined]
    sys.modules.update({"distutils": package, "distutils.version": version})
    try:
        yield
    finally:
        for name in names:
            if name in saved:
                sys.modules[name] = saved[name]
            else:
                sys.modules.pop(name, None)


def import_torchviz() -> Optional[types.ModuleType]:
    """torchviz, importable even where distutils is missing; None when torchviz is not installed."""
    try:
        return importlib.import_module("torchviz")
    except ImportError as error:
        if "distutils" not in str(error):
            return None
    with _distutils_stand_in():
        try:
            return importlib.import_module("torchviz")
        except ImportError:
            return None


def dot_available() -> bool:
    """True when graphviz's ``dot`` program is on PATH and runs."""
    dot = shutil.which("dot")
    return dot is not None and _dot_runs(dot)


@functools.lru_cache(maxsize=None)
def _dot_runs(dot: str) -> bool:
    """Whether this ``dot`` executable starts; asked once per executable."""
    try:
        subprocess.run([dot, "-V"], capture_output=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def named_parameters(**models: nn.Module) -> Dict[str, torch.Tensor]:
    """``named_parameters(M1=m1, M2=m2)`` -> ``{"M1.0.weight": ..., "M2.2.bias": ...}`` for labels."""
    return {f"{model_name}.{name}": p for model_name, model in models.items() for name, p in model.named_parameters()}


def graph_as_text(
    outputs: Any,
    params: Any = None,
    tag: Optional[Callable[[Any], str]] = None,
    notes: Optional[Callable[[Any], List[str]]] = None,
) -> str:
    """The autograd graph as numbered lines: each node, and the nodes it passes gradients to.

    Args:
        outputs: the tensors whose graph to show (a tensor, a list, or a dict by name).
        params: to label the leaves: a module, modules by name, ``model.named_parameters()`` or a dict.
        tag: optional text shown in brackets after each node (e.g. the model or loss it belongs to).
        notes: optional extra lines under each node (e.g. its saved tensors).
    """
    param_names = read_parameters(params).names_by_id()
    named_outputs = read_outputs(outputs).tensors
    nodes = graph_nodes(list(named_outputs.values()))
    numbers = {id(node): index for index, node in enumerate(nodes, 1)}
    output_labels: Dict[int, str] = {}
    for name, tensor in named_outputs.items():
        if tensor.grad_fn is not None:
            label = output_label(name, True) if name.startswith("output") else tr("output {name}", name=name)
            output_labels.setdefault(id(tensor.grad_fn), f"  ({label})")
    lines = []
    for node in nodes:
        label = type(node).__name__
        variable = getattr(node, "variable", None)
        if variable is not None:
            label += f"  {param_names.get(id(variable), tr('leaf'))} {list(variable.shape)}"
        if tag is not None:
            label += f"  ({tag(node)})"
        region = opaque_region(node)
        if region is not None:
            label += f"  [{region_line(region, True)}]"
        children = [f"[{numbers[id(child)]}]" for child, _ in node.next_functions if child is not None]
        arrow = f"  -> {', '.join(children)}" if children else ""
        lines.append(f"[{numbers[id(node)]}] {label}{output_labels.get(id(node), '')}{arrow}")
        lines += [f"      {note}" for note in (notes(node) if notes is not None else [])]
    return "\n".join(lines) if lines else tr("(no graph: these tensors have no grad_fn)")


# ---------------------------------------------------------------- arguments in the wrong roles
# The three drawings take different things in their second place: draw_graph(outputs, params) and
# draw_module_graph(outputs, params) the models, draw_saved_graph(losses, model_outputs, params) each model's output
# tensor. Passed in another's order, the modules would silently be read as outputs (and drop every parameter name)
# or output tensors as parameters (and label nothing). Each *_mistake function returns what is wrong and the right
# call, or None; the drawings then refuse to draw (they never raise) and show that message instead.


def _modules_in(value: Any) -> List[str]:
    """The names of the modules in ``value`` (a module, or modules in a dict, list or tuple)."""
    if isinstance(value, nn.Module):
        return [type(value).__name__.lower()]
    if isinstance(value, Mapping):
        return [str(key) for key, item in value.items() if isinstance(item, nn.Module)]
    if isinstance(value, (list, tuple)):
        return [f"model{index}" for index, item in enumerate(value, 1) if isinstance(item, nn.Module)]
    return []


def _computed_tensors_in(value: Any) -> List[str]:
    """The names of the tensors in ``value`` that the graph computed (they have a grad_fn): outputs, not leaves."""
    if isinstance(value, torch.Tensor):
        return ["output"] if value.grad_fn is not None else []
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = [(f"output{index}", item) for index, item in enumerate(value, 1)]
    else:
        return []
    computed = [str(key) for key, item in items if isinstance(item, torch.Tensor) and item.grad_fn is not None]
    tensors = [item for _, item in items if isinstance(item, torch.Tensor)]
    return computed if computed and len(computed) == len(tensors) == len(items) else []


def _parameters_only(value: Any) -> bool:
    """True for a dict or list of parameters (``named_parameters(...)``, ``list(model.parameters())``)."""
    items = list(value.values()) if isinstance(value, Mapping) else list(value) if isinstance(value, (list, tuple)) \
        else []
    return bool(items) and all(isinstance(item, nn.Parameter) for item in items)


def _by_name(names: List[str], suffix: str = "") -> str:
    return "{" + ", ".join(f'"{name}": {name}{suffix}' for name in names) + "}"


def _outputs_spelled(outputs: Any) -> str:
    if isinstance(outputs, Mapping) and outputs:
        return _by_name([str(key) for key in outputs])
    return "loss"


def draw_graph_mistake(outputs: Any, params: Any, full: Any, name: str = "draw_graph") -> Optional[str]:
    """What is wrong when ``draw_graph(outputs, params, full)`` got its arguments in the wrong roles, else None."""
    mistake = _outputs_mistake(name, outputs)
    if mistake is not None:
        return mistake
    computed = _computed_tensors_in(params)
    if computed:
        return tr(
            "{name}(outputs, params): params names the leaves (modules or parameters), but you passed tensors the "
            "graph computed ({computed}): in draw_saved_graph's order? Pass the modules: "
            "{name}({outputs}, {modules}) with each name's module, or, to box nodes "
            "by model output, draw_saved_graph({outputs}, {model_outputs}, {modules})", name=name,
            computed=", ".join(computed), outputs=_outputs_spelled(outputs), modules=_by_name(computed),
            model_outputs=_by_name(computed, "_output"))
    if not (full is None or isinstance(full, bool)):
        return tr("{name}(outputs, params, full): full is True, False or None, not {type}: "
                  "in draw_saved_graph's order (losses, model_outputs, params)? Call "
                  "{name}({outputs}, params) or draw_saved_graph(losses, model_outputs, params)", name=name,
                  type=type(full).__name__, outputs=_outputs_spelled(outputs))
    return None


def draw_module_graph_mistake(outputs: Any, params: Any) -> Optional[str]:
    """What is wrong when ``draw_module_graph(outputs, params)`` got them in the wrong roles, else None."""
    return draw_graph_mistake(outputs, params, None, name="draw_module_graph")


def draw_saved_graph_mistake(losses: Any, model_outputs: Any, params: Any) -> Optional[str]:
    """What is wrong when ``draw_saved_graph(losses, model_outputs, params)`` got arguments in the wrong roles."""
    mistake = _outputs_mistake("draw_saved_graph", losses)
    if mistake is not None:
        return mistake
    spelled = _outputs_spelled(losses)
    modules = _modules_in(model_outputs)
    if modules:
        return tr(
            "draw_saved_graph(losses, model_outputs, params): model_outputs takes each model's output tensor, but "
            "you passed modules ({names}), in draw_graph's order (outputs, params)? Pass them as "
            "params: draw_saved_graph({losses}, params={modules}), or to box the nodes by model: "
            "draw_saved_graph({losses}, {model_outputs}, {modules})", names=", ".join(modules), losses=spelled,
            modules=_by_name(modules), model_outputs=_by_name(modules, "_output"))
    if _parameters_only(model_outputs):
        return tr(
            "draw_saved_graph(losses, model_outputs, params): model_outputs takes each model's output tensor, but "
            "you passed parameters: pass them as params: draw_saved_graph({losses}, params=...)", losses=spelled)
    computed = _computed_tensors_in(params)
    if computed and model_outputs is None:
        return tr(
            "draw_saved_graph(losses, model_outputs, params): params names the parameters, but you passed tensors "
            "the graph computed ({names}): model outputs go second: "
            "draw_saved_graph({losses}, {model_outputs}, {modules})", names=", ".join(computed), losses=spelled,
            model_outputs=_by_name(computed, "_output"), modules=_by_name(computed))
    return None


def _outputs_mistake(name: str, outputs: Any) -> Optional[str]:
    modules = _modules_in(outputs)
    if not modules:
        return None
    return tr("{name}: the first argument is the graph's outputs (the loss tensors), but you passed modules "
              "({names}): call {name}(loss, {modules}) with the loss computed by them", name=name,
              names=", ".join(modules), modules=_by_name(modules))


class GraphPicture:
    """A drawn graph: SVG in Jupyter when ``dot`` works, readable text otherwise.

    ``note`` is a line shown above the picture and the text (e.g. why the module view was drawn). ``mistake``: why
    nothing was drawn, when the arguments were in the wrong roles, with the right call (``GraphPicture.refused``).
    """

    def __init__(self, digraph: Any, text: str, problem: Optional[str], note: Optional[str] = None,
                 mistake: Optional[str] = None) -> None:
        self.digraph = digraph
        self.text = text
        self.problem = problem
        self.note = note
        self.mistake = mistake
        if digraph is not None:
            digraph.graph_attr.pop("size", None)  # torchviz sets one: graphviz would shrink the text to fit it

    @classmethod
    def refused(cls, mistake: str) -> "GraphPicture":
        """Nothing drawn: the arguments were in the wrong roles; ``mistake`` says so and shows the right call."""
        return cls(None, tr("(not drawn) {mistake}", mistake=mistake), mistake, mistake=mistake)

    def svg(self) -> Optional[str]:
        """The picture as SVG at its natural size (lengths in pt), or None when it cannot be drawn here."""
        if self.digraph is None or not dot_available():
            return None
        try:
            return self.digraph.pipe(format="svg").decode("utf-8")
        except Exception:  # graphviz missing or broken: fall back to text, never crash a lesson
            return None

    def save_png(self, path: str) -> bool:
        """Write a PNG to ``path``; False when that is impossible here."""
        if self.digraph is None or not dot_available():
            return False
        with open(path, "wb") as file:
            file.write(self.digraph.pipe(format="png"))
        return True

    def _fallback_note(self) -> str:
        return self.problem or translated(INSTALL_GRAPHVIZ)

    def _plain(self) -> str:
        return f"({self.note})\n{self.text}" if self.note else self.text

    def __str__(self) -> str:
        if self.mistake is not None:
            return self.text
        if self.problem is None and dot_available():  # the picture can be drawn: no note that says otherwise
            return self._plain()
        return f"{self._plain()}\n\n({self._fallback_note()})"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        """The SVG, with ``unconfined`` so that JupyterLab scrolls rather than shrinks it; else an HTML card."""
        svg = self.svg()
        if svg is not None:
            return {"image/svg+xml": svg, "text/plain": self._plain()}, {"image/svg+xml": {"unconfined": True}}
        if self.mistake is not None:
            card = card_html(tr("Not drawn: arguments in the wrong roles"), pre_html(self.mistake), accent="#c0392b")
            return {"text/html": card, "text/plain": self.text}
        body = pre_html(self._plain()) + f"<div>{html.escape(self._fallback_note())}</div>"
        return {"text/html": card_html(tr("Autograd graph (as text)"), body, accent="#7f8c8d"),
                "text/plain": str(self)}


TORCHVIZ_NODE_STYLE = dict(style="filled", shape="box", align="left", fontsize="10", ranksep="0.1", height="0.2",
                           fontname="monospace")


def _tensor_label(tensor: torch.Tensor, name: str = "") -> str:
    return "%s\n (%s)" % (name, ", ".join(str(size) for size in tensor.shape))


def graph_digraph(outputs: Mapping[str, torch.Tensor], param_names: Mapping[int, str], translate: bool = False) -> Any:
    """Every node behind ``outputs`` as a ``graphviz.Digraph`` in torchviz's look (grey nodes, blue parameters,
    green outputs), and each checkpointed or compiled region as one labelled box (``region_boxes``), its words in
    the learner's language when ``translate``.

    It reads each node's class, ``next_functions`` and ``variable`` only: never a saved tensor, so it draws a graph
    whose buffers were freed, and never recomputes a checkpointed block (torchviz reads a custom node's
    ``saved_tensors``, which raises once they were freed).
    """
    import graphviz

    digraph = graphviz.Digraph(node_attr=TORCHVIZ_NODE_STYLE)
    nodes = graph_nodes(list(outputs.values()))
    regions = region_boxes(nodes)
    keys = {id(node): regions[id(node)].key if id(node) in regions else str(id(node)) for node in nodes}
    drawn: set = set()
    for name, tensor in outputs.items():
        digraph.node(str(id(tensor)), _tensor_label(tensor, output_label(name, translate)), fillcolor="darkolivegreen1")
        if tensor.grad_fn is not None:
            digraph.edge(keys[id(tensor.grad_fn)], str(id(tensor)))
        if tensor._is_view() and tensor._base is not None and id(tensor._base) not in drawn:
            drawn.add(id(tensor._base))
            digraph.node(str(id(tensor._base)), _tensor_label(tensor._base), fillcolor="darkolivegreen3")
            digraph.edge(str(id(tensor._base)), str(id(tensor)), style="dotted")
    edges: Dict[Tuple[str, str], None] = {}
    for node in nodes:
        key = keys[id(node)]
        if key not in drawn:
            drawn.add(key)
            if id(node) in regions:
                digraph.node(key, regions[id(node)].label(translate), **REGION_STYLE)
            else:
                digraph.node(key, type(node).__name__)
        variable = getattr(node, "variable", None)
        if variable is not None:
            digraph.node(str(id(variable)), _tensor_label(variable, param_names.get(id(variable), "")),
                         fillcolor="lightblue")
            digraph.edge(str(id(variable)), key)
        for child in children(node):
            if keys[id(child)] != key:
                edges[(keys[id(child)], key)] = None
    for source, target in edges:
        digraph.edge(source, target)
    return digraph


def draw_graph(outputs: Any, params: Any = None, full: Optional[bool] = None) -> GraphPicture:
    """Draw the graph behind ``outputs`` (a tensor, a list or a dict of them) in torchviz's look.

    ``params`` labels the leaves: a module, modules by name, ``model.named_parameters()`` or a dict.
    ``full``: True draws every node, False the module view (``draw_module_graph``); None (default) draws every
    node up to FULL_DRAWING_MAX_NODES nodes, the module view above, with a note saying how to get every node.
    A checkpointed or compiled region is one labelled box. Never raises: arguments in the wrong roles (modules as
    ``outputs``, model outputs as ``params``) are refused, the picture says why and shows the right call; without
    ``dot`` you get the text form and what to install.
    """
    mistake = draw_graph_mistake(outputs, params, full)
    if mistake is not None:
        return GraphPicture.refused(mistake)
    words = picture_words()
    try:
        node_count = len(graph_nodes(read_outputs(outputs).values()))
        if full is False or (full is None and node_count > FULL_DRAWING_MAX_NODES):
            note = None if full is False else both(marked(
                "{count} autograd nodes: drawn one box per module call. To draw every node: "
                "draw_graph(..., full=True), {count} boxes that graphviz may take seconds to lay out"),
                words.translate, count=node_count)
            return _draw_modules(outputs, params, None, None, note, words)
        text = graph_as_text(outputs, params)
    except Exception as error:  # a graph this tool cannot read: say so rather than stop the lesson
        return GraphPicture(None, tr("(no graph)"), _unreadable(error))
    problem = None if dot_available() else translated(INSTALL_GRAPHVIZ)
    try:
        digraph = graph_digraph(read_outputs(outputs).tensors, read_parameters(params).names_by_id(), words.translate)
    except ImportError:
        return GraphPicture(None, text, _missing_graphviz())
    except Exception as error:  # a drawing bug must not stop a lesson
        return GraphPicture(None, text, _undrawable(error))
    if node_count > FULL_DRAWING_MAX_NODES:  # fewer network-simplex rounds: 3x faster at 870 nodes, a rougher layout
        digraph.graph_attr.update(nslimit="2", nslimit1="2")
    return GraphPicture(digraph, text, problem)


def draw_module_graph(outputs: Any, params: Any = None, depth: Optional[int] = None,
                      inside: Optional[str] = None) -> GraphPicture:
    """Draw the graph behind ``outputs`` with one box per module call; or, with ``inside``, one module's nodes.

    Args:
        outputs: the graph's outputs: a tensor, a list, or by name (``{"d_loss": d_loss, "g_loss": g_loss}``).
        params: the models, best by name (``{"G": netG, "D": netD}``): a box is named after its parameters.
        depth: how many parts of a parameter's name make a box (``G.main.3.weight``: 1 ``G``, 2 ``G.main``,
            3 ``G.main.3``); None: the deepest that keeps the picture to 40 boxes or fewer.
        inside: a box's name (``"G.main"``): draw every autograd node of that module's calls instead.

    A module called twice (a GAN's D on real and on fake) gives two boxes. Which node goes in which box is read
    from the graph alone (``helpers/tools/module_calls.py`` states the rule and its limits). A checkpointed or
    compiled region is a box of its own, or marks the boxes of a non-reentrant checkpoint's nodes. Never raises:
    arguments in the wrong roles (modules as ``outputs``, model outputs as ``params``) are refused with the right
    call.
    """
    mistake = draw_module_graph_mistake(outputs, params)
    if mistake is not None:
        return GraphPicture.refused(mistake)
    try:
        return _draw_modules(outputs, params, depth, inside, None, picture_words())
    except Exception as error:  # a graph this tool cannot read: say so rather than stop the lesson
        return GraphPicture(None, tr("(no graph)"), _undrawable(error))


# A box's extra lines and graphviz style; its second argument: True for the learner's language, False for English.
Annotate = Callable[[Box, bool], Tuple[List[str], Dict[str, str]]]


def _once_per_box(annotate: Annotate) -> Annotate:
    """``annotate``, asked once per box and form (the text and the picture both ask)."""
    answers: Dict[Tuple[str, bool], Tuple[List[str], Dict[str, str]]] = {}

    def cached(box: Box, shown: bool) -> Tuple[List[str], Dict[str, str]]:
        if (box.key, shown) not in answers:
            answers[(box.key, shown)] = annotate(box, shown)
        return answers[(box.key, shown)]

    return cached


def _draw_modules(outputs: Any, params: Any, depth: Optional[int], inside: Optional[str],
                  note: Optional[Note], words: PictureWords, annotate: Optional[Annotate] = None) -> GraphPicture:
    """The module view (or one module's inside); ``annotate(box, translate)`` gives a box's extra lines and graphviz
    style. ``note``: as the picture's title draws it, and translated beside the picture (``both``). ``words``: the
    picture's language. The text form stays English (notebook 06 reads it)."""
    if annotate is not None:
        annotate = _once_per_box(annotate)
    named_outputs = read_outputs(outputs).tensors
    param_names = read_parameters(params).names_by_id()
    types = module_types(params)
    calls = module_calls(named_outputs, param_names, depth if inside is None else len(str(inside).split(".")))
    names = sorted({box.name for box in calls.boxes if box.kind == "module"})
    if inside is not None and inside not in names:
        note = both(marked("no module call named {name} in this graph; boxes at that depth: {names}"),
                    words.translate, name=repr(inside), names=", ".join(names)) if names else \
            both(marked("no module call named {name} in this graph; boxes at that depth: none"), words.translate,
                 name=repr(inside))
        inside, calls = None, module_calls(named_outputs, param_names, depth)
        names = sorted({box.name for box in calls.boxes if box.kind == "module"})
    text = module_text(calls, types, annotate)
    if inside is not None:
        title = translated_if(words.translate, marked(
            "inside {module}: every autograd node of its calls; parameters in blue, dashed: the boxes around it"),
            module=inside)
        make = functools.partial(inside_digraph, calls, inside, param_names, title, words.translate)
    else:
        example = f'inside="{names[0]}"' if names else "inside=NAME"
        title = translated_if(words.translate, marked(
            "one box per module call, depth {depth}: draw_module_graph(..., depth=N) for bigger or smaller boxes, "
            "{example} for one box's autograd nodes"), depth=calls.depth, example=example)
        make = functools.partial(module_digraph, calls, types, f"{note[0]}\n{title}" if note else title, annotate,
                                 words.translate)
    shown_note = note[1] if note else None
    try:
        digraph = make()
    except ImportError:
        return GraphPicture(None, text, _missing_graphviz(), shown_note)
    return GraphPicture(digraph, text, None if dot_available() else translated(INSTALL_GRAPHVIZ), shown_note)

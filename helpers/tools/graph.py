"""Drawing an autograd graph: a thin, never-crashing layer over torchviz, and the module view for big graphs.

torchviz 0.0.3 does ``from distutils.version import LooseVersion``, and Python 3.12 removed distutils:
we lend it a tiny stand-in for the length of the import. Without the graphviz ``dot`` program we show
the same graph as text, with how to install graphviz.

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

from helpers.tools.arguments import read_outputs, read_parameters
from helpers.tools.display import card_html, pre_html
from helpers.tools.module_calls import module_calls, module_types
from helpers.tools.module_graph import inside_digraph, module_digraph, module_text
from helpers.tools.saved import graph_nodes

INSTALL_GRAPHVIZ = (
    "Install graphviz's `dot` program to see pictures: "
    "`sudo apt-get install graphviz` (Debian/Ubuntu, Colab), `brew install graphviz` (macOS), "
    "or `conda install -c conda-forge graphviz`. Then restart the kernel."
)

# Above this many autograd nodes draw_graph shows the module view: the full drawing gets slow (graphviz's time grows
# faster than the node count: about 0.2 s at 470 nodes, 2 s at 870 on two cores) and is too big to read.
FULL_DRAWING_MAX_NODES = 300

Outputs = Union[torch.Tensor, Sequence[torch.Tensor], Mapping[str, torch.Tensor]]


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
    for index, (name, tensor) in enumerate(named_outputs.items(), 1):
        if tensor.grad_fn is not None:
            label = name if name.startswith("output") else f"output {name}"
            output_labels.setdefault(id(tensor.grad_fn), f"  ({label})")
    lines = []
    for node in nodes:
        label = type(node).__name__
        variable = getattr(node, "variable", None)
        if variable is not None:
            label += f"  {param_names.get(id(variable), 'leaf')} {list(variable.shape)}"
        if tag is not None:
            label += f"  ({tag(node)})"
        children = [f"[{numbers[id(child)]}]" for child, _ in node.next_functions if child is not None]
        arrow = f"  -> {', '.join(children)}" if children else ""
        lines.append(f"[{numbers[id(node)]}] {label}{output_labels.get(id(node), '')}{arrow}")
        lines += [f"      {note}" for note in (notes(node) if notes is not None else [])]
    return "\n".join(lines) if lines else "(no graph: these tensors have no grad_fn)"


class GraphPicture:
    """A drawn graph: SVG in Jupyter when ``dot`` works, readable text otherwise.

    ``note`` is a line shown above the picture and the text (e.g. why the module view was drawn).
    """

    def __init__(self, digraph: Any, text: str, problem: Optional[str], note: Optional[str] = None) -> None:
        self.digraph = digraph
        self.text = text
        self.problem = problem
        self.note = note
        if digraph is not None:
            digraph.graph_attr.pop("size", None)  # torchviz sets one: graphviz would shrink the text to fit it

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
        return self.problem or INSTALL_GRAPHVIZ

    def _plain(self) -> str:
        return f"({self.note})\n{self.text}" if self.note else self.text

    def __str__(self) -> str:
        return f"{self._plain()}\n\n({self._fallback_note()})"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Any:
        """The SVG, with ``unconfined`` so that JupyterLab scrolls rather than shrinks it; else an HTML card."""
        svg = self.svg()
        if svg is not None:
            return {"image/svg+xml": svg, "text/plain": self._plain()}, {"image/svg+xml": {"unconfined": True}}
        body = pre_html(self._plain()) + f"<div>{html.escape(self._fallback_note())}</div>"
        return {"text/html": card_html("Autograd graph (as text)", body, accent="#7f8c8d"), "text/plain": str(self)}


def draw_graph(outputs: Any, params: Any = None, full: Optional[bool] = None) -> GraphPicture:
    """Draw the graph behind ``outputs`` (a tensor, a list or a dict of them) with torchviz.

    ``params`` labels the leaves: a module, modules by name, ``model.named_parameters()`` or a dict.
    ``full``: True draws every node, False the module view (``draw_module_graph``); None (default) draws every
    node up to FULL_DRAWING_MAX_NODES nodes, the module view above, with a note saying how to get every node.
    Never raises: without torchviz or ``dot`` you get the text form and what to install.
    """
    try:
        node_count = len(graph_nodes(read_outputs(outputs).values()))
        if full is False or (full is None and node_count > FULL_DRAWING_MAX_NODES):
            note = None if full is False else (
                f"{node_count} autograd nodes: drawn one box per module call. To draw every node: "
                f"draw_graph(..., full=True), {node_count} boxes that graphviz may take seconds to lay out")
            return _draw_modules(outputs, params, None, None, note)
        text = graph_as_text(outputs, params)
    except Exception as error:  # a graph this tool cannot read: say so rather than stop the lesson
        return GraphPicture(None, "(no graph)", f"could not read this graph ({type(error).__name__}: {error}).")
    problem = None if dot_available() else INSTALL_GRAPHVIZ
    torchviz = import_torchviz()
    if torchviz is None:
        return GraphPicture(None, text, "torchviz is not installed: `pip install torchviz` to draw pictures.")
    try:
        tensors = tuple(read_outputs(outputs).values())
        digraph = torchviz.make_dot(tensors, params=read_parameters(params).tensors)
    except Exception as error:  # a torchviz bug must not stop a lesson
        return GraphPicture(None, text, f"torchviz could not draw this graph ({type(error).__name__}: {error}).")
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
    from the graph alone (``helpers/tools/module_calls.py`` states the rule and its limits). Never raises.
    """
    try:
        return _draw_modules(outputs, params, depth, inside, None)
    except Exception as error:  # a graph this tool cannot read: say so rather than stop the lesson
        return GraphPicture(None, "(no graph)", f"could not draw this graph ({type(error).__name__}: {error}).")


def _draw_modules(outputs: Any, params: Any, depth: Optional[int], inside: Optional[str],
                  note: Optional[str]) -> GraphPicture:
    named_outputs = read_outputs(outputs).tensors
    param_names = read_parameters(params).names_by_id()
    types = module_types(params)
    calls = module_calls(named_outputs, param_names, depth if inside is None else len(str(inside).split(".")))
    names = sorted({box.name for box in calls.boxes if box.kind == "module"})
    if inside is not None and inside not in names:
        note = f"no module call named {inside!r} in this graph; boxes at that depth: {', '.join(names) or 'none'}"
        inside, calls = None, module_calls(named_outputs, param_names, depth)
        names = sorted({box.name for box in calls.boxes if box.kind == "module"})
    text = module_text(calls, types)
    if inside is not None:
        title = f"inside {inside}: every autograd node of its calls; parameters in blue, dashed: the boxes around it"
        make = functools.partial(inside_digraph, calls, inside, param_names, title)
    else:
        example = f'inside="{names[0]}"' if names else "inside=NAME"
        title = (f"one box per module call, depth {calls.depth}: draw_module_graph(..., depth=N) for bigger or "
                 f"smaller boxes, {example} for one box's autograd nodes")
        make = functools.partial(module_digraph, calls, types, f"{note}\n{title}" if note else title)
    try:
        digraph = make()
    except ImportError:
        return GraphPicture(None, text, "The graphviz Python package is missing: pip install graphviz", note)
    return GraphPicture(digraph, text, None if dot_available() else INSTALL_GRAPHVIZ, note)

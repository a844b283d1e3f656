"""What a backward visits: ``L1.backward(inputs=M1's parameters)`` in a chain M1 -> M2 runs through M2's nodes."""
from __future__ import annotations

from typing import Dict, Tuple

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from authoring.figures import facts
from authoring.figures.drawing import MONO, SMALL, arrow, box, legend, new_figure
from authoring.figures.palette import INK, MUTED, VISITS, Style

WIDTH, HEIGHT = 8.0, 4.0
NODE, SMALL_NODE = (1.0, 0.42), (0.82, 0.42)  # boxes of the nodes above the parameters, and of the rest
TOP, MIDDLE, LOWER, BOTTOM = 3.0, 2.05, 1.2, 0.45
PLACES: Dict[str, Tuple[float, float]] = {
    "L2": (0.65, TOP), "mask": (1.9, TOP), "L1": (0.65, MIDDLE), "mse": (2.55, MIDDLE),
    "M2.addmm": (4.0, MIDDLE), "M2.t": (3.85, LOWER), "M2.weight": (3.85, BOTTOM), "M2.bias": (4.95, LOWER),
    "M1.addmm": (6.5, MIDDLE), "M1.t": (6.35, LOWER), "M1.weight": (6.35, BOTTOM), "M1.bias": (7.45, LOWER),
}
REQUESTED_BORDER = 3.0
MODEL_BOXES = {"M2": (3.3, 5.55), "M1": (5.75, 7.95)}  # left and right edge of each model's frame
REQUESTED = Style("named in inputs=", VISITS["visited"].fill)


def size_of(key: str) -> Tuple[float, float]:
    """The box of node ``key``."""
    return SMALL_NODE if key.endswith((".t", ".weight", ".bias")) else NODE


def border_point(key: str, towards: str) -> Tuple[float, float]:
    """Where the line from node ``key``'s centre to node ``towards``'s leaves ``key``'s box."""
    (x, y), (tx, ty), (w, h) = PLACES[key], PLACES[towards], size_of(key)
    dx, dy = tx - x, ty - y
    scale = min(w / 2 / abs(dx) if dx else float("inf"), h / 2 / abs(dy) if dy else float("inf"))
    return x + dx * scale, y + dy * scale


def draw_frames(axes: Axes) -> None:
    """A grey frame around each model's nodes, named at its top."""
    for name, (left, right) in MODEL_BOXES.items():
        axes.add_patch(FancyBboxPatch((left, 0.08), right - left, MIDDLE + 0.45, facecolor="none", edgecolor=MUTED,
                                      linewidth=1.0, boxstyle="round,pad=0,rounding_size=0.1"))
        axes.text(left + 0.1, MIDDLE + 0.38, name, ha="left", va="center", fontweight="bold", color=INK)


def draw() -> Figure:
    """The graph, each node drawn as visited or not, and each edge solid where the backward passes."""
    figure, axes = new_figure(WIDTH, HEIGHT)
    axes.text(0.1, HEIGHT - 0.25, "l1.backward(inputs=list(m1.parameters())), in a chain M1 → M2",
              ha="left", va="center", fontfamily=MONO, fontweight="bold", color=INK)
    axes.text(0.1, HEIGHT - 0.55, "Backward runs left to right, from the losses to the parameters. "
              "Solid arrows: the way it takes.", ha="left", va="center", fontsize=SMALL, color=INK)
    draw_frames(axes)
    for parent, child in facts.EDGES:
        taken = parent in facts.VISITED and child in facts.VISITED
        arrow(axes, border_point(parent, child), border_point(child, parent), colour=INK if taken else MUTED,
              line="solid" if taken else "dashed", width=1.8 if taken else 1.0)
    for key, node in facts.GRAPH.items():
        style = VISITS["visited" if key in facts.VISITED else "not visited"]
        border = REQUESTED_BORDER if key in facts.REQUESTED else 1.4
        box(axes, PLACES[key], size_of(key), style, node.label, width=border)
    for row, style in enumerate((VISITS["visited"], VISITS["not visited"], REQUESTED)):
        legend(axes, 0.15, 1.3 - 0.4 * row, {style.label: style},
               border=REQUESTED_BORDER if style is REQUESTED else 1.0)
    return figure

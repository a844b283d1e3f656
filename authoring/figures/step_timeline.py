"""The step timeline: how one training step of M2 meets error 1, or, with ``retain_graph=True``, error 2."""
from __future__ import annotations

from typing import List, Tuple

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from authoring.figures import facts
from authoring.figures.drawing import MONO, SMALL, arrow, box, new_figure
from authoring.figures.palette import INK, MUTED, TIMELINE, Style

WIDTH, HEIGHT = 8.0, 3.6
COLUMNS = (1.3, 1.45, 1.35, 2.05)  # the four stages' widths, in inches; the last holds the errors
LEFT = 1.8  # where the stages start; the row labels sit left of it
CODE, TIME, NOTES, VERSION = 2.95, 2.7, 2.36, 1.86  # heights of the rows, in inches
LANES = dict(zip(facts.LANES, (1.2, 0.45)))
LANE_LABELS = ("saved W, with\nL2.backward()", "saved W, with\nretain_graph=True")


def centres() -> List[float]:
    """The x of each stage's centre."""
    found, x = [], LEFT
    for width in COLUMNS:
        found.append(x + width / 2)
        x += width
    return found


def state_cell(label: str) -> Tuple[Style, str, str]:
    """(style, first line, further lines) for a saved tensor's state label, or for an error kind."""
    if label in facts.ERROR_LINES:
        name, words = facts.ERROR_LINES[label]
        return TIMELINE["error"], f"✗ {name}", words
    return TIMELINE[label.split()[0]], label.replace("->", " → "), ""


def draw_stages(axes: Axes, xs: List[float]) -> None:
    """The time arrow, each stage's call above it and what it does below, and W's version."""
    arrow(axes, (LEFT, TIME), (WIDTH - 0.08, TIME), width=1.6)
    axes.text(LEFT - 0.1, TIME, "time", ha="right", va="center", fontsize=SMALL, color=INK, style="italic")
    for index, x in enumerate(xs):
        axes.plot([x], [TIME], marker="o", markersize=6, color=INK)
        axes.text(x, CODE, facts.STAGES[index], ha="center", va="center", fontfamily=MONO, fontweight="bold",
                  color=INK)
        axes.text(x, NOTES, facts.STAGE_NOTES[index], ha="center", va="center", fontsize=SMALL, color=INK,
                  linespacing=1.1)
        version, before = facts.W_VERSIONS[index], facts.W_VERSIONS[max(index - 1, 0)]
        changed = version != before
        axes.text(x, VERSION, f"v{before} → v{version}" if changed else f"v{version}", ha="center", va="center",
                  fontweight="bold" if changed else "normal", color=INK)
    axes.text(0.1, VERSION, "W's version", ha="left", va="center", fontsize=SMALL, color=INK)


def draw() -> Figure:
    """The figure: stages left to right, W's version, and its saved copy in each of the two variants."""
    figure, axes = new_figure(WIDTH, HEIGHT)
    xs = centres()
    axes.text(0.1, HEIGHT - 0.22, "One training step, M2 first. W: M2's head weight, saved by the forward pass",
              ha="left", va="center", fontsize=11.5, fontweight="bold", color=INK)
    draw_stages(axes, xs)
    axes.plot([0.1, WIDTH - 0.08], [VERSION - 0.3] * 2, color=MUTED, linewidth=0.6)
    for (lane, labels), lane_label in zip(facts.LANES.items(), LANE_LABELS):
        y = LANES[lane]
        axes.text(0.1, y, lane_label, ha="left", va="center", fontsize=SMALL, fontfamily=MONO, color=INK,
                  linespacing=1.1)
        for x, width, label in zip(xs, COLUMNS, labels):
            style, first, rest = state_cell(label)
            if not rest:
                box(axes, (x, y), (width - 0.22, 0.44), style, first)
                continue
            box(axes, (x, y), (width - 0.16, 0.68), style)
            axes.text(x, y + 0.17, first, ha="center", va="center", fontweight="bold", color=style.text)
            axes.text(x, y - 0.1, rest, ha="center", va="center", fontsize=SMALL, color=style.text, linespacing=1.1)
    return figure



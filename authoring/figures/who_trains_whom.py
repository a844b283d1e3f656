"""Who trains whom: for each recipe of notebook 04, the loss whose gradient reaches each model."""
from __future__ import annotations

from matplotlib.figure import Figure

from authoring.figures import facts
from authoring.figures.drawing import MONO, SMALL, box, new_figure
from authoring.figures.palette import GRADIENTS, INK, MUTED

WIDTH = 8.0
ROW = 0.74  # a recipe's height, in inches
TOP = 0.1 + ROW * len(facts.RECIPES)  # the header's lower edge; the rows hang below it
HEIGHT = TOP + 1.1
COLUMNS = {"m1": 5.7, "m2": 7.1}  # the centres of the two models' columns
CELL = (1.2, 0.48)


def draw() -> Figure:
    """A table: one row per recipe (its name and code), and the loss each model is trained on, by pattern and text."""
    figure, axes = new_figure(WIDTH, HEIGHT)
    axes.text(0.1, HEIGHT - 0.25, "Which loss's gradient reaches which model", ha="left", va="center",
              fontsize=12, fontweight="bold", color=INK)
    axes.text(0.1, HEIGHT - 0.55, "L1 is meant to train M1, L2 to train M2; both share a term. "
              "p1, p2: the parameters of M1, M2.", ha="left", va="center", fontsize=SMALL, color=INK)
    axes.text(0.1, TOP + 0.2, "recipe", ha="left", va="center", fontweight="bold", color=INK)
    for column, centre in COLUMNS.items():
        axes.text(centre, TOP + 0.2, f"{column.upper()} trained on", ha="center", va="center", fontweight="bold",
                  color=INK)
    axes.plot([0.1, WIDTH - 0.1], [TOP] * 2, color=INK, linewidth=1.0)
    for index, recipe in enumerate(facts.RECIPES):
        middle = TOP - ROW * (index + 0.5)
        code = "\n".join(recipe.code)
        axes.text(0.1, middle + 0.2, recipe.title, ha="left", va="center", fontweight="bold", color=INK)
        axes.text(0.3, middle - 0.12, code, ha="left", va="center", fontsize=SMALL, fontfamily=MONO, color=INK,
                  linespacing=1.1)
        for column, centre in COLUMNS.items():
            loss = getattr(recipe, column)
            box(axes, (centre, middle), CELL, GRADIENTS[loss], loss, bold=True, size_pt=12)
        axes.plot([0.1, WIDTH - 0.1], [TOP - ROW * (index + 1)] * 2, color=MUTED, linewidth=0.6)
    return figure

"""The course's conceptual figures, shipped inside the package so they show on Colab too (nothing to clone).

In a code cell::

    from helpers.course.figures import show_figure
    show_figure("step_timeline")

In a markdown cell, as an attachment the notebook carries (``nbformat``: the cell's ``attachments``)::

    cell["attachments"] = attachments("step_timeline")
    cell["source"] = markdown_image("step_timeline")   # ![alt text](attachment:step_timeline.png)

The images (PNG for screens, SVG for print) are drawn by ``python -m authoring.figures``; this module only reads
them, so it needs no matplotlib. Each translated set lies in ``images/<language>/`` (``zh_CN``: Chinese labels, drawn
with a font for Chinese, so a learner needs none); ``language=""`` is English.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from helpers.language import chosen_language

IMAGES = Path(__file__).resolve().parent / "images"
DISPLAY_WIDTH = 800  # pixels a figure takes in a notebook; the PNG has more, for sharp screens and print

FIGURES: Dict[str, str] = {  # name -> alt text: what the figure shows, for a reader who cannot see it
    "step_timeline": (
        "Timeline of one training step, M2 first: the forward pass saves M2's head weight W at version 1. "
        "Without retain_graph, L2.backward() frees it and L1.backward() fails with error 1. "
        "With retain_graph=True it stays alive, opt2.step() moves W to version 2, "
        "and L1.backward() fails with error 2: is at version 2; expected version 1."
    ),
    "backward_visits": (
        "Graph of a chain M1 to M2 with two losses of M2's output: l1.backward(inputs=M1's parameters) runs "
        "L1's mean, MseLoss, M2's Addmm and M1's nodes down to M1's weight and bias, freeing their saved tensors; "
        "L2's mean, its mask multiplication and the branches to M2's weight and bias do not run and keep theirs."
    ),
    "who_trains_whom": (
        "Table of which loss's gradient reaches which model: the widely copied fix and (d) the summed loss train "
        "both M1 and M2 on L1+L2; (a) backward(inputs=), (b) torch.autograd.grad and (c) detaching the other "
        "model's output train M1 on L1 and M2 on L2."
    ),
}


def _known(name: str) -> str:
    if name not in FIGURES:
        raise ValueError(f"no figure named {name!r}; the figures are {', '.join(FIGURES)}")
    return name


def figure_path(name: str, kind: str = "png", language: str = "") -> Path:
    """The file of figure ``name``: ``kind`` "png" (screens, notebooks) or "svg" (print), in ``language`` ("" for
    English)."""
    if kind not in ("png", "svg"):
        raise ValueError(f"kind must be 'png' or 'svg', not {kind!r}")
    return (IMAGES / language if language else IMAGES) / f"{_known(name)}.{kind}"


@dataclass(frozen=True)
class FigureImage:
    """A figure as a notebook shows it: Jupyter calls ``_repr_png_``."""

    name: str
    alt: str
    png: bytes
    width: Optional[int] = DISPLAY_WIDTH

    def _repr_png_(self) -> Tuple[bytes, Dict[str, Any]]:
        metadata: Dict[str, Any] = {"alt": self.alt}
        if self.width:
            metadata["width"] = self.width
        return self.png, metadata

    def __repr__(self) -> str:
        return f"<figure {self.name}: {self.alt}>"


def show_figure(name: str, width: Optional[int] = DISPLAY_WIDTH) -> FigureImage:
    """Figure ``name``, to show as a code cell's result, in the helpers' language where it is drawn in it (else
    English); ``width`` in pixels (None: the PNG's own)."""
    path = figure_path(name, language=chosen_language())
    return FigureImage(name, FIGURES[_known(name)], (path if path.exists() else figure_path(name)).read_bytes(), width)


def attachment_name(name: str) -> str:
    """The file name a markdown cell's attachment of figure ``name`` has: ``name.png``."""
    return f"{_known(name)}.png"


def attachment(name: str, language: str = "") -> Dict[str, str]:
    """Figure ``name`` in ``language`` as one cell attachment's bundle: ``{"image/png": <base64 of the PNG>}``."""
    return {"image/png": base64.b64encode(figure_path(name, language=language).read_bytes()).decode("ascii")}


def attachments(*names: str, language: str = "") -> Dict[str, Dict[str, str]]:
    """A markdown cell's ``attachments`` holding the figures ``names``, in ``language``."""
    return {attachment_name(name): attachment(name, language) for name in names}


def markdown_image(name: str) -> str:
    """The markdown that shows an attached figure: ``![alt text](attachment:name.png)``."""
    return f"![{FIGURES[_known(name)]}](attachment:{attachment_name(name)})"

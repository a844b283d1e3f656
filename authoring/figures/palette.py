"""The figures' colours and category styles: colour-blind safe, and apart in grey.

Every colour comes from Okabe and Ito's palette (safe for the common colour-vision deficiencies). Within a figure,
the fills of different categories differ in grey by at least ``MIN_GREY_STEP`` of the range, and each category also
has its own hatching, border and text label, so a figure reads printed in grey or by someone who sees no colour.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

# Okabe & Ito (2008), "Color Universal Design"; white is the page, not a category colour.
OKABE_ITO: Dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "bluish green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish purple": "#CC79A7",
}
WHITE = "#FFFFFF"
INK = OKABE_ITO["black"]
MUTED = "#555555"  # lines and text of what is off the path: a grey, not a category colour
MIN_GREY_STEP = 0.2  # of the 0-1 grey range, between the fills of any two categories of one figure


@dataclass(frozen=True)
class Style:
    """How one category is drawn.

    Attributes:
        label: the category's name, written in the legend and in its boxes.
        fill: the box's fill (an Okabe-Ito colour, or white).
        hatch: a matplotlib hatch pattern ("" for none).
        line: the border's line style, "solid" or "dashed".
        text: the text colour inside the box.
    """

    label: str
    fill: str
    hatch: str = ""
    line: str = "solid"
    text: str = INK


# The saved copy of M2's head weight, over one training step.
TIMELINE: Dict[str, Style] = {
    "alive": Style("alive", OKABE_ITO["bluish green"]),
    "freed": Style("freed", WHITE, hatch="///", line="dashed"),
    "stale": Style("stale", OKABE_ITO["orange"], hatch="..."),
    "error": Style("error", INK, text=WHITE),
}
# The nodes a restricted backward runs, and the ones it does not.
VISITS: Dict[str, Style] = {
    "visited": Style("runs (frees its saved tensors)", OKABE_ITO["sky blue"]),
    "not visited": Style("does not run (keeps them)", WHITE, hatch="///", line="dashed", text=MUTED),
}
# Which loss's gradient a model receives: crossed hatching for the sum of the two single hatchings.
GRADIENTS: Dict[str, Style] = {
    "L1": Style("L1", OKABE_ITO["yellow"], hatch="///"),
    "L2": Style("L2", OKABE_ITO["sky blue"], hatch="\\\\\\"),
    "L1+L2": Style("L1+L2", OKABE_ITO["blue"], hatch="xxx"),
}
STYLES: Dict[str, Dict[str, Style]] = {
    "step_timeline": TIMELINE,
    "backward_visits": VISITS,
    "who_trains_whom": GRADIENTS,
}


def grey_level(colour: str) -> float:
    """``colour`` ("#RRGGBB") in grey, 0 (black) to 1 (white), with the ITU-R 601 weights PIL's "L" mode uses."""
    red, green, blue = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return (red * 299 + green * 587 + blue * 114) / 1000 / 255

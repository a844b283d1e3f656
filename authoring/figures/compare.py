"""Whether a shipped image is what the code draws now, allowing for a different matplotlib.

- PNG, when drawn by the same matplotlib minor release (3.11.x; the SVG's metadata says which): the same size, and at
  most ``MAX_CHANGED`` of the pixels differ by more than ``PIXEL_STEP`` (0-255, in any channel). A FreeType or
  patch release may move antialiasing by a shade, which this allows; a changed label, colour or position changes
  far more pixels, which it does not. Another minor release lays text out differently (measured: 3.10 against
  3.11 moves 3-8 % of the pixels), so there the images are not compared, only reported; what each picture says
  is tested against PyTorch either way (tests/course/test_figures.py).
- SVG: byte for byte when drawn by the same matplotlib version; across versions an SVG's path data changes
  wholesale, so there the PNG's verdict stands for both.
"""
from __future__ import annotations

import io
import re
from typing import Optional

import matplotlib
import numpy
from PIL import Image

PIXEL_STEP = 64
MAX_CHANGED = 0.005  # of the pixels
CREATOR = re.compile(rb"<dc:title>Matplotlib v([^,<]+)")


def png_difference(shipped: bytes, drawn: bytes) -> Optional[str]:
    """None when the two PNGs match within the tolerance, else what differs."""
    if shipped == drawn:
        return None
    old, new = (Image.open(io.BytesIO(data)).convert("RGB") for data in (shipped, drawn))
    if old.size != new.size:
        return f"its size is {old.size[0]}x{old.size[1]} px, the code draws {new.size[0]}x{new.size[1]} px"
    change = numpy.abs(numpy.asarray(old, dtype=numpy.int16) - numpy.asarray(new, dtype=numpy.int16)).max(axis=2)
    changed = float((change > PIXEL_STEP).mean())
    if changed > MAX_CHANGED:
        return f"{changed:.2%} of its pixels differ from what the code draws (at most {MAX_CHANGED:.1%} may)"
    return None


def same_minor_release(version: Optional[str]) -> bool:
    """Whether ``version`` is this matplotlib's major.minor release (None: unknown, treated as the same)."""
    return version is None or version.split(".")[:2] == matplotlib.__version__.split(".")[:2]


def svg_drawn_by(svg: bytes) -> Optional[str]:
    """The matplotlib version that wrote ``svg``, or None when it does not say."""
    found = CREATOR.search(svg)
    return found.group(1).decode() if found else None


def svg_difference(shipped: bytes, drawn: bytes) -> Optional[str]:
    """None when the SVGs are equal or come from different matplotlib versions, else what differs."""
    if shipped == drawn or svg_drawn_by(shipped) != matplotlib.__version__:
        return None
    return "it differs from what the code draws with the same matplotlib version"

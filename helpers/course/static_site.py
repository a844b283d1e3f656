"""The course built as a website: each widget gives way to its static form, since nothing can run it there."""
from __future__ import annotations

import os

from helpers.tools.display import in_notebook

STATIC_SITE_VARIABLE = "COURSE_STATIC_SITE"


def building_static_site() -> bool:
    """True while the course's website is built (``bash book/build`` sets the variable for the kernels it starts)."""
    return os.environ.get(STATIC_SITE_VARIABLE) == "1"


def widgets_wanted() -> bool:
    """True in a live notebook, where buttons can answer a click; False in plain Python and on the website."""
    return in_notebook() and not building_static_site()

"""Showing a notebook's own plot in the course's language: ``show_plot(figure)`` in place of ``plt.show()``.

In English it is ``plt.show()``. Where the helpers speak Chinese (``COURSE_LANGUAGE``), the figure's words (axis
labels, titles, legends, tick labels) are translated from the helpers' catalog and drawn in a font for Chinese; where
the machine has no such font, the plot keeps its English words and a one-line note says how to get Chinese ones
(never boxes for missing characters). A word the catalog does not hold (code, such as ``autograd.grad``) stays as
it is. A label made from a template (``"teacher, {kind}"``) is translated with its field's value translated too.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional

from helpers.course.chinese_font import chinese_font
from helpers.language import chosen_language, marked, tr, translated

# The words of the notebooks' plots (04: costs and distillation, 08: replicas drifting), with the names of the
# recipes they show. tests/course/test_plots.py checks that every word the notebooks draw is here.
PLOT_WORDS = (
    marked("backward nodes run"), marked("step time / one-pass (this run)"), marked("saved tensors (MiB)"),
    marked("at the peak"), marked("left alive after the step"), marked("epoch"), marked("test accuracy"),
    marked("teacher, {kind}"), marked("student, {kind}"), marked("copied fix"), marked("recipe (c)"),
    marked("(c) detach the other"), marked("(d) sum = one-pass limit"), marked("detach the other"),
    marked("SGD step"), marked("largest |rank 0 - rank 1| weight"), marked("Replicas drifting apart"),
    marked("{name} (stays at 0)"),
)
METADATA_KEY = "course_plot"  # the output's metadata: the words drawn and the font, for the tests


def _template(word: str) -> Optional["re.Pattern[str]"]:
    """A pattern matching what a word with ``{fields}`` becomes once filled; None for a word without fields."""
    if "{" not in word:
        return None
    parts = re.split(r"\{(\w+)\}", word)
    pattern = "".join(re.escape(part) if index % 2 == 0 else f"(?P<{part}>.+)" for index, part in enumerate(parts))
    return re.compile(f"^{pattern}$")


def translated_label(text: str) -> str:
    """``text`` in the helpers' language when it is one of ``PLOT_WORDS`` (filled, for a template); else as it is."""
    if text in PLOT_WORDS and "{" not in text:
        return translated(text)
    for word in PLOT_WORDS:
        pattern = _template(word)
        match = pattern.match(text) if pattern else None
        if match:
            return translated(word).format(**{name: translated_label(value) for name, value in match.groupdict().items()})
    return text


def _translate_words(figure) -> None:  # type: ignore[no-untyped-def] # a matplotlib Figure
    """Every text of ``figure`` translated. Tick labels made of words (categories, or set by hand) are made when the
    figure is drawn: their formatter is wrapped to translate what it makes. Number formatters are left alone."""
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    for text in figure.findobj(Text):
        text.set_text(translated_label(text.get_text()))
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, (StrCategoryFormatter, FixedFormatter)):
                axis.set_major_formatter(FuncFormatter(
                    lambda value, position, formatter=formatter: translated_label(formatter(value, position))))


def drawn_words(figure) -> List[str]:  # type: ignore[no-untyped-def] # a matplotlib Figure
    """Every non-empty text ``figure`` draws, tick labels included (it is drawn once to make them)."""
    from matplotlib.text import Text

    figure.canvas.draw()
    return [text.get_text() for text in figure.findobj(Text) if text.get_text().strip() and text.get_visible()]


def show_plot(figure) -> None:  # type: ignore[no-untyped-def] # a matplotlib Figure
    """Show ``figure`` as ``plt.show()`` does, its words in the course's language where a font can draw them."""
    import matplotlib
    import matplotlib.pyplot as plt

    if not chosen_language():
        plt.show()
        return
    font = chinese_font()
    if font is None:
        print(tr("No font that draws this language was found: the plot's words stay as the code writes them. Install "
                 "one (for example fonts-noto-cjk) and run this cell again."))
        _show(figure, {"font": None, "words": drawn_words(figure)})
        return
    _translate_words(figure)
    families = [font, *matplotlib.rcParams["font.sans-serif"]]
    with matplotlib.rc_context({"font.sans-serif": families}):  # matplotlib falls back, glyph by glyph, along the list
        _show(figure, {"font": font, "words": drawn_words(figure)})


def _show(figure, facts: Dict[str, object]) -> None:  # type: ignore[no-untyped-def] # a matplotlib Figure
    """Display ``figure`` now (in IPython, with ``facts`` in the output's metadata), then close it so that the inline
    backend does not show it again; outside IPython, ``plt.show()``."""
    import matplotlib.pyplot as plt

    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython comes with the course
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is None or get_ipython() is None:
        plt.show()
        return
    display(figure, metadata={METADATA_KEY: facts})
    plt.close(figure)

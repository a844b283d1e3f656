"""Showing a notebook's own plot in the course's language: ``show_plot(figure)`` in place of ``plt.show()``.

In English it is ``plt.show()``. Where the helpers speak Chinese (``COURSE_LANGUAGE``), the figure's words are
translated from the helpers' catalog: a text whose whole content (spaces aside) is one of ``PLOT_WORDS`` (axis
labels, titles, legend entries, and the tick labels of category axes or of ticks set by hand), a template such as
``"teacher, {kind}"`` with its field's value translated too. A word the catalog does not hold (code, such as
``autograd.grad``) stays as it is. Each translated text, and each tick label, then lists a font for Chinese after its
own fonts, so matplotlib draws each character in the first font that has it: numbers stay in the figure's own font,
and the figure can be saved or shown again later. Where the machine has no font for Chinese, the plot keeps its
words as the code writes them and a one-line note says how to get one (never boxes for missing characters). The
figure is the learner's: it keeps its translated words afterwards.
"""
from __future__ import annotations

import functools
import re
from typing import Dict, List, Optional

from helpers.chinese_font import chinese_font
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


@functools.lru_cache(maxsize=None)
def _template(word: str) -> Optional["re.Pattern[str]"]:
    """A pattern matching what a word with ``{fields}`` becomes once filled; None for a word without fields."""
    if "{" not in word:
        return None
    parts = re.split(r"\{(\w+)\}", word)
    pattern = "".join(re.escape(part) if index % 2 == 0 else f"(?P<{part}>.+)" for index, part in enumerate(parts))
    return re.compile(f"^{pattern}$")


def translated_label(text: str) -> str:
    """``text`` in the helpers' language when, spaces aside, it is one of ``PLOT_WORDS`` (filled, for a template);
    else as it is."""
    words = " ".join(text.split())
    if words in PLOT_WORDS and "{" not in words:
        return translated(words)
    for word in PLOT_WORDS:
        pattern = _template(word)
        match = pattern.match(words) if pattern else None
        if match:
            values = {name: translated_label(value) for name, value in match.groupdict().items()}
            return translated(word).format(**values)
    return text


def _with_font(families: object, font: str) -> List[str]:
    """A text's font families with ``font`` added last (matplotlib falls back to it for the characters the others
    lack)."""
    listed = [families] if isinstance(families, str) else list(families)  # type: ignore[call-overload]
    return listed if font in listed else [*listed, font]


def _translate_words(figure, font: str) -> None:  # type: ignore[no-untyped-def] # a matplotlib Figure
    """Every text of ``figure`` translated and able to draw Chinese in ``font``. Tick labels made of words
    (categories, or set by hand) are made when the figure is drawn: their formatters are wrapped to translate what
    they make. Number formatters are left alone."""
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    for text in figure.findobj(Text):
        text.set_text(translated_label(text.get_text()))
        text.set_fontfamily(_with_font(text.get_fontfamily(), font))
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            for formatter, set_formatter in ((axis.get_major_formatter(), axis.set_major_formatter),
                                             (axis.get_minor_formatter(), axis.set_minor_formatter)):
                if isinstance(formatter, (StrCategoryFormatter, FixedFormatter)):
                    set_formatter(FuncFormatter(
                        lambda value, position, formatter=formatter: translated_label(formatter(value, position))))
            _tick_labels_in(axis, font)


def _tick_labels_in(axis, font: str) -> None:  # type: ignore[no-untyped-def] # a matplotlib Axis
    """The axis's tick labels, those made later too, able to draw Chinese in ``font``."""
    families = _with_font(axis.get_ticklabels()[0].get_fontfamily() if axis.get_ticklabels() else "sans-serif", font)
    try:
        axis.set_tick_params(which="both", labelfontfamily=families)
    except (TypeError, ValueError):  # matplotlib before 3.8 has no labelfontfamily: set the labels that exist
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            tick.label1.set_fontfamily(families)
            tick.label2.set_fontfamily(families)


def drawn_words(figure) -> List[str]:  # type: ignore[no-untyped-def] # a matplotlib Figure
    """Every non-empty text ``figure`` draws, tick labels included (it is drawn once to make them)."""
    from matplotlib.text import Text

    figure.canvas.draw()
    return [text.get_text() for text in figure.findobj(Text) if text.get_text().strip() and text.get_visible()]


def show_plot(figure) -> None:  # type: ignore[no-untyped-def] # a matplotlib Figure
    """Show ``figure`` as ``plt.show()`` does, its words in the course's language where a font can draw them."""
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
    _translate_words(figure, font)
    _show(figure, {"font": font, "words": drawn_words(figure)})


def _show(figure, facts: Dict[str, object]) -> None:  # type: ignore[no-untyped-def] # a matplotlib Figure
    """Under the inline backend (Jupyter), display ``figure`` now with ``facts`` in the output's metadata, and close
    it so that the backend does not show it again; with any other backend (a window, ipympl), ``plt.show()``."""
    import matplotlib
    import matplotlib.pyplot as plt

    if "inline" not in matplotlib.get_backend():
        plt.show()
        return
    from IPython.display import display

    display(figure, metadata={METADATA_KEY: facts})
    plt.close(figure)

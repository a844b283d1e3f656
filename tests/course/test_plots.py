"""``show_plot``: the notebooks' own plots in the course's language, drawn in a font for Chinese, or kept in English
with a one-line note where there is none. The Chinese website's build shows the real plots of notebooks 04 and 08
(tests/site/test_site.py looks at the words they drew)."""
from __future__ import annotations

import contextlib
import io
import os
from unittest import mock

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
import pytest  # noqa: E402

from helpers.course import plots  # noqa: E402
from helpers.chinese_font import CJK_FONTS, _draws_chinese, chinese_font  # noqa: E402
from helpers.language import LANGUAGE_VARIABLE  # noqa: E402
from tests.ci import unavailable  # noqa: E402
from tests.plot_words import texts_without_glyphs, words_left_in_english, words_without_glyphs  # noqa: E402


def _figure():
    """A plot with the words notebook 04's and 08's plots use: labels, a legend from templates, category ticks."""
    figure, axis = plt.subplots()
    axis.barh(["copied fix", "(c) detach the other", "autograd.grad"], [3, 2, 1], label="at the peak")
    axis.plot([0, 1], [0, 1], label="teacher, copied fix")
    axis.plot([0, 1], [1, 0], label="detach the other (stays at 0)")
    axis.set(xlabel="SGD step", ylabel="test accuracy", title="Replicas drifting apart")
    axis.legend()
    return figure


def _shown(language: str, without_font: bool = False):
    """What ``show_plot`` displays in ``language`` (on a machine without a font for Chinese, if asked): the figure
    and its facts."""
    shown = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, {LANGUAGE_VARIABLE: language}))
        stack.enter_context(mock.patch.object(plots, "_show", lambda figure, facts: shown.append((figure, facts))))
        if without_font:
            stack.enter_context(mock.patch.object(plots, "chinese_font", lambda: None))
        plots.show_plot(_figure())
    return shown


def _require_font() -> str:
    """The font for Chinese this machine has; the test skips without one (fails in CI, which installs one)."""
    font = chinese_font()
    if font is None:
        unavailable("no font for Chinese on this machine (CI installs fonts-wqy-microhei)")
    return font


def test_in_english_it_is_plt_show():
    figure = _figure()
    with mock.patch.dict(os.environ, {LANGUAGE_VARIABLE: ""}), mock.patch.object(plt, "show") as show:
        plots.show_plot(figure)
    show.assert_called_once_with()
    assert "Replicas drifting apart" in plots.drawn_words(figure) and "copied fix" in plots.drawn_words(figure)


def test_in_chinese_every_word_is_chinese_and_drawn_by_its_font():
    font = _require_font()
    (figure, facts), = _shown("zh_CN")
    words = facts["words"]
    assert facts["font"] == font
    assert "副本逐渐偏离" in words and "广为流传的修复" in words, words
    assert "教师模型，广为流传的修复" in words and "分离另一个模型（保持为 0）" in words, "templates and their fields"
    assert "autograd.grad" in words, "code stays as it is"
    assert not words_left_in_english(words), words
    assert not texts_without_glyphs(figure), "each text draws every character with its own fonts"


def test_the_figure_draws_chinese_later_too_in_serif_and_with_its_own_number_font():
    """The fonts go with each text, not with a setting in force while it is shown: saving it later draws no box; a
    serif figure gets the Chinese font too; its numbers keep the figure's own font (the Chinese one comes last)."""
    _require_font()
    with matplotlib.rc_context({"font.family": "serif"}):
        figure = _figure()
    with mock.patch.dict(os.environ, {LANGUAGE_VARIABLE: "zh_CN"}), \
            mock.patch.object(plots, "_show", lambda figure, facts: None):
        plots.show_plot(figure)
    figure.savefig(io.BytesIO(), format="png")  # after the show, outside any setting
    assert not texts_without_glyphs(figure)
    assert all(text.get_fontfamily()[0] == "serif" for text in figure.findobj(matplotlib.text.Text)
               if text.get_text()), "each text's own font first"


def test_a_label_with_spaces_or_line_breaks_around_it_is_translated():
    with mock.patch.dict(os.environ, {LANGUAGE_VARIABLE: "zh_CN"}):
        assert plots.translated_label("  test accuracy\n") == "测试准确率"
        assert plots.translated_label("Replicas drifting\napart") == "副本逐渐偏离"


def test_with_a_window_backend_it_leaves_the_showing_to_plt_show():
    """Only Jupyter's inline backend gets the figure displayed (and closed); a window or ipympl gets plt.show()."""
    figure = _figure()
    with mock.patch.object(matplotlib, "get_backend", lambda: "TkAgg"), mock.patch.object(plt, "show") as show:
        plots._show(figure, {})
    show.assert_called_once_with()
    assert plt.fignum_exists(figure.number)
    plt.close(figure)


def test_numbers_are_drawn_as_in_english():
    """Only words are translated: the ticks of a number axis read the same in both languages (0.25 stays 0.25)."""
    def numbers(language: str):
        figure, axis = plt.subplots()
        axis.plot([-0.5, 0.75], [0.05, 0.95])
        axis.set_xticks([-0.5, -0.25, 0, 0.25, 0.5, 0.75])
        with mock.patch.dict(os.environ, {LANGUAGE_VARIABLE: language}), \
                mock.patch.object(plots, "_show", lambda figure, facts: None):
            if language:
                plots.show_plot(figure)
        figure.canvas.draw()
        return [label.get_text() for label in axis.get_xticklabels() + axis.get_yticklabels()]

    english = numbers("")
    assert "0.25" in english and numbers("zh_CN") == english


def test_without_a_font_for_chinese_the_words_stay_english_with_a_note(capsys):
    (figure, facts), = _shown("zh_CN", without_font=True)
    assert facts["font"] is None and "Replicas drifting apart" in facts["words"]
    note = capsys.readouterr().out.strip()
    assert len(note.splitlines()) == 1 and "字体" in note and "fonts-noto-cjk" in note


def test_the_checks_catch_english_words_and_missing_glyphs():
    assert words_left_in_english(["copied fix", "autograd.grad", "副本"]) == ["copied fix"]
    assert words_without_glyphs(["副本"], None) == ["副本"], "DejaVu Sans has no Chinese: a box"


def test_a_font_installed_after_matplotlib_cached_its_fonts_is_found():
    """matplotlib's font list predates a font installed since (fonts-noto-cjk on Colab): ``chinese_font`` looks at
    the system's files again, so running the cell again finds it."""
    from matplotlib import font_manager

    font = _require_font()
    path = next(entry.fname for entry in font_manager.fontManager.ttflist if entry.name == font)
    cached = [entry for entry in font_manager.fontManager.ttflist  # as if no font for Chinese were cached yet
              if entry.fname != path and entry.name not in CJK_FONTS and not _draws_chinese(entry.fname)]
    with mock.patch.object(font_manager.fontManager, "ttflist", cached), \
            mock.patch.object(font_manager, "findSystemFonts", lambda: [path]):
        assert chinese_font() == font

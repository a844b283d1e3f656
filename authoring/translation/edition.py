"""Writing a Chinese notebook from an English one and its catalog.

Markdown cells take their Chinese from the catalog (lines joined where a break would show as a space between two
characters: cjk.py); a check cell gets its title and its ``✓ checked:`` line in Chinese, a ``predict`` card its
question, choices and explanation, and a printed sentence its Chinese (printed.py); every other character of every
code cell stays the English one (``english_code`` undoes the check lines, ``skeleton`` blanks the card's strings,
and the tests compare the results with the English cell byte for byte). An entry that is missing or empty leaves the
English in place, one that is stale keeps its old Chinese, each with a one-line note, so that an author sees it. A
title or a card's string that is not current stays English (an old label could pair with the wrong outcome; a code
cell has no room for a note). ``python -m authoring.generate --check`` fails on all of them.
"""
from __future__ import annotations

import copy
import json
from typing import Dict, List, Optional, Tuple

import nbformat
import polib

from authoring.launch_cells import is_setup_cell, with_badges, with_launch_cells
from authoring.release_json import Release
from authoring.translation import printed
from authoring.translation.cjk import joined
from authoring.translation.catalog import LOCALE, TEXT_SUFFIX, TITLE_SUFFIX, Catalog, by_context, card_choices, \
    chinese, current, learner_strings, title_text
from helpers.course.figures import FIGURES, attachment, figure_path

FOLDER = "zh-CN"  # solutions/zh-CN/ and notebooks/zh-CN/
LANGUAGE = LOCALE  # what the Chinese set-up cell sets COURSE_LANGUAGE to
SETUP_CONTEXT = "colab-setup" + TITLE_SUFFIX  # the Colab set-up cell's title, in the shared catalog
CHECK_TITLE_EN, CHECK_TITLE_ZH = "#@title ✓ check: ", "#@title ✓ 检查："
CHECKED_EN, CHECKED_ZH = "✓ checked: ", "✓ 已检查："
NOT_TRANSLATED = "> （本段尚未翻译，下面是英文原文。）\n\n"
STALE = "> （英文原文已修改，本段译文有待更新。）\n\n"


class TranslationError(ValueError):
    """A catalogued string cannot be written into its cell (a check line that is not where the title says)."""


def markdown_english(cell: nbformat.NotebookNode) -> str:
    """A markdown cell's English as the catalog keys it: without the generated launch badges."""
    return with_badges(cell.source, "")


def _markdown(entry: Optional[polib.POEntry], english: str) -> str:
    """A markdown cell's Chinese, its lines joined where a break would show as a space between two characters."""
    text = chinese(entry)
    if text is None:
        return NOT_TRANSLATED + english
    text = joined(text)
    if not current(entry, english):
        return STALE + text
    return text


def _current_text(entry: Optional[polib.POEntry], english: str) -> Optional[str]:
    """The entry's Chinese when it translates ``english`` as it is now; else None (the English stays)."""
    return chinese(entry) if current(entry, english) else None


def _printed_text(entry: Optional[polib.POEntry], one: printed.Printed) -> Optional[str]:
    """A printed sentence's current Chinese, if it can stand in the code (else None: the English stays, and
    ``--check`` says why)."""
    text = _current_text(entry, one.english)
    return None if text is None or printed.translation_problem(one.english, text, one.is_f_string) else text


def check_line(text: str, prefix: str) -> str:
    """The Python literal of a check cell's printed line (``print("✓ checked: ...")``)."""
    return json.dumps(prefix + text, ensure_ascii=False)


def translated_check(source: str, english: str, translation: str, where: str) -> str:
    """A check cell's source with its title and its printed line in Chinese; nothing else changes."""
    if "\n" in translation:
        raise TranslationError(f"{where}: a check title's translation must be one line")
    first, newline, rest = source.partition("\n")
    if first != CHECK_TITLE_EN + english:
        raise TranslationError(f"{where}: the title line is not '{CHECK_TITLE_EN}{english}'")
    literal = check_line(english, CHECKED_EN)
    if rest.count(literal) != 1:
        raise TranslationError(f"{where}: the check prints {literal} not exactly once")
    return CHECK_TITLE_ZH + translation + newline + rest.replace(literal, check_line(translation, CHECKED_ZH))


def english_code(source: str, english: str, translation: str) -> str:
    """The inverse of ``translated_check``: the English cell a Chinese check cell was written from."""
    first, newline, rest = source.partition("\n")
    return (CHECK_TITLE_EN + english + newline + rest.replace(check_line(translation, CHECKED_ZH),
                                                              check_line(english, CHECKED_EN)))


def with_shown_strings(source: str, translations: List[Optional[str]]) -> str:
    """``source`` with each string it shows a learner replaced by its translation (None: left as it is)."""
    spans = learner_strings(source)
    for (start, end, _), text in sorted(zip(spans, translations), reverse=True):
        if text is not None:
            source = source[:start] + json.dumps(text, ensure_ascii=False) + source[end:]
    return source


def skeleton(source: str) -> Tuple[str, List[str]]:
    """``source`` with each string it shows a learner blanked to ``""`` and each sentence it prints reduced to its
    fields, and those strings in order: two cells with the same skeleton differ only in what they show."""
    spans = learner_strings(source)
    return printed.skeleton(with_shown_strings(source, [""] * len(spans))), [text for _, _, text in spans]


def with_chinese_launch_cells(notebook: nbformat.NotebookNode, release: Release, path: str,
                              shared: Catalog) -> nbformat.NotebookNode:
    """``with_launch_cells`` for a Chinese notebook at ``path``: its own badges (Kaggle's too), the set-up cell's
    title in Chinese."""
    notebook = with_launch_cells(notebook, release, path, kaggle=True, language=LANGUAGE)
    message = by_context(shared).get(SETUP_CONTEXT)
    for cell in notebook.cells:
        if is_setup_cell(cell):
            english = title_text(cell, checks_only=False) or ""
            title = chinese(message) if current(message, english) else english
            if "\n" in title:
                raise TranslationError(f"{path}: the set-up cell's title must be one line")
            cell.source = "#@title " + title + "\n" + cell.source.partition("\n")[2]
    return notebook


def setup_title(notebook: nbformat.NotebookNode) -> Dict[str, str]:
    """The shared catalog's entries found in ``notebook``: the Colab set-up cell's title."""
    for cell in notebook.cells:
        if is_setup_cell(cell):
            return {SETUP_CONTEXT: title_text(cell, checks_only=False) or ""}
    return {}


def _with_chinese_figures(cell: nbformat.NotebookNode) -> None:
    """A markdown cell's attached course figures replaced by their Chinese drawings, where they exist."""
    for name in list(cell.get("attachments", {})):
        figure = name.rsplit(".", 1)[0]
        if figure in FIGURES and figure_path(figure, language=LANGUAGE).exists():
            cell.attachments[name] = attachment(figure, LANGUAGE)


def translated(english: nbformat.NotebookNode, catalog: Catalog, shared: Catalog, release: Release,
               path: str, source_path: str) -> nbformat.NotebookNode:
    """The Chinese solution notebook at ``path``, written from the English one at ``source_path``."""
    notebook = copy.deepcopy(english)
    messages = by_context(catalog)
    for index, cell in enumerate(notebook.cells, 1):
        if cell.cell_type == "markdown":
            text = markdown_english(cell)
            if text.strip():
                cell.source = _markdown(messages.get(cell.id), text)
            _with_chinese_figures(cell)
            continue
        where = f"{source_path}, cell {index}"
        shown = [_current_text(messages.get(f"{cell.id}{TEXT_SUFFIX}{number}"), text)
                 for number, (_, _, text) in enumerate(learner_strings(cell.source))]
        cell.source = with_shown_strings(cell.source, shown)
        title = title_text(cell)
        if title is None:
            entries = printed.printed_entries(cell.id, cell.source)
            cell.source = printed.with_printed(cell.source, [(one, _printed_text(messages.get(key), one))
                                                             for key, one in entries])
        if any(len(set(choices)) != len(choices) for choices in card_choices(cell.source)):
            raise TranslationError(f"{where}: two of a card's strings are translated alike")
        if title is not None:
            text = _current_text(messages.get(cell.id + TITLE_SUFFIX), title) or title
            cell.source = translated_check(cell.source, title, text, where)
    notebook.metadata["course"] = {
        "language": FOLDER,
        "translated_from": source_path,
        "note": f"Generated by `python -m authoring.generate` from {source_path} and its catalog in i18n/: "
                "edit those, not this copy.",
    }
    return with_chinese_launch_cells(notebook, release, path, shared)

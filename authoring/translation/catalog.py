"""The translatable texts of a notebook, and the PO catalog that holds their translations (read with polib).

One entry per text, keyed by ``msgctxt``: a markdown cell by its id (``a266346e``), a check cell's title by its id
and ``#title`` (``216205b5#title``), a string a code cell shows a learner by its id and ``#text.N``
(``f5f1924e#text.0``: a ``predict`` card's question, choices and explanation, in the order they appear), and a
sentence it prints by its id and ``#print.N`` (printed.py).
``msgid`` is the English the entry translates. When the English changes,
``merged`` keeps the old Chinese, marks the entry ``fuzzy`` and keeps the English it was made from as its previous
``msgid`` (``#| msgid`` in the file), as gettext's ``msgmerge`` does; a translator updates it in any PO editor
(Poedit, Weblate, Crowdin) and removes the flag.

polib is the PO library translation tools build on (Weblate, translate-toolkit). It reads and writes every part of
an entry this needs, the previous ``msgid`` of a stale entry included, exactly as GNU gettext does; Babel, which
JupyterLab installs anyway, writes a multi-line previous ``msgid`` on one line and drops it when reading.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import nbformat
import polib

from authoring.translation.printed import node_spans, printed_entries

LOCALE = "zh_CN"  # the Chinese edition's language: its catalogs' folder, its images' folder, COURSE_LANGUAGE
CATALOGS = Path("i18n") / LOCALE  # every catalog of the Chinese edition
TITLE_SUFFIX = "#title"
TEXT_SUFFIX = "#text."
LEARNER_CALLS = ("predict",)  # calls whose question, choices (a dict's keys) and explanation a learner reads
CHECK_TITLE = re.compile(r"^#@title ✓ check: (?P<text>.+)$")
ANY_TITLE = re.compile(r"^#@title (?P<text>.+)$")
HEADER = ("The course's Chinese edition: one entry per cell, keyed by the cell's id.\n"
          "Edit msgstr only; `python -m authoring.generate --update-catalogs` keeps msgid in step with the English.")
METADATA = {"Project-Id-Version": "two-losses-course", "Language": LOCALE, "MIME-Version": "1.0",
            "Content-Type": "text/plain; charset=UTF-8", "Content-Transfer-Encoding": "8bit"}

Entries = Dict[str, str]  # msgctxt -> English, in cell order
Catalog = polib.POFile

def title_text(cell: nbformat.NotebookNode, checks_only: bool = True) -> Optional[str]:
    """The text of a code cell's ``#@title`` line (after ``✓ check:`` for a check cell); None without one."""
    if cell.cell_type != "code" or not cell.source.startswith("#@title "):
        return None
    match = (CHECK_TITLE if checks_only else ANY_TITLE).match(cell.source.split("\n", 1)[0])
    return match["text"] if match else None


def _is_text(node: Optional[ast.expr]) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _argument(call: ast.Call, position: int, name: str) -> Optional[ast.expr]:
    """A call's argument, given by position or by name; None when absent."""
    if len(call.args) > position:
        return call.args[position]
    return next((keyword.value for keyword in call.keywords if keyword.arg == name), None)


def _shown_arguments(call: ast.Call) -> List[ast.expr]:
    """What a ``predict(question, choices, run, expected, explanation)`` call shows: the question, each choice's
    label (the keys of a dict written out) and the explanation, as written in the call."""
    question, choices = _argument(call, 0, "question"), _argument(call, 1, "choices")
    explanation = _argument(call, 4, "explanation")
    shown = [] if question is None else [question]
    if isinstance(choices, ast.Dict):
        shown += [key for key in choices.keys if key is not None]
    elif choices is not None:
        shown.append(choices)
    return shown + ([] if explanation is None else [explanation])


def _learner_calls(tree: ast.AST) -> List[ast.Call]:
    """The calls of ``predict`` by its plain name (as the notebooks import it), in source order."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in LEARNER_CALLS]


def learner_strings(source: str) -> List[Tuple[int, int, str]]:
    """``(start, end, text)`` of each string literal a code cell shows a learner (see ``LEARNER_CALLS``), by
    position in ``source``; none in a cell that is not plain Python (a cell magic: ``untranslatable`` says so)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    span = node_spans(source)
    return sorted((*span(node), node.value) for call in _learner_calls(tree) for node in _shown_arguments(call)
                  if _is_text(node))


def card_choices(source: str) -> List[List[str]]:
    """The choice labels of each ``predict`` card in ``source`` (the keys of its dict, as written)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    cards = [_argument(call, 1, "choices") for call in _learner_calls(tree)]
    return [[key.value for key in choices.keys if _is_text(key)] for choices in cards if isinstance(choices, ast.Dict)]


def untranslatable(source: str) -> List[str]:
    """What a code cell shows a learner that the catalog cannot hold: a ``predict`` argument that is not one string
    literal (an f-string, a sum, a name), or a ``predict`` call in a cell that is not plain Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ["a predict call in a cell that is not plain Python"] if "predict(" in source else []
    return [f"predict's {ast.unparse(node)[:60]!r} is not one string literal" for call in _learner_calls(tree)
            for node in _shown_arguments(call) if not _is_text(node)]


def notebook_entries(notebook: nbformat.NotebookNode, markdown_english: Dict[str, str]) -> Entries:
    """The texts of ``notebook`` to translate: each markdown cell (as ``markdown_english`` gives its English, badges
    left out), each check cell's title, and the strings code cells show. The Colab set-up cell is the shared
    catalog's."""
    entries: Entries = {}
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            if markdown_english[cell.id].strip():
                entries[cell.id] = markdown_english[cell.id]
        else:
            title = title_text(cell)
            if title is not None:
                entries[cell.id + TITLE_SUFFIX] = title
            for number, (_, _, text) in enumerate(learner_strings(cell.source)):
                entries[f"{cell.id}{TEXT_SUFFIX}{number}"] = text
            if title is None:  # a check cell prints its ✓ line, which its title's entry translates
                entries.update((key, printed.english) for key, printed in printed_entries(cell.id, cell.source))
    return entries


def new_catalog() -> Catalog:
    """An empty Chinese catalog with the course's header."""
    catalog = polib.POFile(wrapwidth=0)
    catalog.header = HEADER
    catalog.metadata = dict(METADATA)
    return catalog


def load(path: Path) -> Catalog:
    """The catalog at ``path``."""
    return polib.pofile(str(path), wrapwidth=0, encoding="utf-8")


def po_text(catalog: Catalog) -> str:
    """``catalog`` as the text of a PO file: no line wrapping, the previous English of stale entries kept."""
    text = str(catalog)
    return text if text.endswith("\n") else text + "\n"


def by_context(catalog: Catalog) -> Dict[str, polib.POEntry]:
    """The catalog's entries by ``msgctxt`` (obsolete ones and entries without a context are left out)."""
    return {entry.msgctxt: entry for entry in catalog if entry.msgctxt and not entry.obsolete}


def _cell(context: str) -> str:
    """The cell a ``msgctxt`` belongs to (``f5f1924e`` of ``f5f1924e#print.2``)."""
    return context.split("#", 1)[0]


def merged(catalog: Catalog, entries: Entries) -> Catalog:
    """A catalog with exactly ``entries``' keys, in their order: an unchanged entry as it was; one whose cell has an
    entry of the same English under another key (a cell's strings renumbered) with that entry's Chinese; a new one
    empty, or with the Chinese of a dropped entry of the same English (a cell pasted back gets a new id); one whose
    English changed keeps its Chinese, marked ``fuzzy``, with the English it was made from beside it. Entries whose
    cell is gone stay at the end as obsolete (``#~``), as gettext's ``msgmerge`` keeps them."""
    old = by_context(catalog)
    dropped = {entry.msgid: entry for context, entry in old.items() if context not in entries and entry.msgstr}
    in_cell = {(_cell(context), entry.msgid): entry for context, entry in old.items() if entry.msgstr}
    result = new_catalog()
    result.header = catalog.header or result.header
    result.metadata = dict(catalog.metadata) or result.metadata
    for context, english in entries.items():
        before = old.get(context)
        same_in_cell = in_cell.get((_cell(context), english))
        if (before is None or before.msgid != english) and same_in_cell is not None:
            # the cell's strings were renumbered (one added before it): the entry follows its English
            result.append(polib.POEntry(msgctxt=context, msgid=english, msgstr=same_in_cell.msgstr,
                                        flags=list(same_in_cell.flags), previous_msgid=same_in_cell.previous_msgid))
            dropped.pop(english, None)
        elif (before is None or not before.msgstr) and english in dropped:
            moved = dropped.pop(english)
            result.append(polib.POEntry(msgctxt=context, msgid=english, msgstr=moved.msgstr, flags=list(moved.flags),
                                        previous_msgid=moved.previous_msgid))
        elif before is None or not before.msgstr:
            result.append(polib.POEntry(msgctxt=context, msgid=english, msgstr=""))
        elif before.msgid == english:
            result.append(before)
        else:
            previous = before.previous_msgid if before.fuzzy and before.previous_msgid else before.msgid
            result.append(polib.POEntry(msgctxt=context, msgid=english, msgstr=before.msgstr, flags=["fuzzy"],
                                        previous_msgid=previous))
    kept_obsolete = [entry for entry in catalog if entry.obsolete]
    for entry in [*dropped.values(), *kept_obsolete]:
        entry.obsolete = True
        result.append(entry)
    return result


def current(entry: Optional[polib.POEntry], english: str) -> bool:
    """True when ``entry`` translates ``english`` as it is now: filled, not fuzzy, made from the same English."""
    return chinese(entry) is not None and not entry.fuzzy and entry.msgid == english


def chinese(entry: Optional[polib.POEntry]) -> Optional[str]:
    """An entry's Chinese, or None where there is none (no entry, or an empty one)."""
    if entry is None or not entry.msgstr.strip():
        return None
    return entry.msgstr


def entry_problem(entry: Optional[polib.POEntry], english: str, copies_allowed: bool = False) -> Optional[str]:
    """Why ``entry`` does not translate ``english`` as it is now (missing, empty, stale, or the English copied where
    a copy is not ``copies_allowed``); None when it does."""
    if entry is None:
        return "is missing"
    if chinese(entry) is None:
        return "is empty"
    if not current(entry, english):
        return "is stale: its English changed (update the Chinese, then remove the fuzzy flag)"
    if not copies_allowed and entry.msgstr.strip() == english.strip() and any(c.isalpha() for c in english):
        return "is the English copied, not translated"
    return None


def problems(catalog: Catalog, entries: Entries, name: str) -> List[str]:
    """What keeps ``catalog`` from translating ``entries``: missing, empty, stale (English changed) or obsolete."""
    old = by_context(catalog)
    found = [f"{name}: entry {context} {problem}" for context, english in entries.items()
             if (problem := entry_problem(old.get(context), english)) is not None]
    found += [f"{name}: entry {context} is for a cell that no longer exists" for context in old
              if context not in entries]
    return found

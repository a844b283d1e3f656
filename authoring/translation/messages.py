"""What the helpers say, in Chinese: the ``tr("...")`` strings of ``helpers/`` and their catalog.

``extract`` reads every ``tr`` call in the package's source (with ``ast``, as ``xgettext`` would); the catalog
``i18n/zh_CN/helpers.po`` holds one entry per English message (``msgid``), with where it is used as references.
``merged`` keeps the catalog in step with the source the way ``msgmerge`` does: a message whose English changed keeps
the Chinese of the closest old one, marked ``fuzzy`` with that English beside it; a message no longer used stays as
obsolete. ``compiled`` is the ``.mo`` file that ``helpers.language`` reads at run time with the standard library
(the helpers do not need polib). ``problems`` lists what keeps the catalog from translating every message.
"""
from __future__ import annotations

import ast
import difflib
import string
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple

import polib

from authoring.translation.catalog import CATALOGS, LOCALE, Catalog, chinese, entry_problem, load, new_catalog, po_text

MARKERS = ("tr", "marked")  # helpers.language's: translate now, or mark a constant shown later
CATALOG_NAME = "helpers.po"
COMPILED = Path("helpers") / "locale" / LOCALE / "LC_MESSAGES" / "helpers.mo"
SIMILAR = 0.6  # how close an old English must be for its Chinese to be kept, marked fuzzy

Messages = Dict[str, List[str]]  # English -> where it is used ("helpers/x.py:12"), in source order


def _marked_calls(tree: ast.AST) -> List[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id in MARKERS)
        or (isinstance(node.func, ast.Attribute) and node.func.attr in MARKERS))]


def fields(text: str) -> Set[str]:
    """The ``{name}`` fields of a message (``str.format``'s); none in a text that is not a format string."""
    try:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError:  # a lone brace
        return set()


def extract(root: Path) -> Tuple[Messages, List[str]]:
    """Every message ``helpers/`` marks with ``tr`` or ``marked``, and each call that cannot be catalogued: an
    argument that is not one string literal, or fields that are not the values passed."""
    messages: Messages = {}
    found: List[str] = []
    for path in sorted((root / "helpers").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative == "helpers/language.py":  # where the markers are defined, not used
            continue
        for call in sorted(_marked_calls(ast.parse(path.read_text(encoding="utf-8"))), key=lambda c: c.lineno):
            where = f"{relative}:{call.lineno}"
            text = call.args[0] if call.args else None
            if not (isinstance(text, ast.Constant) and isinstance(text.value, str)) or len(call.args) != 1:
                found.append(f"{where}: a marked message is one string literal (its fields as keywords)")
                continue
            passed = {keyword.arg for keyword in call.keywords}
            if None in passed or (passed and fields(text.value) != passed):
                found.append(f"{where}: the message's fields {sorted(fields(text.value))} are not the values "
                             f"passed {sorted(name for name in passed if name)}")
                continue
            messages.setdefault(text.value, []).append(where)
    return messages, found


def _entry(english: str, places: List[str], chinese_text: str = "", **extra: object) -> polib.POEntry:
    flags = ["python-brace-format"] if fields(english) else []
    files = dict.fromkeys(place.rsplit(":", 1)[0] for place in places)  # no line numbers: they move with every edit
    entry = polib.POEntry(msgid=english, msgstr=chinese_text, occurrences=[(file, "") for file in files], **extra)
    entry.flags = flags + [flag for flag in entry.flags if flag not in flags]
    return entry


def merged(catalog: Catalog, messages: Messages) -> Catalog:
    """A catalog with exactly ``messages``, in the order of the source: a known one as it was (its references
    renewed); a new one with the Chinese of the closest message no longer used, marked ``fuzzy`` with that English
    as its previous ``msgid``, or empty; the rest of the unused ones at the end, obsolete."""
    old = {entry.msgid: entry for entry in catalog if not entry.obsolete}
    unused = {english: entry for english, entry in old.items() if english not in messages and entry.msgstr}
    result = new_catalog()
    result.header = catalog.header or ("What the helpers say, in Chinese: one entry per message of helpers/.\n"
                                       "Edit msgstr only; `python -m authoring.generate --update-catalogs` keeps "
                                       "msgid in step with the source.")
    result.metadata = dict(catalog.metadata) or result.metadata
    for english, places in messages.items():
        before = old.get(english)
        if before is not None and before.msgstr:
            result.append(_entry(english, places, before.msgstr, flags=list(before.flags),
                                 previous_msgid=before.previous_msgid))
            continue
        closest = difflib.get_close_matches(english, list(unused), n=1, cutoff=SIMILAR)
        if closest:
            moved = unused.pop(closest[0])
            previous = moved.previous_msgid if moved.fuzzy and moved.previous_msgid else moved.msgid
            result.append(_entry(english, places, moved.msgstr, flags=["fuzzy"], previous_msgid=previous))
        else:
            result.append(_entry(english, places))
    for entry in [*unused.values(), *(entry for entry in catalog if entry.obsolete)]:
        entry.obsolete = True
        result.append(entry)
    return result


def problems(catalog: Catalog, messages: Messages, name: str, copies_allowed: bool = False) -> List[str]:
    """What keeps ``catalog`` from translating ``messages``: a missing, empty, stale or English-copied entry (unless
    ``copies_allowed``: a figure's code or PyTorch's words stay English), a translation whose fields differ from the
    English's, or an entry for a message no longer used."""
    found: List[str] = []
    entries = {entry.msgid: entry for entry in catalog if not entry.obsolete}
    for english in messages:
        entry = entries.get(english)
        where = f"{name}: {english[:70]!r}"
        problem = entry_problem(entry, english, copies_allowed)
        if problem is not None:
            found.append(f"{where} {problem}")
        elif fields(entry.msgstr) != fields(english):
            found.append(f"{where}: the Chinese has the fields {sorted(fields(entry.msgstr))}, the English "
                         f"{sorted(fields(english))}")
    found += [f"{name}: {english[:70]!r} is no longer used (run --update-catalogs)" for english in entries
              if english not in messages]
    return found


def present(path: Path) -> Optional[Catalog]:
    """The catalog at ``path``; None when there is none."""
    return load(path) if path.exists() else None


def updated_file_text(path: Path, messages: Callable[[], Messages]) -> Optional[str]:
    """The catalog at ``path`` brought in step with ``messages()``, as PO text; None where there is no catalog (and
    then ``messages`` is not called: what it reads may not exist either)."""
    catalog = present(path)
    return None if catalog is None else po_text(merged(catalog, messages()))


def file_problems(path: Path, messages: Callable[[], Messages], name: str, copies_allowed: bool = False) -> List[str]:
    """``problems`` of the catalog at ``path`` against ``messages()`` (nothing where there is no catalog)."""
    catalog = present(path)
    return [] if catalog is None else problems(catalog, messages(), name, copies_allowed)


def current_translations(catalog: Catalog) -> Dict[str, str]:
    """English -> translation of every entry that is filled and not stale."""
    return {entry.msgid: entry.msgstr for entry in catalog if entry.translated() and chinese(entry)}


def compiled(catalog: Catalog) -> bytes:
    """The ``.mo`` file of ``catalog``: its current translations only (a fuzzy entry stays English at run time)."""
    return catalog.to_binary()


def catalog_file(root: Path) -> Path:
    """Where the helpers' Chinese catalog lives."""
    return root / CATALOGS / CATALOG_NAME


def load_catalog(root: Path) -> Catalog:
    """The helpers' Chinese catalog; an empty one before it exists."""
    return present(catalog_file(root)) or new_catalog()


def updated_text(root: Path) -> Optional[str]:
    """The helpers' catalog brought in step with the source, as the text of its PO file; None where there is
    neither a catalog nor a marked message."""
    messages = extract(root)[0]
    if not messages and not catalog_file(root).exists():
        return None
    return po_text(merged(load_catalog(root), messages))


def compiled_output(root: Path) -> Dict[Path, bytes]:
    """The compiled catalog the package ships, as path -> bytes (nothing before there is a catalog)."""
    return {root / COMPILED: compiled(load_catalog(root))} if catalog_file(root).exists() else {}


def catalog_problems(root: Path) -> List[str]:
    """What keeps the helpers from speaking Chinese everywhere they speak to a learner."""
    messages, found = extract(root)
    name = catalog_file(root).relative_to(root).as_posix()
    return found + problems(load_catalog(root), messages, name)

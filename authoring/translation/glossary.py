"""The course's Chinese terms (``i18n/zh_CN/glossary.csv``), and the checks that the translations use them.

Each row: the English term, its Chinese (then, after ``|``, forms also accepted once it is introduced, such as the
abbreviation ``DDP``), variants a translator might write instead (wrong here), whether the first
use in each notebook carries the English in parentheses (``计算图（computation graph）``), and optionally a regular
expression for the English (``in[- ]place``). The English is matched as a word, plurals included, outside code
(backticks, fenced blocks, and a name joined by dots such as ``autograd.grad`` in a title) and links' addresses.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, List, Sequence, Tuple

CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
# A name a translation keeps in Latin letters: CamelCase (GradScaler), capitals (DDP, NCCL), or a capitalised word
# of four letters or more inside a sentence (Kaggle, Colab).
NAME = re.compile(r"(?<![\w.])(?:[A-Z][a-z]+[A-Z]\w*|[A-Z]{2,}\w*|(?<=[a-z,;:] )[A-Z][a-z]{3,})\b")
QUOTE = re.compile(r"[A-Za-z][A-Za-z0-9 ,;:'./_-]*[A-Za-z0-9]")  # a run of English inside Chinese text


@dataclass(frozen=True)
class Term:
    """One row of the glossary."""

    english: str
    chinese: str
    variants: Tuple[str, ...]
    parenthesise: bool
    pattern: str
    also: Tuple[str, ...] = ()  # other accepted forms, after the first use (an abbreviation: DDP)

    def used_in(self, chinese_text: str) -> bool:
        """True when ``chinese_text`` uses the term or one of its accepted forms."""
        text = prose(chinese_text)
        return any(form in text for form in (self.chinese, *self.also))

    def appears_in(self, english_text: str) -> bool:
        """True when the English term is used in ``english_text`` (outside code and link addresses)."""
        return re.search(rf"(?<![\w.-])(?:{self.pattern})(?:s|es)?(?![\w-]|\.\w)", prose(english_text),
                         re.IGNORECASE) is not None

    def variants_in(self, chinese_text: str, protected: Sequence[str] = ()) -> List[str]:
        """The variants ``chinese_text`` uses, where the glossary's own term would be right. ``protected``: other
        terms of the glossary, which may contain a variant (梯度累加节点, gradient accumulator, holds 梯度累加)."""
        rest = prose(chinese_text)
        for form in sorted((self.chinese, *self.also, *protected), key=len, reverse=True):
            rest = rest.replace(form, "")
        return [variant for variant in self.variants if variant in rest]


def prose(text: str) -> str:
    """``text`` without code spans, fenced code, links' addresses and emphasis marks."""
    return LINK_TARGET.sub("]", CODE.sub(" ", text)).replace("*", "")


def without_quotes(english: str, chinese: str) -> str:
    """``english`` less the passages the Chinese quotes word for word in emphasis or quotation marks (a PyTorch
    message such as *Trying to backward through the graph a second time*, "marked ready twice"), which are not
    translated. English left unmarked in the Chinese is not a quote, and its terms count."""
    marked = re.findall(r"\*([^*\n]+)\*|\"([^\"\n]+)\"|“([^”\n]+)”", chinese)
    for quote in sorted({part for parts in marked for part in parts if part}, key=len, reverse=True):
        if len(quote.split()) >= 3 and QUOTE.fullmatch(quote.strip()):
            english = prose(english).replace(quote.strip(), " ")
    return english


def names_missing(english: str, chinese: str) -> List[str]:
    """The names the English uses that the Chinese leaves out (a plural counts as its singular: GPUs, GPU)."""
    kept = prose(chinese)
    return sorted({name for name in NAME.findall(prose(english))
                   if name not in kept and not (name.endswith("s") and name[:-1] in kept)})


def load(path: Path) -> List[Term]:
    """The glossary's terms, longest English first (so ``in-place operation`` is tried before ``in-place``)."""
    with path.open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    terms = [Term(row["english"], row["chinese"].split("|")[0], tuple(v for v in row["variants"].split("|") if v),
                  row["parenthesise"] == "yes", row["pattern"] or re.escape(row["english"]),
                  tuple(row["chinese"].split("|")[1:])) for row in rows]
    return sorted(terms, key=lambda term: -len(term.english))


def term_problems(terms: Sequence[Term], pairs: Iterable[Tuple[str, str, str]]) -> List[str]:
    """For ``(where, english, chinese)`` pairs: each term the English uses and the Chinese does not, and each
    variant the Chinese uses."""
    found: List[str] = []
    forms = [form for term in terms for form in (term.chinese, *term.also)]
    for where, english, chinese in pairs:
        found += [f"{where}: the English names {name}, the Chinese does not"
                  for name in names_missing(english, chinese)]
        english = without_quotes(english, chinese)
        for term in terms:
            if term.appears_in(english) and not term.used_in(chinese):
                found.append(f"{where}: the English says '{term.english}', the Chinese lacks '{term.chinese}'")
            longer = [form for form in forms if len(form) > len(term.chinese)]
            for variant in term.variants_in(chinese, longer):
                found.append(f"{where}: '{variant}' where the glossary says '{term.chinese}' ({term.english})")
    return found


def first_use_problems(terms: Sequence[Term], where: str, chinese_cells: Sequence[str]) -> List[str]:
    """Each parenthesised term whose first use in a notebook's text (headings aside: a title stays short) is not
    followed by its English in parentheses: ``计算图（computation graph）``."""
    text = "\n".join(line for cell in chinese_cells for line in prose(cell).split("\n")
                     if not line.lstrip().startswith("#")).replace("[", "").replace("]", "")
    found: List[str] = []
    for term in terms:
        if not term.parenthesise or term.chinese not in text:
            continue
        after = text[text.index(term.chinese) + len(term.chinese):]
        if not re.match(rf"\s*[（(]\s*(?:{term.pattern})", after, re.IGNORECASE):
            found.append(f"{where}: the first '{term.chinese}' is not followed by '（{term.english}）'")
    return found

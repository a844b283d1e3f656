"""The sentences a code cell prints for a learner: each argument of a ``print(...)`` call that is a string (or
f-string) with words in it.

Such a string may be written as several literals side by side (Python joins them), over several lines. Its English,
as the catalog holds it, is the text between the quotes as written, literals joined: an f-string keeps its
``{fields}`` as written (``{bumps}``, ``{error:.1e}``), and a translation must keep the same fields (in any order).
The Chinese notebook gets one literal on one line in its place, ``f"..."`` or ``"..."``; everything else in the
cell stays the English code. A string this cannot write again (a raw or triple-quoted one, or one with a ``"`` in
it) is reported by ``untranslatable`` for the author to rewrite.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

SUFFIX = "#print."  # a printed sentence's catalog key: <cell id>#print.<n>, in the order they appear in the cell
_LITERAL = re.compile(r"""([fFuU]?)(["'])((?:\\.|(?!\2)[^\\\n])*)\2""")  # one single-line literal, f or plain
_FIELD = re.compile(r"(?<!\{)\{(?!\{)(?:[^{}]|\{[^{}]*\})*\}")  # an f-string's {field}, one level of nested braces
_WORDS = re.compile(r"[^\W\d_]{2,}|[\u3400-\u9fff]")  # a word of two letters, or one Chinese character


@dataclass(frozen=True)
class Printed:
    """One printed sentence: where its literal(s) stand in the cell, its English, and whether it is an f-string."""

    start: int
    end: int
    english: str
    is_f_string: bool


def fields(text: str) -> List[str]:
    """The ``{fields}`` of an f-string's text, sorted (``{{`` is a brace, not a field)."""
    return sorted(_FIELD.findall(text))


def _joined(segment: str) -> Optional[Tuple[str, bool]]:
    """The English of literals written side by side, and whether any is an f-string; None for a form this cannot
    write again."""
    pieces, position = [], 0
    while True:
        position += len(segment[position:]) - len(segment[position:].lstrip())
        if position >= len(segment):
            break
        match = _LITERAL.match(segment, position)
        if match is None:
            return None
        pieces.append(match)
        position = match.end()
    if not pieces or any('"' in re.sub(r'\\"', "", piece[3]) for piece in pieces):
        return None
    is_f_string = any(piece[1].lower() == "f" for piece in pieces)
    if not is_f_string:
        return "".join(piece[3] for piece in pieces), False
    return "".join(piece[3] if piece[1].lower() == "f" else piece[3].replace("{", "{{").replace("}", "}}")
                   for piece in pieces), True


def _prints(source: str) -> List[ast.expr]:
    """Each argument of a ``print`` call in ``source`` that is a string with words in it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            for argument in node.args:
                if not isinstance(argument, (ast.Constant, ast.JoinedStr)) or not isinstance(
                        getattr(argument, "value", ""), str):
                    continue
                parts = argument.values if isinstance(argument, ast.JoinedStr) else [argument]
                words = "".join(part.value for part in parts
                                if isinstance(part, ast.Constant) and isinstance(part.value, str))
                if _WORDS.search(words):
                    found.append(argument)
    return found


def _span(source: str, node: ast.expr) -> Tuple[int, int]:
    """Where ``node`` stands in ``source``, as string indices (ast counts columns in UTF-8 bytes)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def index(line_number: int, byte_column: int) -> int:
        line = lines[line_number - 1]
        return starts[line_number - 1] + len(line.encode("utf-8")[:byte_column].decode("utf-8"))

    return index(node.lineno, node.col_offset), index(node.end_lineno, node.end_col_offset)


def printed_strings(source: str) -> List[Printed]:
    """Each sentence ``source`` prints for a learner that the catalog can hold, in the order they stand."""
    found = []
    for node in _prints(source):
        start, end = _span(source, node)
        joined = _joined(source[start:end])
        if joined is not None:
            found.append(Printed(start, end, *joined))
    return sorted(found, key=lambda printed: printed.start)


def untranslatable(source: str) -> List[str]:
    """Each printed sentence with English words that the catalog cannot hold, said as a problem."""
    problems = []
    for node in _prints(source):
        start, end = _span(source, node)
        if _joined(source[start:end]) is None:
            problems.append(f"print's {source[start:end][:60]!r} is raw, triple-quoted or holds a \", which the "
                            "Chinese edition cannot write again")
    return problems


def literal(printed: Printed, text: str) -> str:
    """The Python literal that prints ``text`` where ``printed`` stood (an f-string if it was one)."""
    return ("f" if printed.is_f_string else "") + '"' + text + '"'


def with_printed(source: str, translations: List[Optional[str]]) -> str:
    """``source`` with each printed sentence replaced by its translation (None: left as written)."""
    for printed, text in sorted(zip(printed_strings(source), translations), key=lambda pair: -pair[0].start):
        if text is not None:
            source = source[:printed.start] + literal(printed, text) + source[printed.end:]
    return source


def translation_problem(english: str, chinese: str, is_f_string: bool) -> Optional[str]:
    """Why ``chinese`` cannot stand in for ``english`` in the code: other fields, a line break, or a ``"``."""
    if is_f_string and fields(chinese) != fields(english):
        return f"its fields {fields(chinese)} are not the English's {fields(english)}"
    if "\n" in chinese or re.search(r'(?<!\\)"', chinese):
        return "it must be one line without a \" (write “ ” or an escaped \\\")"
    return None


def skeleton(source: str) -> str:
    """``source`` with each printed sentence reduced to its fields, sorted (``f"{a}{b}"``), or ``""``: two cells
    with the same skeleton differ only in the words they print."""
    printed = printed_strings(source)
    return with_printed(source, ["".join(fields(one.english)) if one.is_f_string else "" for one in printed])

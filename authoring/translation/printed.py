"""The sentences a code cell prints for a learner: each argument of a ``print(...)`` call that is a string (or
f-string) with words in it, or such a string as a branch of ``a if c else b`` / ``a or b`` given to ``print``.

Such a string may be written as several literals side by side (Python joins them), over several lines. Its English,
as the catalog holds it, is the text between the quotes as written, literals joined: an f-string keeps its
``{fields}`` as written (``{bumps}``, ``{error:.1e}``), and a translation must keep the same fields (in any order).
The Chinese notebook gets one literal on one line in its place, ``f"..."`` or ``"..."``; everything else in the
cell stays the English code. A form this cannot write again (a raw or triple-quoted string, one with a ``"`` in it,
a comment between its literals, a ``.format`` or ``%`` string, a cell that does not parse) is reported by
``untranslatable`` for the author to rewrite. A translation is written back only if the literal it makes parses and
holds the English's fields (compared as Python reads them), else ``translation_problem`` says why.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

SUFFIX = "#print."  # a printed sentence's catalog key: <cell id>#print.<n>, in the order they appear in the cell
_LITERAL = re.compile(r"""([fFuU]?)(["'])((?:\\.|(?!\2)[^\\\n])*)\2""")  # one single-line literal, f or plain
_FIELD = re.compile(r"(?<!\{)\{(?!\{)(?:[^{}]|\{[^{}]*\})*\}")  # an f-string's {field}, one level of nested braces
_WORDS = re.compile(r"[^\W\d_]{2,}|[\u3400-\u9fff]")  # a word of two letters, or one Chinese character
_BRACE_OR_NAMED_ESCAPE = re.compile(r"(\\N\{[^}]*\})|([{}])")


@dataclass(frozen=True)
class Printed:
    """One printed sentence: where its literal(s) stand in the cell, its English, and whether it is an f-string."""

    start: int
    end: int
    english: str
    is_f_string: bool


def source_lines(source: str) -> List[str]:
    """``source``'s lines with their ends, split where ``ast`` counts lines (``\\n``, ``\\r\\n``, ``\\r``; not a form
    feed or U+2028, which ``str.splitlines`` also splits at)."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source)


def fields(text: str) -> List[str]:
    """The ``{fields}`` of an f-string's text as written, sorted (``{{`` is a brace, not a field): for messages."""
    return sorted(_FIELD.findall(text))


def _fields_as_read(text: str) -> Optional[List[str]]:
    """The fields of ``f"text"`` as Python reads them (expression, conversion, format), sorted; None when it does
    not parse."""
    try:
        tree = ast.parse('f"' + text + '"', mode="eval")
    except SyntaxError:
        return None
    return sorted(ast.dump(node) for node in ast.walk(tree) if isinstance(node, ast.FormattedValue))


def _doubled_braces(body: str) -> str:
    """A plain literal's text as part of an f-string: its braces doubled, a ``\\N{NAME}`` escape left as it is."""
    return _BRACE_OR_NAMED_ESCAPE.sub(lambda match: match.group(1) or match.group(2) * 2, body)


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
    return "".join(piece[3] if piece[1].lower() == "f" else _doubled_braces(piece[3]) for piece in pieces), True


def _has_words(node: ast.expr) -> bool:
    parts = node.values if isinstance(node, ast.JoinedStr) else [node]
    return bool(_WORDS.search("".join(part.value for part in parts
                                      if isinstance(part, ast.Constant) and isinstance(part.value, str))))


def _shown(argument: ast.expr) -> Iterator[ast.expr]:
    """The strings an argument of ``print`` shows: itself, or the branches of ``a if c else b`` and ``a or b``."""
    if isinstance(argument, ast.IfExp):
        yield from _shown(argument.body)
        yield from _shown(argument.orelse)
    elif isinstance(argument, ast.BoolOp):
        for value in argument.values:
            yield from _shown(value)
    elif isinstance(argument, ast.JoinedStr) or (isinstance(argument, ast.Constant)
                                                   and isinstance(argument.value, str)):
        yield argument


def _print_calls(tree: ast.AST) -> Iterator[ast.Call]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print")


def _prints(source: str) -> List[ast.expr]:
    """Each string with words in it that a ``print`` call in ``source`` shows (see ``_shown``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [node for call in _print_calls(tree) for argument in call.args for node in _shown(argument)
            if _has_words(node)]


def node_spans(source: str) -> Callable[[ast.expr], Tuple[int, int]]:
    """A function giving where a node of ``source``'s tree stands in it, as string indices (ast counts lines where
    ``source_lines`` splits, and columns in UTF-8 bytes)."""
    lines = source_lines(source)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def index(line_number: int, byte_column: int) -> int:
        line = lines[line_number - 1]
        return starts[line_number - 1] + len(line.encode("utf-8")[:byte_column].decode("utf-8"))

    def span(node: ast.expr) -> Tuple[int, int]:
        return index(node.lineno, node.col_offset), index(node.end_lineno, node.end_col_offset)

    return span


def _same_string(node: ast.expr, rebuilt: str) -> bool:
    """True when the one literal ``rebuilt`` reads as the same string as ``node`` (a check of ``_joined``)."""
    try:
        again = ast.parse(rebuilt, mode="eval").body
    except SyntaxError:
        return False
    without_u = re.compile(r", kind='u'")  # a u"..." literal reads as the same string as "..."
    return without_u.sub("", ast.dump(again)) == without_u.sub("", ast.dump(node))


def _found(source: str) -> Iterator[Tuple[int, int, Optional[Printed]]]:
    """Each printed string with words: its span, and the ``Printed`` to translate (None: cannot be)."""
    span = node_spans(source)
    for node in _prints(source):
        start, end = span(node)
        joined = _joined(source[start:end])
        printed = None if joined is None else Printed(start, end, *joined)
        if printed is not None and not _same_string(node, literal(printed, printed.english)):
            printed = None
        yield start, end, printed


def printed_strings(source: str) -> List[Printed]:
    """Each sentence ``source`` prints for a learner that the catalog can hold, in the order they stand."""
    return sorted((printed for _, _, printed in _found(source) if printed is not None),
                  key=lambda printed: printed.start)


def untranslatable(source: str) -> List[str]:
    """Each printed sentence with words that the catalog cannot hold, said as a problem."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ["a print in a cell that is not plain Python"] if re.search(r"\bprint\(", source) else []
    problems = [f"print's {source[start:end][:60]!r} is raw, triple-quoted, holds a \" or a comment between its "
                "literals: the Chinese edition cannot write it again" for start, end, printed in _found(source)
                if printed is None]
    for call in _print_calls(tree):
        for argument in call.args:
            formatted = (isinstance(argument, ast.BinOp) and isinstance(argument.op, ast.Mod)) or (
                isinstance(argument, ast.Call) and isinstance(argument.func, ast.Attribute)
                and argument.func.attr == "format")
            if formatted and any(_has_words(node) for node in ast.walk(argument) if isinstance(node, ast.Constant)):
                problems.append(f"print's {ast.unparse(argument)[:60]!r} is formatted with % or .format: write an "
                                "f-string, which the Chinese edition can translate")
    return problems


def literal(printed: Printed, text: str) -> str:
    """The Python literal that prints ``text`` where ``printed`` stood (an f-string if it was one)."""
    return ("f" if printed.is_f_string else "") + '"' + text + '"'


def printed_entries(cell_id: str, source: str) -> List[Tuple[str, Printed]]:
    """Each printed sentence of a code cell with its catalog key, ``<cell id>#print.N`` (a check cell has none: its
    title's entry translates its ✓ line, which the caller knows)."""
    return [(f"{cell_id}{SUFFIX}{number}", printed) for number, printed in enumerate(printed_strings(source))]


def with_printed(source: str, translations: Sequence[Tuple[Printed, Optional[str]]]) -> str:
    """``source`` with each printed sentence (of ``printed_strings(source)``) replaced by its translation (None: left
    as written)."""
    for printed, text in sorted(translations, key=lambda pair: -pair[0].start):
        if text is not None:
            source = source[:printed.start] + literal(printed, text) + source[printed.end:]
    return source


def translation_problem(english: str, chinese: str, is_f_string: bool) -> Optional[str]:
    """Why ``chinese`` cannot stand in for ``english`` in the code: a line break, a ``"``, a literal that does not
    parse, or (in an f-string) other fields than the English's."""
    if "\n" in chinese or re.search(r'(?<!\\)"', chinese):
        return "it must be one line without a \" (write “ ” or an escaped \\\")"
    try:
        ast.parse(("f" if is_f_string else "") + '"' + chinese + '"', mode="eval")
    except SyntaxError as error:
        return f"the literal it makes does not parse ({error.msg})"
    if is_f_string and _fields_as_read(chinese) != _fields_as_read(english):
        return f"its fields {fields(chinese)} are not the English's {fields(english)}"
    return None


def skeleton(source: str) -> str:
    """``source`` with each printed sentence reduced to its fields, sorted (``f"{a}{b}"``), or ``""``: two cells
    with the same skeleton differ only in the words they print."""
    return with_printed(source, [(one, "".join(fields(one.english)) if one.is_f_string else "")
                                 for one in printed_strings(source)])

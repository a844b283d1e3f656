"""What a notebook should show after Run All, read from its cells' source code.

Nothing here is hard-coded per notebook: the counts come from the calls in each cell (``expect_error``,
``%%expect_error``, ``exercises.check``, ``exercises.hint``, ``predict``, ``draw_graph``, ``draw_saved_graph``),
so the browser tests stay right when the notebooks change.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set

import nbformat
from IPython.core.inputtransformer2 import TransformerManager

GRAPH_FUNCTIONS = frozenset({"draw_graph", "draw_saved_graph"})
_TRANSFORMER = TransformerManager()


@dataclass(frozen=True)
class ExpectedErrorCard:
    """One ``expect_error`` that displays a report: by course kind name (``"backward-twice"``) or exception class.

    Both are None when the kind is a variable (known only at run time): then the card must still show a course
    kind's "Covered in notebook" line.
    """

    cell_index: int
    kind: Optional[str]
    exception_name: Optional[str]


@dataclass(frozen=True)
class PredictQuestion:
    """One displayed ``predict(...)`` widget and its number of choices (None when not a literal dict)."""

    cell_index: int
    choice_count: Optional[int]


@dataclass
class NotebookExpectations:
    """What each cell of one notebook must show; cell indices are positions in the notebook's cell list."""

    cell_count: int
    code_cells: List[int] = field(default_factory=list)
    error_cards: List[ExpectedErrorCard] = field(default_factory=list)
    exercise_checks: Dict[int, str] = field(default_factory=dict)
    hint_cells: Dict[int, str] = field(default_factory=dict)
    graph_cells: Set[int] = field(default_factory=set)
    predict_questions: List[PredictQuestion] = field(default_factory=list)
    language: str = ""  # the COURSE_LANGUAGE a cell sets (the Chinese set-up cell's zh_CN); "" for English


def python_source(cell_source: str) -> str:
    """A cell's code as IPython runs it: magics become ``get_ipython().run_cell_magic(...)`` calls."""
    return _TRANSFORMER.transform_cell(cell_source)


def function_name(call: ast.Call) -> str:
    """``draw_graph`` for ``draw_graph(...)`` and ``helpers.tools.graph.draw_graph(...)``; "" otherwise."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return ""


def qualified_name(call: ast.Call) -> str:
    """``exercises.check`` for ``exercises.check(...)``; the bare name for a plain call."""
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
        return f"{call.func.value.id}.{call.func.attr}"
    return function_name(call)


def displayed_calls(tree: ast.Module) -> Iterator[ast.Call]:
    """Calls whose result a notebook displays: the cell's last expression, and arguments of ``display(...)``."""
    if tree.body and isinstance(tree.body[-1], ast.Expr) and isinstance(tree.body[-1].value, ast.Call):
        yield tree.body[-1].value
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and function_name(node) == "display":
            yield from (argument for argument in node.args if isinstance(argument, ast.Call))


def first_string_argument(call: ast.Call) -> Optional[str]:
    """The call's first positional argument when it is a string literal."""
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def shows_report(call: ast.Call) -> bool:
    """False for ``expect_error(..., show=False)``, True otherwise."""
    for keyword in call.keywords:
        if keyword.arg == "show" and isinstance(keyword.value, ast.Constant):
            return bool(keyword.value.value)
    return True


def error_cards_of(cell_index: int, tree: ast.Module) -> List[ExpectedErrorCard]:
    """The reports the cell's ``expect_error`` blocks and ``%%expect_error`` magic display."""
    cards = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if function_name(node) == "run_cell_magic" and first_string_argument(node) == "expect_error":
            line = node.args[1].value if isinstance(node.args[1], ast.Constant) else ""
            cards.append(ExpectedErrorCard(cell_index, line.split("#", 1)[0].strip(), None))
        elif function_name(node) == "expect_error" and node.args and shows_report(node):
            kind = first_string_argument(node)
            exception_name = None if kind else ast.unparse(node.args[0])
            if isinstance(node.args[0], ast.Name) and not node.args[0].id[:1].isupper():
                exception_name = None  # a variable holding a kind, e.g. in a loop: known only at run time
            cards.append(ExpectedErrorCard(cell_index, kind, exception_name))
    return cards


def choice_count(call: ast.Call) -> Optional[int]:
    """How many choices a ``predict(question, {label: outcome, ...}, ...)`` call offers, when written literally."""
    choices = call.args[1] if len(call.args) > 1 else next(
        (keyword.value for keyword in call.keywords if keyword.arg == "choices"), None
    )
    return len(choices.keys) if isinstance(choices, ast.Dict) else None


def chosen_language(tree: ast.AST) -> str:
    """The language a cell gives the helpers: ``os.environ["COURSE_LANGUAGE"] = "zh_CN"``; "" when none."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript)
                and ast.unparse(node.targets[0]) == "os.environ['COURSE_LANGUAGE']"
                and isinstance(node.value, ast.Constant)):
            return str(node.value.value)
    return ""


def read_expectations(path: Path) -> NotebookExpectations:
    """Read ``path`` and list, per cell, the cards, pictures and widgets it must show."""
    notebook = nbformat.read(str(path), as_version=4)
    expected = NotebookExpectations(cell_count=len(notebook.cells))
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        expected.code_cells.append(index)
        tree = ast.parse(python_source(cell.source))
        expected.language = chosen_language(tree) or expected.language
        expected.error_cards += error_cards_of(index, tree)
        for call in displayed_calls(tree):
            name = qualified_name(call)
            if name == "exercises.check" and first_string_argument(call):
                expected.exercise_checks[index] = first_string_argument(call)
            elif name == "exercises.hint" and first_string_argument(call):
                expected.hint_cells[index] = first_string_argument(call)
            elif function_name(call) in GRAPH_FUNCTIONS:
                expected.graph_cells.add(index)
            elif function_name(call) == "predict":
                expected.predict_questions.append(PredictQuestion(index, choice_count(call)))
    return expected

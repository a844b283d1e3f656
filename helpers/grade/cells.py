"""What the grader reads and changes in a notebook's cells: which exercise a cell answers (its ``# EXERCISE: <id>``
line); before the notebook runs, the check statements go, and an extraction cell comes last.

The notebook's own ``exercises.check/hint/summary(...)`` statements are left out (the grader checks the answers
itself, elsewhere), line for line, so the rest of each cell runs as written. The last cell sends each answer out as
cloudpickle bytes: functions defined in the notebook travel by value, modules (torch, helpers) by name, so nothing
the notebook patched in them comes along.
"""
from __future__ import annotations

import ast
import json
import re
from typing import Optional, Sequence, Tuple

SKIPPED_CALLS = ("check", "hint", "summary")
EXERCISE_MARKER = re.compile(r"#[ \t]*exercise[ \t]*:[ \t]*(?P<id>\w+)", re.IGNORECASE)


def exercise_marker(source: str) -> Optional[str]:
    """The exercise id of a cell whose first line is ``# EXERCISE: <id>``, in any case and spacing
    (``# Exercise: head_weight_grad``, ``#EXERCISE:head_weight_grad``), lower case; else None."""
    if not isinstance(source, str):
        return None
    match = EXERCISE_MARKER.match(source.lstrip().lstrip("\ufeff").lstrip())
    return match["id"].lower() if match else None


def _is_check_call(node: ast.AST) -> bool:
    value = node.value if isinstance(node, ast.Expr) else None  # an assignment's name may be used later: kept
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in SKIPPED_CALLS and isinstance(value.func.value, (ast.Name, ast.Attribute))
            and ast.unparse(value.func.value).split(".")[-1] == "exercises")


def without_checks(source: str) -> Tuple[str, int]:
    """``source`` with its top-level ``exercises.check/hint/summary(...)`` statements replaced by ``pass``.

    Returns the new source and how many statements were left out. A cell that does not parse (a magic) is kept.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, 0
    lines = source.splitlines()
    removed = 0
    for node in tree.body:
        if _is_check_call(node):
            for line in range(node.lineno - 1, node.end_lineno or node.lineno):
                lines[line] = ""
            lines[node.lineno - 1] = " " * node.col_offset + "pass  # left out by the grader"
            removed += 1
    return "\n".join(lines), removed


_EXTRACT = '''
def _grader_extract(names, path):
    import base64, importlib, json, os, sys
    kept = list(sys.path)
    # The notebook's folder may hold a module of the same name: import the installed cloudpickle.
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != os.getcwd()]
    sys.modules.pop("cloudpickle", None)
    try:
        cloudpickle = importlib.import_module("cloudpickle")
    finally:
        sys.path[:] = kept
    here = os.path.realpath(os.getcwd())
    for module in list(sys.modules.values()):  # the learner's own modules, beside the notebook, travel by value
        source = getattr(module, "__file__", None) or ""
        if source and os.path.realpath(source).startswith(here + os.sep):
            try:
                cloudpickle.register_pickle_by_value(module)
            except Exception:
                pass
    namespace = sys.modules["__main__"].__dict__
    found = {}
    for name in names:
        if name not in namespace:
            found[name] = {"missing": True}
            continue
        try:
            found[name] = {"pickle": base64.b64encode(cloudpickle.dumps(namespace[name])).decode()}
        except Exception as error:
            found[name] = {"error": type(error).__name__ + ": " + str(error)[:200]}
    with open(path, "w") as file:
        json.dump(found, file)
_grader_extract(%s, %s)
'''


def extraction_cell(answer_names: Sequence[str], path: str) -> str:
    """The source of the cell that writes each answer to ``path`` as JSON: ``{name: {"pickle": base64}}``, or
    ``{"missing": true}`` when the notebook never defined it, or ``{"error": ...}`` when it cannot be sent."""
    return _EXTRACT % (json.dumps(list(answer_names)), json.dumps(path))

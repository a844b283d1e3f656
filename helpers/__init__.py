"""Helpers for the course "Two models, two losses, one graph".

- ``helpers.tools``: what you can take to your own code (``diagnose``, the drawings, ``expect_error``, ...).
- ``helpers.course``: the lessons: seeded models and data, each notebook's set-up, the exercises and checkers.

The notebooks use ``from helpers import expect_error, exercises`` and ``%load_ext helpers``.
Importing changes nothing (no seeds, no warning filters, no output) and loads nothing of torch: each name below is
imported when first used. So the course's exercises load only when ``helpers.exercises`` is first used (``from
helpers.tools import diagnose`` brings no course state along), and the grader's parts that need no torch (the
runner that starts a learner's notebook) do not pay for importing it.
"""
from __future__ import annotations

import importlib
from typing import Any, List

__all__ = ["exercises", "expect_error", "load_ipython_extension"]
_WHERE = {"exercises": ("helpers.course.exercises", None), "expect_error": ("helpers.tools.expect", "expect_error"),
          "load_ipython_extension": ("helpers.tools.magic", "load_ipython_extension")}


def __getattr__(name: str) -> Any:
    """``helpers.exercises``, ``helpers.expect_error`` and ``helpers.load_ipython_extension``, imported on first
    use."""
    if name not in _WHERE:
        raise AttributeError(f"module 'helpers' has no attribute {name!r}")
    module_name, attribute = _WHERE[name]
    module = importlib.import_module(module_name)
    return module if attribute is None else getattr(module, attribute)


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))

"""Helpers for the course "Two models, two losses, one graph".

- ``helpers.tools``: what you can take to your own code (``diagnose``, the drawings, ``expect_error``, ...).
- ``helpers.course``: the lessons: seeded models and data, each notebook's set-up, the exercises and checkers.

The notebooks use ``from helpers import expect_error, exercises`` and ``%load_ext helpers``.
Importing changes nothing (no seeds, no warning filters, no output), and the course's exercises load only when
``helpers.exercises`` is first used, so ``from helpers.tools import diagnose`` brings no course state along.
"""
from __future__ import annotations

import importlib
from typing import Any, List

from helpers.tools.expect import expect_error
from helpers.tools.magic import load_ipython_extension

__all__ = ["exercises", "expect_error", "load_ipython_extension"]


def __getattr__(name: str) -> Any:
    """``helpers.exercises``, imported on first use."""
    if name == "exercises":
        return importlib.import_module("helpers.course.exercises")
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))

"""The clinic's (06, 07) and notebook 08's checker test answers: one module per case, each with OTHER_CORRECT and
WRONG_ANSWERS dicts keyed by exercise id, in the format of tests/course/test_exercises.py (which merges them)."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Dict, List


def merged(table_name: str) -> Dict[str, List]:
    """The table ``table_name`` of every module in this package, merged."""
    tables: Dict[str, List] = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).resolve().parent)]), key=lambda info: info.name):
        module = importlib.import_module(f"tests.course.clinic_answers.{info.name}")
        for exercise_id, answers in getattr(module, table_name).items():
            tables.setdefault(exercise_id, []).extend(answers)
    return tables

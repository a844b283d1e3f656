"""A row of the report: one notebook and exercise, its status and message."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

STATUSES = ("passed", "failed", "not attempted", "error")


@dataclass(frozen=True)
class Row:
    """One line of grades.csv."""

    notebook: str
    exercise: str
    status: str
    message: str
    learner: str = ""
    own_check_passed: Optional[bool] = None

"""What the helpers know of the solved notebooks: solutions.json, and the message of a student copy's stub.

The solved notebooks in solutions/ are the one source. ``python -m authoring.generate`` writes solutions.json: each
exercise's solution cell, notebook and place in it, for where solutions/ is absent (an installed package, Colab).
The helpers take the last hint (the full solution) and the course order from it.
"""
from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Dict, Optional

FILE_NAME = "solutions.json"
# What a student copy's stub raises (``raise NotImplementedError("your code here")``): the generator writes it,
# the checkers read it as "not attempted yet".
STUB_MESSAGE = "your code here"


@functools.lru_cache(maxsize=None)
def recorded_solutions() -> Dict[str, Dict[str, object]]:
    """exercise id -> ``{"notebook": "04_whose_gradient", "position": 1, "source": "..."}``."""
    text = resources.files(__package__).joinpath(FILE_NAME).read_text(encoding="utf-8")
    return json.loads(text)


def solution_source(exercise_id: str) -> Optional[str]:
    """The solution cell of ``exercise_id``, or None when none is recorded."""
    entry = recorded_solutions().get(exercise_id)
    return str(entry["source"]) if entry else None

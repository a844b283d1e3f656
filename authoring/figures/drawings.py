"""The course's figures, by name: the function that draws each one."""
from __future__ import annotations

from typing import Callable, Dict

from matplotlib.figure import Figure

from authoring.figures import backward_visits, step_timeline, who_trains_whom

DRAWINGS: Dict[str, Callable[[], Figure]] = {
    "step_timeline": step_timeline.draw,
    "backward_visits": backward_visits.draw,
    "who_trains_whom": who_trains_whom.draw,
}

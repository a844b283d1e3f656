"""Hints revealed one level at a time: the symptom, the cause, the API and the shape of the fix (in words, without
code), then the full solution."""
from __future__ import annotations

import html
from typing import List, Optional, Tuple

from helpers.course.exercises.solutions import solution_source
from helpers.course.static_site import building_static_site, widgets_wanted
from helpers.language import marked, tr, translated
from helpers.tools.display import card_html, pre_html

LEVEL_NAMES = (marked("Symptom"), marked("Cause"), marked("The API, and the shape of the fix"), marked("Full solution"))
SOLUTION_LEVEL = LEVEL_NAMES[-1]


def hint_levels(exercise_id: str, hints: Tuple[str, str, str]) -> List[Tuple[str, str]]:
    """All four levels as (name, text), in the chosen language (the solution's code as it is)."""
    solution = solution_source(exercise_id) or tr("(no solution recorded for this exercise)")
    return list(zip(LEVEL_NAMES, (*(translated(hint) for hint in hints), solution)))


class NoSuchLevel:
    """The answer to a hint level that does not exist: how many there are."""

    def __init__(self, exercise_id: str, level: object, count: int) -> None:
        self.text = tr("There is no hint level {level} for {exercise}: there are {count} levels, 1 to {count}. "
                       'exercises.hint("{exercise}", level=1) shows the first.', level=repr(level),
                       exercise=exercise_id, count=count)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return card_html(tr("No such hint level"), f"<div>{html.escape(self.text)}</div>", accent="#7f8c8d")


class HintText:
    """Hints up to a level, as text (plain Python) or a card (Jupyter without widgets)."""

    def __init__(self, exercise_id: str, levels: List[Tuple[str, str]], shown: int) -> None:
        self.exercise_id = exercise_id
        self.levels = levels
        self.shown = max(1, min(shown, len(levels)))

    def __str__(self) -> str:
        lines = [tr("Hints for {exercise}:", exercise=self.exercise_id)]
        lines += [tr("{number}. {name}: {text}", number=i, name=translated(name), text=text)
                  for i, (name, text) in enumerate(self.levels[: self.shown], 1)]
        if self.shown < len(self.levels):
            lines.append(tr('(more: exercises.hint("{exercise}", level={level}))', exercise=self.exercise_id,
                            level=self.shown + 1))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        parts = [_level_html(i, name, text) for i, (name, text) in enumerate(self.levels[: self.shown], 1)]
        return card_html(tr("Hints for {exercise}", exercise=self.exercise_id), "".join(parts), accent="#2980b9")


def _level_body(name: str, text: str) -> str:
    return pre_html(text) if name == SOLUTION_LEVEL else f"<div>{html.escape(text)}</div>"


def _level_html(number: int, name: str, text: str) -> str:
    return (f"<div style='margin:4px 0'><b>{number}. {html.escape(translated(name))}</b>"
            f"{_level_body(name, text)}</div>")


class FoldedHints(HintText):
    """Every level, each folded under its name: the hint button's static form, on the course's website."""

    def __init__(self, exercise_id: str, levels: List[Tuple[str, str]]) -> None:
        super().__init__(exercise_id, levels, len(levels))

    def _repr_html_(self) -> str:
        parts = [f"<details style='margin:4px 0'><summary><b>{i}. {html.escape(translated(name))}</b></summary>"
                 f"{_level_body(name, text)}</details>" for i, (name, text) in enumerate(self.levels, 1)]
        return card_html(tr("Hints for {exercise}", exercise=self.exercise_id), "".join(parts), accent="#2980b9")


def hint_widget(exercise_id: str, levels: List[Tuple[str, str]]):  # -> ipywidgets.VBox
    """A button that reveals the next level each click (ipywidgets 7 and 8)."""
    import ipywidgets

    shown = ipywidgets.HTML(value="")
    button = ipywidgets.Button(description=tr("Show hint {number} of {count}", number=1, count=len(levels)),
                               layout=ipywidgets.Layout(width="auto"))  # the whole label, in any language
    state = {"count": 0}

    def reveal(_button: object) -> None:
        if state["count"] >= len(levels):
            return
        state["count"] += 1
        number = state["count"]
        shown.value += _level_html(number, *levels[number - 1])
        if number == len(levels):
            button.description = tr("All hints shown")
            button.disabled = True
        else:
            button.description = tr("Show hint {number} of {count}", number=number + 1, count=len(levels))

    button.on_click(reveal)
    return ipywidgets.VBox([ipywidgets.HBox([button]), shown])  # in a row, the button keeps its own width


def make_hint(exercise_id: str, hints: Tuple[str, str, str], level: Optional[int] = None):
    """A widget in Jupyter; text up to ``level`` (default 1) elsewhere or when ``level`` is given.

    A level that does not exist gets an answer saying how many there are.
    """
    levels = hint_levels(exercise_id, hints)
    if level is not None and (isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= len(levels)):
        return NoSuchLevel(exercise_id, level, len(levels))
    if level is None and building_static_site():
        return FoldedHints(exercise_id, levels)
    if level is None and widgets_wanted():
        try:
            return hint_widget(exercise_id, levels)
        except ImportError:
            pass
    return HintText(exercise_id, levels, level or 1)

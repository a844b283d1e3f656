"""Situations: one value per axis (batch size, ``.grad`` before the call, modes, frozen weights, optimizer kind,
consecutive calls, model shape), generated from the axes a contract declares, the notebook's own situation first.

Order is smallest first: the notebook's situation, then every one-axis change from it, then seeded combinations of
several. The judge shrinks a failing situation back towards the notebook's, one axis at a time, while it still fails.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Sequence, Tuple

from helpers.course.seeds import fresh
from helpers.language import marked, tr, translated


@dataclass(frozen=True)
class Axis:
    """One way a situation can vary. ``values[0]`` is the notebook's own; ``describe(value)`` names a value for a
    diagnosis ("a batch of 3 rows")."""

    name: str
    values: Tuple[Any, ...]
    describe: Callable[[Any], str]
    tried: str  # what a notebook's line says this axis varies, e.g. "batches of 1, 3 and 32 rows"

    @property
    def notebook(self) -> Any:
        return self.values[0]


def _batch_words(rows: int) -> str:
    return tr("a batch of 1 row") if rows == 1 else tr("a batch of {rows} rows", rows=rows)


def batch(notebook: int, *others: int) -> Axis:
    """Rows per batch: the notebook's, then others (1 and an odd size are the ones that expose a constant)."""
    sizes = (notebook, *others)
    shown = sorted(set(sizes))
    return Axis("batch", sizes, _batch_words, f"batches of {', '.join(map(str, shown[:-1]))} and {shown[-1]} rows")


_GRADS_WORDS = {"none": marked(".grad empty (None)"), "filled": marked(".grad already holding a gradient"),
                "zero": marked(".grad holding zeros")}
GRADS = Axis("grads", ("none", "filled", "zero"), lambda grads: translated(_GRADS_WORDS[grads]),
             "`.grad` empty, zero or already filled")
MODE = Axis("mode", ("train", "eval"), lambda mode: tr("the models handed over in train mode") if mode == "train"
            else tr("the models handed over in eval mode"), "models in train and in eval mode")
FROZEN = Axis("frozen", (False, True), lambda frozen: tr("a frozen first layer (requires_grad=False)") if frozen
              else tr("no frozen weights"), "a frozen first layer")


def calls(*counts: int) -> Axis:
    """Consecutive calls on the same objects, the inputs refilled in place between them."""
    return Axis("calls", counts, lambda count: tr("1 call in a row on the same objects") if count == 1
                else tr("{count} calls in a row on the same objects", count=count),
                f"{max(counts)} calls in a row on the same objects, the inputs refilled in place")


KIND_NAMES = (marked("SGD with momentum"), marked("fused Adam"), marked("fused AdamW"))  # shown with translated()


def optimizers(*kinds: str) -> Axis:
    """Optimizer kinds (names of ``step_watch.optimizer_kinds``)."""
    return Axis("optimizer", kinds, lambda kind: tr("{kind} optimizers", kind=translated(kind)),
                "optimizers " + ", ".join(kinds))


def shapes(*variants: str, tried: str) -> Axis:
    """Exercise-specific model or graph variants, described by their names (marked for the catalog where they are
    defined), in the chosen language."""
    return Axis("shape", variants, translated, tried)


@dataclass(frozen=True)
class Situation:
    """One value per axis, and the seed the objects are built from."""

    values: Tuple[Tuple[str, Any], ...]
    seed: int

    def __getitem__(self, axis: str) -> Any:
        return dict(self.values)[axis]

    def get(self, axis: str, default: Any = None) -> Any:
        return dict(self.values).get(axis, default)

    def with_value(self, axis: str, value: Any) -> "Situation":
        return Situation(tuple((name, value if name == axis else old) for name, old in self.values), self.seed)

    def changed_axes(self, axes: Sequence[Axis]) -> List[Axis]:
        """The axes on which this situation is not the notebook's."""
        return [axis for axis in axes if self[axis.name] != axis.notebook]


def notebook_situation(axes: Sequence[Axis], seed: int) -> Situation:
    return Situation(tuple((axis.name, axis.notebook) for axis in axes), seed)


def generate(axes: Sequence[Axis], seed: int, combinations: int = 6) -> Iterator[Situation]:
    """The notebook's situation, each one-axis change, then ``combinations`` seeded mixtures on new seeds.

    The seed goes through ``seeds.fresh``, so the grader's salt gives every check situations no notebook saw.
    """
    base = fresh(seed)
    start = notebook_situation(axes, base)
    yield start
    for axis in axes:
        for value in axis.values[1:]:
            yield start.with_value(axis.name, value)
    rng = random.Random(base)
    for index in range(combinations):
        values = tuple((axis.name, rng.choice(axis.values)) for axis in axes)
        yield Situation(values, base + 101 * (index + 1))


def describe(situation: Situation, axes: Sequence[Axis]) -> str:
    """"With a batch of 3 rows (the notebook used 32 rows) and models in eval mode" - only what is not the
    notebook's."""
    parts = []
    for axis in situation.changed_axes(axes):
        text = axis.describe(situation[axis.name])
        if axis.name == "batch":
            text = tr("{batch} (the notebook used {rows})", batch=text, rows=axis.notebook)
        parts.append(text)
    if not parts:
        return tr("In the notebook's own situation")
    listed = parts[0]
    for part in parts[1:]:
        listed = tr("{first} and {second}", first=listed, second=part)
    return tr("With {conditions}", conditions=listed)


def tried_line(axes: Sequence[Axis], extra: Sequence[str] = ()) -> str:
    """The one line an exercise's text carries: what its check varies."""
    return "**What the check tries:** " + "; ".join([axis.tried for axis in axes] + list(extra)) + "."


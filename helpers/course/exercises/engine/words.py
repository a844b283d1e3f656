"""A difference in the learner's words: what came back, what it should have been, and the likely cause."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from helpers.course.exercises.compare import as_combination, describe_combination, scale_factor
from helpers.course.exercises.engine.compare import Difference
from helpers.course.exercises.engine.situations import Axis, Situation


def _name(path: str) -> str:
    return f"`{path}`"


def _mode(training: bool) -> str:
    return "training" if training else "eval"


def _factor_words(factor: float, situation: Situation, axes: Sequence[Axis]) -> str:
    """``21x the right one``, and the batch-size question when the factor is a ratio of batch sizes."""
    text = f"{factor:.3g}x the right one"
    notebook = next((axis.notebook for axis in axes if axis.name == "batch"), None)
    rows = situation.get("batch")
    if notebook and rows and rows != notebook:
        for ratio in (notebook / rows, rows / notebook, notebook, 1 / notebook):
            if abs(factor - ratio) < 1e-3 * max(1.0, abs(ratio)):
                return text + ": is a batch size written into your code? Average over the batch that arrives"
    if abs(factor + 1) < 1e-3:
        return text + " (the wrong sign)"
    return text


def _tensor_words(what: str, difference: Difference, situation: Situation, axes: Sequence[Axis]) -> str:
    now, right, was = difference.learner, difference.reference, difference.before
    if now is None or right is None:
        return (f"{what} is {'None' if now is None else 'a tensor'} after your call, where the reference leaves "
                f"{'None' if right is None else 'a tensor'}")
    if now.shape != right.shape:
        return f"{what} has shape {list(now.shape)}, where the reference's has {list(right.shape)}"
    if difference.key.kind != "return" and isinstance(was, torch.Tensor) and was.shape == now.shape and bool(
            torch.equal(was, now)):
        return f"{what} is exactly as it was before your call, where the reference changes it: was it never stepped?"
    factor = scale_factor(now, right)
    if factor is not None and difference.key.kind in ("grad", "return"):
        return f"{what} is {_factor_words(factor, situation, axes)}"
    if difference.key.kind == "grad" and isinstance(was, torch.Tensor) and was.shape == right.shape and bool(
            was.abs().sum()):
        weights = as_combination([now], {"the right gradient": [right], "what it held before your call": [was]})
        if weights is not None and abs(weights["what it held before your call"]) > 1e-3:
            return (f"{what} is {describe_combination(weights)}: the gradient that was there before your call "
                    "was still in it")
    largest = float((now.detach().float() - right.detach().float()).abs().max())
    return f"{what} differs from the reference's by up to {largest:.3g}"


def explain(difference: Difference, situation: Situation, axes: Sequence[Axis]) -> str:
    """One difference as a sentence (no situation prefix)."""
    key, was, now = difference.key, difference.before, difference.learner
    path = key.path
    if key.kind == "return" and isinstance(now, torch.Tensor) and isinstance(difference.reference, torch.Tensor) \
            and now.shape == difference.reference.shape:
        return _tensor_words("the tensor your function returned", difference, situation, axes)
    if key.kind in ("return", "raised"):
        return f"your function {difference.text}"
    if key.kind == "training":
        return (f"{_name(path)} came back in {_mode(now)} mode; it was handed to you in {_mode(was)} mode. Leave "
                "each module in the mode you found it in")
    if key.kind == "requires_grad":
        frozen = " (frozen)" if not was else ""
        return (f"{_name(path + '.requires_grad')} came back {now}; it was handed to you {was}{frozen}. Leave "
                "requires_grad as you found it: restrict a backward with inputs= (listing only parameters that "
                "require grad), or detach a tensor; never unfreeze a frozen weight")
    if key.kind == "input":
        return (f"the input {_name(path)} was changed (its values, requires_grad or .grad), or written in place "
                "(its version counter moved): inputs are data, read them, never write them")
    if key.kind == "global":
        return f"your function left {path} changed ({was} before, {now} after)"
    if key.kind == "settings":
        return f"{_name(path)}'s settings changed (learning rate, another hyperparameter, or its parameters)"
    if key.kind == "version":
        return (f"your function wrote into {_name(path)} in place (its version went from {was} to {now}), though "
                "its values came out the same: any graph that saved this tensor (a layer saves its weight whenever "
                "its input requires grad) would now raise error 2 at backward")
    if key.kind == "grad":
        if not difference.allowed:
            if was is None:
                return f"{_name(path + '.grad')} was None before your call and is a tensor after it"
            if now is None:
                return f"{_name(path + '.grad')} held a gradient before your call and is None after it"
            return f"{_name(path + '.grad')} changed, and your function must leave it as it was"
        return _tensor_words(_name(path + ".grad"), difference, situation, axes)
    if key.kind in ("value", "buffer"):
        if not difference.allowed:
            return f"your function changed {_name(path)}, which it must leave as it was"
        return _tensor_words(f"{_name(path)} after your call", difference, situation, axes)
    if key.kind == "state":
        return (f"the optimizer state {_name(path)} differs from the reference's: was that optimizer stepped "
                "another number of times, or with another gradient?")
    return f"{path} differs from the reference's ({_short(now)} instead of {_short(difference.reference)})"


def _short(value: Any) -> str:
    return repr(value)[:80]


def calls_words(call: int, calls: int) -> Optional[str]:
    """"on the 2nd of 3 calls", or None for a single call."""
    if calls <= 1:
        return None
    ordinal = {1: "1st", 2: "2nd", 3: "3rd"}.get(call, f"{call}th")
    return f"on the {ordinal} of {calls} calls"

"""A difference in the learner's words: what came back, what it should have been, and the likely cause."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from helpers.course.exercises.compare import as_combination, describe_combination, scale_factor
from helpers.course.exercises.engine.compare import Difference
from helpers.course.exercises.engine.situations import Axis, Situation
from helpers.language import marked, tr, translated

RIGHT_GRADIENT = marked("the right gradient")  # the parts a wrong gradient is read as a mixture of
HELD_BEFORE = marked("what it held before your call")


def _name(path: str) -> str:
    return f"`{path}`"


def _mode(training: bool) -> str:
    return tr("training") if training else tr("eval")


def _factor_words(what: str, factor: float, situation: Situation, axes: Sequence[Axis]) -> str:
    """``<what> is 21x the right one``, and the batch-size question when the factor is a ratio of batch sizes."""
    shown = f"{factor:.3g}"
    notebook = next((axis.notebook for axis in axes if axis.name == "batch"), None)
    rows = situation.get("batch")
    if notebook and rows and rows != notebook:
        for ratio in (notebook / rows, rows / notebook, notebook, 1 / notebook):
            if abs(factor - ratio) < 1e-3 * max(1.0, abs(ratio)):
                return tr("{what} is {factor}x the right one: is a batch size written into your code? Average over "
                          "the batch that arrives", what=what, factor=shown)
    if abs(factor + 1) < 1e-3:
        return tr("{what} is {factor}x the right one (the wrong sign)", what=what, factor=shown)
    return tr("{what} is {factor}x the right one", what=what, factor=shown)


def _tensor_words(what: str, difference: Difference, situation: Situation, axes: Sequence[Axis]) -> str:
    now, right, was = difference.learner, difference.reference, difference.before
    if now is None and right is None:
        return tr("{what} is None after your call, where the reference leaves None", what=what)
    if now is None:
        return tr("{what} is None after your call, where the reference leaves a tensor", what=what)
    if right is None:
        return tr("{what} is a tensor after your call, where the reference leaves None", what=what)
    if now.shape != right.shape:
        return tr("{what} has shape {shape}, where the reference's has {expected}", what=what,
                  shape=list(now.shape), expected=list(right.shape))
    if difference.key.kind != "return" and isinstance(was, torch.Tensor) and was.shape == now.shape and bool(
            torch.equal(was, now)):
        return tr("{what} is exactly as it was before your call, where the reference changes it: was it never "
                  "stepped?", what=what)
    factor = scale_factor(now, right)
    if factor is not None and difference.key.kind in ("grad", "return"):
        return _factor_words(what, factor, situation, axes)
    if difference.key.kind == "grad" and isinstance(was, torch.Tensor) and was.shape == right.shape and bool(
            was.abs().sum()):
        weights = as_combination([now], {RIGHT_GRADIENT: [right], HELD_BEFORE: [was]})
        if weights is not None and abs(weights[HELD_BEFORE]) > 1e-3:
            return tr("{what} is {combination}: the gradient that was there before your call was still in it",
                      what=what, combination=describe_combination(weights))
    largest = float((now.detach().float() - right.detach().float()).abs().max())
    return tr("{what} differs from the reference's by up to {largest}", what=what, largest=f"{largest:.3g}")


def _global_words(path: str, was: Any, now: Any) -> str:
    """A global setting the call left changed, one sentence per setting ``observe`` watches."""
    if path == "the default dtype":
        return tr("your function left the default dtype changed ({was} before, {now} after)", was=was, now=now)
    if path == "anomaly detection":
        return tr("your function left anomaly detection changed ({was} before, {now} after)", was=was, now=now)
    if path == "gradient tracking":
        return tr("your function left gradient tracking changed ({was} before, {now} after)", was=was, now=now)
    return tr("your function left {setting} changed ({was} before, {now} after)", setting=path, was=was, now=now)


def _grad_words(difference: Difference, situation: Situation, axes: Sequence[Axis]) -> str:
    name, was, now = _name(difference.key.path + ".grad"), difference.before, difference.learner
    if difference.allowed:
        return _tensor_words(name, difference, situation, axes)
    if was is None:
        return tr("{name} was None before your call and is a tensor after it", name=name)
    if now is None:
        return tr("{name} held a gradient before your call and is None after it", name=name)
    return tr("{name} changed, and your function must leave it as it was", name=name)


def explain(difference: Difference, situation: Situation, axes: Sequence[Axis]) -> str:
    """One difference as a sentence (no situation prefix)."""
    key, was, now = difference.key, difference.before, difference.learner
    path = key.path
    if key.kind == "return" and isinstance(now, torch.Tensor) and isinstance(difference.reference, torch.Tensor) \
            and now.shape == difference.reference.shape:
        return _tensor_words(tr("the tensor your function returned"), difference, situation, axes)
    if key.kind in ("return", "raised"):
        return tr("your function {problem}", problem=difference.text)
    if key.kind == "training":
        return tr("{name} came back in {now} mode; it was handed to you in {was} mode. Leave each module in the mode "
                  "you found it in", name=_name(path), now=_mode(now), was=_mode(was))
    if key.kind == "requires_grad":
        if not was:
            return tr("{name} came back {now}; it was handed to you {was} (frozen). Leave requires_grad as you found "
                      "it: restrict a backward with inputs= (listing only parameters that require grad), or detach a "
                      "tensor; never unfreeze a frozen weight", name=_name(path + ".requires_grad"), now=now, was=was)
        return tr("{name} came back {now}; it was handed to you {was}. Leave requires_grad as you found it: restrict "
                  "a backward with inputs= (listing only parameters that require grad), or detach a tensor; never "
                  "unfreeze a frozen weight", name=_name(path + ".requires_grad"), now=now, was=was)
    if key.kind == "input":
        return tr("the input {name} was changed (its values, requires_grad or .grad), or written in place (its "
                  "version counter moved): inputs are data, read them, never write them", name=_name(path))
    if key.kind == "global":
        return _global_words(path, was, now)
    if key.kind == "settings":
        return tr("{name}'s settings changed (learning rate, another hyperparameter, or its parameters)",
                  name=_name(path))
    if key.kind == "version":
        return tr("your function wrote into {name} in place (its version went from {was} to {now}), though its "
                  "values came out the same: any graph that saved this tensor (a layer saves its weight whenever its "
                  "input requires grad) would now raise error 2 at backward", name=_name(path), was=was, now=now)
    if key.kind == "grad":
        return _grad_words(difference, situation, axes)
    if key.kind in ("value", "buffer"):
        if not difference.allowed:
            return tr("your function changed {name}, which it must leave as it was", name=_name(path))
        return _tensor_words(tr("{name} after your call", name=_name(path)), difference, situation, axes)
    if key.kind == "state":
        return tr("the optimizer state {name} differs from the reference's: was that optimizer stepped another "
                  "number of times, or with another gradient?", name=_name(path))
    return tr("{name} differs from the reference's ({value} instead of {expected})", name=translated(path),
              value=_short(now), expected=_short(difference.reference))


def _short(value: Any) -> str:
    return repr(value)[:80]


def calls_words(call: int, calls: int) -> Optional[str]:
    """"on the 2nd of 3 calls", or None for a single call."""
    if calls <= 1:
        return None
    if call == 1:
        return tr("on the 1st of {calls} calls", calls=calls)
    if call == 2:
        return tr("on the 2nd of {calls} calls", calls=calls)
    if call == 3:
        return tr("on the 3rd of {calls} calls", calls=calls)
    return tr("on the {call}th of {calls} calls", call=call, calls=calls)

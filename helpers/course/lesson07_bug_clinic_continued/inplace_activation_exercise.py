"""Exercise of notebook 07, case 3: the forward of a model whose regression head is a residual block written in place.

Fixed contract: ``fixed_forward(encoder, cls_head, reg_head, x) -> (logits, value)``, where ``reg_head`` is a
``ResidualHead`` (``fc`` and ``out``, two Linears) whose own forward writes ``h += self.fc(h)`` and ``h.relu_()``:
the values of ``h = encoder(x)``, ``cls_head(h)`` and ``reg_head(h)`` as that in-place code computes them (checked
against it, run without grad), with a graph that gives every parameter and ``x`` the gradient of ``l_cls + l_reg``.
The forward changes nothing else: no weights, no ``.grad``, no train/eval mode, no requires_grad flag.

The checker trains with the learner's forward for two runs of three steps (fresh models each run, a new batch every
step, SGD then Adam), recording the gradients the optimizer is stepped with, and compares outputs and gradients
(every parameter and the input) with plain torch on copies of the models.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from helpers.course.exercises.compare import (
    close,
    describe_value,
    flattened,
    max_difference,
    same_gradients,
    scale_factor,
)
from helpers.course.exercises.engine import step_watch
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_learner
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson07_bug_clinic_continued.inplace_activation import (
    BATCH,
    CLASSES,
    make_batch,
    make_residual_multitask,
    multitask_parameters,
    reference_gradients,
    residual_reference_forward,
    task_losses,
)
from helpers.course.lesson07_bug_clinic_continued.inplace_activation_contract import CONTRACT
from helpers.language import marked, space, tr, translated
from helpers.tools.errors import KINDS, parse_version_error, short_description

EXERCISE_ID = "fixed_forward"
STEPS = 3
SEED = 61
MODEL_NAMES = ("encoder", "cls_head", "reg_head")
RUNS: Tuple[str, ...] = ("SGD", "Adam")   # the optimizer kind of each run; the checker, not the learner, steps it
CARRY_OVER = marked("Your earlier steps were right, so look for something kept from one call to the next (a global, "
                    "a cache, a function attribute): each call must use only its own arguments.")

HINTS = (  # the first one's [16, 12] is [BATCH, WIDTH], the shape of h (a marked message has no fields)
    marked("Backward fails with error 2 on a [16, 12] tensor (the shape of h) at version 2, expected 0, with no "
           "optimizer step anywhere. A right forward returns the same logits and value as the in-place head, and "
           "training with it gives every parameter (and x) the gradient of l_cls + l_reg."),
    marked("Two layers saved h for backward before it was rewritten: cls_head's Linear, and the head's own fc, which "
           "reads h and then adds its output into that same h (+=), before the in-place ReLU. So handing the head a "
           "copy (reg_head(h.clone())) still fails: the head rewrites its copy after fc saved it. Detaching does not "
           "help either: h.detach() shares h's version counter, and anything computed from a detached h no longer "
           "trains the encoder."),
    marked("Don't call reg_head(h); write its computation yourself, out of place, with its two layers reg_head.fc "
           "and reg_head.out: a new tensor for the skip connection's sum (an addition that returns a new tensor, not "
           "+=), then an out-of-place ReLU (torch.relu), then out. The classifier reads h as the encoder made it."),
)


def _output_problem(outputs: Any, models: Tuple[nn.Module, ...], x: torch.Tensor, earlier_right: bool) -> Optional[str]:
    """What is wrong with the learner's ``(logits, value)``, compared with the in-place code run without grad."""
    if not (isinstance(outputs, (tuple, list)) and len(outputs) == 2
            and all(isinstance(t, torch.Tensor) for t in outputs)):
        return tr("Return the pair (logits, value), two tensors; you returned {value}.", value=describe_value(outputs))
    logits, value = outputs
    for name, tensor, shape in (("logits", logits, (BATCH, CLASSES)), ("value", value, (BATCH, 1))):
        if tuple(tensor.shape) != shape:
            return tr("{name} should have shape {shape} (what the head returns), but yours has shape {yours}.",
                      name=name, shape=list(shape), yours=list(tensor.shape))
    for name, tensor, head in (("logits", logits, "cls_head"), ("value", value, "reg_head")):
        if not tensor.requires_grad:
            return tr("Your {name} carries no gradient (it does not require grad): it was computed under "
                      "torch.no_grad() or from a detached tensor, so its loss can train neither {head} nor the "
                      "encoder. Keep the whole forward pass recorded.", name=name, head=head)
    encoder, cls_head, reg_head = (copy.deepcopy(model) for model in models)
    with torch.no_grad():
        h = encoder(x)
        right_logits = cls_head(h)
        right_value = reg_head(h.clone())     # the in-place code itself, on a copy: the values to return
        fc_h = reg_head.fc(h)
        if not close(logits, right_logits):
            if close(logits, cls_head(torch.relu(h + fc_h))) or close(logits, cls_head(h + fc_h)):
                return tr("Your logits are the classifier applied to the features after the residual head rewrote "
                          "them (h + fc(h), ReLU'd): the head ran first and changed h in place before cls_head read "
                          "it. That hides error 2 and silently changes the classifier's input.")
            gap = max_difference(logits, right_logits)
            return (tr("Your logits differ from cls_head(encoder(x)) by up to {gap}. Keep the computation the same; "
                       "only the in-place steps must change.", gap=f"{gap:.3g}") +
                    (space() + translated(CARRY_OVER) if earlier_right else ""))
        if not close(value, right_value):
            known = (
                (reg_head.out(h + fc_h), tr("Your value has no ReLU: the block is out(relu(h + fc(h))). Keep the "
                                            "activation, out of place (torch.relu).")),
                (reg_head.out(torch.relu(fc_h)), tr("Your value has no skip connection: the block is "
                                                    "out(relu(h + fc(h))), the input h added to fc(h).")),
                (reg_head.out(torch.relu(h) + fc_h), tr("Your value applies the ReLU to h before the addition: the "
                                                        "block adds first, out(relu(h + fc(h))).")),
                (reg_head.out(torch.relu(h) + reg_head.fc(torch.relu(h))),
                 tr("Your value applies the ReLU to h before the block: the block reads h itself, "
                    "out(relu(h + fc(h))).")),
            )
            for candidate, message in known:
                if close(value, candidate):
                    return message
            return (tr("Your value differs from reg_head's output, out(relu(h + fc(h))), by up to {gap}. Keep the "
                       "computation the same.", gap=f"{max_difference(value, right_value):.3g}") +
                    (space() + translated(CARRY_OVER) if earlier_right else ""))
    return None


def _backward_problem(error: Exception) -> str:
    """The diagnosis when backward through the learner's outputs raised."""
    if KINDS["inplace-version"].matches(error):
        details = parse_version_error(str(error))
        text = tr("Backward through your outputs raised {error}. Your forward still changes, in place, a tensor "
                  "autograd saved. In the residual head, `h += self.fc(h)` rewrites the very tensor that self.fc "
                  "saved for its weight gradient (and cls_head, if it is the encoder's h), and relu_() rewrites it "
                  "again. Handing the head a copy (h.clone(), h.detach().clone()) or an alias (h.detach(), h.data) "
                  "does not help: the head rewrites its own input after its fc saved it. Write the head's "
                  "computation out of place: h + reg_head.fc(h), then torch.relu, then reg_head.out.",
                  error=short_description(error))
        if details is not None and details.op == "Addmm":
            text += space() + tr("The message calls the tensor the output of Addmm (the encoder's last Linear), not of "
                             "Add or Relu: the in-place ops ran outside autograd's record (on h.detach()), and such a "
                             "tensor shares h's memory and version counter, so the change is still caught.")
        return text
    if KINDS["backward-twice"].matches(error):
        return tr("Backward through your outputs raised {error}. Did your forward call backward itself, or reuse a "
                  "graph from an earlier call? Return this call's outputs; the training step runs backward.",
                  error=short_description(error))
    return tr("Backward through your outputs raised {error}", error=short_description(error))


def _is_zero(grad: Optional[torch.Tensor]) -> bool:
    return grad is None or not bool(grad.abs().sum())


def _gradient_problem(recorded: Dict[str, Optional[torch.Tensor]], expected: Dict[str, torch.Tensor],
                      cls_only: Dict[str, torch.Tensor], earlier_right: bool) -> Optional[str]:
    """Compare the gradients the optimizer was stepped with (and x.grad) with the reference; None if right."""
    wrong = [name for name in expected if not same_gradients([recorded[name]], [expected[name]])]
    if not wrong:
        return None
    sentences: List[str] = []
    missing = [name for name in wrong if _is_zero(recorded[name])]
    if missing:
        sentences.append(tr("{names} got no gradient at all.", names=", ".join(missing)))
    shared = [name for name in expected if name.startswith("encoder.")] + ["x"]
    explained = set(missing)
    if any(name in wrong for name in shared) and same_gradients([recorded[n] for n in shared],
                                                                [cls_only[n] for n in shared]):
        sentences.append(tr("The encoder (and the input x) received only the gradient of l_cls: the regression loss "
                            "never reached it. A .detach() (or .data) before the residual head cuts that path, so "
                            "the regression task stops training the shared encoder."))
        explained.update(shared)
    if "cls_head.weight" in wrong and "cls_head.weight" not in explained:
        sentences.append(tr("cls_head.weight's gradient is wrong although the logits were right: the features the "
                            "classifier saved for its weight gradient were changed in place after it read them, "
                            "without autograd noticing (.data bypasses the version counter), so backward used the "
                            "rewritten features."))
        explained.add("cls_head.weight")
    rest = [name for name in wrong if name not in explained]
    if rest:
        factor = scale_factor(flattened([recorded[n] for n in rest], [expected[n] for n in rest]),
                              flattened([expected[n] for n in rest], [expected[n] for n in rest]))
        if factor is not None:
            sentences.append(tr("{names} got {factor} times the gradient of l_cls + l_reg. Did your forward call "
                                "backward, or scale an output?", names=", ".join(rest), factor=f"{factor:.3g}"))
        else:
            sentences.append(tr("{names} got a gradient that differs from the gradient of l_cls + l_reg.",
                                names=", ".join(rest)) + (space() + translated(CARRY_OVER) if earlier_right else ""))
    return space().join(sentences)


def _side_effects(models: Tuple[nn.Module, ...], weights: List[torch.Tensor],
                  before: step_watch.Snapshot) -> Optional[str]:
    """What the learner's forward changed besides computing outputs; None if nothing."""
    named = multitask_parameters(*models)
    with_grad = [name for name, p in named.items() if p.grad is not None]
    if with_grad:
        names = ", ".join(with_grad[:3]) + (" ..." if len(with_grad) > 3 else "")
        return tr("Your forward filled .grad ({names}): a forward pass only computes the outputs; the training step "
                  "runs backward, once.", names=names)
    if not all(torch.equal(p.detach(), w) for p, w in zip(named.values(), weights)):
        return tr("Your forward changed the models' weights: a forward pass only reads them.")
    change = step_watch.changed(before, {}, dict(zip(MODEL_NAMES, models)), {})
    return None if change is None else tr("Your forward {change}.", change=change)


def _check_run(forward: Callable[..., Any], run: int, kind: str, earlier_right: List[bool],
               keep: List[Any]) -> Optional[str]:
    """Train for ``STEPS`` steps with the learner's forward; the diagnosis, or None if every step was right."""
    models = make_residual_multitask(seed=SEED + run)
    named = multitask_parameters(*models)
    optimizer = step_watch.kind(kind)(named.values())
    record = step_watch.watch(optimizer, "optimizer")
    keep += [models, optimizer]                   # alive until the check ends: no id() is ever reused
    for step in range(1, STEPS + 1):
        x, labels, targets = make_batch(seed=SEED + 10 * run + step)
        expected = reference_gradients(models, x, labels, targets, forward=residual_reference_forward)
        cls_only = reference_gradients(models, x, labels, targets, losses="cls", forward=residual_reference_forward)
        learner_x = x.clone().requires_grad_(True)
        keep += [x, learner_x]
        optimizer.zero_grad(set_to_none=True)
        weights = [p.detach().clone() for p in named.values()]
        before = step_watch.snapshot({}, dict(zip(MODEL_NAMES, models)), {})
        outputs = run_learner(tr("Your forward (step {step})", step=step), forward, *models, learner_x)
        problem = _side_effects(models, weights, before)
        if problem is None:
            problem = _output_problem(outputs, models, x, any(earlier_right))
        if problem is None:
            l_cls, l_reg = task_losses(*outputs, labels, targets)
            try:
                (l_cls + l_reg).backward()
            except Exception as error:  # the learner's graph: never crash the checker
                problem = _backward_problem(error)
        if problem is None:
            optimizer.step()
            recorded: Dict[str, Optional[torch.Tensor]] = dict(zip(named, record.calls[-1].grads))
            recorded["x"] = learner_x.grad
            problem = _gradient_problem(recorded, expected, cls_only, any(earlier_right))
        if problem is not None:
            return tr("On step {step}: {problem}", step=step, problem=problem)
        earlier_right.append(True)
    return None


def check_fixed_forward(forward: Callable[..., Any]) -> CheckResult:
    """Train with the learner's forward for a few steps; compare outputs and every gradient with plain torch."""
    earlier_right: List[bool] = []
    keep: List[Any] = []
    for run, kind in enumerate(RUNS):
        diagnosis = _check_run(forward, run, kind, earlier_right, keep)
        if diagnosis is not None:
            return failed(EXERCISE_ID, tr("Run {run} (fresh models, {optimizer}): {diagnosis}", run=run + 1,
                                          optimizer=translated(kind), diagnosis=diagnosis))
    return passed(EXERCISE_ID, tr("{runs} runs of {steps} training steps with fresh models: your forward raised "
                                  "nothing, changed nothing but its outputs, returned the logits and value the "
                                  "in-place code computes, and every parameter of the encoder and both heads, and the "
                                  "input x, got exactly the gradient of l_cls + l_reg.", runs=len(RUNS), steps=STEPS))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="fixed_forward",
    checker=check_fixed_forward,
    hints=HINTS,
    contract=CONTRACT,
)

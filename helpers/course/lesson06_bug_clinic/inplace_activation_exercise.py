"""Exercise of notebook 06, case 6: a multi-task forward pass without the in-place ReLU bug.

Fixed contract: ``fixed_forward(encoder, cls_head, reg_head, x) -> (logits, value)``, the same computation as
``cls_head(h), reg_head(h)`` with ``h = encoder(x)``, where ``reg_head`` starts with ``nn.ReLU(inplace=True)``.
The checker trains with the learner's forward for a few steps, with an optimizer that records the gradients it is
stepped with, and compares outputs and gradients (every parameter and the input) with a plain-torch twin.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import torch

from helpers.course.exercises.compare import (
    close,
    describe_value,
    flattened,
    max_difference,
    same_gradients,
    scale_factor,
)
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_learner
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson06_bug_clinic.inplace_activation import (
    BATCH,
    CLASSES,
    WIDTH,
    Models,
    make_batch,
    make_multitask,
    multitask_parameters,
    reference_forward,
    reference_gradients,
    task_losses,
)
from helpers.course.recording import RecordingSGD
from helpers.tools.errors import KINDS, parse_version_error, short_description

EXERCISE_ID = "fixed_forward"
STEPS = 3
LEARNING_RATE = 0.1
SEED = 61

HINTS = (
    f"Backward fails with error 2 on a {[BATCH, WIDTH]} tensor at version 1, expected 0, with no optimizer step "
    f"anywhere: {[BATCH, WIDTH]} is the shape of the encoder's output h. A right forward returns the same logits "
    "and value, and training with it gives every parameter (and x) the gradient of l_cls + l_reg.",
    "cls_head is a Linear: it saved h to compute its weight gradient. reg_head's nn.ReLU(inplace=True) then "
    "rewrote that same h. Detaching h does not help: h.detach() shares h's memory and version counter, and "
    "h.detach().clone() cuts the regression loss off from the encoder.",
    "Leave h as the classifier saved it: apply the regression head's ReLU out of place (the functional "
    "torch.relu, then the head's linear layer), or give the head a copy of h (.clone()).",
)


def _output_problem(outputs: Any, reference: Models, x: torch.Tensor, step: int) -> Optional[str]:
    """What is wrong with the learner's ``(logits, value)``, compared with the reference twin; None if right."""
    if not (isinstance(outputs, (tuple, list)) and len(outputs) == 2
            and all(isinstance(t, torch.Tensor) for t in outputs)):
        return f"Return the pair (logits, value), two tensors; on step {step} you returned {describe_value(outputs)}."
    logits, value = outputs
    for name, tensor, shape in (("logits", logits, (BATCH, CLASSES)), ("value", value, (BATCH, 1))):
        if tuple(tensor.shape) != shape:
            return (f"{name} should have shape {list(shape)} (what the head returns), "
                    f"but yours has shape {list(tensor.shape)}.")
    for name, tensor, head in (("logits", logits, "cls_head"), ("value", value, "reg_head")):
        if not tensor.requires_grad:
            return (f"Your {name} carries no gradient (it does not require grad): it was computed under "
                    f"torch.no_grad() or from a detached tensor, so its loss can train neither {head} nor the "
                    "encoder. Keep the whole forward pass recorded.")
    encoder, cls_head, reg_head = reference
    with torch.no_grad():
        h = encoder(x)
        right_logits, right_value = reference_forward(encoder, cls_head, reg_head, x)
        if not close(logits, right_logits):
            if close(logits, cls_head(torch.relu(h))):
                return ("Your logits are cls_head(relu(h)), not cls_head(h): the classifier read the features "
                        "after the regression head's ReLU(inplace=True) had rewritten them. Calling the heads in "
                        "the other order hides error 2, but silently changes the classifier's input.")
            gap = max_difference(logits, right_logits)
            return (f"Your logits differ from cls_head(encoder(x)) by up to {gap:.3g}. "
                    "Keep the computation the same; only the in-place step must change.")
        if not close(value, right_value):
            if close(value, reg_head[1](h)):
                return ("Your value is the regression head without its ReLU. Keep the activation, "
                        "just not in place: torch.relu(h) instead of the in-place nn.ReLU.")
            return (f"Your value differs from reg_head's output (ReLU, then Linear) by up to "
                    f"{max_difference(value, right_value):.3g}. Keep the computation the same.")
    return None


def _backward_problem(error: Exception, step: int) -> str:
    """The diagnosis when backward through the learner's outputs raised."""
    if KINDS["inplace-version"].matches(error):
        details = parse_version_error(str(error))
        text = (f"On step {step}, backward through your outputs raised {short_description(error)}. "
                "Your forward still changes, in place, a tensor autograd saved: the regression head's "
                "ReLU(inplace=True) rewrites the encoder's output h, which cls_head's Linear saved for its weight "
                "gradient. Use an out-of-place ReLU (torch.relu(h)) or give the head its own copy (h.clone()).")
        if details is not None and details.op == "Addmm":
            text += (" The message still calls h the output of Addmm (the encoder's last Linear), not of the ReLU: "
                     "the in-place ReLU ran outside autograd's record (on h.detach(), or under torch.no_grad()). "
                     "Such a tensor shares h's memory and its version counter, so the change is still caught.")
        return text
    if KINDS["backward-twice"].matches(error):
        return (f"On step {step}, backward through your outputs raised {short_description(error)}. "
                "Did your forward call backward itself? Return the outputs; the training step runs backward.")
    return f"On step {step}, backward through your outputs raised {short_description(error)}"


def _is_zero(grad: Optional[torch.Tensor]) -> bool:
    return grad is None or not bool(grad.abs().sum())


def _gradient_problem(recorded: Dict[str, Optional[torch.Tensor]], expected: Dict[str, torch.Tensor],
                      cls_only: Dict[str, torch.Tensor], step: int) -> Optional[str]:
    """Compare the gradients the optimizer was stepped with (and x.grad) with the reference; None if right."""
    wrong = [name for name in expected if not same_gradients([recorded[name]], [expected[name]])]
    if not wrong:
        return None
    sentences: List[str] = []
    missing = [name for name in wrong if _is_zero(recorded[name])]
    if missing:
        sentences.append(f"{', '.join(missing)} got no gradient at all.")
    shared = [name for name in expected if name.startswith("encoder.")] + ["x"]
    explained = set(missing)
    if any(name in wrong for name in shared) and same_gradients([recorded[n] for n in shared],
                                                                [cls_only[n] for n in shared]):
        sentences.append("The encoder (and the input x) received only the gradient of l_cls: the regression loss "
                         "never reached it. A .detach() (or .data) before the regression head cuts that path, so "
                         "the regression task stops training the shared encoder.")
        explained.update(shared)
    if "cls_head.weight" in wrong and "cls_head.weight" not in explained:
        sentences.append("cls_head.weight's gradient is wrong although the logits were right: the features the "
                         "classifier saved for its weight gradient were changed in place after it read them, "
                         "without autograd noticing (.data bypasses the version counter), so backward used the "
                         "ReLU'd features.")
        explained.add("cls_head.weight")
    rest = [name for name in wrong if name not in explained]
    if rest:
        factor = scale_factor(flattened([recorded[n] for n in rest], [expected[n] for n in rest]),
                              flattened([expected[n] for n in rest], [expected[n] for n in rest]))
        if factor is not None:
            sentences.append(f"{', '.join(rest)} got {factor:.3g} times the gradient of l_cls + l_reg. "
                             "Did your forward call backward, or scale an output?")
        else:
            sentences.append(f"{', '.join(rest)} got a gradient that differs from the gradient of l_cls + l_reg.")
    return f"On step {step}: " + " ".join(sentences)


def _step_reference(reference: Models, expected: Dict[str, torch.Tensor]) -> None:
    """Plain SGD on the reference twin, with the reference gradients."""
    with torch.no_grad():
        for name, param in multitask_parameters(*reference).items():
            param.add_(expected[name], alpha=-LEARNING_RATE)


def _check(forward: Callable[..., Any]) -> Optional[str]:
    """Train for ``STEPS`` steps with the learner's forward; the diagnosis, or None if every step was right."""
    models, reference = make_multitask(seed=SEED), make_multitask(seed=SEED)
    named = multitask_parameters(*models)
    optimizer = RecordingSGD(list(named.values()), lr=LEARNING_RATE)
    for step in range(1, STEPS + 1):
        x, labels, targets = make_batch(seed=SEED + step)
        expected = reference_gradients(reference, x, labels, targets)
        cls_only = reference_gradients(reference, x, labels, targets, losses="cls")
        learner_x = x.clone().requires_grad_(True)
        optimizer.zero_grad()
        outputs = run_learner(f"Your forward (step {step})", forward, *models, learner_x)
        problem = _output_problem(outputs, reference, x, step)
        if problem is not None:
            return problem
        l_cls, l_reg = task_losses(*outputs, labels, targets)
        try:
            (l_cls + l_reg).backward()
        except Exception as error:  # the learner's graph: never crash the checker
            return _backward_problem(error, step)
        optimizer.step()
        recorded: Dict[str, Optional[torch.Tensor]] = dict(zip(named, optimizer.records[-1]))
        recorded["x"] = learner_x.grad
        problem = _gradient_problem(recorded, expected, cls_only, step)
        if problem is not None:
            return problem
        _step_reference(reference, expected)
    return None


def check_fixed_forward(forward: Callable[..., Any]) -> CheckResult:
    """Train with the learner's forward for a few steps; compare outputs and every gradient with plain torch."""
    diagnosis = _check(forward)
    if diagnosis is not None:
        return failed(EXERCISE_ID, diagnosis)
    return passed(EXERCISE_ID, f"For {STEPS} training steps your forward raised nothing, returned the reference logits "
                               "and value, and every parameter of the encoder and both heads, and the input x, got "
                               "exactly the gradient of l_cls + l_reg.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="fixed_forward",
    checker=check_fixed_forward,
    hints=HINTS,
)

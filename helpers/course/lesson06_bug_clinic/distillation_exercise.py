"""Exercise of notebook 06, case 4: one distillation step in which only the student learns.

Fixed contract: ``distill_step(student, teacher, optimizer, x, y, temperature, alpha) -> None``, where
``optimizer`` holds the student's parameters only and the teacher arrives as loaded from a checkpoint
(train mode, parameters requiring grad). The checker watches the teacher (weights, BatchNorm buffers, whether
any backward reached it) and compares the gradient the student's optimizer is stepped with against plain torch.
A wrong student gradient is taken apart as ``a * (soft-term gradient) + b * (cross-entropy gradient)``, for the
right soft term and for the usual wrong ones, so that a missing ``T**2`` or a swapped KL is named as such.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.exercises.compare import added, close, same_gradients
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson06_bug_clinic.distillation import (
    CLASSES,
    changed_entries,
    frozen_copy,
    make_batch,
    make_student,
    make_teacher,
    parameter_names,
    relative_error,
    snapshot,
    soft_loss,
)
from helpers.course.recording import LEARNING_RATE, RecordingSGD
from helpers.tools.gradients import gradients_of

EXERCISE_ID = "distill_step"
STEPS = 3
SETTINGS: Tuple[Tuple[float, float], ...] = ((3.0, 0.7), (2.0, 0.4))  # (temperature, alpha)
CHECK_BATCH = 32

HINTS = (
    "A right step leaves the teacher exactly as it was (weights, BatchNorm statistics, no .grad) and gives the "
    "student exactly the gradient of alpha * T^2 * KL(teacher || student) + (1 - alpha) * CE, with the teacher's "
    "logits taken in eval mode.",
    "A forward pass through the teacher is recorded like any other, so the student's loss reaches the teacher's "
    "parameters and backward() fills their .grad. In train mode its BatchNorm uses the batch's statistics and "
    "updates its running averages, even under no_grad. Softening by T shrinks the soft term's gradient by 1/T^2.",
    "The teacher only gives targets: eval mode, and a forward pass without a graph (torch.no_grad(), "
    ".detach() or requires_grad_(False)). The soft term is the KL divergence between the temperature-softened "
    "distributions (the student's log-probabilities against the teacher's probabilities, batch mean) times T squared, "
    "mixed with the hard cross-entropy by alpha. Then zero, one backward, step.",
)

StepFunction = Callable[..., Any]
SoftVariant = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]


def _kl(input_: torch.Tensor, target: torch.Tensor, temperature: float, **kwargs: Any) -> torch.Tensor:
    return temperature ** 2 * F.kl_div(input_, target, reduction="batchmean", **kwargs)


# Soft terms a step may compute instead of the right one (each with T**2 and "batchmean", so that a missing T**2
# or another reduction shows up as the coefficient), and what to tell the learner who did.
SOFT_VARIANTS: Dict[str, Tuple[SoftVariant, str]] = {
    "right": (soft_loss, ""),
    "swapped": (
        lambda s, t, T: soft_loss(t, s, T),
        "The soft term is KL(student || teacher), the KL the wrong way round. F.kl_div(input, target) computes "
        "KL(target || input): input = F.log_softmax(student_logits / T), target = F.softmax(teacher_logits / T).",
    ),
    "probabilities as input": (
        lambda s, t, T: _kl(F.softmax(s / T, dim=1), F.softmax(t / T, dim=1), T),
        "F.kl_div was given the student's probabilities as its first argument; it expects log-probabilities: "
        "use F.log_softmax(student_logits / T, dim=1).",
    ),
    "logits as input": (
        lambda s, t, T: _kl(s / T, F.softmax(t / T, dim=1), T),
        "F.kl_div was given the student's (scaled) logits as its first argument; it expects log-probabilities: "
        "use F.log_softmax(student_logits / T, dim=1).",
    ),
    "log-probabilities as target": (
        lambda s, t, T: _kl(F.log_softmax(s / T, dim=1), F.log_softmax(t / T, dim=1), T),
        "F.kl_div was given the teacher's log-probabilities as its target without log_target=True: it read them "
        "as probabilities. Pass F.softmax(teacher_logits / T) as the target, or keep the log-probabilities and "
        "add log_target=True.",
    ),
    "teacher not softened": (
        lambda s, t, T: _kl(F.log_softmax(s / T, dim=1), F.softmax(t, dim=1), T),
        "The teacher's logits were not divided by T: both sides of the KL must be softened, softmax(teacher / T).",
    ),
    "student not softened": (
        lambda s, t, T: _kl(F.log_softmax(s, dim=1), F.softmax(t / T, dim=1), T),
        "The student's logits were not divided by T in the soft term: log_softmax(student / T) there (the "
        "cross-entropy uses the plain logits).",
    ),
}


def _teacher_report(teacher: nn.Module, before: Dict[str, torch.Tensor], reached: bool, step: int,
                    student_note: str) -> Optional[str]:
    """What the step did to the teacher that it must not: change its weights or buffers, or compute its gradient.

    ``student_note`` (what is right or wrong with the student's gradient) is added when backward reached the teacher.
    """
    changed = changed_entries(teacher, before)
    weights = [name for name in changed if name in parameter_names(teacher)]
    buffers = [name for name in changed if name not in weights]
    if weights:
        return (f"On step {step}, the teacher's weights changed ({', '.join(weights)}): the teacher trained. It must "
                "stay exactly as loaded; only the optimizer you are given (the student's) may step.")
    if buffers:
        return (f"On step {step}, the teacher's BatchNorm statistics changed ({', '.join(buffers)}): the teacher "
                "ran in train mode, where BatchNorm normalises with the batch's statistics (other logits) and "
                "updates its running averages, even under torch.no_grad(). Call teacher.eval() before its forward "
                "pass.")
    with_grad = [name for name, p in teacher.named_parameters() if p.grad is not None]
    if reached or with_grad:
        where = (f" (.grad is filled on {', '.join(with_grad)}, and piles up there: the student's zero_grad() never "
                 "clears it)" if with_grad else " (then thrown away: a backward pass through the teacher for nothing)")
        return (f"On step {step}, backward() went through the teacher and computed gradients for its "
                f"parameters{where}. The teacher's forward pass was recorded, so its saved tensors were kept for that "
                "backward. Compute the teacher's logits under torch.no_grad() (or .detach() them, or call "
                f"teacher.requires_grad_(False)). {student_note}")
    return None




def _parts(student: nn.Module, teacher: nn.Module, x: torch.Tensor, y: torch.Tensor,
           temperature: float) -> Dict[str, List[torch.Tensor]]:
    """The student's gradient of each candidate soft term and of the cross-entropy, at the current parameters."""
    copy_of_student = copy.deepcopy(student)
    student_logits = copy_of_student(x)
    with torch.no_grad():
        teacher_logits = frozen_copy(teacher)(x)
    parts = {name: gradients_of(variant(student_logits, teacher_logits, temperature), copy_of_student)
             for name, (variant, _) in SOFT_VARIANTS.items()}
    parts["hard"] = gradients_of(F.cross_entropy(student_logits, y), copy_of_student)
    return parts


def _flat(grads: List[Optional[torch.Tensor]], like: List[torch.Tensor]) -> torch.Tensor:
    return torch.cat([(torch.zeros_like(e) if g is None else g).detach().double().cpu().flatten()
                      for g, e in zip(grads, like)])


def _fit(recorded: List[Optional[torch.Tensor]], soft: List[torch.Tensor],
         hard: List[torch.Tensor]) -> Optional[Tuple[float, float]]:
    """``(a, b)`` when ``recorded == a * soft + b * hard`` up to round-off, else None."""
    target, soft_flat, hard_flat = _flat(recorded, hard), _flat(soft, hard), _flat(hard, hard)
    basis = torch.stack([soft_flat, hard_flat], dim=1)
    solution = torch.linalg.lstsq(basis, target.unsqueeze(1)).solution.flatten()
    a, b = float(solution[0]), float(solution[1])
    return (a, b) if close(a * soft_flat + b * hard_flat, target) else None


def _near(value: float, target: float) -> bool:
    return math.isclose(value, target, rel_tol=2e-3, abs_tol=1e-6)


def _coefficient_problem(a: float, b: float, temperature: float, alpha: float) -> Optional[str]:
    """What the soft and cross-entropy coefficients ``a`` and ``b`` say about the loss, or None when right."""
    soft_ratio, hard_ratio = a / alpha, b / (1 - alpha)
    got = (f"Your gradient is {a:.3g} x the soft term's + {b:.3g} x the cross-entropy's; it should be {alpha:g} x "
           f"and {1 - alpha:g} x.")
    if _near(a, 0.0):
        return ("The soft (KL) term gave the student no gradient: did you detach the student's logits in it, or "
                "leave it out? Only the teacher's logits are constants.")
    if _near(b, 0.0):
        return ("The cross-entropy term gave the student no gradient: did you detach the student's logits in it, or "
                "leave it out?")
    if _near(soft_ratio, 1.0) and _near(hard_ratio, 1.0):
        return None
    if _near(hard_ratio, 1.0):
        known = {
            1 / temperature ** 2: f"= 1/T^2 (T = {temperature:g}): the T^2 factor is missing. Dividing the logits by T "
                                  "shrinks the soft term's gradient by 1/T^2; multiply the KL by T * T to undo it.",
            1 / temperature: "= 1/T: the KL was multiplied by T instead of T^2 = T * T.",
            temperature ** 2: "= T^2: the T^2 factor is there twice.",
            1 / CLASSES: f"= 1/{CLASSES}, one over the number of classes: reduction=\"mean\" averages over classes "
                         "too. Use reduction=\"batchmean\" (the mean over the batch of each sample's KL).",
            float(CHECK_BATCH): f"= {CHECK_BATCH}, the batch size: reduction=\"sum\" adds the samples up. Use "
                                "reduction=\"batchmean\".",
            1 / alpha: "= 1/alpha: the KL term is not multiplied by alpha.",
        }
        for factor, meaning in known.items():
            if _near(soft_ratio, factor):
                return f"The soft term's gradient is {soft_ratio:.3g} times the right one {meaning} {got}"
        return f"The soft term's gradient is {soft_ratio:.3g} times the right one. {got}"
    if _near(a, 1 - alpha) and _near(b, alpha):
        return f"alpha and 1 - alpha are swapped: the soft term gets alpha, the cross-entropy 1 - alpha. {got}"
    if _near(hard_ratio, 1 / (1 - alpha)) and _near(soft_ratio, 1.0):
        return f"The cross-entropy is not multiplied by 1 - alpha. {got}"
    return f"The soft and cross-entropy terms are weighted wrongly. {got}"


def _student_problem(recorded: List[Optional[torch.Tensor]], parts: Dict[str, List[torch.Tensor]],
                     reference: List[torch.Tensor], previous: Optional[List[Optional[torch.Tensor]]],
                     temperature: float, alpha: float) -> str:
    """What is wrong with the gradient the student was stepped with, in a sentence or two."""
    if all(g is None or not bool(g.abs().sum()) for g in recorded):
        return "It was stepped with no gradient at all: call zero_grad() before backward(), and step() after it."
    if previous is not None and same_gradients(recorded, added(reference, previous)):
        return ("It still contained the previous step's gradient: gradients pile up in .grad. Call "
                "optimizer.zero_grad() before backward().")
    for name, (_, message) in SOFT_VARIANTS.items():
        fit = _fit(recorded, parts[name], parts["hard"])
        if fit is None:
            continue
        coefficients = _coefficient_problem(*fit, temperature, alpha)
        if name == "right":
            if coefficients is None:  # right up to the fit's round-off, yet not close enough: say how far
                break
            return coefficients
        if coefficients is None or _near(fit[0], 0.0) or _near(fit[1], 0.0):
            return coefficients or message
        return f"{message} Also: {coefficients}"
    difference = relative_error([torch.zeros_like(e) if g is None else g for g, e in zip(recorded, reference)],
                                reference)
    return ("It differs from the gradient of alpha * T^2 * KL(softmax(teacher / T) || softmax(student / T)) + "
            f"(1 - alpha) * CE(student, y) by {difference:.3g} of its size, and is not a mix of its two terms. "
            "Compute the loss from this step's logits, with the teacher in eval mode.")


_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise
    "backward-twice": (
        "A first backward freed the student's graph: add the soft and the hard term into one loss and "
        "call backward() once."
    ),
    "inplace-version": (
        "Something was changed in place (a step?) before a backward that needed it: run the backward "
        "first."
    ),
}


def _check_with(step_function: StepFunction, temperature: float, alpha: float) -> Optional[str]:
    """Run the learner's step for several consecutive steps; the diagnosis, or None if right."""
    teacher = make_teacher(seed=7)          # as loaded: train mode, parameters requiring grad
    untouched = frozen_copy(teacher)        # what the teacher must stay
    student = make_student(seed=8)
    optimizer = RecordingSGD(student.parameters())
    previous: Optional[List[Optional[torch.Tensor]]] = None
    for step in range(1, STEPS + 1):
        x, y = make_batch(seed=70 + step, batch=CHECK_BATCH)
        parts = _parts(student, untouched, x, y, temperature)
        reference = [alpha * s + (1 - alpha) * h for s, h in zip(parts["right"], parts["hard"])]
        teacher_before = snapshot(teacher)
        student_before = [p.detach().clone() for p in student.parameters()]
        count = len(optimizer.records)
        reached: List[bool] = []
        hooks = [p.register_hook(lambda grad: reached.append(True)) for p in teacher.parameters() if p.requires_grad]
        try:
            run_step(step_function, step, student, teacher, optimizer, x, y, temperature, alpha,
                     explanations=_ERROR_EXPLANATIONS)
        finally:
            for hook in hooks:
                hook.remove()
        calls = len(optimizer.records) - count
        recorded = optimizer.records[-1] if calls else None
        student_right = recorded is not None and same_gradients(recorded, reference)
        problem = None if recorded is None or student_right else _student_problem(
            recorded, parts, reference, previous, temperature, alpha)
        note = ("The student's gradient itself is right: nothing else needs to change." if student_right
                else f"And the student's gradient is wrong too. {problem}" if problem else "")
        teacher_problem = _teacher_report(teacher, teacher_before, bool(reached), step, note)
        if teacher_problem is not None:
            return teacher_problem.rstrip()
        if calls != 1:
            what = "never stepped" if calls == 0 else f"stepped {calls} times"
            return f"On step {step}, the student's optimizer was {what}; each step should step it exactly once."
        expected_after = [b - LEARNING_RATE * (torch.zeros_like(b) if g is None else g)
                          for b, g in zip(student_before, recorded)]
        if not all(close(p, e) for p, e in zip(student.parameters(), expected_after)):
            return (f"On step {step}, the student's parameters changed other than through optimizer.step(). "
                    "Change weights only with the optimizer.")
        if problem is not None:
            return f"On step {step}, the student's optimizer was stepped with the wrong gradient. {problem}"
        previous = recorded
    return None


def check_distill_step(step_function: StepFunction) -> CheckResult:
    """Run the learner's step for several steps at two settings; watch the teacher, compare the student's gradient."""
    for temperature, alpha in SETTINGS:
        diagnosis = _check_with(step_function, temperature, alpha)
        if diagnosis is not None:
            return failed(EXERCISE_ID, f"With temperature {temperature:g} and alpha {alpha:g}: {diagnosis}")
    settings = " and ".join(f"T = {t:g}, alpha = {a:g}" for t, a in SETTINGS)
    return passed(EXERCISE_ID, f"For {STEPS} consecutive steps, with {settings}: the teacher's weights and BatchNorm "
                               "statistics stayed exactly as loaded, no backward reached it, and the student was "
                               "stepped with exactly the gradient of alpha * T^2 * KL(teacher || student) + "
                               "(1 - alpha) * CE, the teacher taken in eval mode.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="distill_step",
    checker=check_distill_step,
    hints=HINTS,
)

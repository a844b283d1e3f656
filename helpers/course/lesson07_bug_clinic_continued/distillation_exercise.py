"""Exercise of notebook 07, case 1: ONLINE distillation, a step in which the teacher learns too.

Fixed contract: ``online_distill_step(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha)``
returns nothing; ``opt_student`` holds only the student's parameters, ``opt_teacher`` only the teacher's. One forward
pass of each model, the teacher in train mode (it learns, so its BatchNorm uses the batch's statistics and updates
its running averages once). The teacher is stepped once with the gradient of ``CE(teacher_logits, y)``; the student
once with the gradient of ``alpha * T**2 * KL(softmax(teacher / T) || softmax(student / T)) + (1 - alpha) *
CE(student, y)``, the teacher's logits from that same forward pass held constant; both gradients at the weights the
step started from. Modes and requires_grad flags stay as handed over.

The checker runs three runs of three consecutive steps, each run with fresh models, its own temperature and alpha
and its own optimizer kinds (SGD, SGD with momentum, Adam, AdamW fused where supported), a new batch every step. It
records the gradient each optimizer is stepped with (``helpers.course.exercises.engine.step_watch``), replays every step on
a twin optimizer (``helpers.course.exercises.engine.twins``), and compares with plain torch. A wrong gradient is taken
apart into known terms: the teacher's as ``a * grad CE + b * grad(soft term)`` (b != 0: its logits were not
detached), the student's as ``a * (soft-term gradient) + b * (cross-entropy gradient)`` for the right soft term and
for the usual wrong ones.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.exercises.compare import added, close, same_gradients
from helpers.course.exercises.engine import step_watch
from helpers.course.exercises.engine.twins import TwinOptimizer, copy_module, weights
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson07_bug_clinic_continued.distillation import (
    CLASSES,
    make_batch,
    make_student,
    make_teacher,
    relative_error,
    soft_loss,
)
from helpers.course.lesson07_bug_clinic_continued.distillation_contract import CONTRACT
from helpers.language import marked, space, tr, translated
from helpers.tools.gradients import gradients_of

EXERCISE_ID = "online_distill_step"
STEPS = 3
CHECK_BATCH = 32
# (temperature, alpha, the teacher's optimizer, the student's optimizer): one run of STEPS steps each
RUNS: Tuple[Tuple[float, float, str, str], ...] = (
    (3.0, 0.7, "SGD", "SGD"),
    (2.0, 0.4, "Adam", "SGD with momentum"),
    (4.0, 0.6, "fused AdamW", "fused AdamW"),                  # plain AdamW where this torch has no fused one
)
CARRY_OVER = marked("Your earlier steps were right, so look for something kept from one call to the next (a global, "
                    "a cache, a function attribute, an optimizer made once): each call must use only its own "
                    "arguments.")
# where a model's weights changed other than through its optimizer's step (``TwinOptimizer.replay``)
WHERE_MOVED = {"before": marked("before its step"), "between": marked("between its step"),
               "after": marked("after its step"), "in": marked("in its step")}
THE_MODEL = {"teacher": marked("The teacher"), "student": marked("The student")}  # at the start of a sentence

HINTS = (
    marked("A right step runs each model forward once (the teacher in train mode: it learns), steps the teacher with "
           "the gradient of its own cross-entropy and the student with the gradient of the distillation loss against "
           "those same teacher logits, both at the weights the step started from. Stepping the teacher before the "
           "student's backward raises error 1, or error 2 with retain_graph=True; a silent variant trains the "
           "teacher towards the student."),
    marked("The teacher's logits are recorded: the teacher needs that graph for its own loss. Used as they are in "
           "the student's loss, they are a path, not a target: the student's loss reaches back into the teacher, "
           "whose graph its own backward may already have freed (error 1) or whose weights its step has changed "
           "(error 2); summed into one backward, the student's loss trains the teacher. Freezing the teacher (eval "
           "mode, requires_grad_(False), no_grad), as in the worked fix, would stop it learning."),
    marked("Keep the teacher in train mode and its forward recorded, once. In the student's loss use the teacher's "
           "logits as a constant: .detach() them there (only there). Each optimizer: zero_grad, a backward of its "
           "own loss, step; the order no longer matters once the student's loss cannot reach the teacher. The soft "
           "term is T squared times the batch-mean KL of the softened distributions (student log-probabilities "
           "against teacher probabilities), mixed with the student's cross-entropy by alpha."),
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
        marked("The soft term is KL(student || teacher), the KL the wrong way round. F.kl_div(input, target) "
               "computes KL(target || input): input = F.log_softmax(student_logits / T), target = "
               "F.softmax(teacher_logits / T)."),
    ),
    "probabilities as input": (
        lambda s, t, T: _kl(F.softmax(s / T, dim=1), F.softmax(t / T, dim=1), T),
        marked("F.kl_div was given the student's probabilities as its first argument; it expects "
               "log-probabilities: use F.log_softmax(student_logits / T, dim=1)."),
    ),
    "logits as input": (
        lambda s, t, T: _kl(s / T, F.softmax(t / T, dim=1), T),
        marked("F.kl_div was given the student's (scaled) logits as its first argument; it expects "
               "log-probabilities: use F.log_softmax(student_logits / T, dim=1)."),
    ),
    "log-probabilities as target": (
        lambda s, t, T: _kl(F.log_softmax(s / T, dim=1), F.log_softmax(t / T, dim=1), T),
        marked("F.kl_div was given the teacher's log-probabilities as its target without log_target=True: it read "
               "them as probabilities. Pass F.softmax(teacher_logits / T) as the target, or keep the "
               "log-probabilities and add log_target=True."),
    ),
    "teacher not softened": (
        lambda s, t, T: _kl(F.log_softmax(s / T, dim=1), F.softmax(t, dim=1), T),
        marked("The teacher's logits were not divided by T: both sides of the KL must be softened, "
               "softmax(teacher / T)."),
    ),
    "student not softened": (
        lambda s, t, T: _kl(F.log_softmax(s, dim=1), F.softmax(t / T, dim=1), T),
        marked("The student's logits were not divided by T in the soft term: log_softmax(student / T) there (the "
               "cross-entropy uses the plain logits)."),
    ),
}


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
    got = tr("The student's gradient is {soft} x the soft term's + {hard} x the cross-entropy's; it should be "
             "{alpha} x and {rest} x.", soft=f"{a:.3g}", hard=f"{b:.3g}", alpha=f"{alpha:g}", rest=f"{1 - alpha:g}")
    if _near(a, 0.0):
        return tr("The soft (KL) term gave the student no gradient: did you detach the student's logits in it, or "
                  "leave it out? Only the teacher's logits are constants.")
    if _near(b, 0.0):
        return tr("The cross-entropy term gave the student no gradient: did you detach the student's logits in it, "
                  "or leave it out?")
    if _near(soft_ratio, 1.0) and _near(hard_ratio, 1.0):
        return None
    if _near(hard_ratio, 1.0):
        ratio = f"{soft_ratio:.3g}"
        known = {  # the factor -> the whole diagnosis
            1 / temperature ** 2: tr(
                "The soft term's gradient is {ratio} times the right one = 1/T^2 (T = {temperature}): the T^2 factor "
                "is missing. Dividing the logits by T shrinks the soft term's gradient by about 1/T^2; multiply the KL "
                "by T * T to undo it. {got}", ratio=ratio, temperature=f"{temperature:g}", got=got),
            1 / temperature: tr("The soft term's gradient is {ratio} times the right one = 1/T: the KL was multiplied "
                                "by T instead of T^2 = T * T. {got}", ratio=ratio, got=got),
            temperature ** 2: tr("The soft term's gradient is {ratio} times the right one = T^2: the T^2 factor is "
                                 "there twice. {got}", ratio=ratio, got=got),
            1 / CLASSES: tr("The soft term's gradient is {ratio} times the right one = 1/{classes}, one over the "
                            "number of classes: reduction=\"mean\" averages over classes too. Use "
                            "reduction=\"batchmean\" (the mean over the batch of each sample's KL). {got}",
                            ratio=ratio, classes=CLASSES, got=got),
            float(CHECK_BATCH): tr("The soft term's gradient is {ratio} times the right one = {batch}, the batch "
                                   "size: reduction=\"sum\" adds the samples up. Use reduction=\"batchmean\". {got}",
                                   ratio=ratio, batch=CHECK_BATCH, got=got),
            1 / alpha: tr("The soft term's gradient is {ratio} times the right one = 1/alpha: the KL term is not "
                          "multiplied by alpha. {got}", ratio=ratio, got=got),
        }
        for factor, diagnosis in known.items():
            if _near(soft_ratio, factor):
                return diagnosis
        return tr("The soft term's gradient is {ratio} times the right one. {got}", ratio=ratio, got=got)
    if _near(a, 1 - alpha) and _near(b, alpha):
        return tr("Alpha and 1 - alpha are swapped: the soft term gets alpha, the cross-entropy 1 - alpha. {got}",
                  got=got)
    if _near(hard_ratio, 1 / (1 - alpha)) and _near(soft_ratio, 1.0):
        return tr("The cross-entropy is not multiplied by 1 - alpha. {got}", got=got)
    return tr("The soft and cross-entropy terms are weighted wrongly. {got}", got=got)


def _student_parts(student: nn.Module, teacher_logits: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                   temperature: float) -> Dict[str, List[torch.Tensor]]:
    """The student's gradient of each candidate soft term and of the cross-entropy, against constant targets."""
    twin = copy_module(student)
    student_logits = twin(x)
    parts = {name: gradients_of(variant(student_logits, teacher_logits, temperature), twin)
             for name, (variant, _) in SOFT_VARIANTS.items()}
    parts["hard"] = gradients_of(F.cross_entropy(student_logits, y), twin)
    return parts


def _distillation_gradient(student: nn.Module, teacher_logits: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                           temperature: float, alpha: float) -> List[torch.Tensor]:
    twin = copy_module(student)
    student_logits = twin(x)
    loss = alpha * soft_loss(student_logits, teacher_logits, temperature) + \
        (1 - alpha) * F.cross_entropy(student_logits, y)
    return gradients_of(loss, twin)


class _Reference:
    """Everything a right step does, computed with plain torch on copies, before the learner's step runs."""

    def __init__(self, student: nn.Module, teacher: nn.Module, x: torch.Tensor, y: torch.Tensor,
                 temperature: float, alpha: float) -> None:
        self.x, self.y, self.temperature, self.alpha = x, y, temperature, alpha
        self.student_at_start, self.teacher_at_start = copy_module(student), copy_module(teacher)
        twin_teacher = copy_module(teacher)
        teacher_logits = twin_teacher(x)                           # train mode: batch statistics, buffers updated
        self.buffers = {n: b.detach().clone() for n, b in twin_teacher.named_buffers()}
        self.teacher = gradients_of(F.cross_entropy(teacher_logits, y), twin_teacher)
        soft = soft_loss(copy_module(student)(x), teacher_logits, temperature)   # NOT detached: reaches the teacher
        self.teacher_soft = gradients_of(soft, twin_teacher)
        eval_teacher = copy_module(teacher).eval()
        self.teacher_eval = gradients_of(F.cross_entropy(eval_teacher(x), y), eval_teacher)
        self.targets = teacher_logits.detach()
        self.parts = _student_parts(student, self.targets, x, y, temperature)
        self.student = [alpha * s + (1 - alpha) * h for s, h in zip(self.parts["right"], self.parts["hard"])]

    def student_gradient(self, teacher: nn.Module, at: List[torch.Tensor], train: bool) -> List[torch.Tensor]:
        """The student's gradient (at the step's starting weights) against a teacher holding the weights ``at``."""
        twin = copy_module(teacher, at).train(train)
        with torch.no_grad():
            targets = twin(self.x)
        return _distillation_gradient(self.student_at_start, targets, self.x, self.y, self.temperature, self.alpha)

    def wrong_targets(self, teacher: nn.Module, moved: List[torch.Tensor]) -> List[Tuple[List[torch.Tensor], str]]:
        """The student's gradient against the usual wrong targets, and what to say about each.

        ``teacher`` is the teacher after the learner's step (its BatchNorm buffers as the step left them), ``moved``
        the weights its optimizer's step produced.
        """
        start = list(self.teacher_at_start.parameters())
        eval_mode = tr("The student learned from the teacher's eval-mode logits. In this step the teacher runs "
                       "once, in train mode, and learns from that forward pass; the student learns from the same "
                       "logits.")
        after = tr("The student learned from teacher logits computed after opt_teacher.step(): a second teacher "
                   "forward, through the teacher its step had already moved. Use the logits of the teacher's one "
                   "forward pass, taken at the weights the step started from (.detach() them for the student's "
                   "loss), whatever the order of the two steps.")
        return [(self.student_gradient(teacher, moved, True), after),
                (self.student_gradient(self.teacher_at_start, start, False), eval_mode),
                (self.student_gradient(teacher, moved, False),
                 tr("{eval_mode} (And they were taken after opt_teacher.step().)", eval_mode=eval_mode))]


def _empty(grads: List[Optional[torch.Tensor]]) -> bool:
    return all(g is None or not bool(g.abs().sum()) for g in grads)


def _with_carry_over(problem: str, carry_over: bool) -> str:
    """``problem``, followed by the carry-over hint when earlier steps were right."""
    return problem + space() + translated(CARRY_OVER) if carry_over else problem


def _teacher_problem(recorded: List[Optional[torch.Tensor]], reference: _Reference,
                     previous: Optional[List[Optional[torch.Tensor]]], alpha: float, carry_over: bool) -> str:
    """What is wrong with the gradient opt_teacher was stepped with (``carry_over``: earlier steps were right)."""
    if _empty(recorded):
        return tr("opt_teacher was stepped with no gradient at all: zero its gradients before the teacher's "
                  "backward, and step after it.")
    if previous is not None and same_gradients(recorded, added(reference.teacher, previous)):
        return tr("The teacher's gradient still contained the previous step's: gradients pile up in .grad. Call "
                  "opt_teacher.zero_grad() before the teacher's backward.")
    fit = _fit(recorded, reference.teacher_soft, reference.teacher)
    if fit is not None and not _near(fit[0], 0.0):
        soft, own = fit
        if _near(soft, alpha):
            return tr("The teacher was stepped with {own} x the gradient of its cross-entropy + {soft} x the soft "
                      "term's gradient (alpha x, the whole student loss's share): the student's loss reached the "
                      "teacher through teacher_logits, which went into it without .detach(). That silently trains "
                      "the teacher towards the student. In the student's loss the teacher's logits are a target: use "
                      "teacher_logits.detach() there.", own=f"{own:.3g}", soft=f"{soft:.3g}")
        return tr("The teacher was stepped with {own} x the gradient of its cross-entropy + {soft} x the soft term's "
                  "gradient: the student's loss reached the teacher through teacher_logits, which went into it "
                  "without .detach(). That silently trains the teacher towards the student. In the student's loss "
                  "the teacher's logits are a target: use teacher_logits.detach() there.", own=f"{own:.3g}",
                  soft=f"{soft:.3g}")
    if same_gradients(recorded, reference.teacher_eval):
        return tr("The teacher's gradient is that of its cross-entropy in eval mode: its forward ran in eval mode "
                  "(BatchNorm's running statistics instead of the batch's). Unlike the worked fix, this teacher "
                  "learns: it runs in train mode.")
    if fit is not None and _near(fit[0], 0.0) and not _near(fit[1], 0.0):
        return tr("The teacher was stepped with {own} x the gradient of its cross-entropy. Its loss is "
                  "F.cross_entropy(teacher_logits, y), unweighted: alpha and T belong to the student's loss.",
                  own=f"{fit[1]:.3g}")
    return _with_carry_over(tr("The teacher's gradient differs from the gradient of F.cross_entropy(teacher_logits, "
                               "y) at the weights the step started from (relative error {error}).",
                               error=f"{relative_error(recorded, reference.teacher):.1%}"), carry_over)


def _student_problem(recorded: List[Optional[torch.Tensor]], reference: _Reference,
                     wrong_targets: List[Tuple[List[torch.Tensor], str]],
                     previous: Optional[List[Optional[torch.Tensor]]], temperature: float, alpha: float,
                     carry_over: bool) -> str:
    """What is wrong with the gradient opt_student was stepped with (``carry_over``: earlier steps were right)."""
    if _empty(recorded):
        return tr("opt_student was stepped with no gradient at all: zero its gradients before the student's "
                  "backward, and step after it.")
    if previous is not None and same_gradients(recorded, added(reference.student, previous)):
        return tr("The student's gradient still contained the previous step's: gradients pile up in .grad. Call "
                  "opt_student.zero_grad() before the student's backward.")
    for gradient, message in wrong_targets:
        if same_gradients(recorded, gradient):
            return message
    for name, (_, message) in SOFT_VARIANTS.items():
        fit = _fit(recorded, reference.parts[name], reference.parts["hard"])
        if fit is None:
            continue
        coefficients = _coefficient_problem(*fit, temperature, alpha)
        if name == "right":
            if coefficients is None:
                break
            return coefficients
        if coefficients is None or _near(fit[0], 0.0) or _near(fit[1], 0.0):
            return coefficients or translated(message)
        return tr("{problem} Also: {coefficients}", problem=translated(message), coefficients=coefficients)
    return _with_carry_over(tr("The student's gradient differs from the gradient of alpha * T^2 * KL(softmax(teacher "
                               "/ T) || softmax(student / T)) + (1 - alpha) * CE(student, y) by {error} of its size, "
                               "and is not a mix of its two terms. Build both losses from this call's forward passes.",
                               error=f"{relative_error(recorded, reference.student):.3g}"), carry_over)


def _buffer_problem(teacher: nn.Module, before: Dict[str, torch.Tensor], reference: _Reference) -> Optional[str]:
    """The teacher's BatchNorm buffers against one train-mode forward on x; None if they match."""
    now = {n: b.detach() for n, b in teacher.named_buffers()}
    if all(torch.equal(now[n].cpu(), reference.buffers[n].cpu()) if n.endswith("num_batches_tracked")
           else close(now[n], reference.buffers[n]) for n in now):
        return None
    counts = [int(now[n]) - int(before[n]) for n in now if n.endswith("num_batches_tracked")]
    forwards = counts[0] if counts else None
    if forwards == 0:
        return tr("The teacher's BatchNorm statistics did not change: no forward pass ran in train mode. This "
                  "teacher learns: one forward pass, in train mode, gives the logits for both losses.")
    if forwards is not None and forwards > 1:
        return tr("The teacher ran {count} forward passes in train mode: its BatchNorm running statistics were "
                  "updated {count} times. Run each model forward once per step and use those logits for both "
                  "losses (detached in the student's).", count=forwards)
    return tr("The teacher's BatchNorm running statistics differ from those after one train-mode forward pass on x: "
              "did its forward pass see another input?")


def _teacher_flag_problem(before: step_watch.Snapshot, teacher: nn.Module) -> Optional[str]:
    """The teacher's flags switched off, said for this case: unlike the worked fix's, this teacher learns."""
    was, now = before.modules["teacher"], step_watch.module_state(teacher)
    if was.modes[""] and now.modes[""] is False:
        return tr("Your step left the teacher in eval mode. Unlike the worked fix, this teacher learns: it runs in "
                  "train mode (BatchNorm with the batch's statistics), and stays there. Don't call teacher.eval().")
    if any(flag and now.requires_grad.get(name) is False for name, flag in was.requires_grad.items()):
        return tr("Your step switched off the teacher's requires_grad. Unlike the worked fix, this teacher learns: "
                  "it needs its gradient. Cut only the path from the student's loss: teacher_logits.detach() there.")
    return None


def _on(step: int, problem: str) -> str:
    """``problem`` as a sentence about step ``step``."""
    return tr("On step {step}: {problem}", step=step, problem=problem)


_ERROR_EXPLANATIONS = {  # what each error means in this exercise
    "backward-twice": marked(
        "The student's loss led back into the teacher's graph, which the teacher's backward had already freed: "
        "the teacher's logits are a target for the student. Use teacher_logits.detach() in the student's loss."
    ),
    "inplace-version": marked(
        "opt_teacher.step() changed the teacher's weights in place while the student's loss still led back through "
        "the teacher's graph (that graph saved some of the teacher's weights themselves, not copies, and "
        "retain_graph=True only keeps those references). Use teacher_logits.detach() in the student's loss."
    ),
    "does not require grad": marked(
        "A loss had no graph to run backward through. This teacher learns: its forward pass must be recorded (no "
        "torch.no_grad(), no requires_grad_(False) on it); detach its logits only where the student's loss uses them."
    ),
}


def _check_run(step_function: StepFunction, run: int, temperature: float, alpha: float, teacher_kind: str,
               student_kind: str, earlier_right: List[bool], keep: List[Any]) -> Optional[str]:
    """Run the learner's step STEPS times on fresh models; the diagnosis, or None if every step was right."""
    teacher, student = make_teacher(seed=7), make_student(seed=8 + run)     # the teacher as loaded: train mode
    models = {"teacher": teacher, "student": student}
    makes = {"teacher": step_watch.kind(teacher_kind), "student": step_watch.kind(student_kind)}
    optimizers = {f"opt_{part}": makes[part](model.parameters()) for part, model in models.items()}
    records = {part: step_watch.watch(optimizers[f"opt_{part}"], f"opt_{part}") for part in models}
    twins = {part: TwinOptimizer(makes[part], model.parameters()) for part, model in models.items()}
    keep += [models, optimizers, twins]                   # alive until the check ends: no id() is ever reused
    previous: Dict[str, Optional[List[Optional[torch.Tensor]]]] = {"teacher": None, "student": None}
    for step in range(1, STEPS + 1):
        x, y = make_batch(seed=100 * run + 10 * step, batch=CHECK_BATCH)
        keep += [x, y]
        reference = _Reference(student, teacher, x, y, temperature, alpha)
        buffers = {n: b.detach().clone() for n, b in teacher.named_buffers()}
        before = step_watch.snapshot({"x": x, "y": y}, models, optimizers)
        start = {part: weights(model.parameters()) for part, model in models.items()}
        counts = {part: len(record.calls) for part, record in records.items()}
        run_step(step_function, step, student, teacher, optimizers["opt_student"], optimizers["opt_teacher"], x, y,
                 temperature, alpha, explanations=_ERROR_EXPLANATIONS)
        problem = _teacher_flag_problem(before, teacher)
        change = step_watch.changed(before, {"x": x, "y": y}, models, optimizers)
        if problem is None and change is not None:
            problem = tr("Your step {change}.", change=change)
        if problem is not None:
            return _on(step, problem)
        new = {part: step_watch.calls_in(record, counts[part]) for part, record in records.items()}
        for part, model in models.items():
            name = f"opt_{part}"
            if not new[part]:
                return tr("On step {step}: {optimizer} was never stepped: each optimizer steps exactly once per call "
                          "(and only the optimizers you are given).", step=step, optimizer=name)
            if len(new[part]) != 1:
                return tr("On step {step}: {optimizer} was stepped {count} times: each optimizer steps exactly once "
                          "per call (and only the optimizers you are given).", step=step, optimizer=name,
                          count=len(new[part]))
            where = twins[part].replay(list(model.parameters()), start[part], new[part])
            if where is not None:
                return tr("On step {step}: {model}'s weights changed other than through {optimizer}.step() ({where}). "
                          "Change weights only through the optimizers you are given.", step=step,
                          model=translated(THE_MODEL[part]), optimizer=name, where=translated(WHERE_MOVED[where]))
        recorded = {part: new[part][0].grads for part in new}
        if not same_gradients(recorded["teacher"], reference.teacher):
            return _on(step, _teacher_problem(recorded["teacher"], reference, previous["teacher"], alpha,
                                              carry_over=any(earlier_right)))
        if not same_gradients(recorded["student"], reference.student):
            wrong_targets = reference.wrong_targets(teacher, new["teacher"][0].after)
            return _on(step, _student_problem(recorded["student"], reference, wrong_targets, previous["student"],
                                              temperature, alpha, carry_over=any(earlier_right)))
        problem = _buffer_problem(teacher, buffers, reference)
        if problem is not None:
            return _on(step, problem)
        earlier_right.append(True)
        previous = recorded
    return None


def check_online_distill_step(step_function: StepFunction) -> CheckResult:
    """Run the learner's step for several runs of consecutive steps; compare both optimizers' gradients."""
    earlier_right: List[bool] = []
    keep: List[Any] = []
    for run, (temperature, alpha, teacher_kind, student_kind) in enumerate(RUNS):
        diagnosis = _check_run(step_function, run, temperature, alpha, teacher_kind, student_kind, earlier_right,
                               keep)
        if diagnosis is not None:
            return failed(EXERCISE_ID, tr("With T = {temperature}, alpha = {alpha}, opt_teacher {teacher_optimizer} "
                                          "and opt_student {student_optimizer}: {diagnosis}",
                                          temperature=f"{temperature:g}", alpha=f"{alpha:g}",
                                          teacher_optimizer=translated(step_watch.available(teacher_kind)),
                                          student_optimizer=translated(step_watch.available(student_kind)),
                                          diagnosis=diagnosis))
    return passed(EXERCISE_ID, tr("{runs} runs of {steps} consecutive steps, each with fresh models, its own T, alpha "
                                  "and optimizer kinds: each model ran forward once per step (the teacher in train "
                                  "mode), the teacher was stepped once with exactly the gradient of its "
                                  "cross-entropy, and the student once with exactly the gradient of the distillation "
                                  "loss against that forward pass's teacher logits, held constant, both at the "
                                  "weights the step started from.", runs=len(RUNS), steps=STEPS))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="online_distill_step",
    checker=check_online_distill_step,
    hints=HINTS,
    contract=CONTRACT,
)

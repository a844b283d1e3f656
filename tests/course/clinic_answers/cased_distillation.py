"""Notebook 06, case 4 (distillation): alternative correct answers and plausible wrong ones for ``distill_step``."""
import warnings

import torch
import torch.nn.functional as F


def _soft(student_logits, teacher_logits, temperature):
    return temperature * temperature * F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                                                F.softmax(teacher_logits / temperature, dim=1),
                                                reduction="batchmean")


def _step(optimizer, loss):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


# Alternative correct answers
def step_detach_and_log_target(student, teacher, optimizer, x, y, temperature, alpha):
    """Teacher forward recorded but its logits detached; kl_div with log-probabilities on both sides."""
    teacher.eval()
    teacher_logits = teacher(x).detach()
    student_logits = student(x)
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                    F.log_softmax(teacher_logits / temperature, dim=1), reduction="batchmean", log_target=True)
    _step(optimizer, alpha * temperature ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def step_frozen_teacher_autograd_grad(student, teacher, optimizer, x, y, temperature, alpha):
    """requires_grad_(False) instead of no_grad; the KL written out by hand; gradients via autograd.grad."""
    teacher.eval().requires_grad_(False)
    student_logits = student(x)
    teacher_probs = F.softmax(teacher(x) / temperature, dim=1)
    student_log_probs = F.log_softmax(student_logits / temperature, dim=1)
    kl = (teacher_probs * (teacher_probs.log() - student_log_probs)).sum(dim=1).mean()
    loss = alpha * temperature ** 2 * kl + (1 - alpha) * F.cross_entropy(student_logits, y)
    params = list(student.parameters())
    for param, grad in zip(params, torch.autograd.grad(loss, params)):
        param.grad = grad
    optimizer.step()


def step_backward_restricted_to_student(student, teacher, optimizer, x, y, temperature, alpha):
    """The teacher's forward recorded (eval mode), but backward(inputs=...) never goes into the teacher."""
    teacher.eval()
    student_logits, teacher_logits = student(x), teacher(x)
    loss = alpha * _soft(student_logits, teacher_logits, temperature) + (1 - alpha) * F.cross_entropy(student_logits, y)
    optimizer.zero_grad()
    loss.backward(inputs=list(student.parameters()))
    optimizer.step()


# Wrong answers
def step_teacher_recorded(student, teacher, optimizer, x, y, temperature, alpha):
    """The usual step: teacher in eval mode, but its forward recorded, so backward reaches it."""
    teacher.eval()
    teacher_logits, student_logits = teacher(x), student(x)
    _step(optimizer, alpha * _soft(student_logits, teacher_logits, temperature)
          + (1 - alpha) * F.cross_entropy(student_logits, y))


def step_retain_graph_teacher_recorded(student, teacher, optimizer, x, y, temperature, alpha):
    """The error-1 habit: soft and hard terms backward separately, the first with retain_graph=True."""
    teacher.eval()
    teacher_logits, student_logits = teacher(x), student(x)
    optimizer.zero_grad()
    (alpha * _soft(student_logits, teacher_logits, temperature)).backward(retain_graph=True)
    ((1 - alpha) * F.cross_entropy(student_logits, y)).backward()
    optimizer.step()


def step_teacher_in_train_mode(student, teacher, optimizer, x, y, temperature, alpha):
    """no_grad, but the teacher left in train mode (as loaded): BatchNorm uses batch statistics and updates."""
    with torch.no_grad():
        teacher_logits = teacher(x)
    student_logits = student(x)
    _step(optimizer, alpha * _soft(student_logits, teacher_logits, temperature)
          + (1 - alpha) * F.cross_entropy(student_logits, y))


def step_teacher_trained_too(student, teacher, optimizer, x, y, temperature, alpha):
    """The teacher also fine-tuned on the labels in the same step."""
    teacher.eval()
    teacher_opt = torch.optim.SGD(teacher.parameters(), lr=0.01)
    teacher_logits, student_logits = teacher(x), student(x)
    teacher_opt.zero_grad()
    F.cross_entropy(teacher_logits, y).backward()
    teacher_opt.step()
    _step(optimizer, alpha * _soft(student_logits, teacher_logits.detach(), temperature)
          + (1 - alpha) * F.cross_entropy(student_logits, y))


def _frozen_logits(teacher, x):
    teacher.eval()
    with torch.no_grad():
        return teacher(x)


def step_without_t_squared(student, teacher, optimizer, x, y, temperature, alpha):
    teacher_logits, student_logits = _frozen_logits(teacher, x), student(x)
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                    F.softmax(teacher_logits / temperature, dim=1), reduction="batchmean")
    _step(optimizer, alpha * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def step_kl_swapped(student, teacher, optimizer, x, y, temperature, alpha):
    """softmax on the student, log_softmax on the teacher: KL(student || teacher)."""
    teacher_logits, student_logits = _frozen_logits(teacher, x), student(x)
    soft = F.kl_div(F.log_softmax(teacher_logits / temperature, dim=1),
                    F.softmax(student_logits / temperature, dim=1), reduction="batchmean")
    _step(optimizer, alpha * temperature ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def step_reduction_mean(student, teacher, optimizer, x, y, temperature, alpha):
    teacher_logits, student_logits = _frozen_logits(teacher, x), student(x)
    with warnings.catch_warnings():   # torch warns that "mean" is not the KL's mean; the checker must say so too
        warnings.simplefilter("ignore", UserWarning)
        soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                        F.softmax(teacher_logits / temperature, dim=1), reduction="mean")
    _step(optimizer, alpha * temperature ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def step_forgets_zero_grad(student, teacher, optimizer, x, y, temperature, alpha):
    teacher_logits, student_logits = _frozen_logits(teacher, x), student(x)
    loss = alpha * _soft(student_logits, teacher_logits, temperature) + (1 - alpha) * F.cross_entropy(student_logits, y)
    loss.backward()
    optimizer.step()


def step_detaches_the_student(student, teacher, optimizer, x, y, temperature, alpha):
    """.detach() sprinkled on the wrong logits: the soft term no longer reaches the student."""
    teacher.eval()
    teacher_logits, student_logits = teacher(x), student(x)
    _step(optimizer, alpha * _soft(student_logits.detach(), teacher_logits, temperature)
          + (1 - alpha) * F.cross_entropy(student_logits, y))


def step_alpha_swapped(student, teacher, optimizer, x, y, temperature, alpha):
    teacher_logits, student_logits = _frozen_logits(teacher, x), student(x)
    _step(optimizer, (1 - alpha) * _soft(student_logits, teacher_logits, temperature)
          + alpha * F.cross_entropy(student_logits, y))


def step_log_target_forgotten(student, teacher, optimizer, x, y, temperature, alpha):
    teacher_logits, student_logits = _frozen_logits(teacher, x), student(x)
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                    F.log_softmax(teacher_logits / temperature, dim=1), reduction="batchmean")
    _step(optimizer, alpha * temperature ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def step_swapped_without_t_squared(student, teacher, optimizer, x, y, temperature, alpha):
    teacher_logits, student_logits = _frozen_logits(teacher, x), student(x)
    soft = F.kl_div(F.log_softmax(teacher_logits / temperature, dim=1),
                    F.softmax(student_logits / temperature, dim=1), reduction="batchmean")
    _step(optimizer, alpha * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def step_backward_twice(student, teacher, optimizer, x, y, temperature, alpha):
    """Two backward passes through the student's graph, the first without retain_graph."""
    teacher_logits, student_logits = _frozen_logits(teacher, x), student(x)
    optimizer.zero_grad()
    (alpha * _soft(student_logits, teacher_logits, temperature)).backward()
    ((1 - alpha) * F.cross_entropy(student_logits, y)).backward()
    optimizer.step()


OTHER_CORRECT = {
    "distill_step": [step_detach_and_log_target, step_frozen_teacher_autograd_grad,
                     step_backward_restricted_to_student],
}

WRONG_ANSWERS = {
    "distill_step": [
        (step_teacher_recorded, "backward() went through the teacher"),
        (step_teacher_recorded, "The student's gradient itself is right"),
        (step_retain_graph_teacher_recorded, "backward() went through the teacher"),
        (step_teacher_in_train_mode, "ran in train mode"),
        (step_teacher_trained_too, "the teacher's weights changed"),
        (step_without_t_squared, "= 1/T^2 (T = 3): the T^2 factor is missing"),
        (step_kl_swapped, "KL the wrong way round"),
        (step_reduction_mean, "reduction=\"mean\" averages over classes"),
        (step_forgets_zero_grad, "still contained the previous step's"),
        (step_detaches_the_student, "The soft (KL) term gave the student no gradient"),
        (step_alpha_swapped, "alpha and 1 - alpha are swapped"),
        (step_log_target_forgotten, "without log_target=True"),
        (step_swapped_without_t_squared, "KL the wrong way round. F.kl_div(input, target)"),
        (step_backward_twice, "add the soft and the hard term into one loss"),
    ],
}

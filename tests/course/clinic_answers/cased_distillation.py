"""Notebook 07, case 1 (online distillation): other correct answers and plausible wrong ones for
``online_distill_step``, each wrong one with the diagnosis it must get."""
import warnings

import torch
import torch.nn.functional as F


def _soft(student_logits, teacher_logits, temperature):
    return temperature * temperature * F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                                                F.softmax(teacher_logits / temperature, dim=1),
                                                reduction="batchmean")


def _student_loss(student_logits, teacher_logits, y, temperature, alpha):
    return alpha * _soft(student_logits, teacher_logits, temperature) + \
        (1 - alpha) * F.cross_entropy(student_logits, y)


def _step(optimizer, loss, **kwargs):
    optimizer.zero_grad()
    loss.backward(**kwargs)
    optimizer.step()


# Other correct answers
def student_first(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """The student steps first: with detached targets, the order does not matter."""
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_student, _student_loss(student_logits, teacher_logits.detach(), y, temperature, alpha))
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))


def one_backward_of_the_sum(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """Both losses summed into one backward: right, because the student's loss cannot reach the teacher."""
    teacher_logits, student_logits = teacher(x), student(x)
    targets = teacher_logits.detach()
    opt_student.zero_grad()
    opt_teacher.zero_grad()
    (F.cross_entropy(teacher_logits, y) + _student_loss(student_logits, targets, y, temperature, alpha)).backward()
    opt_teacher.step()
    opt_student.step()


def with_autograd_grad_and_log_target(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """autograd.grad for both, kl_div with log-probabilities on both sides."""
    teacher_logits, student_logits = teacher(x), student(x)
    teacher_params = [p for p in teacher.parameters() if p.requires_grad]   # a frozen layer has no gradient
    student_params = [p for p in student.parameters() if p.requires_grad]
    for param, grad in zip(teacher_params, torch.autograd.grad(F.cross_entropy(teacher_logits, y), teacher_params)):
        param.grad = grad
    targets = F.log_softmax(teacher_logits.detach() / temperature, dim=1)
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1), targets, reduction="batchmean",
                    log_target=True)
    loss = alpha * temperature ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, y)
    for param, grad in zip(student_params, torch.autograd.grad(loss, student_params)):
        param.grad = grad
    opt_teacher.step()
    opt_student.step()


def restricted_backward_without_detach(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """No detach: backward(inputs=student's parameters) never enters the teacher's graph, even after its step."""
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    _step(opt_student, _student_loss(student_logits, teacher_logits, y, temperature, alpha),
          inputs=[p for p in student.parameters() if p.requires_grad])


def targets_read_under_no_grad_of_the_same_forward(student, teacher, opt_student, opt_teacher, x, y, temperature,
                                                  alpha):
    """The KL written by hand, the targets copied out of the one forward pass with .clone() under no_grad."""
    teacher_logits = teacher(x)
    with torch.no_grad():
        probs = F.softmax(teacher_logits.clone() / temperature, dim=1)
    opt_teacher.zero_grad(set_to_none=False)
    F.cross_entropy(teacher_logits, y).backward()
    opt_teacher.step()
    student_logits = student(x)
    log_q = F.log_softmax(student_logits / temperature, dim=1)
    kl = (probs * (probs.log() - log_q)).sum(dim=1).mean()
    _step(opt_student, alpha * temperature * temperature * kl + (1 - alpha) * F.cross_entropy(student_logits, y))


# Wrong answers
def copies_the_worked_fix(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """The frozen-teacher fix copied over: eval mode, no_grad; the teacher never learns."""
    teacher.eval()
    with torch.no_grad():
        teacher_logits = teacher(x)
    _step(opt_student, _student_loss(student(x), teacher_logits, y, temperature, alpha))


def frozen_teacher_then_trained_in_eval_mode(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """eval() for the teacher, put back to train() at the end: its forward ran in eval mode."""
    teacher.eval()
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    _step(opt_student, _student_loss(student_logits, teacher_logits.detach(), y, temperature, alpha))
    teacher.train()


def requires_grad_switched_off(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    teacher.requires_grad_(False)
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_student, _student_loss(student_logits, teacher_logits, y, temperature, alpha))
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))


def requires_grad_off_for_targets_and_left_off(student, teacher, opt_student, opt_teacher, x, y, temperature,
                                               alpha):
    """Trains the teacher first, then freezes it "for the targets" and never switches it back on."""
    teacher_logits = teacher(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    teacher.requires_grad_(False)
    _step(opt_student, _student_loss(student(x), teacher_logits.detach(), y, temperature, alpha))


def teacher_steps_first_not_detached(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """The notebook's error 1: the student's loss leads back into the freed teacher graph."""
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    _step(opt_student, _student_loss(student_logits, teacher_logits, y, temperature, alpha))


def teacher_steps_first_retain_graph(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """The notebook's error 2: retain_graph=True, then the step changes weights the teacher's graph saved."""
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y), retain_graph=True)
    _step(opt_student, _student_loss(student_logits, teacher_logits, y, temperature, alpha))


def one_backward_not_detached(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """No error at all: one backward of the sum, the teacher's logits not detached."""
    teacher_logits, student_logits = teacher(x), student(x)
    opt_teacher.zero_grad()
    opt_student.zero_grad()
    (F.cross_entropy(teacher_logits, y) + _student_loss(student_logits, teacher_logits, y, temperature,
                                                          alpha)).backward()
    opt_teacher.step()
    opt_student.step()


def second_teacher_forward_after_its_step(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """Silences error 1 with a fresh teacher forward: the student learns from the moved teacher."""
    _step(opt_teacher, F.cross_entropy(teacher(x), y))
    with torch.no_grad():
        teacher_logits = teacher(x)
    _step(opt_student, _student_loss(student(x), teacher_logits, y, temperature, alpha))


def targets_from_a_second_forward_before_the_step(student, teacher, opt_student, opt_teacher, x, y, temperature,
                                                  alpha):
    """Right gradients, but two train-mode teacher forwards: BatchNorm's running statistics move twice."""
    with torch.no_grad():
        targets = teacher(x)
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    _step(opt_student, _student_loss(student_logits, targets, y, temperature, alpha))


def targets_in_eval_mode(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """The teacher learns in train mode, but the student's targets come from an eval-mode pass."""
    teacher_logits = teacher(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y), retain_graph=False)
    teacher.eval()
    with torch.no_grad():
        targets = teacher(x)
    teacher.train()
    _step(opt_student, _student_loss(student(x), targets, y, temperature, alpha))


def kl_swapped(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    targets = teacher_logits.detach()
    soft = F.kl_div(F.log_softmax(targets / temperature, dim=1), F.softmax(student_logits / temperature, dim=1),
                    reduction="batchmean")
    _step(opt_student, alpha * temperature ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def without_t_squared(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                    F.softmax(teacher_logits.detach() / temperature, dim=1), reduction="batchmean")
    _step(opt_student, alpha * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def alpha_swapped(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    _step(opt_student, _student_loss(student_logits, teacher_logits.detach(), y, temperature, 1 - alpha))


def reduction_mean(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                        F.softmax(teacher_logits.detach() / temperature, dim=1), reduction="mean")
    _step(opt_student, alpha * temperature ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def forgets_the_teachers_zero_grad(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    teacher_logits, student_logits = teacher(x), student(x)
    F.cross_entropy(teacher_logits, y).backward()
    opt_teacher.step()
    _step(opt_student, _student_loss(student_logits, teacher_logits.detach(), y, temperature, alpha))


def forgets_the_students_zero_grad(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    _student_loss(student_logits, teacher_logits.detach(), y, temperature, alpha).backward()
    opt_student.step()


def teacher_loss_weighted_too(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """(1 - alpha) on the teacher's cross-entropy as well."""
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, (1 - alpha) * F.cross_entropy(teacher_logits, y))
    _step(opt_student, _student_loss(student_logits, teacher_logits.detach(), y, temperature, alpha))


def never_steps_the_teacher(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_student, _student_loss(student_logits, teacher_logits.detach(), y, temperature, alpha))


def its_own_student_optimizer(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """An SGD made inside the step instead of the opt_student handed over."""
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    mine = torch.optim.SGD(student.parameters(), lr=0.1)
    _step(mine, _student_loss(student_logits, teacher_logits.detach(), y, temperature, alpha))
    opt_student.step()   # "to be safe": with zero grads... but SGD steps nothing new, Adam's state differs


_memory = {}


def caches_the_first_targets(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """State carried from call to call: the teacher's targets computed once per teacher and reused."""
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    targets = _memory.setdefault(id(teacher), teacher_logits.detach())
    _step(opt_student, _student_loss(student_logits, targets, y, temperature, alpha))


def previous_teacher_as_target(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """State carried in a function attribute: last call's teacher logits "smooth" this call's targets."""
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    targets = teacher_logits.detach()
    last = getattr(previous_teacher_as_target, "last", None)
    previous_teacher_as_target.last = targets
    if last is not None and last.shape == targets.shape:
        targets = 0.5 * (targets + last)
    _step(opt_student, _student_loss(student_logits, targets, y, temperature, alpha))


def halves_the_learning_rate(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """Changes state the contract does not mention: the teacher's optimizer's learning rate."""
    for group in opt_teacher.param_groups:
        group["lr"] = group["lr"] * 0.5
    student_first(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha)


def puts_the_student_in_eval_mode(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    student_first(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha)
    student.eval()


def unfreezes_the_teacher_afterwards(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """Frozen "for the targets", then requires_grad_(True) to undo it: a layer handed over frozen comes back
    trainable."""
    teacher_logits = teacher(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    teacher.requires_grad_(False)
    _step(opt_student, _student_loss(student(x), teacher_logits.detach(), y, temperature, alpha))
    teacher.requires_grad_(True)


def puts_both_models_in_training_mode(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """"A training step trains": .train() on both models, whatever mode the student came in."""
    student.train()
    teacher.train()
    student_first(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha)


def divides_by_the_notebook_batch(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    """The KL summed, then divided by the notebook's batch of 32: right only for batches of 32 rows."""
    teacher_logits, student_logits = teacher(x), student(x)
    _step(opt_teacher, F.cross_entropy(teacher_logits, y))
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),
                    F.softmax(teacher_logits.detach() / temperature, dim=1), reduction="sum") / 32
    _step(opt_student, alpha * temperature ** 2 * soft + (1 - alpha) * F.cross_entropy(student_logits, y))


def raises(student, teacher, opt_student, opt_teacher, x, y, temperature, alpha):
    raise ValueError("oops")


OTHER_CORRECT = {
    "online_distill_step": [student_first, one_backward_of_the_sum, with_autograd_grad_and_log_target,
                            restricted_backward_without_detach, targets_read_under_no_grad_of_the_same_forward],
}

WRONG_ANSWERS = {
    "online_distill_step": [
        (copies_the_worked_fix, "left the teacher in eval mode. Unlike the worked fix, this teacher learns"),
        (frozen_teacher_then_trained_in_eval_mode, "its cross-entropy in eval mode"),
        (requires_grad_switched_off, "A loss had no graph to run backward through"),
        (requires_grad_off_for_targets_and_left_off, "switched off the teacher's requires_grad"),
        (teacher_steps_first_not_detached, "which the teacher's backward had already freed"),
        (teacher_steps_first_retain_graph, "retain_graph=True only keeps those references"),
        (one_backward_not_detached, "went into it without .detach()"),
        (second_teacher_forward_after_its_step, "computed after opt_teacher.step()"),
        (targets_from_a_second_forward_before_the_step, "The teacher ran 2 forward passes"),
        (targets_in_eval_mode, "The student learned from the teacher's eval-mode logits"),
        (kl_swapped, "KL the wrong way round"),
        (without_t_squared, "the T^2 factor is missing"),
        (alpha_swapped, "Alpha and 1 - alpha are swapped"),
        (reduction_mean, "reduction=\"mean\" averages over classes"),
        (forgets_the_teachers_zero_grad, "opt_teacher.zero_grad()"),
        (forgets_the_students_zero_grad, "opt_student.zero_grad()"),
        (teacher_loss_weighted_too, "Its loss is F.cross_entropy(teacher_logits, y), unweighted"),
        (never_steps_the_teacher, "opt_teacher was never stepped"),
        (its_own_student_optimizer, "changed other than through opt_student.step()"),
        (caches_the_first_targets, "look for something kept from one call to the next"),
        (previous_teacher_as_target, "look for something kept from one call to the next"),
        (halves_the_learning_rate, "changed opt_teacher's settings"),
        (puts_the_student_in_eval_mode, "student is now in eval mode"),
        (raises, "raised ValueError: oops"),
        (unfreezes_the_teacher_afterwards, "`teacher.0.weight.requires_grad` came back True"),
        (puts_both_models_in_training_mode, "`student` came back in training mode; it was handed to you in eval mode"),
        (divides_by_the_notebook_batch, "With a batch of 2 rows (the notebook used 32): `student.0.weight.grad`"),
    ],
}

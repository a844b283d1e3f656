"""Notebook 07, case 1 (distillation): the models, the reference step, and the failures the notebook shows."""
import pytest
import torch
import torch.nn.functional as F

from helpers.course.lesson07_bug_clinic_continued.distillation import (
    ALPHA,
    TEMPERATURE,
    changed_entries,
    distillation_loss,
    frozen_copy,
    gradient_reaching_teacher,
    make_batch,
    make_student,
    make_teacher,
    parameter_names,
    reached_parameters,
    reference_gradients,
    relative_error,
    snapshot,
    soft_loss,
)
from helpers.course.lesson07_bug_clinic_continued.distillation_exercise import _coefficient_problem, _fit
from helpers.tools.errors import classify
from helpers.tools.graph import named_parameters


def _same(first, second):
    return all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(first, second))


def test_the_teacher_is_pretrained_and_handed_over_as_loaded():
    teacher = make_teacher()
    assert teacher.training and all(p.requires_grad and p.grad is None for p in teacher.parameters())
    x, y = make_batch(seed=1)
    with torch.no_grad():
        accuracy = (frozen_copy(teacher)(x).argmax(dim=1) == y).float().mean()
    assert accuracy > 0.8
    assert all(torch.equal(a, b) for a, b in zip(teacher.state_dict().values(), make_teacher().state_dict().values()))


def test_the_reference_changes_nothing_and_matches_a_hand_written_frozen_step():
    teacher, student = make_teacher(), make_student()
    x, y = make_batch()
    before = snapshot(teacher)
    reference = reference_gradients(student, teacher, x, y)
    assert changed_entries(teacher, before) == [] and teacher.training
    assert all(p.grad is None for p in (*teacher.parameters(), *student.parameters()))
    teacher.eval()
    with torch.no_grad():
        teacher_logits = teacher(x)
    distillation_loss(student(x), teacher_logits, y).backward()
    assert _same([p.grad for p in student.parameters()], reference)


def test_soft_loss_is_the_term_weighed_by_alpha():
    student_logits, teacher_logits = torch.randn(6, 5), torch.randn(6, 5)
    y = torch.randint(5, (6,))
    hard = F.cross_entropy(student_logits, y)
    expected = ALPHA * soft_loss(student_logits, teacher_logits, TEMPERATURE) + (1 - ALPHA) * hard
    assert torch.allclose(distillation_loss(student_logits, teacher_logits, y), expected)


def test_the_broken_step_is_right_once_then_learns_from_a_teacher_that_moved():
    teacher, student = make_teacher().eval(), make_student()
    original = frozen_copy(teacher)
    optimizer = torch.optim.SGD([*teacher.parameters(), *student.parameters()], lr=0.1)
    x, y = make_batch()
    errors = []
    for _ in range(2):
        reference = reference_gradients(student, original, x, y)
        loss = distillation_loss(student(x), teacher(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        errors.append(relative_error([p.grad for p in student.parameters()], reference))
    assert errors[0] < 1e-6 and errors[1] > 1e-2
    assert changed_entries(teacher, snapshot(original)) == parameter_names(teacher)


def test_gradient_reaching_teacher_is_what_a_recorded_backward_puts_in_its_grad():
    teacher, student = make_teacher().eval(), make_student()
    x, y = make_batch()
    expected = gradient_reaching_teacher(student, teacher, x, y)
    assert all(p.grad is None for p in teacher.parameters())
    distillation_loss(student(x), teacher(x), y).backward()
    assert _same([p.grad for p in teacher.parameters()], expected)
    assert any(float(g.abs().sum()) > 0 for g in expected)


def test_no_grad_in_train_mode_still_changes_the_batchnorm_buffers_only():
    teacher = make_teacher()
    before = snapshot(teacher)
    x, _ = make_batch()
    with torch.no_grad():
        teacher(x)
    changed = changed_entries(teacher, before)
    assert changed and not set(changed) & set(parameter_names(teacher))


def test_reached_parameters_sees_the_teacher_only_when_it_is_recorded():
    teacher, student = make_teacher().eval(), make_student()
    params = named_parameters(teacher=teacher, student=student)
    x, y = make_batch()
    assert set(reached_parameters(distillation_loss(student(x), teacher(x), y), params)) == set(params)
    with torch.no_grad():
        constant = teacher(x)
    reached = reached_parameters(distillation_loss(student(x), constant, y), params)
    assert reached == [name for name in params if name.startswith("student.")]


@pytest.mark.parametrize("retain_graph, kind", [(False, "backward-twice"), (True, "inplace-version")])
def test_online_teacher_step_then_student_backward_raises_error_1_or_2(retain_graph, kind):
    teacher, student = make_teacher(), make_student()
    teacher_opt = torch.optim.SGD(teacher.parameters(), lr=0.1)
    x, y = make_batch()
    teacher_logits, student_logits = teacher(x), student(x)
    F.cross_entropy(teacher_logits, y).backward(retain_graph=retain_graph)
    teacher_opt.step()
    with pytest.raises(RuntimeError) as caught:
        distillation_loss(student_logits, teacher_logits, y).backward()
    assert classify(caught.value).name == kind
    distillation_loss(student(x), teacher_logits.detach(), y).backward()   # the fix runs (a fresh student pass)


def test_the_checker_takes_a_gradient_apart_into_its_two_terms():
    soft, hard = [torch.randn(3, 4), torch.randn(4)], [torch.randn(3, 4), torch.randn(4)]
    mixed = [0.7 / 9 * s + 0.3 * h for s, h in zip(soft, hard)]
    a, b = _fit(mixed, soft, hard)
    assert abs(a - 0.7 / 9) < 1e-5 and abs(b - 0.3) < 1e-5
    assert "the T^2 factor is missing" in _coefficient_problem(a, b, 3.0, 0.7)
    assert _coefficient_problem(0.7, 0.3, 3.0, 0.7) is None
    assert _fit([torch.randn(3, 4), torch.randn(4)], soft, hard) is None

"""Notebook 06, case 6: the in-place ReLU really breaks backward, and the reference really is the right fix."""
import pytest
import torch

from helpers.course.exercises.compare import same_gradients
from helpers.course.lesson06_bug_clinic.inplace_activation import (
    BATCH,
    WIDTH,
    make_batch,
    make_multitask,
    multitask_parameters,
    reference_forward,
    reference_gradients,
    task_losses,
)
from helpers.tools.errors import KINDS, parse_version_error


def as_written(encoder, cls_head, reg_head, x):
    h = encoder(x)
    return cls_head(h), reg_head(h)


def test_the_models_are_seeded_and_leave_the_global_random_state_alone():
    state = torch.random.get_rng_state()
    first, second = make_multitask(seed=3), make_multitask(seed=3)
    assert torch.equal(state, torch.random.get_rng_state())
    for a, b in zip(multitask_parameters(*first).values(), multitask_parameters(*second).values()):
        assert torch.equal(a, b)
    assert not torch.equal(make_multitask(seed=4)[0][0].weight, first[0][0].weight)
    assert first[2][0].inplace, "the case is about the regression head's ReLU(inplace=True)"


def test_the_broken_forward_raises_error_2_on_h_without_any_optimizer_step():
    models = make_multitask()
    x, labels, targets = make_batch()
    l_cls, l_reg = task_losses(*as_written(*models, x), labels, targets)
    with pytest.raises(RuntimeError) as caught:
        (l_cls + l_reg).backward()
    assert KINDS["inplace-version"].matches(caught.value)
    details = parse_version_error(str(caught.value))
    assert details.shape == (BATCH, WIDTH)
    assert details.op == "Relu" and (details.version_expected, details.version_now) == (0, 1)


def test_the_broken_forward_computes_the_reference_outputs():
    """The bug is in backward only: the classifier read h before the ReLU rewrote it."""
    models = make_multitask()
    x, _, _ = make_batch()
    with torch.no_grad():
        broken = as_written(*models, x)
        right = reference_forward(*models, x)
    assert all(torch.equal(a, b) for a, b in zip(broken, right))


def test_reference_gradients_are_those_of_both_losses_and_leave_the_models_alone():
    models = make_multitask()
    x, labels, targets = make_batch()
    both = reference_gradients(models, x, labels, targets)
    cls_only = reference_gradients(models, x, labels, targets, losses="cls")
    reg_only = reference_gradients(models, x, labels, targets, losses="reg")
    assert all(p.grad is None for p in multitask_parameters(*models).values())
    assert set(both) == set(multitask_parameters(*models)) | {"x"}
    assert same_gradients(list(both.values()), [cls_only[n] + reg_only[n] for n in both])
    assert not same_gradients([both["encoder.0.weight"]], [cls_only["encoder.0.weight"]])
    assert not bool(reg_only["cls_head.weight"].abs().sum()) and not bool(cls_only["reg_head.1.weight"].abs().sum())


def test_reading_h_through_data_is_silent_and_gives_the_classifier_a_wrong_gradient():
    models = make_multitask()
    x, labels, targets = make_batch()
    expected = reference_gradients(models, x, labels, targets)
    encoder, cls_head, reg_head = models
    h = encoder(x)
    l_cls, l_reg = task_losses(cls_head(h), reg_head(h.data), labels, targets)
    (l_cls + l_reg).backward()
    assert not same_gradients([cls_head.weight.grad], [expected["cls_head.weight"]])

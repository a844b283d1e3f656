"""Notebook 07, case 3: the in-place ReLU really breaks backward, and the reference really is the right fix."""
import inspect
import textwrap

import nbformat
import pytest
import torch

from helpers.course.exercises.compare import same_gradients
from helpers.course.lesson07_bug_clinic_continued.inplace_activation import (
    BATCH,
    WIDTH,
    ResidualHead,
    make_batch,
    make_multitask,
    make_residual_multitask,
    multitask_parameters,
    reference_forward,
    reference_gradients,
    residual_reference_forward,
    task_losses,
)
from helpers.tools.errors import KINDS, parse_version_error
from tests.paths import ROOT


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


# The exercise's variant: the regression head is a residual block that writes += and relu_() itself.
def test_the_residual_head_raises_error_2_even_on_its_own_copy_of_h():
    for give in (lambda h: h, lambda h: h.clone()):
        encoder, cls_head, reg_head = make_residual_multitask()
        x, labels, targets = make_batch()
        h = encoder(x)
        l_cls, l_reg = task_losses(cls_head(h), reg_head(give(h)), labels, targets)
        with pytest.raises(RuntimeError) as caught:
            (l_cls + l_reg).backward()
        assert KINDS["inplace-version"].matches(caught.value)
        details = parse_version_error(str(caught.value))
        assert details.shape == (BATCH, WIDTH) and (details.version_expected, details.version_now) == (0, 2)


def test_the_residual_reference_computes_what_the_in_place_head_computes():
    models = make_residual_multitask(seed=5)
    x, labels, targets = make_batch(seed=5)
    with torch.no_grad():
        h = models[0](x)
        as_written = (models[1](h), models[2](h))
        right = residual_reference_forward(*models, x)
    assert all(torch.equal(a, b) for a, b in zip(as_written, right))
    grads = reference_gradients(models, x, labels, targets, forward=residual_reference_forward)
    assert {"reg_head.fc.weight", "reg_head.out.weight", "x"} <= set(grads)
    assert all(p.grad is None for p in multitask_parameters(*models).values())


def test_the_exercise_intro_shows_the_residual_heads_real_forward():
    cells = nbformat.read(str(ROOT / "solutions" / "07_bug_clinic_continued.ipynb"), as_version=4).cells
    intro = next(c.source for c in cells
                 if c.cell_type == "markdown" and c.source.startswith("### Exercise: `fixed_forward`"))
    body = textwrap.dedent(inspect.getsource(ResidualHead.forward)).splitlines()[1:]  # the lines after `def`
    shown = [line.split("#")[0].strip() for line in intro.splitlines()]
    for line in body:
        assert line.split("#")[0].strip() in shown, line

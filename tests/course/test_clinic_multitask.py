"""Notebook 07, case 2 (multi-task heads on one trunk): the broken step really fails, the tempting fixes really go
wrong, the reference is right, and the exercise's checker takes a wrong gradient apart."""
import pytest
import torch
import torch.nn.functional as F

from helpers.course.lesson07_bug_clinic_continued.multitask import (
    CLASSES,
    HIDDEN,
    StepLog,
    make_batch,
    make_multitask_model,
    per_task_optimizers,
    reference_gradients,
    reference_step,
    relative_error,
    same_gradients,
    split_optimizers,
    task_losses,
    weights_after,
)
from helpers.tools.diagnosis import diagnose
from helpers.tools.errors import KINDS
from helpers.tools.graph import named_parameters


def _setup(seed=0):
    trunk, head_a, head_b = make_multitask_model(seed=seed)
    return trunk, head_a, head_b, make_batch(seed=seed)


def test_models_and_batches_are_seeded_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    first, second = make_multitask_model(seed=3), make_multitask_model(seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    for a, b in zip(first, second):
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    x, y_a, y_b = make_batch(seed=3)
    assert y_a.shape == (x.shape[0], 1) and y_b.shape == (x.shape[0],) and int(y_b.max()) < CLASSES
    assert first[0](x).shape == (x.shape[0], HIDDEN)


def test_the_broken_step_raises_error_1():
    trunk, head_a, head_b, (x, y_a, y_b) = _setup()
    opt_a, opt_b = per_task_optimizers(trunk, head_a, head_b)
    loss_a, loss_b = task_losses(head_a, head_b, trunk(x), y_a, y_b)
    opt_a.zero_grad()
    loss_a.backward()
    opt_a.step()
    opt_b.zero_grad()
    with pytest.raises(RuntimeError) as caught:
        loss_b.backward()
    assert KINDS["backward-twice"].matches(caught.value)


def test_retain_graph_raises_error_2_on_the_trunks_second_layer():
    trunk, head_a, head_b, (x, y_a, y_b) = _setup()
    opt_a, opt_b = per_task_optimizers(trunk, head_a, head_b)
    loss_a, loss_b = task_losses(head_a, head_b, trunk(x), y_a, y_b)
    loss_a.backward(retain_graph=True)
    opt_a.step()
    report = diagnose(loss_b, named_parameters(trunk=trunk, head_a=head_a, head_b=head_b))
    assert [s.parameter for s in report.problems] == ["trunk.2.weight"]
    with pytest.raises(RuntimeError) as caught:
        loss_b.backward()
    assert KINDS["inplace-version"].matches(caught.value)


def test_with_a_one_layer_trunk_retain_graph_runs_and_steps_the_trunk_twice():
    trunk, head_a, head_b, (x, y_a, y_b) = _setup()
    one_layer = trunk[:2]
    opt_a, opt_b = per_task_optimizers(one_layer, head_a, head_b)
    log = StepLog({"opt_a": opt_a, "opt_b": opt_b}, dict(one_layer.named_parameters()))
    loss_a, loss_b = task_losses(head_a, head_b, one_layer(x), y_a, y_b)
    loss_a.backward(retain_graph=True)
    opt_a.step()
    loss_b.backward()
    opt_b.step()
    assert log.optimizers() == ["opt_a", "opt_b"]


def test_weights_after_two_sgd_optimizers_land_where_one_summed_step_lands_adam_and_decay_do_not():
    x, y_a, y_b = make_batch(seed=0)
    sgd = weights_after(lambda ps: torch.optim.SGD(ps, lr=0.1), True, x, y_a, y_b, steps=0)
    start_trunk, start_a, start_b = make_multitask_model(seed=0)
    start = {**{f"trunk.{n}": p for n, p in start_trunk[:2].named_parameters()},
             **{f"head_a.{n}": p for n, p in start_a.named_parameters()},
             **{f"head_b.{n}": p for n, p in start_b.named_parameters()}}
    assert sgd.keys() == start.keys() and all(torch.equal(sgd[n], start[n]) for n in start)

    def lands_the_same(make_optimizer):
        per_task, summed = (weights_after(make_optimizer, both, x, y_a, y_b) for both in (True, False))
        moved = any(not torch.equal(per_task[n], start[n]) for n in start)
        return moved and all(torch.allclose(per_task[n], summed[n], rtol=1e-4, atol=1e-6) for n in start)

    assert lands_the_same(lambda ps: torch.optim.SGD(ps, lr=0.1))
    assert lands_the_same(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9))
    assert not lands_the_same(lambda ps: torch.optim.SGD(ps, lr=0.1, weight_decay=0.1))
    assert not lands_the_same(lambda ps: torch.optim.Adam(ps, lr=1e-2))


def test_recomputing_the_forward_gives_task_b_the_gradient_at_moved_weights():
    trunk, head_a, head_b, (x, y_a, y_b) = _setup()
    opt_a, opt_b = per_task_optimizers(trunk, head_a, head_b)
    wanted = reference_gradients(trunk, head_a, head_b, x, y_a, y_b)
    log = StepLog({"opt_a": opt_a, "opt_b": opt_b}, dict(trunk.named_parameters()))
    opt_a.zero_grad()
    F.mse_loss(head_a(trunk(x)), y_a).backward()
    opt_a.step()
    opt_b.zero_grad()
    F.cross_entropy(head_b(trunk(x)), y_b).backward()
    opt_b.step()
    log.close()
    (_, task_a), (_, task_b) = log.steps
    assert same_gradients(task_a, wanted["trunk<-a"])
    assert not same_gradients(task_b, wanted["trunk<-b"]) and relative_error(task_b, wanted["trunk<-b"]) > 0.01
    assert not same_gradients(log.total(), wanted["trunk"])


def test_reference_gradients_split_the_trunks_gradient_into_the_two_tasks():
    trunk, head_a, head_b, batch = _setup()
    grads = reference_gradients(trunk, head_a, head_b, *batch)
    assert same_gradients(grads["trunk"], [a + b for a, b in zip(grads["trunk<-a"], grads["trunk<-b"])])
    assert all(p.grad is None for module in (trunk, head_a, head_b) for p in module.parameters())


def test_the_reference_step_is_one_sgd_step_on_each_parameter_with_the_right_gradient():
    trunk, head_a, head_b, batch = _setup()
    grads = reference_gradients(trunk, head_a, head_b, *batch)
    before = {name: [p.detach().clone() for p in module.parameters()]
              for name, module in (("trunk", trunk), ("head_a", head_a), ("head_b", head_b))}
    optimizers = [torch.optim.SGD(module.parameters(), lr=0.1) for module in (trunk, head_a, head_b)]
    reference_step(trunk, head_a, head_b, *optimizers, *batch)
    for name, module in (("trunk", trunk), ("head_a", head_a), ("head_b", head_b)):
        expected = [w - 0.1 * g for w, g in zip(before[name], grads[name])]
        assert same_gradients([p.detach() for p in module.parameters()], expected), name


def test_split_optimizers_hold_each_parameter_once():
    trunk, head_a, head_b, _ = _setup()
    held = [id(p) for opt in split_optimizers(trunk, head_a, head_b) for g in opt.param_groups for p in g["params"]]
    every = [id(p) for module in (trunk, head_a, head_b) for p in module.parameters()]
    assert sorted(held) == sorted(every)


def test_step_log_sees_only_the_given_parameters_and_its_hooks_come_off():
    trunk, head_a, head_b, batch = _setup()
    opt_trunk, opt_a, opt_b = split_optimizers(trunk, head_a, head_b)
    log = StepLog({"opt_trunk": opt_trunk, "opt_a": opt_a, "opt_b": opt_b}, dict(trunk.named_parameters()))
    reference_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, *batch)
    assert log.optimizers() == ["opt_trunk"] and "opt_trunk.step() moved" in str(log)
    log.close()
    reference_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, *batch)
    assert len(log.steps) == 1


def test_relative_error():
    expected = [torch.tensor([3.0, 4.0])]
    assert relative_error(expected, expected) == 0.0
    assert relative_error([torch.tensor([3.0, 0.0])], expected) == pytest.approx(0.8)


def test_the_checker_names_what_the_trunks_task_coefficients_mean():
    from helpers.course.lesson07_bug_clinic_continued.multitask_exercise import _mix_problem, _task_mix

    task_a, task_b = [torch.randn(3, 4), torch.randn(4)], [torch.randn(3, 4), torch.randn(4)]
    mix = _task_mix([0.3 * a + 2.0 * b for a, b in zip(task_a, task_b)], task_a, task_b)
    assert mix is not None and abs(mix[0] - 0.3) < 1e-4 and abs(mix[1] - 2.0) < 1e-4
    assert "task weights are missing" in _mix_problem(1.0, 1.0, 0.3, 2.0)
    assert "swapped" in _mix_problem(2.0, 0.3, 0.3, 2.0)
    assert "applied twice" in _mix_problem(0.09, 4.0, 0.3, 2.0)
    assert "loss_b never reached the trunk" in _mix_problem(0.3, 0.0, 0.3, 2.0)

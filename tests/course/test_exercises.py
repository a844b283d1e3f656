"""Exercise checkers: reject stubs and wrong answers with a specific diagnosis, accept every correct answer."""
import re

import pytest
import torch

from helpers import exercises
from helpers.course.exercises.hints import hint_levels, hint_widget
from helpers.course.exercises.registry import get_exercise
from helpers.course.exercises.result import Status
from helpers.course.exercises.solutions import solution_source
from tests.course.clinic_answers import merged
from tests.notebook_cells import exercise_cells, load_answer

SOLUTION_CELLS = exercise_cells("solutions")
STUDENT_CELLS = exercise_cells("notebooks")


def test_every_exercise_has_one_solution_cell_and_one_student_cell():
    assert sorted(SOLUTION_CELLS) == sorted(exercises.ids())
    assert sorted(STUDENT_CELLS) == sorted(exercises.ids())


@pytest.mark.parametrize("exercise_id", exercises.ids())
def test_checker_accepts_the_solution_notebooks_answer(exercise_id):
    answer = load_answer(SOLUTION_CELLS[exercise_id], get_exercise(exercise_id).answer_name)
    result = exercises.evaluate(exercise_id, answer)
    assert result.passed, result.message


@pytest.mark.parametrize("exercise_id", exercises.ids())
def test_checker_reports_the_student_stub_as_not_attempted(exercise_id):
    stub = load_answer(STUDENT_CELLS[exercise_id], get_exercise(exercise_id).answer_name)
    result = exercises.evaluate(exercise_id, stub)
    assert result.status is Status.NOT_ATTEMPTED and not result.passed


@pytest.mark.parametrize("placeholder", [None, ...])
def test_placeholders_are_not_attempted(placeholder):
    assert exercises.evaluate("head_weight_grad", placeholder).status is Status.NOT_ATTEMPTED


def test_solution_hint_is_the_solution_cell():
    assert solution_source("head_weight_grad") == SOLUTION_CELLS["head_weight_grad"]


# head_weight_grad: alternative correct answers
def backward_and_clone(model, x, target):
    model.zero_grad()
    ((model(x) - target) ** 2).mean().backward()
    return model[-1].weight.grad.clone()


def backward_restricted_to_the_weight(model, x, target):
    weight = model[-1].weight
    weight.grad = None
    ((model(x) - target) ** 2).mean().backward(inputs=[weight])
    return weight.grad


# parameters_reached
def reached_via_autograd_grad(loss, named_params):
    grads = torch.autograd.grad(loss, list(named_params.values()), allow_unused=True)
    return [name for name, grad in zip(named_params, grads) if grad is not None]


def reached_recursively(loss, named_params):
    found = set()

    def visit(node):
        if node is None:
            return
        variable = getattr(node, "variable", None)
        for name, param in named_params.items():
            if variable is param:
                found.add(name)
        for child, _ in node.next_functions:
            visit(child)

    visit(loss.grad_fn)
    return found


def follows_only_the_first_input(loss, named_params):
    found, node = set(), loss.grad_fn
    while node is not None:
        for name, param in named_params.items():
            if getattr(node, "variable", None) is param:
                found.add(name)
        node = node.next_functions[0][0] if node.next_functions else None
    return found


def names_every_parameter(loss, named_params):
    return set(named_params)


def names_the_first_model_only(loss, named_params):
    return {name for name in named_params if name.startswith("M1")}


def returns_the_tensors(loss, named_params):
    return list(named_params.values())


def forgets_none_nodes(loss, named_params):
    found, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        stack.extend(child for child, _ in node.next_functions)  # None children crash on the next pop
    return found


# two_grads
def two_grads_reverse_order(l1, l2, params1, params2):
    grads2 = torch.autograd.grad(l2, params2, retain_graph=True)
    return torch.autograd.grad(l1, params1), grads2


def two_grads_with_restricted_backward(l1, l2, params1, params2):
    l1.backward(retain_graph=True, inputs=list(params1))
    l2.backward(inputs=list(params2))
    return [p.grad.clone() for p in params1], [p.grad.clone() for p in params2]


def two_grads_without_retain_graph(l1, l2, params1, params2):
    return torch.autograd.grad(l1, params1), torch.autograd.grad(l2, params2)


def two_grads_swapped(l1, l2, params1, params2):
    return torch.autograd.grad(l2, params1, retain_graph=True), torch.autograd.grad(l1, params2)


def two_grads_by_backward_on_both(l1, l2, params1, params2):
    l1.backward(retain_graph=True)
    l2.backward()
    return [p.grad for p in params1], [p.grad for p in params2]


def two_grads_one_list(l1, l2, params1, params2):
    return torch.autograd.grad(l1, params1, retain_graph=True)


# bumps_per_step
def bumps_on_a_linear_layer(make_optimizer):
    layer = torch.nn.Linear(4, 1)
    layer(torch.ones(2, 4)).sum().backward()
    optimizer = make_optimizer(layer.parameters())
    before = layer.weight._version
    optimizer.step()
    return layer.weight._version - before


def bumps_over_two_steps_halved(make_optimizer):
    param = torch.nn.Parameter(torch.zeros(2))
    param.grad = torch.ones(2)
    optimizer = make_optimizer([param])
    before = param._version
    optimizer.step()
    optimizer.step()
    return (param._version - before) // 2


def bumps_without_a_gradient(make_optimizer):
    param = torch.nn.Parameter(torch.zeros(2))
    optimizer = make_optimizer([param])
    before = param._version
    optimizer.step()
    return param._version - before


def returns_the_version_itself(make_optimizer):
    layer = torch.nn.Linear(4, 1)
    layer(torch.ones(2, 4)).sum().backward()
    make_optimizer(layer.parameters()).step()
    return layer.weight._version


def counts_two_steps(make_optimizer):
    return 2 * bumps_on_a_linear_layer(make_optimizer)


def types_in_the_numbers(make_optimizer):
    return 1


# two_model_step
def step_with_autograd_grad(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2 = losses(m1(x1), m2(x2))
    grads1 = torch.autograd.grad(l1, list(m1.parameters()), retain_graph=True)
    grads2 = torch.autograd.grad(l2, list(m2.parameters()))
    for p, g in zip([*m1.parameters(), *m2.parameters()], [*grads1, *grads2]):
        p.grad = g
    opt1.step()
    opt2.step()


def step_with_detach(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    o1, o2 = m1(x1), m2(x2)
    l1, _ = losses(o1, o2.detach())
    _, l2 = losses(o1.detach(), o2)
    (l1 + l2).backward()
    opt1.step()
    opt2.step()


def step_l2_first_two_forwards(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    _, l2 = losses(m1(x1), m2(x2))
    l2.backward(inputs=list(m2.parameters()))
    l1, _ = losses(m1(x1), m2(x2))
    l1.backward(inputs=list(m1.parameters()))
    opt1.step()
    opt2.step()


def step_early_step_restricted(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = losses(m1(x1), m2(x2))
    l2.backward(retain_graph=True, inputs=list(m2.parameters()))
    opt2.step()                                   # M2 changes, but L1's restricted backward never visits M2
    l1.backward(inputs=list(m1.parameters()))
    opt1.step()


def step_copied_fix(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True)
    l2.backward()
    opt1.step()
    opt2.step()


def step_summed_loss(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = losses(m1(x1), m2(x2))
    (l1 + l2).backward()
    opt1.step()
    opt2.step()


def step_swapped(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = losses(m1(x1), m2(x2))
    l2.backward(retain_graph=True, inputs=list(m1.parameters()))
    l1.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def step_without_zero_grad(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2 = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def step_original_loop_with_retain_graph(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2 = losses(m1(x1), m2(x2))
    opt1.zero_grad()
    l1.backward(retain_graph=True)
    opt1.step()
    opt2.zero_grad()
    l2.backward()
    opt2.step()


def step_detach_on_the_wrong_side(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    o1, o2 = m1(x1), m2(x2)
    l1, _ = losses(o1.detach(), o2)
    _, l2 = losses(o1, o2.detach())
    (l1 + l2).backward()
    opt1.step()
    opt2.step()


def step_forgets_m2(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    l1, _ = losses(m1(x1), m2(x2))
    l1.backward(inputs=list(m1.parameters()))
    opt1.step()


def step_m2_twice(m1, m2, opt1, opt2, x1, x2, losses):
    step_with_detach(m1, m2, opt1, opt2, x1, x2, losses)
    opt2.step()


def step_manual_update(m1, m2, opt1, opt2, x1, x2, losses):
    step_with_detach(m1, m2, opt1, opt2, x1, x2, losses)
    with torch.no_grad():
        m1[0].weight.mul_(0.99)


def step_without_retain_graph(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = losses(m1(x1), m2(x2))
    l1.backward(inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def step_with_closures(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2 = losses(m1(x1), m2(x2))

    def closure1():
        opt1.zero_grad()
        l1.backward(retain_graph=True, inputs=list(m1.parameters()))
        return l1

    def closure2():
        opt2.zero_grad()
        l2.backward(inputs=list(m2.parameters()))
        return l2

    grads_done = [closure1(), closure2()]  # both backward passes first
    opt1.step()
    opt2.step()
    return grads_done


def step_swapping_loss_arguments(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    o1, o2 = m1(x1), m2(x2)
    l1, _ = losses(o1, o2.detach())
    l2, _ = losses(o2, o1.detach())  # right only when the losses are symmetric
    (l1 + l2).backward()
    opt1.step()
    opt2.step()


def step_zero_grad_after_backward(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2 = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    opt1.zero_grad()
    opt2.zero_grad()
    opt1.step()
    opt2.step()


def step_with_half_the_loss(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = losses(m1(x1), m2(x2))
    (0.5 * l1).backward(retain_graph=True, inputs=list(m1.parameters()))
    (0.5 * l2).backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


_stash = {}


def step_with_last_steps_gradients(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2 = losses(m1(x1), m2(x2))
    new1 = torch.autograd.grad(l1, list(m1.parameters()), retain_graph=True)
    new2 = torch.autograd.grad(l2, list(m2.parameters()))
    old1, old2 = _stash.get(id(m1), (new1, new2))
    _stash[id(m1)] = (new1, new2)
    for p, g in zip([*m1.parameters(), *m2.parameters()], [*old1, *old2]):
        p.grad = g
    opt1.step()
    opt2.step()


def step_disabling_grad(m1, m2, opt1, opt2, x1, x2, losses):
    torch.set_grad_enabled(False)
    raise RuntimeError("oops")


# chained_amp_step
def _chain_losses(tenc, unet, x, target, mask):
    import torch.nn.functional as F

    with torch.autocast(x.device.type):
        loss = F.mse_loss(unet(tenc(x)), target, reduction="none")
        return loss.mean(), (loss * mask).mean()


def amp_step_unet_backward_first(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_unet).backward(retain_graph=True, inputs=list(unet.parameters()))
    scaler.scale(loss_tenc).backward(inputs=list(tenc.parameters()))
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_tenc_stepped_early(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.unscale_(opt_tenc)
    scaler.step(opt_tenc)                      # safe: unet's backward never visits tenc
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.step(opt_unet)
    scaler.update()


def amp_step_autograd_grad(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    grads_tenc = torch.autograd.grad(scaler.scale(loss_tenc), list(tenc.parameters()), retain_graph=True)
    grads_unet = torch.autograd.grad(scaler.scale(loss_unet), list(unet.parameters()))
    for p, g in zip([*tenc.parameters(), *unet.parameters()], [*grads_tenc, *grads_unet]):
        p.grad = g
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_running_unet_twice(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    """Seed 2's question answered: no retain_graph, unet runs again on the detached hidden state."""
    import torch.nn.functional as F

    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    with torch.autocast(x.device.type):
        hidden_state = tenc(x)
        loss_tenc = F.mse_loss(unet(hidden_state), target, reduction="none").mean()
    scaler.scale(loss_tenc).backward(inputs=list(tenc.parameters()))
    with torch.autocast(x.device.type):
        loss_unet = (F.mse_loss(unet(hidden_state.detach()), target, reduction="none") * mask).mean()
    scaler.scale(loss_unet).backward()
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_as_widely_shared(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(inputs=list(tenc.parameters()))
    scaler.unscale_(opt_tenc)
    scaler.step(opt_tenc)
    opt_tenc.zero_grad(set_to_none=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.unscale_(opt_unet)
    scaler.step(opt_unet)
    opt_unet.zero_grad(set_to_none=True)
    scaler.update()


def amp_step_summed(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc + loss_unet).backward()
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_mixing(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward()
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_swapped(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_unet).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.scale(loss_tenc).backward(inputs=list(unet.parameters()))
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_without_zero_grad(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_without_update(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.step(opt_tenc)
    scaler.step(opt_unet)


def amp_step_updating_twice(*args):
    amp_step_unet_backward_first(*args)
    args[4].update()


def amp_step_unet_stepped_first(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_unet).backward(retain_graph=True, inputs=list(unet.parameters()))
    scaler.step(opt_unet)                      # too early: tenc's backward passes through unet
    scaler.scale(loss_tenc).backward(inputs=list(tenc.parameters()))
    scaler.step(opt_tenc)
    scaler.update()


def amp_step_without_autocast(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    import torch.nn.functional as F

    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss = F.mse_loss(unet(tenc(x)), target, reduction="none")
    loss_tenc, loss_unet = loss.mean(), (loss * mask).mean()
    scaler.scale(loss_tenc).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_bypassing_the_scaler_for_unet(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.step(opt_tenc)
    opt_unet.step()
    scaler.update()


def amp_step_update_between_steps(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.step(opt_tenc)
    scaler.update()
    scaler.step(opt_unet)


def amp_step_half_loss(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc / 2).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_raises(*args):
    raise RuntimeError("oops")


def amp_step_forgets_unet(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask):
    opt_tenc.zero_grad()
    loss_tenc, _ = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(inputs=list(tenc.parameters()))
    scaler.step(opt_tenc)
    scaler.update()


OTHER_CORRECT = {
    "head_weight_grad": [backward_and_clone, backward_restricted_to_the_weight],
    "parameters_reached": [reached_via_autograd_grad, reached_recursively],
    "two_grads": [two_grads_reverse_order, two_grads_with_restricted_backward],
    "bumps_per_step": [bumps_on_a_linear_layer, bumps_over_two_steps_halved],
    "two_model_step": [step_with_autograd_grad, step_with_detach, step_l2_first_two_forwards,
                       step_early_step_restricted, step_with_closures],
    "chained_amp_step": [amp_step_unet_backward_first, amp_step_tenc_stepped_early, amp_step_autograd_grad,
                         amp_step_running_unet_twice],
    **merged("OTHER_CORRECT"),  # notebook 06's cases: tests/course/clinic_answers/
}


@pytest.mark.parametrize(
    "exercise_id, answer",
    [(exercise_id, answer) for exercise_id, answers in OTHER_CORRECT.items() for answer in answers],
)
def test_checkers_accept_other_correct_answers(exercise_id, answer):
    result = exercises.evaluate(exercise_id, answer)
    assert result.passed, result.message


# head_weight_grad: wrong answers, each with its own diagnosis
def forgets_zero_grad(model, x, target):
    ((model(x) - target) ** 2).mean().backward()
    return model[-1].weight.grad.clone()


def sums_instead_of_mean(model, x, target):
    return torch.autograd.grad(((model(x) - target) ** 2).sum(), model[-1].weight)[0]


def returns_the_tuple(model, x, target):
    return torch.autograd.grad(((model(x) - target) ** 2).mean(), model[-1].weight)


def takes_the_first_layer(model, x, target):
    return torch.autograd.grad(((model(x) - target) ** 2).mean(), model[0].weight)[0]


def takes_a_step(model, x, target):
    grad = backward_and_clone(model, x, target)
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    return grad


def backward_twice(model, x, target):
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    loss.backward()


def fails_its_own_assert(model, x, target):
    assert False, "my own check"


def forgets_return(model, x, target):
    torch.autograd.grad(((model(x) - target) ** 2).mean(), model[-1].weight)


def returns_the_weight(model, x, target):
    return model[-1].weight


def doubles_on_every_call(model, x, target):
    return 2 * torch.autograd.grad(((model(x) - target) ** 2).mean(), model[-1].weight)[0]


def changes_the_inputs(model, x, target):
    x.mul_(2)
    return torch.autograd.grad(((model(x) - target) ** 2).mean(), model[-1].weight)[0]


def hits_a_torch_not_implemented_error(model, x, target):
    return torch.empty(1, 64, device="meta").clone().cpu()


def calls_exit(model, x, target):
    raise SystemExit(0)


class Unprintable:
    def __repr__(self):
        raise RuntimeError("no repr")


WRONG_ANSWERS = {
    "head_weight_grad": [
        (forgets_zero_grad, "twice the right one"),
        (sums_instead_of_mean, "32 times too large"),
        (returns_the_tuple, "returned a tuple"),
        (takes_the_first_layer, "another parameter"),
        (takes_a_step, "changed the model's parameters"),
        (backward_twice, "raised Error 1: backward through the graph a second time"),
        (fails_its_own_assert, "raised AssertionError: my own check"),
        (forgets_return, "returned None"),
        (returns_the_weight, "differs from the reference"),
        (doubles_on_every_call, "differs from the reference"),
        (changes_the_inputs, "changed x or target in place"),
        (hits_a_torch_not_implemented_error, "raised NotImplementedError"),
        (calls_exit, "raised SystemExit"),
        (lambda model, x, target: Unprintable(), "could not be compared"),
        (42, "should be a function"),
    ],
    "parameters_reached": [
        (follows_only_the_first_input, "misses"),
        (names_every_parameter, "includes M2"),
        (names_the_first_model_only, "The shared term connects L1 to M2"),
        (returns_the_tensors, "names (strings"),
        (forgets_none_nodes, "raised AttributeError"),
        (lambda loss, params: {name: True for name in params}, "not dict"),
        (lambda loss, params: {n for n, p in params.items() if p in [loss]}, "compare identities"),
    ],
    "two_grads": [
        (two_grads_without_retain_graph, "pass retain_graph=True"),
        (two_grads_swapped, "M1 got the gradient of L2"),
        (two_grads_by_backward_on_both, "gradient of L1 + L2"),
        (two_grads_one_list, "Return a pair"),
        (lambda l1, l2, p1, p2: (torch.autograd.grad(l1, p1, retain_graph=True), torch.autograd.grad(l1, p2)),
         "M2 got the gradient of L1"),
        (lambda l1, l2, p1, p2: ([p.grad for p in p1], [p.grad for p in p2]), "are None"),
    ],
    "bumps_per_step": [
        (bumps_without_a_gradient, "Did the parameter have a .grad"),
        (lambda make_optimizer: 1 if "SGD" in repr(make_optimizer(torch.nn.Linear(1, 1).parameters())) else 5, "For Adam()"),
        (returns_the_version_itself, "one bump too many"),
        (counts_two_steps, "did you step twice"),
        (types_in_the_numbers, "You returned 1 for every optimizer"),
        (lambda make_optimizer: bumps_on_a_linear_layer(lambda params: make_optimizer(params)) * 0,
         "not of .data or .grad"),
    ],
    "two_model_step": [
        (step_copied_fix, "gradient of L1 + L2"),
        (step_summed_loss, "gradient of L1 + L2"),
        (step_swapped, "gradient of L2 instead of L1"),
        (step_without_zero_grad, "gradients pile up"),
        (step_original_loop_with_retain_graph, "raised Error 2"),
        (step_detach_on_the_wrong_side, "detach is on the wrong output"),
        (step_forgets_m2, "M2's optimizer was never stepped"),
        (step_m2_twice, "stepped 2 times"),
        (step_manual_update, "other than through the optimizers"),
        (step_without_retain_graph, "raised Error 1"),
        (step_swapping_loss_arguments, "asymmetric losses"),
        (step_zero_grad_after_backward, "zero_grad() before backward()"),
        (step_with_half_the_loss, "0.5 times the gradient"),
        (step_with_last_steps_gradients, "previous step's gradient"),
        (step_disabling_grad, "raised RuntimeError: oops"),
    ],
    "chained_amp_step": [
        (amp_step_as_widely_shared, "runs through unet"),
        (amp_step_summed, "gradient of loss_tenc + loss_unet"),
        (amp_step_mixing, "gradient of loss_tenc + loss_unet"),
        (amp_step_swapped, "ownership is swapped"),
        (amp_step_without_zero_grad, "still held the previous step's"),
        (amp_step_without_update, "scaler.update() was called 0 times"),
        (amp_step_updating_twice, "a second update() in one step"),
        (amp_step_forgets_unet, "unet's optimizer was never stepped"),
        (amp_step_raises, "raised RuntimeError: oops"),
        (amp_step_unet_stepped_first, "unet was stepped before tenc's backward"),
        (amp_step_without_autocast, "ran without autocast"),
        (amp_step_bypassing_the_scaler_for_unet, "still multiplied by the scaler's scale"),
        (amp_step_update_between_steps, "before both optimizers had stepped"),
        (amp_step_half_loss, "0.5 times the gradient"),
    ],
    **merged("WRONG_ANSWERS"),  # notebook 06's cases: tests/course/clinic_answers/
}


def test_every_checker_is_tested_with_three_wrong_and_one_other_correct_answer():
    for exercise_id in exercises.ids():
        assert len(WRONG_ANSWERS.get(exercise_id, [])) >= 3, exercise_id
        assert len(OTHER_CORRECT.get(exercise_id, [])) >= 1, exercise_id


@pytest.mark.parametrize(
    "exercise_id, answer, diagnosis",
    [(exercise_id, *case) for exercise_id, cases in WRONG_ANSWERS.items() for case in cases],
)
def test_checkers_reject_wrong_answers_with_a_specific_diagnosis(exercise_id, answer, diagnosis):
    result = exercises.evaluate(exercise_id, answer)
    assert result.status is Status.FAILED
    assert diagnosis in result.message


def test_strict_mode_raises_on_failure_and_not_on_success(monkeypatch):
    monkeypatch.setenv("COURSE_STRICT", "1")
    with pytest.raises(AssertionError, match="twice the right one"):
        exercises.check("head_weight_grad", forgets_zero_grad)
    with pytest.raises(AssertionError, match="Not attempted yet"):
        exercises.check("head_weight_grad", None)
    assert exercises.check("head_weight_grad", backward_and_clone).passed


def test_without_strict_mode_check_returns_the_failure(monkeypatch):
    monkeypatch.delenv("COURSE_STRICT", raising=False)
    result = exercises.check("head_weight_grad", forgets_zero_grad)
    assert not result.passed and "Not yet" in str(result) and "twice" in result._repr_html_()


def test_unknown_exercise_lists_the_known_ids():
    with pytest.raises(KeyError, match="head_weight_grad"):
        exercises.check("no_such_exercise", None)


def test_hints_in_text_come_one_level_at_a_time():
    first = str(exercises.hint("head_weight_grad"))
    assert "1. Symptom" in first and "2. Cause" not in first and 'level=2' in first
    everything = str(exercises.hint("head_weight_grad", level=4))
    assert "3. The API, and the shape of the fix" in everything and "torch.autograd.grad(" in everything


def _solution_lines(exercise_id):
    """The lines of an exercise's solution that are code worth hiding (not comments, not short)."""
    lines = [line.strip() for line in SOLUTION_CELLS[exercise_id].splitlines()]
    return [line for line in lines if len(line) >= 16 and not line.startswith(("#", '"""', "def "))]


@pytest.mark.parametrize("exercise_id", exercises.ids())
def test_the_third_hint_gives_the_api_and_the_shape_of_the_fix_without_the_code(exercise_id):
    third = get_exercise(exercise_id).hints[2]
    flat = " ".join(third.split())
    shown_code = [line for line in _solution_lines(exercise_id) if line in flat]
    assert shown_code == [], f"hint 3 gives away solution lines: {shown_code}"
    assert not re.search(r"\b\w+(\[[^\]]*\])?\s=\s\S", flat), f"hint 3 has an assignment: {third}"
    assert not re.search(r";\s*\w+\(", flat), f"hint 3 strings statements together: {third}"
    assert not re.search(r"\w\([^()]*,[^()]*\)", flat), f"hint 3 writes out a call with its arguments: {third}"


@pytest.mark.parametrize("level", [0, 5, -1, "2", 2.0, True])
def test_asking_for_a_level_that_does_not_exist_says_how_many_there_are(level):
    answer = str(exercises.hint("two_grads", level=level))
    assert "there are 4 levels, 1 to 4" in answer and "two_grads" in answer


def test_hint_widget_reveals_the_next_level_on_each_click():
    widget = hint_widget("head_weight_grad", hint_levels("head_weight_grad", get_exercise("head_weight_grad").hints))
    button, shown = widget.children
    assert shown.value == ""
    button.click()
    assert "1. Symptom" in shown.value and "2. Cause" not in shown.value
    for _ in range(3):
        button.click()
    assert "4. Full solution" in shown.value and button.disabled


def test_a_learners_set_grad_enabled_false_does_not_outlive_the_check():
    exercises.evaluate("two_model_step", step_disabling_grad)
    assert torch.is_grad_enabled()


def test_the_summary_shows_each_exercise_of_the_notebook_as_its_last_check_left_it(monkeypatch):
    from helpers.course.exercises import progress as summary_module

    monkeypatch.delenv("COURSE_STRICT", raising=False)
    monkeypatch.setattr(summary_module, "LAST_RESULTS", {})
    fresh = str(exercises.summary("02_backward_twice"))
    assert "two_grads: not attempted yet - its check cell has not run" in fresh
    assert "Next: open notebooks/03_inplace_version.ipynb." in fresh
    exercises.check("two_grads", load_answer(STUDENT_CELLS["two_grads"], get_exercise("two_grads").answer_name))
    assert "two_grads: not attempted yet" in str(exercises.summary("02_backward_twice"))
    exercises.check("two_grads", lambda *args: (None, None))
    failed_line = [line for line in str(exercises.summary("02_backward_twice")).splitlines() if "two_grads" in line][0]
    assert failed_line.startswith("✗ two_grads: failed - ") and len(failed_line) < 200
    exercises.check("two_grads", load_answer(SOLUTION_CELLS["two_grads"], get_exercise("two_grads").answer_name))
    assert "✓ two_grads: passed" in str(exercises.summary("02_backward_twice"))
    assert "last notebook" in str(exercises.summary(exercises.ids() and "06_bug_clinic"))
    assert "no exercises" in str(exercises.summary("99_no_such_notebook"))


def test_in_strict_mode_the_summary_fails_when_an_exercise_has_not_passed(monkeypatch):
    from helpers.course.exercises import progress as summary_module

    monkeypatch.setattr(summary_module, "LAST_RESULTS", {})
    monkeypatch.setenv("COURSE_STRICT", "1")
    with pytest.raises(AssertionError, match="not every exercise passed"):
        exercises.summary("02_backward_twice")

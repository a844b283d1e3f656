"""Answers to the exercises of notebooks 00-05, as learners write them: other correct answers, and wrong ones with
the diagnosis each must get.

Each exercise's wrong answers include, besides the classic mistakes, the classes a checker could be fooled by:
an answer that carries state from one call to the next (a cache, a global, a remembered batch or optimizer), one
that changes state its contract does not mention (.grad, requires_grad, train/eval mode, global settings) and, for
the GradScaler step, a clip before unscale_ and a mishandled step with an inf gradient. ``CLASSES`` names them, and
tests/course/test_exercises.py checks every class is there.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

# ---------------------------------------------------------------- shared shapes of wrong answers


def remembering(answer):
    """``answer`` with a cache keyed on the first argument's identity: right on the first call, stale after."""
    cache = {}

    def cached(*args):
        key = id(args[0])
        if key not in cache:
            cache[key] = answer(*args)
        return cache[key]

    return cached


def leaving_eval_mode(answer, module_position=0):
    def wrapped(*args):
        args[module_position].eval()
        return answer(*args)

    return wrapped


def leaving_anomaly_on(answer):
    def wrapped(*args):
        torch.autograd.set_detect_anomaly(True)
        return answer(*args)

    return wrapped


def two_grads_bumping_the_weights(l1, l2, params1, params2):
    params1, params2 = list(params1), list(params2)
    grads = (torch.autograd.grad(l1, params1, retain_graph=True), torch.autograd.grad(l2, params2, retain_graph=True))
    with torch.no_grad():
        for p in params1 + params2:
            p.add_(0.0)                          # same values, new versions: the caller's backward raises error 2
    return grads


# ---------------------------------------------------------------- head_weight_grad (00)


def head_grad(model, x, target):
    (grad,) = torch.autograd.grad(((model(x) - target) ** 2).mean(), model[-1].weight)
    return grad


def head_grad_through_detached_features(model, x, target):
    features = model[:-1](x).detach()            # the head's gradient needs only its input
    prediction = model[-1](features)
    return torch.autograd.grad(torch.mean((prediction - target) ** 2), [model[-1].weight])[0]


def head_grad_by_hand(model, x, target):
    with torch.no_grad():
        features = model[:-1](x)
        error = model[-1](features) - target
        return 2 * error.t() @ features / error.numel()


def head_grad_backward_then_restore(model, x, target):
    saved = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ((model(x) - target) ** 2).mean().backward()
    answer = model[-1].weight.grad.clone()
    for p, old in zip(model.parameters(), saved):
        p.grad = old
    return answer


def backward_and_clone(model, x, target):
    model.zero_grad()
    ((model(x) - target) ** 2).mean().backward()
    return model[-1].weight.grad.clone()


def forgets_zero_grad(model, x, target):
    ((model(x) - target) ** 2).mean().backward()
    return model[-1].weight.grad.clone()


def backward_restricted_to_the_weight(model, x, target):
    weight = model[-1].weight
    weight.grad = None
    ((model(x) - target) ** 2).mean().backward(inputs=[weight])
    return weight.grad


def divides_by_the_first_batch_size(model, x, target):
    return torch.autograd.grad(((model(x) - target) ** 2).sum() / 32, model[-1].weight)[0]


def writes_into_the_weight_without_changing_it(model, x, target):
    grad = head_grad(model, x, target)
    with torch.no_grad():
        model[-1].weight.add_(0.0)              # same values, one more version: the caller's backward would fail
    return grad


def leaves_gradient_tracking_off(model, x, target):
    grad = head_grad(model, x, target)
    torch.set_grad_enabled(False)                # never switched back: the caller's next forward records nothing
    return grad


def sums_instead_of_mean(model, x, target):
    return torch.autograd.grad(((model(x) - target) ** 2).sum(), model[-1].weight)[0]


def returns_the_tuple(model, x, target):
    return torch.autograd.grad(((model(x) - target) ** 2).mean(), model[-1].weight)


def takes_the_first_layer(model, x, target):
    return torch.autograd.grad(((model(x) - target) ** 2).mean(), model[0].weight)[0]


def takes_a_step(model, x, target):
    grad = head_grad(model, x, target)
    with torch.no_grad():
        model[-1].weight.sub_(0.1 * grad)
    return grad


def backward_twice(model, x, target):
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    loss.backward()


def fails_its_own_assert(model, x, target):
    assert False, "my own check"


def forgets_return(model, x, target):
    torch.autograd.grad(((model(x) - target) ** 2).mean(), model[-1].weight)


def changes_the_inputs(model, x, target):
    x.mul_(2)
    return head_grad(model, x, target)


def freezes_the_body(model, x, target):
    for param in model[:-1].parameters():
        param.requires_grad_(False)                # "only the head needs a gradient" - never undone
    return head_grad(model, x, target)


def hits_a_torch_not_implemented_error(model, x, target):
    return torch.empty(1, 64, device="meta").clone().cpu()


def calls_exit(model, x, target):
    raise SystemExit(0)


class Unprintable:
    def __repr__(self):
        raise RuntimeError("no repr")


_first_answer = {}


def remembers_in_a_global(model, x, target):
    if "grad" not in _first_answer:
        _first_answer["grad"] = head_grad(model, x, target)
    return _first_answer["grad"]


# ---------------------------------------------------------------- parameters_reached (01)


def reached_via_autograd_grad(loss, named_params):
    trainable = {name: p for name, p in named_params.items() if p.requires_grad}  # a frozen one has no node
    grads = torch.autograd.grad(loss, list(trainable.values()), allow_unused=True, retain_graph=True)
    return {name for name, grad in zip(trainable, grads) if grad is not None}


def reached_as_a_list(loss, named_params):
    return sorted(reached_recursively(loss, named_params))   # the right names, but not the set the text asks for


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


def reached_breadth_first(loss, named_params):
    from collections import deque

    by_id = {id(p): n for n, p in named_params.items()}
    queue, seen, names = deque([loss.grad_fn]), {}, []
    while queue:
        fn = queue.popleft()
        if fn is None or id(fn) in seen:
            continue
        seen[id(fn)] = fn  # keep the node alive: on torch < 2.5 a freed wrapper's id is reused
        if hasattr(fn, "variable") and id(fn.variable) in by_id:
            names.append(by_id[id(fn.variable)])
        queue.extend(f for f, _ in fn.next_functions)
    return frozenset(names)


def reached_via_autograd_grad_freeing(loss, named_params):
    grads = torch.autograd.grad(loss, list(named_params.values()), allow_unused=True)
    return [name for name, grad in zip(named_params, grads) if grad is not None]


def reached_via_backward(loss, named_params):
    loss.backward(retain_graph=True)
    return {name for name, p in named_params.items() if p.grad is not None}


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


def reached_remembered_per_dict():
    cache = {}

    def parameters_reached(loss, named_params):
        if id(named_params) not in cache:
            cache[id(named_params)] = reached_recursively(loss, named_params)
        return cache[id(named_params)]

    return parameters_reached


def freezes_what_it_finds(loss, named_params):
    names = reached_recursively(loss, named_params)
    for name in names:
        named_params[name].requires_grad_(False)   # "mark as visited" - on the model itself
    return names


# ---------------------------------------------------------------- two_grads (02)


def two_grads_both_kept(l1, l2, params1, params2):
    return (torch.autograd.grad(l1, params1, retain_graph=True),
            torch.autograd.grad(l2, params2, retain_graph=True))


def two_grads_second_first(loss_a, loss_b, first_params, second_params):
    grads_b = torch.autograd.grad(loss_b, list(second_params), retain_graph=True)
    grads_a = torch.autograd.grad(loss_a, list(first_params), retain_graph=True)
    return list(grads_a), list(grads_b)


def two_grads_one_loop(l1, l2, params1, params2):
    return tuple(torch.autograd.grad(loss, params, retain_graph=True) for loss, params in ((l1, params1),
                                                                                        (l2, params2)))


def two_grads_as_in_the_notebook(l1, l2, params1, params2):
    grads1 = torch.autograd.grad(l1, params1, retain_graph=True)
    return grads1, torch.autograd.grad(l2, params2)     # the caller's backward comes after this one


def two_grads_reverse_order_freeing(l1, l2, params1, params2):
    grads2 = torch.autograd.grad(l2, params2, retain_graph=True)
    return torch.autograd.grad(l1, params1), grads2


def two_grads_with_restricted_backward(l1, l2, params1, params2):
    l1.backward(retain_graph=True, inputs=list(params1))
    l2.backward(retain_graph=True, inputs=list(params2))
    return [p.grad.clone() for p in params1], [p.grad.clone() for p in params2]


def two_grads_without_retain_graph(l1, l2, params1, params2):
    return torch.autograd.grad(l1, params1), torch.autograd.grad(l2, params2)


def two_grads_swapped(l1, l2, params1, params2):
    return torch.autograd.grad(l2, params1, retain_graph=True), torch.autograd.grad(l1, params2, retain_graph=True)


def two_grads_by_backward_on_both(l1, l2, params1, params2):
    l1.backward(retain_graph=True)
    l2.backward(retain_graph=True)
    return [p.grad for p in params1], [p.grad for p in params2]


def two_grads_one_list(l1, l2, params1, params2):
    return torch.autograd.grad(l1, params1, retain_graph=True)


def two_grads_freezing_the_other(l1, l2, params1, params2):
    for p in params1:
        p.requires_grad_(False)                        # "l2 must not reach the first model"
    grads2 = torch.autograd.grad(l2, params2, retain_graph=True)
    for p in params1:
        p.requires_grad_(True)
    for p in params2:
        p.requires_grad_(False)                        # "l1 must not reach the second model" - never undone
    return torch.autograd.grad(l1, params1, retain_graph=True), grads2


def two_grads_remembered_per_model():
    cache = {}

    def two_grads(l1, l2, params1, params2):
        key = id(params1[0])                           # "the same model: the same gradients"
        if key not in cache:
            cache[key] = two_grads_both_kept(l1, l2, params1, params2)
        return cache[key]

    return two_grads


# ---------------------------------------------------------------- bumps_per_step (03)


def _bumps(make_optimizer, weight_decay):
    param = torch.nn.Parameter(torch.zeros(2))
    param.grad = torch.ones(2)
    optimizer = make_optimizer([param], weight_decay=weight_decay)
    before = param._version
    optimizer.step()
    return param._version - before


def bumps_on_linear_layers(make_optimizer):
    counts = []
    for decay in (0.01, 0):
        layer = torch.nn.Linear(4, 1)
        layer(torch.ones(2, 4)).sum().backward()
        optimizer = make_optimizer(layer.parameters(), decay)
        start = layer.weight._version
        optimizer.step()
        counts.append(layer.weight._version - start)
    return counts


def bumps_in_one_optimizer_with_two_groups(make_optimizer):
    decayed, plain = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    decayed.grad, plain.grad = torch.ones(3), torch.ones(3)
    optimizer = make_optimizer([{"params": [decayed], "weight_decay": 0.01}, {"params": [plain]}], weight_decay=0.0)
    before = decayed._version, plain._version
    optimizer.step()
    return decayed._version - before[0], plain._version - before[1]


def bumps_without_a_gradient(make_optimizer):
    counts = []
    for decay in (0.01, 0.0):
        param = torch.nn.Parameter(torch.zeros(2))
        optimizer = make_optimizer([param], weight_decay=decay)
        before = param._version
        optimizer.step()
        counts.append(param._version - before)
    return tuple(counts)


def returns_the_versions_themselves(make_optimizer):
    counts = []
    for decay in (0.01, 0.0):
        layer = torch.nn.Linear(4, 1)
        layer(torch.ones(2, 4)).sum().backward()
        make_optimizer(layer.parameters(), weight_decay=decay).step()
        counts.append(layer.weight._version)
    return tuple(counts)


def counts_two_steps(make_optimizer):
    return tuple(2 * n for n in bumps_on_linear_layers(make_optimizer))


def ignores_weight_decay(make_optimizer):
    param = torch.nn.Parameter(torch.zeros(2))
    param.grad = torch.ones(2)
    optimizer = make_optimizer([param], weight_decay=0.01)
    before = param._version
    optimizer.step()
    return (param._version - before,) * 2


def pair_the_wrong_way_round(make_optimizer):
    return _bumps(make_optimizer, 0.0), _bumps(make_optimizer, 0.01)


def returns_one_number(make_optimizer):
    return _bumps(make_optimizer, 0.01)


def types_in_the_numbers(make_optimizer):
    return 1, 1


def remembered_by_optimizer_class():
    cache = {}

    def bumps_per_step(make_optimizer):
        probe = make_optimizer([torch.nn.Parameter(torch.zeros(1))], weight_decay=0.0)
        name = type(probe).__name__
        if name not in cache:
            cache[name] = (_bumps(make_optimizer, 0.01), _bumps(make_optimizer, 0.0))
        return cache[name]

    return bumps_per_step


def changes_the_default_dtype(make_optimizer):
    torch.set_default_dtype(torch.float64)             # "more precise" - never undone
    return _bumps(make_optimizer, 0.01), _bumps(make_optimizer, 0.0)


# ---------------------------------------------------------------- two_model_step (04)


def step_restricted(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2, l_both = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(retain_graph=True, inputs=list(m2.parameters()))
    l_both.backward()
    opt1.step()
    opt2.step()


def step_with_autograd_grad(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2, joint = losses(m1(x1), m2(x2))
    p1 = [p for p in m1.parameters() if p.requires_grad]      # some weights may be frozen
    p2 = [p for p in m2.parameters() if p.requires_grad]
    grads1 = torch.autograd.grad(l1 + joint, p1, retain_graph=True)
    grads2 = torch.autograd.grad(l2 + joint, p2)
    for p, g in zip(p1 + p2, [*grads1, *grads2]):
        p.grad = g
    opt1.step()
    opt2.step()


def step_with_detach(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    o1, o2 = m1(x1), m2(x2)
    l1 = losses(o1, o2.detach())[0]
    l2 = losses(o1.detach(), o2)[1]
    joint = losses(o1, o2)[2]
    (l1 + l2 + joint).backward()
    opt1.step()
    opt2.step()


def step_each_model_its_sum(m1, m2, opt1, opt2, x1, x2, losses):
    """M2's part first, two forward passes, no retain_graph."""
    opt2.zero_grad()
    opt1.zero_grad()
    _, loss_b, both = losses(m1(x1), m2(x2))
    (loss_b + both).backward(inputs=[p for p in m2.parameters() if p.requires_grad])
    loss_a, _, both = losses(m1(x1), m2(x2))
    (loss_a + both).backward(inputs=[p for p in m1.parameters() if p.requires_grad])
    opt2.step()
    opt1.step()


def step_early_step_restricted(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2, l_both = losses(m1(x1), m2(x2))
    (l2 + l_both).backward(retain_graph=True, inputs=[p for p in m2.parameters() if p.requires_grad])
    opt2.step()                                   # M2 changes, but M1's restricted backward never visits M2's weights
    (l1 + l_both).backward(inputs=[p for p in m1.parameters() if p.requires_grad])
    opt1.step()


def step_copied_fix(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2, l_both = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True)
    l2.backward(retain_graph=True)
    l_both.backward()
    opt1.step()
    opt2.step()


def step_summed_loss(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    sum(losses(m1(x1), m2(x2))).backward()
    opt1.step()
    opt2.step()


def step_swapped(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2, l_both = losses(m1(x1), m2(x2))
    l2.backward(retain_graph=True, inputs=list(m1.parameters()))
    l1.backward(retain_graph=True, inputs=list(m2.parameters()))
    l_both.backward()
    opt1.step()
    opt2.step()


def step_forgets_the_joint_loss(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2, _ = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def step_joint_loss_detached_for_each(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    o1, o2 = m1(x1), m2(x2)
    l1, _, both1 = losses(o1, o2.detach())
    _, l2, both2 = losses(o1.detach(), o2)
    (l1 + both1 + l2 + both2).backward()        # each copy of the joint loss reaches one model
    opt1.step()
    opt2.step()


def step_without_zero_grad(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2, l_both = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(retain_graph=True, inputs=list(m2.parameters()))
    l_both.backward()
    opt1.step()
    opt2.step()


def step_original_loop_with_retain_graph(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2, l_both = losses(m1(x1), m2(x2))
    opt1.zero_grad()
    (l1 + l_both).backward(retain_graph=True)
    opt1.step()
    opt2.zero_grad()
    l2.backward()
    opt2.step()


def step_forgets_m2(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    l1, _, l_both = losses(m1(x1), m2(x2))
    (l1 + l_both).backward(inputs=list(m1.parameters()))
    opt1.step()


def step_m2_twice(m1, m2, opt1, opt2, x1, x2, losses):
    step_restricted(m1, m2, opt1, opt2, x1, x2, losses)
    opt2.step()


def step_manual_update(m1, m2, opt1, opt2, x1, x2, losses):
    step_restricted(m1, m2, opt1, opt2, x1, x2, losses)
    with torch.no_grad():
        m1[0].weight.mul_(0.99)


def step_without_retain_graph(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2, l_both = losses(m1(x1), m2(x2))
    l1.backward(inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    l_both.backward()
    opt1.step()
    opt2.step()


def step_swapping_loss_arguments(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    o1, o2 = m1(x1), m2(x2)
    l1 = losses(o1, o2.detach())[0]
    l2 = losses(o2, o1.detach())[0]  # right only when the losses are symmetric
    (l1 + l2 + losses(o1, o2)[2]).backward()
    opt1.step()
    opt2.step()


def step_zero_grad_after_backward(m1, m2, opt1, opt2, x1, x2, losses):
    l1, l2, l_both = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(retain_graph=True, inputs=list(m2.parameters()))
    l_both.backward()
    opt1.zero_grad()
    opt2.zero_grad()
    opt1.step()
    opt2.step()


def step_with_half_the_loss(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2, l_both = losses(m1(x1), m2(x2))
    (0.5 * (l1 + l_both)).backward(retain_graph=True, inputs=list(m1.parameters()))
    (0.5 * (l2 + l_both)).backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()


def step_remembering_the_first_batch():
    batch = {}

    def two_model_step(m1, m2, opt1, opt2, x1, x2, losses):
        if not batch:
            batch["x"] = (x1.clone(), x2.clone())     # "cache the data on the first call"
        step_restricted(m1, m2, opt1, opt2, *batch["x"], losses)

    return two_model_step


_own_optimizers = {}


def step_with_its_own_optimizers(m1, m2, opt1, opt2, x1, x2, losses):
    if id(m1) not in _own_optimizers:                 # built once, kept at module level
        _own_optimizers[id(m1)] = (torch.optim.SGD(m1.parameters(), lr=0.1), torch.optim.SGD(m2.parameters(), lr=0.1))
    step_restricted(m1, m2, *_own_optimizers[id(m1)], x1, x2, losses)


def step_freezing_each_model_in_turn(m1, m2, opt1, opt2, x1, x2, losses):
    opt1.zero_grad()
    opt2.zero_grad()
    m2.requires_grad_(False)                           # M2 frozen: M1's losses cannot reach it
    o1 = m1(x1)
    l1, _, both = losses(o1, m2(x2))
    (l1 + both).backward()
    m2.requires_grad_(True)
    m1.requires_grad_(False)                           # now M1 frozen for M2's losses - and never unfrozen
    _, l2, both = losses(m1(x1), m2(x2))
    (l2 + both).backward()
    opt1.step()
    opt2.step()


def step_disabling_grad(m1, m2, opt1, opt2, x1, x2, losses):
    torch.set_grad_enabled(False)
    raise RuntimeError("oops")


# ---------------------------------------------------------------- chained_amp_step (05)


def _chain_losses(tenc, unet, x, target, mask):
    with torch.autocast(x.device.type):
        loss = F.mse_loss(unet(tenc(x)), target, reduction="none")
        return loss.mean(), (loss * mask).mean()


def _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm):
    for optimizer, module in ((opt_tenc, tenc), (opt_unet, unet)):
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(module.parameters(), max_norm)
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_unet_backward_first(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_unet.zero_grad()
    opt_tenc.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_unet).backward(retain_graph=True, inputs=list(unet.parameters()))
    scaler.scale(loss_tenc).backward()
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_tenc_stepped_early(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.unscale_(opt_tenc)
    torch.nn.utils.clip_grad_norm_(tenc.parameters(), max_norm)
    scaler.step(opt_tenc)                      # safe: unet's restricted backward never visits tenc
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.unscale_(opt_unet)
    torch.nn.utils.clip_grad_norm_(unet.parameters(), max_norm)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_autograd_grad(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    trainable = [p for p in tenc.parameters() if p.requires_grad]    # some of tenc's weights may be frozen
    grads_tenc = torch.autograd.grad(scaler.scale(loss_tenc), trainable, retain_graph=True)
    grads_unet = torch.autograd.grad(scaler.scale(loss_tenc + loss_unet), list(unet.parameters()))
    for p, g in zip([*trainable, *unet.parameters()], [*grads_tenc, *grads_unet]):
        p.grad = g
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_running_unet_twice(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    """No retain_graph: the masked loss runs unet again on the detached hidden state, one backward for both."""
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    with torch.autocast(x.device.type):
        hidden_state = tenc(x)
        end_to_end = F.mse_loss(unet(hidden_state), target, reduction="none").mean()
        masked = (F.mse_loss(unet(hidden_state.detach()), target, reduction="none") * mask).mean()
    scaler.scale(end_to_end + masked).backward()
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_as_widely_shared(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
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


def amp_step_corrected_recipe_of_section_4(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True, inputs=list(tenc.parameters()))
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_summed(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc + loss_unet).backward()
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_masked_loss_only_for_unet_and_tenc_swapped(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask,
                                                       max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_unet).backward(retain_graph=True)            # the masked loss end to end
    scaler.scale(loss_tenc).backward(inputs=list(unet.parameters()))
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_without_zero_grad(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_without_update(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    for optimizer, module in ((opt_tenc, tenc), (opt_unet, unet)):
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(module.parameters(), max_norm)
    scaler.step(opt_tenc)
    scaler.step(opt_unet)


def amp_step_updating_twice(*args):
    amp_step(*args)
    args[4].update()


def amp_step_unet_stepped_first(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_unet).backward(retain_graph=True, inputs=list(unet.parameters()))
    scaler.unscale_(opt_unet)
    torch.nn.utils.clip_grad_norm_(unet.parameters(), max_norm)
    scaler.step(opt_unet)                      # too early: loss_tenc's backward passes through unet
    scaler.scale(loss_tenc).backward(inputs=list(tenc.parameters()))
    scaler.unscale_(opt_tenc)
    torch.nn.utils.clip_grad_norm_(tenc.parameters(), max_norm)
    scaler.step(opt_tenc)
    scaler.update()


def amp_step_without_autocast(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss = F.mse_loss(unet(tenc(x)), target, reduction="none")
    loss_tenc, loss_unet = loss.mean(), (loss * mask).mean()
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_clipping_before_unscale(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    torch.nn.utils.clip_grad_norm_(tenc.parameters(), max_norm)     # clips the scaled gradient
    torch.nn.utils.clip_grad_norm_(unet.parameters(), max_norm)
    scaler.step(opt_tenc)                                           # unscales only now
    scaler.step(opt_unet)
    scaler.update()


def amp_step_without_clipping(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_clipping_both_together(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    scaler.unscale_(opt_tenc)
    scaler.unscale_(opt_unet)
    torch.nn.utils.clip_grad_norm_([*tenc.parameters(), *unet.parameters()], max_norm)
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    scaler.update()


def amp_step_bypassing_the_scaler(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    for optimizer, module in ((opt_tenc, tenc), (opt_unet, unet)):
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(module.parameters(), max_norm)
    opt_tenc.step()                            # an inf in the gradient goes straight into the weights
    opt_unet.step()
    scaler.update()


def amp_step_skipping_everything_on_overflow(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    grads = [p.grad for p in [*tenc.parameters(), *unet.parameters()] if p.grad is not None]
    if not all(torch.isfinite(g).all() for g in grads):
        return                                 # "skip the bad step" - both modules, and no update()
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_no_update_after_overflow(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet).backward(inputs=list(unet.parameters()))
    finite = all(torch.isfinite(p.grad).all() for p in tenc.parameters())
    for optimizer, module in ((opt_tenc, tenc), (opt_unet, unet)):
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(module.parameters(), max_norm)
    scaler.step(opt_tenc)
    scaler.step(opt_unet)
    if finite:
        scaler.update()                        # "nothing to update after a skipped step"


def amp_step_half_loss(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    opt_unet.zero_grad()
    loss_tenc, loss_unet = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(retain_graph=True)
    scaler.scale(loss_unet / 2).backward(inputs=list(unet.parameters()))
    _clip_and_step(tenc, unet, opt_tenc, opt_unet, scaler, max_norm)


def amp_step_raises(*args):
    raise RuntimeError("oops")


def amp_step_forgets_unet(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    opt_tenc.zero_grad()
    loss_tenc, _ = _chain_losses(tenc, unet, x, target, mask)
    scaler.scale(loss_tenc).backward(inputs=list(tenc.parameters()))
    scaler.unscale_(opt_tenc)
    torch.nn.utils.clip_grad_norm_(tenc.parameters(), max_norm)
    scaler.step(opt_tenc)
    scaler.update()


def amp_step_remembering_the_first_batch():
    batch = {}

    def chained_amp_step(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
        batch.setdefault("data", (x.clone(), target.clone(), mask.clone()))
        amp_step(tenc, unet, opt_tenc, opt_unet, scaler, *batch["data"], max_norm)

    return chained_amp_step


_scalers = {}


def amp_step_with_its_own_scaler(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    own = _scalers.setdefault(id(tenc), torch.amp.GradScaler(x.device.type))   # kept from call to call
    amp_step(tenc, unet, opt_tenc, opt_unet, own, x, target, mask, max_norm)


def amp_step_freezing_tenc(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm):
    amp_step(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm)
    tenc.requires_grad_(False)                 # "tenc is done for this step" - the next step gets no gradient


OTHER_CORRECT = {
    "head_weight_grad": [head_grad_through_detached_features, head_grad_by_hand, head_grad_backward_then_restore],
    "parameters_reached": [reached_via_autograd_grad, reached_recursively, reached_breadth_first],
    "two_grads": [two_grads_both_kept, two_grads_second_first, two_grads_one_loop],
    "bumps_per_step": [bumps_on_linear_layers, bumps_in_one_optimizer_with_two_groups],
    "two_model_step": [step_with_autograd_grad, step_with_detach, step_each_model_its_sum,
                       step_early_step_restricted, step_joint_loss_detached_for_each],
    "chained_amp_step": [amp_step_unet_backward_first, amp_step_tenc_stepped_early, amp_step_autograd_grad,
                         amp_step_running_unet_twice],
}

_STATEFUL_HEAD = remembering(head_grad)
_STATEFUL_REACHED = reached_remembered_per_dict()
_STATEFUL_TWO_GRADS = two_grads_remembered_per_model()
_STATEFUL_BUMPS = remembered_by_optimizer_class()
_STATEFUL_STEP = step_remembering_the_first_batch()
_STATEFUL_AMP = amp_step_remembering_the_first_batch()

WRONG_ANSWERS = {
    "head_weight_grad": [
        (forgets_zero_grad, "adds into .grad"),
        (backward_and_clone, "changed model[0].weight.grad"),
        (backward_restricted_to_the_weight, "changed model[2].weight.grad"),
        (sums_instead_of_mean, "32 times too large"),
        (divides_by_the_first_batch_size, "divides by 32"),
        (leaves_gradient_tracking_off, "returned with gradient tracking switched off"),
        (writes_into_the_weight_without_changing_it, "wrote into model[2].weight in place"),
        (returns_the_tuple, "returned a tuple"),
        (takes_the_first_layer, "another parameter"),
        (takes_a_step, "changed the model's parameters"),
        (backward_twice, "raised Error 1: backward through the graph a second time"),
        (fails_its_own_assert, "raised AssertionError: my own check"),
        (forgets_return, "returned None"),
        (lambda model, x, target: model[-1].weight, "differs from the reference"),
        (lambda model, x, target: 2 * head_grad(model, x, target), "differs from the reference"),
        (changes_the_inputs, "changed the input `x` in place"),
        (hits_a_torch_not_implemented_error, "raised NotImplementedError"),
        (calls_exit, "raised SystemExit"),
        (lambda model, x, target: Unprintable(), "could not be compared"),
        (42, "should be a function"),
        (_STATEFUL_HEAD, "returned the gradient of the first call"),
        (remembers_in_a_global, "It remembers an earlier call"),
        (freezes_the_body, "requires_grad changed"),
        (leaving_eval_mode(head_grad), "eval mode"),
        (leaving_anomaly_on(head_grad), "left anomaly detection switched on"),
    ],
    "parameters_reached": [
        (follows_only_the_first_input, "misses"),
        (names_every_parameter, "includes M2"),
        (names_the_first_model_only, "The shared term connects L1 to M2"),
        (returns_the_tensors, "names (strings"),
        (reached_as_a_list, "a set, not a list"),
        (forgets_none_nodes, "raised AttributeError"),
        (lambda loss, params: {name: True for name in params}, "not dict"),
        (lambda loss, params: {n for n, p in params.items() if p in [loss]}, "compare identities"),
        (reached_via_autograd_grad_freeing, "freed the saved tensors of the loss's graph"),
        (reached_via_backward, "filled M1.0.weight.grad, which was empty"),
        (_STATEFUL_REACHED, "does it remember an earlier call"),
        (freezes_what_it_finds, "requires_grad changed"),
        (leaving_anomaly_on(reached_recursively), "left anomaly detection switched on"),
    ],
    "two_grads": [
        (two_grads_without_retain_graph, "pass retain_graph=True"),
        (two_grads_as_in_the_notebook, "the caller's own backward afterwards raises error 1"),
        (two_grads_reverse_order_freeing, "your function freed the graph"),
        (two_grads_bumping_the_weights, "raises error 2"),
        (two_grads_swapped, "M1 got the gradient of L2"),
        (two_grads_by_backward_on_both, "backward() adds into .grad"),
        (two_grads_with_restricted_backward, "changed M1.0.weight.grad"),
        (two_grads_one_list, "return a pair"),
        (lambda l1, l2, p1, p2: (torch.autograd.grad(l1, p1, retain_graph=True),
                                 torch.autograd.grad(l1, p2, retain_graph=True)), "M2 got the gradient of L1"),
        (lambda l1, l2, p1, p2: ([None] * len(p1), [None] * len(p2)), "are None"),
        (_STATEFUL_TWO_GRADS, "remembers an earlier call"),
        (two_grads_freezing_the_other, "requires_grad changed"),
    ],
    "bumps_per_step": [
        (bumps_without_a_gradient, "Did the parameter have a .grad"),
        (returns_the_versions_themselves, "one bump too many"),
        (counts_two_steps, "did you step twice"),
        (types_in_the_numbers, "or return fixed numbers"),
        (ignores_weight_decay, "did you pass weight_decay to make_optimizer"),
        (pair_the_wrong_way_round, "the wrong way round"),
        (returns_one_number, "Return a pair of ints"),
        (_STATEFUL_BUMPS, "exactly your answer for AdamW()"),
        (changes_the_default_dtype, "left the default dtype at torch.float64"),
        (leaving_anomaly_on(lambda make: (_bumps(make, 0.01), _bumps(make, 0.0))), "left anomaly detection"),
    ],
    "two_model_step": [
        (step_copied_fix, "L2 leaked into M1"),
        (step_summed_loss, "L2 leaked into M1"),
        (step_swapped, "should get 1 x L1 + 1 x L_both"),
        (step_forgets_the_joint_loss, "L_both never reached M1"),
        (step_without_zero_grad, "gradients pile up"),
        (step_original_loop_with_retain_graph, "raised Error 2"),
        (step_forgets_m2, "M2's optimizer was never stepped"),
        (step_m2_twice, "stepped 2 times"),
        (step_manual_update, "other than through the optimizers"),
        (step_without_retain_graph, "raised Error 1"),
        (step_swapping_loss_arguments, "asymmetric losses"),
        (step_zero_grad_after_backward, "zero_grad() before the backward passes"),
        (step_with_half_the_loss, "0.5 times the reference's"),
        (step_disabling_grad, "raised RuntimeError: oops"),
        (_STATEFUL_STEP, "the gradient of the previous batch"),
        (step_with_its_own_optimizers, "an optimizer of your own"),
        (step_freezing_each_model_in_turn, "left M1's parameters with requires_grad changed"),
        (leaving_eval_mode(step_restricted, 1), "eval mode"),
        (leaving_anomaly_on(step_restricted), "left anomaly detection"),
    ],
    "chained_amp_step": [
        (amp_step_as_widely_shared, "runs through unet"),
        (amp_step_corrected_recipe_of_section_4, "loss_tenc never reached unet"),
        (amp_step_summed, "loss_unet leaked into it"),
        (amp_step_masked_loss_only_for_unet_and_tenc_swapped, "loss_unet leaked into it"),
        (amp_step_without_zero_grad, "still held the previous step's"),
        (amp_step_without_update, "scaler.update() was called 0 times"),
        (amp_step_updating_twice, "a second update() in one step"),
        (amp_step_forgets_unet, "unet's optimizer was never stepped"),
        (amp_step_raises, "raised RuntimeError: oops"),
        (amp_step_unet_stepped_first, "unet was stepped before tenc's backward"),
        (amp_step_without_autocast, "ran without autocast"),
        (amp_step_half_loss, "mixed unevenly"),
        (amp_step_clipping_before_unscale, "clipped before it was unscaled"),
        (amp_step_without_clipping, "was not clipped"),
        (amp_step_clipping_both_together, "clipped together with the other module's"),
        (amp_step_bypassing_the_scaler, "that step must be skipped"),
        (amp_step_skipping_everything_on_overflow, "unet's step was skipped too"),
        (amp_step_no_update_after_overflow, "the scale did not shrink"),
        (_STATEFUL_AMP, "the gradient of the previous batch"),
        (amp_step_with_its_own_scaler, "scaler.update() was called 0 times"),
        (amp_step_freezing_tenc, "requires_grad changed"),
        (leaving_eval_mode(amp_step, 1), "eval mode"),
    ],
}

# The classes of wrong answer every checker of notebooks 00-05 must catch (issue 13, item 9), by exercise.
CLASSES = {
    "head_weight_grad": {"carries state": [_STATEFUL_HEAD, remembers_in_a_global],
                         "changes unmentioned state": [backward_and_clone, freezes_the_body]},
    "parameters_reached": {"carries state": [_STATEFUL_REACHED],
                           "changes unmentioned state": [reached_via_backward, reached_via_autograd_grad_freeing,
                                                         freezes_what_it_finds]},
    "two_grads": {"carries state": [_STATEFUL_TWO_GRADS],
                  "changes unmentioned state": [two_grads_with_restricted_backward, two_grads_freezing_the_other]},
    "bumps_per_step": {"carries state": [_STATEFUL_BUMPS], "changes unmentioned state": [changes_the_default_dtype]},
    "two_model_step": {"carries state": [_STATEFUL_STEP, step_with_its_own_optimizers],
                       "changes unmentioned state": [step_freezing_each_model_in_turn]},
    "chained_amp_step": {"carries state": [_STATEFUL_AMP, amp_step_with_its_own_scaler],
                         "changes unmentioned state": [amp_step_freezing_tenc],
                         "clips before unscale_": [amp_step_clipping_before_unscale],
                         "mishandles the inf step": [amp_step_bypassing_the_scaler,
                                                     amp_step_skipping_everything_on_overflow,
                                                     amp_step_no_update_after_overflow]},
}

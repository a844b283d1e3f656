"""helpers.course.exercises.engine.step_watch and twins: watched optimizers record what each step was given, of any kind,
a twin replays each step to prove it was the optimizer's own, and a snapshot names every change a step must not
make."""
import pytest
import torch
from torch import nn

from helpers.course.exercises.engine import step_watch, twins


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))


@pytest.mark.parametrize("kind", list(step_watch.optimizer_kinds()))
def test_a_watched_optimizer_of_any_kind_records_its_gradients_and_weights(kind):
    model = _model()
    log = []
    optimizer = step_watch.kind(kind)(model.parameters())
    record = step_watch.watch(optimizer, "M", log)
    model(torch.ones(2, 3)).sum().backward()
    start = [p.detach().clone() for p in model.parameters()]
    optimizer.step()
    assert log == ["M: step"] and len(record.calls) == 1
    call = record.calls[0]
    assert all(torch.equal(g, p.grad) for g, p in zip(call.grads, model.parameters()))
    assert all(torch.equal(b, s) for b, s in zip(call.before, start))
    assert not step_watch.moved_outside_step(list(model.parameters()), start, record.calls)
    assert type(optimizer).__module__.startswith("torch.optim"), "the learner gets the real optimizer"


def test_sgd_adam_and_adamw_are_among_the_kinds_and_fused_falls_back_when_missing():
    kinds = step_watch.optimizer_kinds()
    assert {"SGD", "Adam", "AdamW"} <= set(kinds)
    assert step_watch.kind("fused Adam") is not None


def test_a_change_outside_step_is_seen_before_between_and_after_steps():
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    record = step_watch.watch(optimizer, "M")
    start = [p.detach().clone() for p in model.parameters()]
    model(torch.ones(2, 3)).sum().backward()
    optimizer.step()
    assert not step_watch.moved_outside_step(list(model.parameters()), start, record.calls)
    with torch.no_grad():
        model[0].weight.mul_(0.5)
    assert step_watch.moved_outside_step(list(model.parameters()), start, record.calls)
    assert step_watch.moved_outside_step(list(model.parameters()), start, [])


def test_leftover_grad_allows_nothing_zero_or_the_stepped_gradient_only():
    model = _model()
    model(torch.ones(2, 3)).sum().backward()
    given = [p.grad.clone() for p in model.parameters()]
    assert not step_watch.leftover_grad(list(model.parameters()), given)
    model.zero_grad(set_to_none=False)
    assert not step_watch.leftover_grad(list(model.parameters()), given)
    model(torch.ones(2, 3)).sum().mul(3).backward()
    assert step_watch.leftover_grad(list(model.parameters()), given)


@pytest.mark.parametrize("change, words", [
    (lambda m, x, o: x.mul_(2), "changed the input `x` in place"),
    (lambda m, x, o: x.requires_grad_(), "changed the input `x`"),
    (lambda m, x, o: m.requires_grad_(False), "requires_grad changed"),
    (lambda m, x, o: m.eval(), "left the model (or one of its layers) in eval mode"),
    (lambda m, x, o: m[0].train(False), "in eval mode"),
    (lambda m, x, o: o.param_groups[0].update(lr=1.0), "changed opt's settings"),
    (lambda m, x, o: setattr(m, "0", nn.Linear(3, 4)), "replaced parameters of the model"),
    (lambda m, x, o: torch.autograd.set_detect_anomaly(True), "anomaly detection"),
])
def test_a_snapshot_names_each_change_a_step_must_not_make(change, words):
    model, x = _model(), torch.ones(2, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    args = ({"x": x}, {"the model": model}, {"opt": optimizer})
    before = step_watch.snapshot(*args)
    assert step_watch.changed(before, *args) is None
    try:
        change(model, x, optimizer)
        assert words in step_watch.changed(before, *args)
    finally:
        torch.autograd.set_detect_anomaly(False)


def test_fill_in_place_keeps_the_tensor_objects():
    x = torch.zeros(3)
    (same,) = step_watch.fill_in_place((x,), (torch.ones(3),))
    assert same is x and torch.equal(x, torch.ones(3))


def test_where_moved_says_before_between_or_after_the_steps():
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    record = step_watch.watch(optimizer, "M")
    params = list(model.parameters())
    start = [p.detach().clone() for p in params]
    for _ in range(2):
        model(torch.ones(2, 3)).sum().backward()
        optimizer.step()
    assert step_watch.where_moved(params, start, record.calls) is None
    record.calls[1].before[0] += 1.0
    assert step_watch.where_moved(params, start, record.calls) == "between"
    with torch.no_grad():
        model[0].weight.add_(1.0)
    assert step_watch.where_moved(params, start, record.calls[:1]) == "after"
    assert step_watch.where_moved(params, [s + 1 for s in start], record.calls) == "before"


def test_a_snapshot_names_the_parameters_of_a_module_known_by_its_variable_name():
    model = _model()
    before = step_watch.snapshot({}, {"head_b": model}, {})
    model[2].requires_grad_(False)
    assert "changed requires_grad (head_b.2.weight, head_b.2.bias)" in step_watch.changed(before, {}, {"head_b": model},
                                                                                          {})
    model[2].requires_grad_(True)
    before = step_watch.snapshot({}, {"the model": model}, {})
    model[2].requires_grad_(False)
    assert "(the model.2" not in step_watch.changed(before, {}, {"the model": model}, {}), "prose names list nothing"
    model[2].requires_grad_(True)
    model.eval()
    assert "the model is now in eval mode" in step_watch.changed(before, {}, {"the model": model}, {})
    model.train()
    model[0].eval()
    assert "its layer 0 is now in eval mode" in step_watch.changed(before, {}, {"the model": model}, {})


def test_a_snapshot_sees_an_optimizer_given_more_parameters():
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = step_watch.snapshot({}, {}, {"opt": optimizer})
    optimizer.add_param_group({"params": [nn.Parameter(torch.zeros(1))]})
    assert "changed opt's settings" in step_watch.changed(before, {}, {}, {"opt": optimizer})


def test_fused_kinds_are_fused_exactly_where_this_torch_has_them():
    for name in ("fused Adam", "fused AdamW"):
        optimizer = step_watch.kind(name)(_model().parameters())
        fused = name in step_watch.optimizer_kinds()
        assert bool(optimizer.defaults.get("fused")) == fused
        assert step_watch.available(name) == (name if fused else name.replace("fused ", ""))


# ------------------------------------------------------------------ twins: replaying the recorded steps


def _bn_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))


def _train_step(model, optimizer, x):
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()


def _watched(model, name):
    make = step_watch.kind(name)
    optimizer = make(model.parameters())
    return optimizer, step_watch.watch(optimizer, "opt"), twins.TwinOptimizer(make, model.parameters())


@pytest.mark.parametrize("kind", list(step_watch.optimizer_kinds()))
def test_a_twin_replays_every_plain_step_of_any_kind_exactly(kind):
    model = _bn_model()
    optimizer, record, twin = _watched(model, kind)
    for seed in range(3):   # the twin's state (momentum, Adam's moments) follows the real optimizer's
        start, count = twins.weights(model.parameters()), len(record.calls)
        x = torch.randn(5, 3, generator=torch.Generator().manual_seed(seed))
        reference = twins.copy_module(model)
        expected = torch.autograd.grad(reference(x).pow(2).mean(), list(reference.parameters()))
        _train_step(model, optimizer, x)
        new = step_watch.calls_in(record, count)
        assert len(new) == 1 and twin.replay(list(model.parameters()), start, new) is None
        assert all(torch.allclose(g, e, atol=1e-6) for g, e in zip(new[0].grads, expected))


def test_a_twin_says_where_the_weights_changed_outside_the_step():
    model = _bn_model()
    optimizer, record, twin = _watched(model, "Adam")
    params, x = list(model.parameters()), torch.randn(5, 3)
    start = twins.weights(params)
    _train_step(model, optimizer, x)
    with torch.no_grad():
        model[0].weight.mul_(0.5)
    assert twin.replay(params, start, record.calls[-1:]) == "after"

    start = twins.weights(params)
    mine = torch.optim.SGD(model.parameters(), lr=0.1)   # an optimizer of the learner's own
    _train_step(model, mine, x)
    assert twin.replay(params, start, []) == "before"


def test_a_twin_sees_a_step_that_is_not_the_optimizers_own_update():
    model = _bn_model()
    make = step_watch.kind("SGD")
    optimizer = make(model.parameters())
    optimizer.register_step_post_hook(lambda *_: model[0].weight.data.mul_(0.5))   # runs inside step()
    record, twin = step_watch.watch(optimizer, "opt"), twins.TwinOptimizer(make, model.parameters())
    start = twins.weights(model.parameters())
    _train_step(model, optimizer, torch.randn(5, 3))
    assert twin.replay(list(model.parameters()), start, record.calls) == "in"


def test_copy_module_keeps_mode_and_buffers_drops_grad_and_holds_the_weights_given():
    model = _bn_model().eval()
    model(torch.randn(5, 3)).sum().backward()
    at = [torch.full_like(p, 0.5) for p in model.parameters()]
    copy = twins.copy_module(model, at)
    assert not copy.training and all(p.grad is None for p in copy.parameters())
    assert all(torch.equal(b, c) for b, c in zip(model.buffers(), copy.buffers()))
    assert all(torch.equal(p, a) for p, a in zip(copy.parameters(), at))
    assert model[0].weight.grad is not None, "the original is left as it was"

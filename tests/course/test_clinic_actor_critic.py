"""Notebook 06, case 2 (helpers.course.lesson06_bug_clinic.actor_critic): the broken step really fails, the silent
bugs really differ from the reference, and the reference step really steps each parameter once with the right
gradient; and the exercise's A2C checker (actor_critic_exercise)."""
import pytest
import torch

from helpers.course.lesson06_bug_clinic.actor_critic import (
    actor_critic_losses,
    change_of,
    grads_of,
    make_actor_critic,
    make_batch,
    reference_gradients,
    reference_step,
    relative_error,
    two_optimizers_sharing_the_trunk,
    weights_of,
)
from helpers.course.recording import RecordingSGD
from helpers.tools.diagnosis import diagnose
from helpers.tools.errors import KINDS


def popular_step(model, actor_opt, critic_opt, states, actions, returns, retain_graph=False):
    """The notebook's broken step: critic backward and step, then the actor's backward on the same graph."""
    logits, value = model(states)
    advantage = returns - value
    critic_loss = advantage.pow(2).mean()
    critic_opt.zero_grad()
    critic_loss.backward(retain_graph=retain_graph)
    critic_opt.step()
    actor_loss = -(torch.distributions.Categorical(logits=logits).log_prob(actions) * advantage).mean()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()


def every_backward_then_both_steps(model, actor_opt, critic_opt, states, actions, returns, detach=False):
    """The tempting fix: retain_graph=True and every backward before the two steps (optionally detached)."""
    logits, value = model(states)
    actor_loss, critic_loss = actor_critic_losses(logits, value, actions, returns, detach_advantage=detach)
    actor_opt.zero_grad()
    critic_opt.zero_grad()
    critic_loss.backward(retain_graph=True)
    actor_loss.backward()
    critic_opt.step()
    actor_opt.step()


def setup(seed=0):
    model = make_actor_critic(seed=seed)
    return model, *two_optimizers_sharing_the_trunk(model), *make_batch(seed=seed)


def test_model_and_batch_are_seeded_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    first, second = make_actor_critic(seed=3), make_actor_critic(seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), second.parameters()))
    assert not torch.equal(first.critic.weight, make_actor_critic(seed=4).critic.weight)
    states, actions, returns = make_batch(seed=1)
    assert torch.equal(states, make_batch(seed=1)[0])
    logits, value = first(states)
    assert logits.shape == (8, 3) and value.shape == (8,) and actions.dtype == torch.int64


def test_the_trunk_is_in_both_optimizers_and_each_head_in_one():
    model, actor_opt, critic_opt, *_ = setup()

    def ids(optimizer):
        return {id(p) for group in optimizer.param_groups for p in group["params"]}

    trunk = {id(p) for p in model.trunk.parameters()}
    assert trunk <= ids(actor_opt) and trunk <= ids(critic_opt)
    assert not {id(p) for p in model.critic.parameters()} & ids(actor_opt)
    assert not {id(p) for p in model.actor.parameters()} & ids(critic_opt)


def test_the_popular_step_raises_error_1():
    with pytest.raises(RuntimeError) as caught:
        popular_step(*setup())
    assert KINDS["backward-twice"].matches(caught.value)


def test_with_retain_graph_it_raises_error_2_on_the_critic_heads_weight():
    model, actor_opt, critic_opt, states, actions, returns = setup()
    logits, value = model(states)
    actor_loss, critic_loss = actor_critic_losses(logits, value, actions, returns, detach_advantage=False)
    critic_loss.backward(retain_graph=True)
    critic_opt.step()
    report = diagnose(actor_loss, dict(model.named_parameters()))
    assert report.prediction == "inplace-version"
    assert [problem.parameter for problem in report.problems] == ["critic.weight"]
    with pytest.raises(RuntimeError) as caught:
        popular_step(*setup(), retain_graph=True)
    assert KINDS["inplace-version"].matches(caught.value)


def test_a_detached_advantage_hides_error_2_though_the_trunk_changed():
    model, actor_opt, critic_opt, states, actions, returns = setup()
    logits, value = model(states)
    actor_loss, critic_loss = actor_critic_losses(logits, value, actions, returns)
    critic_loss.backward(retain_graph=True)
    critic_opt.step()
    assert not diagnose(actor_loss, dict(model.named_parameters())).will_fail   # nothing saved is stale...
    actor_loss.backward()   # ...so it runs, from what the forward saved; only its step lands on moved weights


def test_the_undetached_advantage_changes_the_critic_head_and_trunk_not_the_actor_head():
    model, _, _, states, actions, returns = setup()
    right = reference_gradients(model, states, actions, returns)
    leaky = reference_gradients(model, states, actions, returns, detach_advantage=False)
    assert relative_error(leaky, right, "actor") < 1e-6
    assert relative_error(leaky, right, "critic") > 1e-2 and relative_error(leaky, right, "trunk") > 1e-2


def test_the_tempting_fix_runs_but_the_critic_head_receives_the_actors_push():
    model, actor_opt, critic_opt, states, actions, returns = setup()
    expected = reference_gradients(model, states, actions, returns)
    every_backward_then_both_steps(model, actor_opt, critic_opt, states, actions, returns)
    received = grads_of(model)
    assert relative_error(received, expected, "actor") < 1e-4
    assert relative_error(received, expected, "critic") > 1e-2


def test_two_optimizers_move_the_trunk_twice_as_far_even_with_a_detached_advantage():
    model, actor_opt, critic_opt, states, actions, returns = setup()
    initial = weights_of(model)
    every_backward_then_both_steps(model, actor_opt, critic_opt, states, actions, returns, detach=True)
    reference_model = make_actor_critic(seed=0)
    reference_step(reference_model, torch.optim.Adam(reference_model.parameters(), lr=actor_opt.defaults["lr"]),
                   states, actions, returns)
    ratio = change_of(model, initial, "trunk") / change_of(reference_model, initial, "trunk")
    assert ratio == pytest.approx(2, rel=0.02)
    for head in ("actor", "critic"):   # each head is in one optimizer: it moves as far as in the reference
        assert change_of(model, initial, head) == pytest.approx(change_of(reference_model, initial, head), rel=1e-3)


def test_reference_step_steps_once_with_the_reference_gradient():
    model, _, _, states, actions, returns = setup()
    expected = reference_gradients(model, states, actions, returns)
    optimizer = RecordingSGD(model.parameters())
    reference_step(model, optimizer, states, actions, returns)
    assert len(optimizer.records) == 1
    for (name, _), grad in zip(model.named_parameters(), optimizer.records[0]):
        assert torch.allclose(grad, expected[name], rtol=1e-5, atol=1e-7), name


def test_reference_gradients_leave_grad_untouched():
    model, _, _, states, actions, returns = setup()
    reference_gradients(model, states, actions, returns)
    assert all(p.grad is None for p in model.parameters())


# The exercise: the A2C update with three optimizers (helpers.course.lesson06_bug_clinic.actor_critic_exercise)
def test_the_entropy_bonus_reaches_the_actor_head_and_the_trunk_never_the_critic_head():
    from helpers.course.lesson06_bug_clinic.actor_critic_exercise import term_gradients

    model, _, _, states, actions, returns = setup()
    terms = term_gradients(model, states, actions, returns)
    assert relative_error(terms["entropy"], {k: torch.ones_like(v) for k, v in terms["entropy"].items()}, "actor") > 0
    assert all(not bool(terms["entropy"][name].abs().sum()) for name in terms["entropy"] if name.startswith("critic"))
    assert all(not bool(terms["leak"][name].abs().sum()) for name in terms["leak"] if name.startswith("actor"))
    assert any(bool(terms["leak"][name].abs().sum()) for name in terms["leak"] if name.startswith("critic"))


@pytest.mark.parametrize("part", ["trunk", "actor", "critic"])
def test_the_fit_recovers_the_weight_each_term_got(part):
    from helpers.course.lesson06_bug_clinic.actor_critic_exercise import fit, term_gradients

    model, _, _, states, actions, returns = setup()
    terms = term_gradients(model, states, actions, returns)
    weights = {"actor": 0.7, "critic": 1.3, "entropy": -0.2, "leak": 1.0}
    mixture = {name: sum(w * terms[term][name] for term, w in weights.items()) for name in terms["actor"]}
    got = fit(mixture, terms, part)
    for term, weight in weights.items():
        if any(bool(terms[term][name].abs().sum()) for name in terms[term] if name.startswith(part)):
            assert got[term] == pytest.approx(weight, rel=1e-4), term
    noise = {name: torch.randn_like(g) for name, g in mixture.items()}
    assert fit(noise, terms, part) is None


def test_the_a2c_checker_varies_coefficients_and_optimizer_kinds():
    from helpers.course.lesson06_bug_clinic.actor_critic_exercise import SESSIONS

    assert len({(s.value_coef, s.entropy_coef) for s in SESSIONS}) == len(SESSIONS)
    assert all(s.value_coef != 1 for s in SESSIONS), "a forgotten value_coef must show"
    kinds = {kind for s in SESSIONS for kind in s.kinds.values()}
    assert {"SGD", "AdamW"} <= kinds and any("fused" in kind for kind in kinds)
    assert {s.refill_in_place for s in SESSIONS} == {True, False}

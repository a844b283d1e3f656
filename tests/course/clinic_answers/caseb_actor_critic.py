"""Notebook 06, case 2 (actor-critic with a shared trunk): answers for the checker of ``actor_critic_step``.

The exercise is the A2C update: ``actor_loss + value_coef * critic_loss - entropy_coef * entropy``, with three
optimizers (trunk, actor head, critic head).
"""
import torch
import torch.nn.functional as F


def _log_prob(logits, actions):
    return torch.log_softmax(logits, dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def _entropy(logits):
    return torch.distributions.Categorical(logits=logits).entropy().mean()


def _zero(*optimizers):
    for optimizer in optimizers:
        optimizer.zero_grad()


def _step(*optimizers):
    for optimizer in optimizers:
        optimizer.step()


def _terms(model, states, actions, returns):
    logits, value = model(states)
    actor_loss = -(_log_prob(logits, actions) * (returns - value).detach()).mean()
    critic_loss = (returns - value).pow(2).mean()
    return actor_loss, critic_loss, _entropy(logits), logits, value


# Other correct answers
def a2c_one_backward(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef, entropy_coef):
    _zero(opt_trunk, opt_actor, opt_critic)
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (actor_loss + value_coef * critic_loss - entropy_coef * entropy).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def a2c_autograd_grad(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef, entropy_coef):
    """torch.autograd.grad of the total loss, written into .grad by hand; the steps in another order."""
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    params = [p for p in model.parameters() if p.requires_grad]        # a frozen weight has no gradient
    grads = torch.autograd.grad(actor_loss + value_coef * critic_loss - entropy_coef * entropy, params)
    for param, grad in zip(params, grads):
        param.grad = grad
    _step(opt_critic, opt_trunk, opt_actor)


def a2c_backward_per_term(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                          entropy_coef):
    """One backward per term (the graph kept for the next), model.zero_grad(), the entropy written by hand."""
    model.zero_grad()
    logits, value = model(states)
    with torch.no_grad():
        advantage = returns - value
    probs, log_probs = F.softmax(logits, dim=-1), F.log_softmax(logits, dim=-1)
    negative_entropy = (probs * log_probs).sum(dim=-1).mean()
    (value_coef * F.mse_loss(value, returns)).backward(retain_graph=True)
    (entropy_coef * negative_entropy).backward(retain_graph=True)
    (-(log_probs[torch.arange(len(actions)), actions] * advantage).mean()).backward()
    _step(opt_actor, opt_critic, opt_trunk)


def a2c_distribution_api(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                         entropy_coef):
    """Categorical's log_prob and entropy; the critic head stepped first (safe: every backward is done)."""
    for optimizer in (opt_critic, opt_actor, opt_trunk):
        optimizer.zero_grad(set_to_none=False)
    logits, value = model(states)
    policy = torch.distributions.Categorical(logits=logits)
    advantage = (returns - value).detach()
    loss = (-(policy.log_prob(actions) * advantage).mean() + value_coef * ((value - returns) ** 2).mean()
            - entropy_coef * policy.entropy().mean())
    loss.backward()
    _step(opt_critic, opt_actor, opt_trunk)


# Wrong answers
def worked_fix_with_the_new_terms_and_one_step(model, opt_trunk, opt_actor, opt_critic, states, actions, returns,
                                               value_coef, entropy_coef):
    """The worked fix's single step carried over: only the trunk's optimizer is stepped."""
    _zero(opt_trunk, opt_actor, opt_critic)
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (actor_loss + value_coef * critic_loss - entropy_coef * entropy).backward()
    opt_trunk.step()


def advantage_not_detached(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                           entropy_coef):
    _zero(opt_trunk, opt_actor, opt_critic)
    logits, value = model(states)
    actor_loss = -(_log_prob(logits, actions) * (returns - value)).mean()
    loss = actor_loss + value_coef * (returns - value).pow(2).mean() - entropy_coef * _entropy(logits)
    loss.backward()
    _step(opt_trunk, opt_actor, opt_critic)


def entropy_detached(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef, entropy_coef):
    """The detach spread to the new term: "the bonus is just a number"."""
    _zero(opt_trunk, opt_actor, opt_critic)
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (actor_loss + value_coef * critic_loss - entropy_coef * entropy.detach()).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def entropy_added(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef, entropy_coef):
    _zero(opt_trunk, opt_actor, opt_critic)
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (actor_loss + value_coef * critic_loss + entropy_coef * entropy).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def entropy_summed_over_the_batch(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                                  entropy_coef):
    _zero(opt_trunk, opt_actor, opt_critic)
    actor_loss, critic_loss, _, logits, _ = _terms(model, states, actions, returns)
    entropy = torch.distributions.Categorical(logits=logits).entropy().sum()
    (actor_loss + value_coef * critic_loss - entropy_coef * entropy).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def value_coef_forgotten(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                         entropy_coef):
    _zero(opt_trunk, opt_actor, opt_critic)
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (actor_loss + critic_loss - entropy_coef * entropy).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def value_coef_hard_coded(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                          entropy_coef):
    """The usual A2C constants typed in instead of the arguments: right only when they happen to match."""
    _zero(opt_trunk, opt_actor, opt_critic)
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (actor_loss + 0.5 * critic_loss - entropy_coef * entropy).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def value_coef_on_the_whole_loss(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                                 entropy_coef):
    _zero(opt_trunk, opt_actor, opt_critic)
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (value_coef * (actor_loss + critic_loss) - entropy_coef * entropy).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def value_detached_for_the_critic(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                                  entropy_coef):
    """One detached advantage reused in the critic's loss: the critic's loss becomes a constant."""
    _zero(opt_trunk, opt_actor, opt_critic)
    logits, value = model(states)
    advantage = (returns - value).detach()
    loss = (-(_log_prob(logits, actions) * advantage).mean() + value_coef * advantage.pow(2).mean()
            - entropy_coef * _entropy(logits))
    loss.backward()
    _step(opt_trunk, opt_actor, opt_critic)


def trunk_stepped_per_head(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                           entropy_coef):
    """A backward per head, the trunk stepped after each: the trunk moves twice."""
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    _zero(opt_trunk, opt_critic)
    (value_coef * critic_loss).backward(retain_graph=True)
    opt_critic.step()
    opt_trunk.step()
    _zero(opt_trunk, opt_actor)
    (actor_loss - entropy_coef * entropy).backward()
    opt_actor.step()
    opt_trunk.step()


def critic_head_forgotten(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                          entropy_coef):
    _zero(opt_trunk, opt_actor, opt_critic)
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (actor_loss + value_coef * critic_loss - entropy_coef * entropy).backward()
    _step(opt_trunk, opt_actor)


def critic_never_zeroed(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                        entropy_coef):
    _zero(opt_trunk, opt_actor)
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (actor_loss + value_coef * critic_loss - entropy_coef * entropy).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def zero_grad_between_backward_passes(model, opt_trunk, opt_actor, opt_critic, states, actions, returns,
                                      value_coef, entropy_coef):
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    _zero(opt_trunk, opt_actor, opt_critic)
    (value_coef * critic_loss).backward(retain_graph=True)
    _zero(opt_trunk, opt_actor, opt_critic)
    (actor_loss - entropy_coef * entropy).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def features_detached_for_the_critic(model, opt_trunk, opt_actor, opt_critic, states, actions, returns,
                                     value_coef, entropy_coef):
    _zero(opt_trunk, opt_actor, opt_critic)
    features = model.trunk(states)
    logits, value = model.actor(features), model.critic(features.detach()).squeeze(-1)
    loss = (-(_log_prob(logits, actions) * (returns - value).detach()).mean()
            + value_coef * (returns - value).pow(2).mean() - entropy_coef * _entropy(logits))
    loss.backward()
    _step(opt_trunk, opt_actor, opt_critic)


def anneals_the_entropy_coef(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                             entropy_coef):
    """State across calls: a call counter on the function itself decays the entropy bonus."""
    calls = getattr(anneals_the_entropy_coef, "calls", 0)
    anneals_the_entropy_coef.calls = calls + 1
    a2c_one_backward(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                     entropy_coef * 0.9 ** calls)


_shared = {}


def one_adam_kept_between_calls(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                                entropy_coef):
    """State across calls: one Adam over the whole model, built on the first call, instead of the three given."""
    optimizer = _shared.setdefault(id(model), torch.optim.Adam(model.parameters(), lr=0.01))
    optimizer.zero_grad()
    actor_loss, critic_loss, entropy, _, _ = _terms(model, states, actions, returns)
    (actor_loss + value_coef * critic_loss - entropy_coef * entropy).backward()
    optimizer.step()


def baseline_in_eval_mode(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                          entropy_coef):
    """An eval-mode pass for the baseline, and the model never put back in training mode."""
    model.eval()
    with torch.no_grad():
        _, baseline = model(states)
    _zero(opt_trunk, opt_actor, opt_critic)
    logits, value = model(states)
    loss = (-(_log_prob(logits, actions) * (returns - baseline)).mean()
            + value_coef * (returns - value).pow(2).mean() - entropy_coef * _entropy(logits))
    loss.backward()
    _step(opt_trunk, opt_actor, opt_critic)


def normalises_returns_in_place(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                                entropy_coef):
    returns.sub_(returns.mean()).div_(returns.std() + 1e-8)
    a2c_one_backward(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef, entropy_coef)


def divides_by_the_notebook_batch(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                                  entropy_coef):
    """Each term summed over the batch, then divided by the notebook's 8 rows: right only for batches of 8."""
    _zero(opt_trunk, opt_actor, opt_critic)
    logits, value = model(states)
    policy = torch.distributions.Categorical(logits=logits)
    actor_loss = -(policy.log_prob(actions) * (returns - value).detach()).sum() / 8
    critic_loss = (returns - value).pow(2).sum() / 8
    (actor_loss + value_coef * critic_loss - entropy_coef * policy.entropy().sum() / 8).backward()
    _step(opt_trunk, opt_actor, opt_critic)


def unfreezes_the_model(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef, entropy_coef):
    """requires_grad_(True) on the whole model "so every part learns": a weight handed over frozen is trained."""
    model.requires_grad_(True)
    a2c_one_backward(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef, entropy_coef)


def puts_the_model_in_training_mode(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef,
                                    entropy_coef):
    model.train()
    a2c_one_backward(model, opt_trunk, opt_actor, opt_critic, states, actions, returns, value_coef, entropy_coef)


OTHER_CORRECT = {
    "actor_critic_step": [a2c_one_backward, a2c_autograd_grad, a2c_backward_per_term, a2c_distribution_api],
}

WRONG_ANSWERS = {
    "actor_critic_step": [
        (worked_fix_with_the_new_terms_and_one_step, "opt_actor was never stepped"),
        (advantage_not_detached, "was not detached"),
        (entropy_detached, "no gradient from the entropy bonus"),
        (entropy_added, "the bonus has the wrong sign"),
        (entropy_summed_over_the_batch, "summed over the batch"),
        (value_coef_forgotten, "value_coef = 0.5 was not applied"),
        (value_coef_hard_coded, "where the contract asks for value_coef = 2"),
        (value_coef_on_the_whole_loss, "the actor's loss reached the actor head with weight 0.5"),
        (value_detached_for_the_critic, "got nothing from the critic's loss"),
        (trunk_stepped_per_head, "opt_trunk was stepped 2 times"),
        (critic_head_forgotten, "opt_critic was never stepped"),
        (critic_never_zeroed, "opt_critic was stepped with a gradient that still held the previous update's"),
        (zero_grad_between_backward_passes, "its .grad was empty when opt_critic stepped"),
        (features_detached_for_the_critic, "a .detach() on the trunk's features for the critic head"),
        (anneals_the_entropy_coef, "where the contract asks for -entropy_coef"),
        (one_adam_kept_between_calls, "not through opt_trunk"),
        (baseline_in_eval_mode, "left the model (or one of its layers) in eval mode"),
        (normalises_returns_in_place, "changed the input `returns` in place"),
        (divides_by_the_notebook_batch, "is a batch size written into your code?"),
        (unfreezes_the_model, "`model.trunk.0.weight.requires_grad` came back True"),
        (puts_the_model_in_training_mode, "came back in training mode; it was handed to you in eval mode"),
    ],
}

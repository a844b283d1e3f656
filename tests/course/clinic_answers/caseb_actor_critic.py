"""Notebook 06, case 2 (actor-critic with a shared trunk): answers for the checker of ``actor_critic_step``."""
import torch
import torch.nn.functional as F


def _log_prob(logits, actions):
    return torch.log_softmax(logits, dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)


# Other correct answers
def step_with_autograd_grad(model, optimizer, states, actions, returns):
    """torch.autograd.grad of the summed loss, written into .grad by hand."""
    logits, value = model(states)
    advantage = (returns - value).detach()
    loss = -(_log_prob(logits, actions) * advantage).mean() + (returns - value).pow(2).mean()
    params = list(model.parameters())
    for param, grad in zip(params, torch.autograd.grad(loss, params)):
        param.grad = grad
    optimizer.step()


def step_two_backward_then_one_step(model, optimizer, states, actions, returns):
    """Two backward passes (the first keeps the shared graph), Categorical, an advantage made under no_grad."""
    optimizer.zero_grad()
    logits, value = model(states)
    with torch.no_grad():
        advantage = returns - value
    actor_loss = -(torch.distributions.Categorical(logits=logits).log_prob(actions) * advantage).mean()
    critic_loss = F.mse_loss(value, returns)
    critic_loss.backward(retain_graph=True)
    actor_loss.backward()
    optimizer.step()


def step_with_a_second_forward_for_the_advantage(model, optimizer, states, actions, returns):
    """The advantage from a separate no-grad forward pass (same weights, same numbers); zero_grad(set_to_none=False)."""
    optimizer.zero_grad(set_to_none=False)
    with torch.no_grad():
        _, baseline = model(states)
    logits, value = model(states)
    actor_loss = -(F.log_softmax(logits, dim=1)[torch.arange(len(actions)), actions] * (returns - baseline)).mean()
    critic_loss = ((value - returns) ** 2).mean()
    (critic_loss + actor_loss).backward()
    optimizer.step()


# Wrong answers
def broken_as_written(model, optimizer, states, actions, returns):
    """The popular step with one optimizer: critic backward and step, then the actor's backward on the same graph."""
    logits, value = model(states)
    advantage = returns - value
    critic_loss = advantage.pow(2).mean()
    optimizer.zero_grad()
    critic_loss.backward()
    optimizer.step()
    actor_loss = -(_log_prob(logits, actions) * advantage).mean()
    optimizer.zero_grad()
    actor_loss.backward()
    optimizer.step()


def retain_graph_critic_stepped_first(model, optimizer, states, actions, returns):
    """retain_graph=True, the fix for error 1: now error 2, on the critic head's weight."""
    logits, value = model(states)
    advantage = returns - value
    critic_loss = advantage.pow(2).mean()
    optimizer.zero_grad()
    critic_loss.backward(retain_graph=True)
    optimizer.step()
    actor_loss = -(_log_prob(logits, actions) * advantage).mean()
    optimizer.zero_grad()
    actor_loss.backward()
    optimizer.step()


def retain_graph_every_backward_then_step(model, optimizer, states, actions, returns):
    """The tempting fix: retain_graph=True and every backward before the step. Runs; the advantage is not detached."""
    optimizer.zero_grad()
    logits, value = model(states)
    advantage = returns - value
    critic_loss = advantage.pow(2).mean()
    actor_loss = -(_log_prob(logits, actions) * advantage).mean()
    critic_loss.backward(retain_graph=True)
    actor_loss.backward()
    optimizer.step()


def detached_advantage_but_stepped_twice(model, optimizer, states, actions, returns):
    """Advantage detached, retain_graph=True, the critic stepped first: runs, but the trunk moves twice."""
    logits, value = model(states)
    critic_loss = (returns - value).pow(2).mean()
    optimizer.zero_grad()
    critic_loss.backward(retain_graph=True)
    optimizer.step()
    actor_loss = -(_log_prob(logits, actions) * (returns - value).detach()).mean()
    optimizer.zero_grad()
    actor_loss.backward()
    optimizer.step()


def features_detached_for_the_critic(model, optimizer, states, actions, returns):
    """.detach() on the trunk's features for the critic head: no error, but the trunk never learns the critic's loss."""
    optimizer.zero_grad()
    features = model.trunk(states)
    logits = model.actor(features)
    value = model.critic(features.detach()).squeeze(-1)
    advantage = (returns - value).detach()
    (-(_log_prob(logits, actions) * advantage).mean() + (returns - value).pow(2).mean()).backward()
    optimizer.step()


def forgets_zero_grad(model, optimizer, states, actions, returns):
    logits, value = model(states)
    advantage = (returns - value).detach()
    (-(_log_prob(logits, actions) * advantage).mean() + (returns - value).pow(2).mean()).backward()
    optimizer.step()


def detaches_the_critic_loss_too(model, optimizer, states, actions, returns):
    """One detached advantage used in both losses: the critic's loss becomes a constant."""
    optimizer.zero_grad()
    logits, value = model(states)
    advantage = (returns - value).detach()
    (-(_log_prob(logits, actions) * advantage).mean() + advantage.pow(2).mean()).backward()
    optimizer.step()


def weights_the_critic_by_half(model, optimizer, states, actions, returns):
    optimizer.zero_grad()
    logits, value = model(states)
    advantage = (returns - value).detach()
    (-(_log_prob(logits, actions) * advantage).mean() + 0.5 * (returns - value).pow(2).mean()).backward()
    optimizer.step()


def zero_grad_between_the_backward_passes(model, optimizer, states, actions, returns):
    """zero_grad() before each loss's backward, one step: the critic's gradient is wiped before the step."""
    logits, value = model(states)
    optimizer.zero_grad()
    (returns - value).pow(2).mean().backward(retain_graph=True)
    optimizer.zero_grad()
    (-(_log_prob(logits, actions) * (returns - value).detach()).mean()).backward()
    optimizer.step()


def builds_its_own_adam(model, optimizer, states, actions, returns):
    """The popular two optimizers, built inside the step: the trunk in both, and not the optimizer it was given."""
    trunk = list(model.trunk.parameters())
    actor_opt = torch.optim.Adam(trunk + list(model.actor.parameters()), lr=0.01)
    critic_opt = torch.optim.Adam(trunk + list(model.critic.parameters()), lr=0.01)
    actor_opt.zero_grad()
    critic_opt.zero_grad()
    logits, value = model(states)
    advantage = (returns - value).detach()
    (-(_log_prob(logits, actions) * advantage).mean() + (returns - value).pow(2).mean()).backward()
    critic_opt.step()
    actor_opt.step()


OTHER_CORRECT = {
    "actor_critic_step": [step_with_autograd_grad, step_two_backward_then_one_step,
                          step_with_a_second_forward_for_the_advantage],
}

WRONG_ANSWERS = {
    "actor_critic_step": [
        (broken_as_written, "freed the graph of the shared trunk"),
        (retain_graph_critic_stepped_first, "which the actor's loss reaches through the undetached advantage"),
        (retain_graph_every_backward_then_step, "was not detached"),
        (detached_advantage_but_stepped_twice, "optimizer.step() was called 2 times"),
        (features_detached_for_the_critic, "cuts the critic's loss off from the trunk"),
        (forgets_zero_grad, "gradients pile up"),
        (detaches_the_critic_loss_too, "the critic head received no gradient at all"),
        (weights_the_critic_by_half, "0.5 times the gradient of the critic's loss"),
        (zero_grad_between_the_backward_passes, "its .grad was empty when the optimizer stepped"),
        (builds_its_own_adam, "not through the optimizer you were given"),
    ],
}

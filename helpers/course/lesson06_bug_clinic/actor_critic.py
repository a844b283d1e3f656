"""Clinic case 2: actor-critic with a shared trunk.

One network: a shared trunk (``Linear -> ReLU``) feeds an actor head (logits over a few discrete actions) and a
critic head (one value per state). The actor learns from the advantage ``returns - value``, the critic learns
to predict the returns.

The correct step, as the course defines it (``reference_step``):

- one forward pass;
- ``advantage = (returns - value).detach()``: for the actor, the advantage is a constant weight on the
  log-probabilities, so the actor's loss never reaches the critic head;
- ``actor_loss + critic_loss``, so the trunk receives the gradient of both losses, each head only its own;
- every backward before any step, and each parameter in exactly one optimizer, stepped once.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.seeds import fresh

STATE_FEATURES = 4
HIDDEN = 16  # the critic head is Linear(16, 1): its saved transposed weight is error 2's [16, 1] tensor
N_ACTIONS = 3
BATCH = 8
LEARNING_RATE = 1e-2
PARTS = ("trunk", "actor", "critic")  # the prefixes of the parameter names, for reports


class ActorCritic(nn.Module):
    """A shared trunk and two heads; ``forward(states)`` returns ``(logits, value)``.

    Shapes: states ``[B, 4]`` -> logits ``[B, 3]`` and value ``[B]``.
    """

    def __init__(self, state_features: int = STATE_FEATURES, hidden: int = HIDDEN, n_actions: int = N_ACTIONS) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(state_features, hidden), nn.ReLU())
        self.actor = nn.Linear(hidden, n_actions)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, states: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        features = self.trunk(states)
        return self.actor(features), self.critic(features).squeeze(-1)


def make_actor_critic(seed: int = 0, device: Optional[torch.device] = None) -> ActorCritic:
    """The case's network, initialised from ``seed`` (the global RNG is left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        model = ActorCritic()
    return model.to(device or "cpu")


def make_batch(
    seed: int = 0, batch: int = BATCH, device: Optional[torch.device] = None
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fixed tiny batch: ``states [B, 4]``, the ``actions [B]`` taken (integers), their ``returns [B]``."""
    generator = torch.Generator().manual_seed(fresh(seed + 3000))
    states = torch.randn(batch, STATE_FEATURES, generator=generator)
    actions = torch.randint(0, N_ACTIONS, (batch,), generator=generator)
    returns = torch.randn(batch, generator=generator)
    return states.to(device or "cpu"), actions.to(device or "cpu"), returns.to(device or "cpu")


def two_optimizers_sharing_the_trunk(
    model: ActorCritic, lr: float = LEARNING_RATE
) -> Tuple[torch.optim.Optimizer, torch.optim.Optimizer]:
    """The popular set-up: ``actor_opt = Adam(trunk + actor head)``, ``critic_opt = Adam(trunk + critic head)``.

    Both hold the trunk. Plain (non-fused) Adam, so each step bumps the weights' version counters.
    """
    trunk = list(model.trunk.parameters())
    actor_opt = torch.optim.Adam(trunk + list(model.actor.parameters()), lr=lr, fused=False)
    critic_opt = torch.optim.Adam(trunk + list(model.critic.parameters()), lr=lr, fused=False)
    return actor_opt, critic_opt


def log_probs(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """``log pi(action | state)`` for each row: the log-softmax of the logits at the action taken."""
    return F.log_softmax(logits, dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def actor_critic_losses(
    logits: torch.Tensor, value: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor,
    detach_advantage: bool = True,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(actor_loss, critic_loss)`` from one forward pass.

    ``actor_loss = -(log_prob(actions) * advantage).mean()`` and ``critic_loss = (returns - value).pow(2).mean()``,
    with ``advantage = returns - value``, detached unless ``detach_advantage=False`` (the silent bug).
    """
    advantage = returns - value
    if detach_advantage:
        advantage = advantage.detach()
    actor_loss = -(log_probs(logits, actions) * advantage).mean()
    critic_loss = (returns - value).pow(2).mean()
    return actor_loss, critic_loss


def gradients(model: nn.Module, loss: torch.Tensor) -> Dict[str, torch.Tensor]:
    """The gradient of ``loss`` for every parameter of ``model``, by name (zeros where it does not reach).

    Uses ``torch.autograd.grad``: ``.grad`` is left untouched and the graph is kept.
    """
    names, params = zip(*model.named_parameters())
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return {name: torch.zeros_like(p) if g is None else g for name, p, g in zip(names, params, grads)}


def reference_gradients(
    model: ActorCritic, states: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor,
    detach_advantage: bool = True,
) -> Dict[str, torch.Tensor]:
    """The gradient a correct step gives each parameter: of ``actor_loss + critic_loss``, at the current weights.

    With ``detach_advantage=False``: what the undetached advantage gives instead.
    """
    logits, value = model(states)
    actor_loss, critic_loss = actor_critic_losses(logits, value, actions, returns, detach_advantage)
    return gradients(model, actor_loss + critic_loss)


def reference_step(
    model: ActorCritic, optimizer: torch.optim.Optimizer, states: torch.Tensor, actions: torch.Tensor,
    returns: torch.Tensor,
) -> None:
    """One correct update with ONE optimizer over all of ``model``'s parameters.

    One forward, a detached advantage, one backward of ``actor_loss + critic_loss``, one step: the trunk gets
    the gradient of both losses, the actor head only the actor's, the critic head only the critic's.
    """
    optimizer.zero_grad()
    logits, value = model(states)
    actor_loss, critic_loss = actor_critic_losses(logits, value, actions, returns)
    (actor_loss + critic_loss).backward()
    optimizer.step()


def part_of(name: str) -> str:
    """``"trunk"``, ``"actor"`` or ``"critic"``: which part of the network a parameter name is in."""
    return name.split(".", 1)[0]


def relative_error(actual: Dict[str, torch.Tensor], expected: Dict[str, torch.Tensor], part: str) -> float:
    """``|actual - expected| / |expected|`` over all parameters of ``part`` (norms of the concatenated tensors)."""
    names = [name for name in expected if part_of(name) == part]
    a = torch.cat([actual[name].detach().flatten().cpu() for name in names])
    e = torch.cat([expected[name].detach().flatten().cpu() for name in names])
    return float((a - e).norm() / e.norm().clamp_min(1e-12))


def grads_of(model: nn.Module) -> Dict[str, torch.Tensor]:
    """Every parameter's ``.grad`` by name, cloned (zeros where it is None)."""
    return {name: torch.zeros_like(p) if p.grad is None else p.grad.detach().clone()
            for name, p in model.named_parameters()}


def weights_of(model: nn.Module) -> Dict[str, torch.Tensor]:
    """Every parameter's current value by name, cloned."""
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def change_of(model: nn.Module, before: Dict[str, torch.Tensor], part: str) -> float:
    """How far the parameters of ``part`` moved since ``before``: the norm of the concatenated differences."""
    moved = [(p.detach() - before[name]).flatten() for name, p in model.named_parameters() if part_of(name) == part]
    return float(torch.cat(moved).norm())

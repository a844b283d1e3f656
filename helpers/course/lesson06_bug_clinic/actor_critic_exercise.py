"""Exercise of notebook 06, case 2: one actor-critic update on a network whose trunk both heads share.

Fixed contract: ``actor_critic_step(model, optimizer, states, actions, returns)``; ``model(states)`` returns
``(logits, value)`` and ``optimizer`` holds all of the model's parameters. One call: one update with the gradient of
``actor_loss + critic_loss``, the advantage ``returns - value`` treated as a constant in the actor's loss.
The checker steps the learner's function with an optimizer that records the gradient it is stepped with, and
compares each part of the network (trunk, actor head, critic head) with plain-torch references.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Set

import torch

from helpers.course.exercises.compare import added, close, flattened, same_gradients, scale_factor
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson06_bug_clinic.actor_critic import (
    ActorCritic,
    actor_critic_losses,
    gradients,
    make_actor_critic,
    make_batch,
    part_of,
)
from helpers.course.recording import RecordingSGD

EXERCISE_ID = "actor_critic_step"
STEPS = 3
SEED = 47
LEARNING_RATE = 0.1  # RecordingSGD's

HINTS = (
    "A right step moves every parameter once: the trunk with the gradient of both losses, the actor head with the "
    "actor's loss only, the critic head with the critic's loss only - all taken before anything changes.",
    "advantage = returns - value carries the value's graph, so the actor's loss reaches (and pushes) the critic "
    "head unless you detach it; a backward after a step meets weights that changed; a trunk in two optimizers, "
    "or two step() calls, moves it twice.",
    "One optimizer, one forward pass, one backward of the sum of both losses, one step. The advantage that "
    "weights the actor's log-probability must be a constant for the actor: .detach() it. The critic's loss is the "
    "mean squared difference between returns and values.",
)

Grads = Dict[str, torch.Tensor]
PART_WORDS = {"trunk": "the shared trunk", "actor": "the actor head", "critic": "the critic head"}


def _candidates(model: ActorCritic, states: torch.Tensor, actions: torch.Tensor,
                returns: torch.Tensor) -> Dict[str, Grads]:
    """Every gradient a parameter could plausibly be stepped with, computed on a copy at the current weights."""
    twin = copy.deepcopy(model)
    logits, value = twin(states)
    actor, critic = actor_critic_losses(logits, value, actions, returns)
    actor_undetached, _ = actor_critic_losses(logits, value, actions, returns, detach_advantage=False)
    return {"right": gradients(twin, actor + critic), "undetached": gradients(twin, actor_undetached + critic),
            "actor": gradients(twin, actor), "critic": gradients(twin, critic)}


def _of(grads: Dict[str, Optional[torch.Tensor]], part: str) -> List[Optional[torch.Tensor]]:
    return [g for name, g in grads.items() if part_of(name) == part]


def _matches(recorded: Dict[str, Optional[torch.Tensor]], expected: Grads, part: str) -> bool:
    return same_gradients(_of(recorded, part), _of(expected, part))


def _is_empty(grads: List[Optional[torch.Tensor]]) -> bool:
    return all(g is None or not bool(g.abs().sum()) for g in grads)


def _diagnose(recorded: Dict[str, Optional[torch.Tensor]], cand: Dict[str, Grads],
              previous: Optional[Dict[str, Optional[torch.Tensor]]], computed: Set[str], step: int) -> str:
    """Say, in learner words, why ``recorded`` is not the right gradient."""
    where = f"On step {step}"
    for part in ("trunk", "actor", "critic"):
        if _is_empty(_of(recorded, part)) and part in computed:
            return (f"{where}, a gradient for {PART_WORDS[part]} was computed, but its .grad was empty when the "
                    "optimizer stepped: call zero_grad() once, before the backward passes, never between a "
                    "backward and the step.")
    if previous is not None and same_gradients(list(recorded.values()), added(list(cand["right"].values()),
                                                                             list(previous.values()))):
        return (f"{where}, the gradient still contained the previous step's: gradients pile up in .grad. "
                "Call optimizer.zero_grad() at the start of each step.")
    if _matches(recorded, cand["undetached"], "critic"):
        return (f"{where}, the critic head was stepped with the critic's gradient plus a push from the actor's loss: "
                "advantage = returns - value was not detached, so the actor's loss flows back through the value "
                "into the critic head (and the trunk). Use advantage = (returns - value).detach() in the actor's loss.")
    if _is_empty(_of(recorded, "critic")):
        return (f"{where}, the critic head received no gradient at all: the critic's loss was cut off from the value. "
                "Did you detach value (or the advantage) in the critic's loss too? Detach only in the actor's loss.")
    if _is_empty(_of(recorded, "actor")):
        return (f"{where}, the actor head received no gradient at all: was the actor's loss left out of the backward, "
                "or computed from detached logits?")
    heads_right = _matches(recorded, cand["right"], "actor") and _matches(recorded, cand["right"], "critic")
    if heads_right and _matches(recorded, cand["actor"], "trunk"):
        return (f"{where}, the trunk received the actor's gradient only, nothing from the critic's loss: a .detach() "
                "on the trunk's features for the critic head cuts the critic's loss off from the trunk. The trunk "
                "must learn from both losses: detach the advantage, not the features.")
    if heads_right and _matches(recorded, cand["critic"], "trunk"):
        return (f"{where}, the trunk received the critic's gradient only, nothing from the actor's loss: a .detach() "
                "on the trunk's features for the actor head cuts the actor's loss off from the trunk. The trunk "
                "must learn from both losses: detach the advantage, not the features.")
    for part, loss in (("critic", "critic"), ("actor", "actor")):
        mine = _of(cand[loss], part)
        if not _matches(recorded, cand["right"], part):
            factor = scale_factor(flattened(_of(recorded, part), mine), flattened(mine, mine))
            if factor is not None:
                return (f"{where}, {PART_WORDS[part]} was stepped with {factor:.3g} times the gradient of the "
                        f"{loss}'s loss. The contract is actor_loss + critic_loss, unweighted, each a mean over the "
                        "batch.")
    wrong = [PART_WORDS[part] for part in ("trunk", "actor", "critic") if not _matches(recorded, cand["right"], part)]
    return (f"{where}, the gradient of {' and '.join(wrong)} differs from the gradient of actor_loss + critic_loss at "
            "the current weights. Use one forward pass, the losses exactly as the contract states them "
            "(log-softmax at the action taken, mean over the batch), and compute every gradient before the step.")


_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise
    "inplace-version": (
        "A backward ran after a step had changed weights its graph saved - usually the critic head's "
        "weight, which the actor's loss reaches through the undetached advantage. Run every backward "
        "before the one step, and detach the advantage."
    ),
    "backward-twice": (
        "The critic's backward freed the graph of the shared trunk (and of the value) before the "
        "actor's loss used it. Do one backward of actor_loss + critic_loss; retain_graph=True alone "
        "leads to error 2 or to a trunk stepped twice."
    ),
}


def _watch(model: ActorCritic, computed: Set[str]) -> List[Any]:
    """Hooks that note which parts of the network some backward computed a gradient for."""
    return [p.register_hook(lambda grad, part=part_of(name): computed.add(part))
            for name, p in model.named_parameters()]


def _check(step_function: Callable[..., Any]) -> Optional[str]:
    """Run the learner's step for several consecutive steps; the diagnosis, or None when every step was right."""
    model = make_actor_critic(seed=SEED)
    optimizer = RecordingSGD(model.parameters(), lr=LEARNING_RATE)
    names = [name for name, _ in model.named_parameters()]
    previous: Optional[Dict[str, Optional[torch.Tensor]]] = None
    for step in range(1, STEPS + 1):
        states, actions, returns = make_batch(seed=SEED + step)
        cand = _candidates(model, states, actions, returns)
        count = len(optimizer.records)
        before = [p.detach().clone() for p in model.parameters()]
        computed: Set[str] = set()
        hooks = _watch(model, computed)
        try:
            run_step(step_function, step, model, optimizer, states, actions, returns, explanations=_ERROR_EXPLANATIONS)
        finally:
            for hook in hooks:
                hook.remove()
        calls = len(optimizer.records) - count
        moved = not all(close(p.detach(), b) for p, b in zip(model.parameters(), before))
        if calls == 0:
            if moved:
                return (f"On step {step}, the weights changed, but not through the optimizer you were given: "
                        "step with `optimizer`; do not build your own.")
            return f"On step {step}, the optimizer was never stepped: call optimizer.step() once, after the backward."
        if calls > 1:
            return (f"On step {step}, optimizer.step() was called {calls} times: every parameter, the shared trunk "
                    f"included, moved {calls} times, and whatever backward ran after the first step used a graph "
                    "whose weights had changed (a trunk held by two optimizers moves twice the same way). Run every "
                    "backward first, then step once.")
        grads_used = optimizer.records[-1]
        expected_after = [b - LEARNING_RATE * (torch.zeros_like(b) if g is None else g)
                          for b, g in zip(before, grads_used)]
        if not all(close(p.detach(), e) for p, e in zip(model.parameters(), expected_after)):
            return (f"On step {step}, the weights changed other than through optimizer.step(). "
                    "Change weights only with the optimizer you were given.")
        recorded = dict(zip(names, grads_used))
        if not same_gradients(list(recorded.values()), list(cand["right"].values())):
            return _diagnose(recorded, cand, previous, computed, step)
        previous = recorded
    return None


def check_actor_critic_step(step_function: Callable[..., Any]) -> CheckResult:
    """Run the learner's step for several consecutive steps and compare each part's gradient with plain torch."""
    diagnosis = _check(step_function)
    if diagnosis is not None:
        return failed(EXERCISE_ID, diagnosis)
    return passed(EXERCISE_ID, f"For {STEPS} consecutive steps the optimizer was stepped once, with exactly the "
                               "gradient of actor_loss + critic_loss: the trunk learned from both losses, the actor "
                               "head only from the actor's, the critic head only from the critic's (the advantage "
                               "was a constant), all taken before the weights changed.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="actor_critic_step",
    checker=check_actor_critic_step,
    hints=HINTS,
)

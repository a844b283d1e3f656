"""Exercise of notebook 06, case 2: the A2C update - an entropy bonus, a value coefficient, three optimizers.

Fixed contract: ``actor_critic_step(model, opt_trunk, opt_actor, opt_critic, states, actions, returns,
value_coef, entropy_coef) -> None``. ``model(states)`` returns ``(logits, value)``; ``opt_trunk``, ``opt_actor`` and
``opt_critic`` hold the trunk's, the actor head's and the critic head's parameters (each parameter in exactly one).
One call, from one forward pass:

- ``actor_loss = -(log_prob * advantage).mean()``, ``advantage = returns - value`` a constant;
- ``critic_loss = (returns - value).pow(2).mean()``;
- ``entropy = Categorical(logits=logits).entropy().mean()``, NOT a constant: the bonus trains the actor head and
  the trunk;
- ``loss = actor_loss + value_coef * critic_loss - entropy_coef * entropy``; each optimizer steps exactly once with
  the gradient of ``loss`` for its parameters, all taken at the weights the call started with.

What has to transfer from the worked fix (one optimizer, ``actor_loss + critic_loss``): the detach belongs to the
advantage only, not to the new entropy term; the coefficients weight the terms; three optimizers each step once,
after every backward.

The checker runs sessions of consecutive updates with other optimizer kinds per part, other coefficients and new
data every step (fresh tensors, or the same tensors refilled in place), records the gradient each ``step()`` was
given, and explains a wrong gradient by fitting it, part by part, as a combination of the terms' gradients:
which coefficient each term really got, and whether the advantage leaked into the critic head.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Set

import torch

from helpers.course.exercises.compare import same_gradients
from helpers.course.exercises.engine import step_watch
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson06_bug_clinic.actor_critic import (
    BATCH,
    ActorCritic,
    actor_critic_losses,
    gradients,
    make_actor_critic,
    make_batch,
    part_of,
)
from helpers.course.lesson06_bug_clinic.actor_critic_contract import CONTRACT
from helpers.language import marked, space, tr, translated

EXERCISE_ID = "actor_critic_step"
STEPS = 3
PARTS = ("trunk", "actor", "critic")
OPTIMIZER_NAMES = {"trunk": "opt_trunk", "actor": "opt_actor", "critic": "opt_critic"}
PART_WORDS = {"trunk": marked("the shared trunk"), "actor": marked("the actor head"),  # shown with part_words
              "critic": marked("the critic head")}


@dataclass(frozen=True)
class Session:
    """One run of consecutive updates: the seed, each part's optimizer kind, the coefficients, how data arrives."""

    seed: int
    kinds: Dict[str, str]
    value_coef: float
    entropy_coef: float
    refill_in_place: bool

    def describe(self) -> str:
        return f"value_coef={self.value_coef}, entropy_coef={self.entropy_coef}"


SESSIONS = (
    Session(47, {"trunk": "SGD", "actor": "SGD", "critic": "SGD"}, 0.5, 0.05, False),
    Session(48, {"trunk": "fused Adam", "actor": "SGD with momentum", "critic": "AdamW"}, 2.0, 0.1, True),
    Session(49, {"trunk": "AdamW", "actor": "Adam", "critic": "SGD"}, 0.25, 0.2, False),
)

HINTS = (
    marked("Usually nothing fails: the update runs, and a part is stepped with the wrong gradient - the critic head "
           "pushed by the actor's loss, the actor head without the entropy bonus, a term with the wrong weight or "
           "sign - or a backward between two steps raises error 1 or 2, or the shared trunk is stepped twice."),
    marked("advantage = returns - value carries the value's graph, so without a detach the actor's loss pushes the "
           "critic head; the entropy is not a target but a term to maximise, so a detach there removes the bonus; a "
           "coefficient on the wrong term, or a sign, changes what each part learns; a step between two backward "
           "passes moves weights the next one still needs."),
    marked("One forward pass. Detach the advantage and nothing else. The entropy is that of the Categorical "
           "distribution of the logits, averaged over the batch. Build one total loss with the coefficients (the "
           "entropy subtracted), zero all three optimizers, one backward, then step each of the three once."),
)

_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise
    "inplace-version": marked(
        "A backward ran after a step had changed weights its graph saved - usually the critic head's weight, "
        "which the actor's loss reaches through an undetached advantage, or a head stepped between two backward "
        "passes. Do every backward first, then the three steps."
    ),
    "backward-twice": marked(
        "A first backward freed the graph of the shared trunk before another loss used it. Build one total loss "
        "and do one backward."
    ),
}

Grads = Dict[str, torch.Tensor]


def part_words(part: str) -> str:
    """How a diagnosis names ``part`` ("the shared trunk"), in the chosen language."""
    return translated(PART_WORDS[part])


def term_gradients(model: ActorCritic, states: torch.Tensor, actions: torch.Tensor,
                   returns: torch.Tensor) -> Dict[str, Grads]:
    """Each term's gradient at the current weights, on a copy: ``"actor"`` (advantage detached), ``"leak"`` (what an
    undetached advantage adds), ``"critic"``, ``"entropy"`` (of the mean entropy)."""
    twin = copy.deepcopy(model)
    with torch.enable_grad():
        logits, value = twin(states)
        actor, critic = actor_critic_losses(logits, value, actions, returns)
        leaky, _ = actor_critic_losses(logits, value, actions, returns, detach_advantage=False)
        entropy = torch.distributions.Categorical(logits=logits).entropy().mean()
        terms = {"actor": gradients(twin, actor), "critic": gradients(twin, critic),
                 "entropy": gradients(twin, entropy)}
        undetached = gradients(twin, leaky)
    terms["leak"] = {name: undetached[name] - terms["actor"][name] for name in undetached}
    return terms


def right_gradients(terms: Dict[str, Grads], value_coef: float, entropy_coef: float) -> Grads:
    """The gradient of ``actor_loss + value_coef * critic_loss - entropy_coef * entropy``."""
    return {name: terms["actor"][name] + value_coef * terms["critic"][name] - entropy_coef * terms["entropy"][name]
            for name in terms["actor"]}


def fit(recorded: Dict[str, Optional[torch.Tensor]], terms: Dict[str, Grads],
        part: str) -> Optional[Dict[str, float]]:
    """The coefficients that make the terms' gradients add up to ``recorded`` on ``part``, or None if none do."""
    names = [name for name in terms["actor"] if part_of(name) == part]
    columns, labels = [], []
    for term in ("actor", "critic", "entropy", "leak"):
        column = torch.cat([terms[term][name].detach().double().flatten() for name in names])
        if float(column.norm()) > 1e-9:
            columns.append(column)
            labels.append(term)
    target = torch.cat([(torch.zeros_like(terms["actor"][name]) if recorded[name] is None else recorded[name])
                        .detach().double().flatten() for name in names])
    if not columns:
        return None
    basis = torch.stack(columns, dim=1)
    if not bool(torch.isfinite(target).all()):
        return None
    solution = torch.linalg.lstsq(basis, target.unsqueeze(1)).solution.squeeze(1)
    if float((basis @ solution - target).norm()) > 1e-4 * max(float(target.norm()), 1e-12):
        return None
    found = dict.fromkeys(("actor", "critic", "entropy", "leak"), 0.0)
    found.update({label: float(value) for label, value in zip(labels, solution)})
    return found


def _near(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-3 * max(abs(b), 1e-2)


def _explain_fit(part: str, got: Dict[str, float], session: Session, where: str) -> Optional[str]:
    """What the fitted coefficients of one part say is wrong, or None if they say nothing clear."""
    vc, ec = session.value_coef, session.entropy_coef
    words = part_words(part)
    if not _near(got["leak"], 0):
        return tr("{where}, {part} was pushed by the actor's loss through the value: advantage = returns - value "
                  "was not detached, so the actor's loss flows back into the critic head (and the trunk). Use "
                  "advantage = (returns - value).detach() in the actor's loss - and only there.", where=where,
                  part=words)
    if part == "trunk" and _near(got["critic"], 0) and not _near(vc, 0):
        return tr("{where}, the trunk got nothing from the critic's loss, though the critic head did: a .detach() on "
                  "the trunk's features for the critic head cuts the critic's loss off from the trunk. The trunk "
                  "learns from every term: detach the advantage, not the features.", where=where)
    if part == "trunk" and _near(got["actor"], 0) and _near(got["entropy"], 0):
        return tr("{where}, the trunk got nothing from the actor's loss nor the entropy, though the actor head did: "
                  "a .detach() on the trunk's features for the actor head cuts them off from the trunk. The trunk "
                  "learns from every term: detach the advantage, not the features.", where=where)
    if part in ("actor", "trunk") and not _near(got["entropy"], -ec):
        if _near(got["entropy"], 0) and _near(got["actor"], 1):
            return tr("{where}, {part} got no gradient from the entropy bonus: the entropy was detached (or left "
                      "out). It is not a target but a term of the loss: it must train the actor head and the trunk. "
                      "Compute it from the logits with its graph, and subtract entropy_coef * entropy.", where=where,
                      part=words)
        if _near(got["entropy"], ec):
            return tr("{where}, {part} was stepped to lower the policy's entropy: the bonus has the wrong sign. "
                      "The loss subtracts entropy_coef * entropy, so that minimising it raises the entropy.",
                      where=where, part=words)
        if _near(got["entropy"], -ec * BATCH):
            return tr("{where}, {part} got {batch} times the entropy bonus's gradient: the entropy was summed over "
                      "the batch. Average it: the mean entropy per state.", where=where, part=words, batch=BATCH)
        return tr("{where}, the entropy term reached {part} with weight {weight}, where the contract asks for "
                  "-entropy_coef = {coefficient} (this call's argument).", where=where, part=words,
                  weight=f"{got['entropy']:.3g}", coefficient=f"{-ec:g}")
    if part in ("critic", "trunk") and not _near(got["critic"], vc):
        if _near(got["critic"], 0):
            return tr("{where}, {part} got nothing from the critic's loss: the value was detached there too (or the "
                      "critic's loss left out). Detach only the advantage in the actor's loss.", where=where,
                      part=words)
        if _near(got["critic"], 1):
            return tr("{where}, the critic's loss reached {part} unweighted: value_coef = {coefficient} was not "
                      "applied. The loss is actor_loss + value_coef * critic_loss - entropy_coef * entropy.",
                      where=where, part=words, coefficient=f"{vc:g}")
        return tr("{where}, the critic's loss reached {part} with weight {weight}, where the contract asks for "
                  "value_coef = {coefficient} (this call's argument).", where=where, part=words,
                  weight=f"{got['critic']:.3g}", coefficient=f"{vc:g}")
    if part in ("actor", "trunk") and not _near(got["actor"], 1):
        if _near(got["actor"], 0):
            return tr("{where}, {part} got nothing from the actor's loss: was it left out of the backward?",
                      where=where, part=words)
        return tr("{where}, the actor's loss reached {part} with weight {weight}; it enters the loss unweighted "
                  "(only the critic's loss and the entropy have coefficients).", where=where, part=words,
                  weight=f"{got['actor']:.3g}")
    return None


def _parts_words(parts: List[str]) -> str:
    """"the actor head and the critic head", in the chosen language."""
    text = part_words(parts[0])
    for part in parts[1:]:
        text = tr("{first} and {second}", first=text, second=part_words(part))
    return text


def _diagnose(recorded: Dict[str, Optional[torch.Tensor]], terms: Dict[str, Grads], right: Grads,
              leftover: Dict[str, Optional[torch.Tensor]], computed: Set[str], session: Session,
              where: str) -> str:
    """Say, in learner words, why ``recorded`` is not the right gradient."""
    wrong = [part for part in PARTS if not _matches(recorded, right, part)]
    for part in wrong:
        if _empty(recorded, part):
            if part in computed:
                return tr("{where}, a gradient for {part} was computed, but its .grad was empty when {optimizer} "
                          "stepped: zero the optimizers once, before the backward, never between a backward and the "
                          "steps.", where=where, part=part_words(part), optimizer=OPTIMIZER_NAMES[part])
            if part == "trunk":
                return tr("{where}, the trunk received no gradient at all: were the heads fed detached features? "
                          "The trunk learns from every term.", where=where)
    for part in wrong:
        names = [name for name in right if part_of(name) == part]
        if _empty(leftover, part):
            continue
        piled = [right[name] + (0 if leftover[name] is None else leftover[name]) for name in names]
        if same_gradients([recorded[name] for name in names], piled):
            return tr("{where}, {optimizer} was stepped with a gradient that still held the previous update's: "
                      "gradients pile up in .grad. Zero all three optimizers (or the model) at the start of each "
                      "update.", where=where, optimizer=OPTIMIZER_NAMES[part])
    for part in ("critic", "actor", "trunk"):
        if part not in wrong:
            continue
        got = fit(recorded, terms, part)
        if got is not None:
            explained = _explain_fit(part, got, session, where)
            if explained is not None:
                return explained
    if "trunk" in wrong and not {"actor", "critic"} & set(wrong):
        return tr("{where}, both heads got the right gradient, but the trunk did not: it must get every term's "
                  "gradient through the features, from the same forward pass - detach the advantage, not the "
                  "features.", where=where)
    return tr("{where}, the gradient of {parts} differs from that of actor_loss + value_coef * critic_loss - "
              "entropy_coef * entropy at the weights the update started with. Use one forward pass, the terms "
              "exactly as the contract states them (log-softmax at the action taken, means over the batch), and "
              "compute every gradient before any step.", where=where, parts=_parts_words(wrong))


def _of(grads: Dict[str, Optional[torch.Tensor]], part: str) -> List[Optional[torch.Tensor]]:
    return [g for name, g in grads.items() if part_of(name) == part]


def _matches(recorded: Dict[str, Optional[torch.Tensor]], right: Grads, part: str) -> bool:
    return same_gradients(_of(recorded, part), _of(right, part))


def _empty(recorded: Dict[str, Optional[torch.Tensor]], part: str) -> bool:
    return all(g is None or not bool(g.abs().sum()) for g in _of(recorded, part))


def _watch_backward(model: ActorCritic, computed: Set[str]) -> List[Any]:
    """Hooks that note which parts of the network some backward computed a gradient for."""
    return [p.register_hook(lambda grad, part=part_of(name): computed.add(part))
            for name, p in model.named_parameters()]


def _run_session(step_function: Callable[..., Any], session: Session) -> Optional[str]:
    """Run one session of consecutive updates; the diagnosis, or None when every update was right."""
    model = make_actor_critic(seed=session.seed)
    parts = {"trunk": model.trunk, "actor": model.actor, "critic": model.critic}
    optimizers = {part: step_watch.kind(session.kinds[part])(module.parameters()) for part, module in parts.items()}
    records = {part: step_watch.watch(opt, part) for part, opt in optimizers.items()}
    states, actions, returns = make_batch(seed=session.seed * 10)
    for step in range(1, STEPS + 1):
        where = tr("On update {step} ({session})", step=step, session=session.describe())
        batch = make_batch(seed=session.seed * 10 + step)
        if session.refill_in_place:
            states, actions, returns = step_watch.fill_in_place((states, actions, returns), batch)
        else:
            states, actions, returns = batch
        terms = term_gradients(model, states, actions, returns)
        right = right_gradients(terms, session.value_coef, session.entropy_coef)
        start = {part: [p.detach().clone() for p in module.parameters()] for part, module in parts.items()}
        leftover = {name: None if p.grad is None else p.grad.detach().clone() for name, p in model.named_parameters()}
        counts = {part: len(record.calls) for part, record in records.items()}
        inputs = {"states": states, "actions": actions, "returns": returns}
        named_optimizers = {OPTIMIZER_NAMES[part]: opt for part, opt in optimizers.items()}
        before = step_watch.snapshot(inputs, {marked("the model"): model}, named_optimizers)
        computed: Set[str] = set()
        hooks = _watch_backward(model, computed)
        try:
            run_step(step_function, step, model, optimizers["trunk"], optimizers["actor"], optimizers["critic"],
                     states, actions, returns, session.value_coef, session.entropy_coef,
                     explanations=_ERROR_EXPLANATIONS)
        finally:
            for hook in hooks:
                hook.remove()
        calls = {part: step_watch.calls_in(record, counts[part]) for part, record in records.items()}
        for part in PARTS:
            params = list(parts[part].parameters())
            if not calls[part] and step_watch.moved_outside_step(params, start[part], []):
                return tr("{where}, {part}'s weights changed, but not through {optimizer}: step with the optimizers "
                          "you were given; do not build your own (nor keep one between calls).", where=where,
                          part=part_words(part), optimizer=OPTIMIZER_NAMES[part])
            if not calls[part]:
                return tr("{where}, {optimizer} was never stepped: each of the three optimizers steps exactly once "
                          "per update, after the backward.", where=where, optimizer=OPTIMIZER_NAMES[part])
            if len(calls[part]) != 1:
                text = tr("{where}, {optimizer} was stepped {count} times: each of the three optimizers steps "
                          "exactly once per update, after the backward.", where=where,
                          optimizer=OPTIMIZER_NAMES[part], count=len(calls[part]))
                return text + (space() + tr("The trunk is shared by both heads: it still takes one step, with the "
                                        "gradient of the whole loss.") if part == "trunk" else "")
        change = step_watch.changed(before, inputs, {marked("the model"): model}, named_optimizers)
        if change is not None:
            return tr("{where}, your step {change}.", where=where, change=change)
        for part in PARTS:
            if step_watch.moved_outside_step(list(parts[part].parameters()), start[part], calls[part]):
                return tr("{where}, {part}'s weights changed other than through {optimizer}.step(). Change weights "
                          "only with the optimizers you were given.", where=where, part=part_words(part),
                          optimizer=OPTIMIZER_NAMES[part])
        recorded: Dict[str, Optional[torch.Tensor]] = {}
        for part in PARTS:
            names = [name for name, _ in model.named_parameters() if part_of(name) == part]
            recorded.update(zip(names, calls[part][0].grads))
        if not same_gradients(list(recorded.values()), [right[name] for name in recorded]):
            return _diagnose(recorded, terms, right, leftover, computed, session, where)
    return None


def check_actor_critic_step(step_function: Callable[..., Any]) -> CheckResult:
    """Run the learner's update in several sessions of consecutive updates; compare each part's gradient with plain
    torch, and check that nothing else changed."""
    for session in SESSIONS:
        diagnosis = _run_session(step_function, session)
        if diagnosis is not None:
            return failed(EXERCISE_ID, diagnosis)
    return passed(EXERCISE_ID, tr("In {runs} runs of {steps} consecutive updates (other coefficients, optimizer "
                                  "kinds and data each time), each of the three optimizers was stepped once with "
                                  "exactly the gradient of actor_loss + value_coef * critic_loss - entropy_coef * "
                                  "entropy: the critic head only from the weighted critic's loss (the advantage a "
                                  "constant), the actor head from the actor's loss and the entropy bonus, the trunk "
                                  "from all three, all taken before the weights changed.", runs=len(SESSIONS),
                                  steps=STEPS))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="actor_critic_step",
    checker=check_actor_critic_step,
    hints=HINTS,
    contract=CONTRACT,
)

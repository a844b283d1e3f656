"""Exercise of notebook 06, case 1 (a GAN): the G step FIRST, then the D step - the worked fix's order reversed.

Fixed contract: ``gan_step(generator, discriminator, opt_g, opt_d, real, noise) -> None``.

- One fake batch, ``fake = generator(noise)``, from G as the call finds it.
- G step first: the non-saturating ``g_loss = BCE(D(fake), 1)`` through D as it is (D has not stepped yet);
  ``opt_g`` steps with exactly g_loss's gradient for G.
- D step second: ``d_loss = BCE(D(real), 1) + BCE(D(fake), 0)`` on that same fake batch, as it was made before
  G's step, held constant; ``opt_d`` steps with exactly d_loss's gradient (G's step did not change D's weights).
  Nothing of g_loss may be in it, and d_loss's backward must not reach G.

What has to transfer from the worked fix (D first, then G): g_loss's backward runs through D and writes into D's
``.grad``, so D's gradients must be cleared (or never written) before D's backward; and D's loss must see the fake
batch as a constant, or its backward runs into a G whose graph is freed and whose weights just changed.

The checker runs sessions of consecutive steps, each with other optimizer kinds (SGD, Adam, AdamW, fused where
this torch has it) and new data every step (fresh tensors in one session, the same tensors refilled in place in
another), records what each optimizer's ``step()`` was given and every backward pass that reaches G or D, and
checks that the answer changed nothing else (inputs, requires_grad, train/eval mode, optimizer settings,
gradients left behind).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import torch
from torch import nn

from helpers.course.exercises.compare import added, flattened, same_gradients, scale_factor
from helpers.course.exercises.engine import step_watch
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson06_bug_clinic.gan import (
    Gradients,
    discriminator_loss,
    generator_loss,
    gradients_of,
    log_backward_passes,
    make_batch,
    make_gan,
    saturating_generator_loss,
)
from helpers.course.lesson06_bug_clinic.gan_contract import CONTRACT
from helpers.course.lesson06_bug_clinic.step_contract import optimizer_words
from helpers.language import marked, tr

EXERCISE_ID = "gan_step"
STEPS = 3


@dataclass(frozen=True)
class Session:
    """One run of consecutive steps: the seed, each model's optimizer kind, and how new data arrives."""

    seed: int
    kind_g: str
    kind_d: str
    refill_in_place: bool

    def describe(self) -> str:
        return tr("G with {g}, D with {d}", g=optimizer_words(self.kind_g), d=optimizer_words(self.kind_d))


SESSIONS = (Session(61, "SGD", "SGD", False), Session(62, "fused Adam", "AdamW", True),
            Session(63, "Adam", "SGD with momentum", False))

HINTS = (
    marked("With the G step moved first, the worked fix's order breaks: D's backward raises error 1 (or, with "
           "retain_graph=True, error 2), or it runs and D is silently stepped with more than d_loss's gradient."),
    marked("g_loss's backward runs through D on its way to G, so it also writes g_loss's gradient into D's .grad, "
           "and a zero_grad() at the top of the step does not remove it. And a fake batch that is not detached in "
           "D's loss connects d_loss to G, whose graph g_loss's backward freed and whose weights opt_g.step() just "
           "changed."),
    marked("Make the fake batch once. G's loss reads it with its history, through D as it is: zero G's gradients, "
           "backward, step G. Then clear D's gradients with its optimizer's zero_grad() just before D's backward "
           "(or keep G's backward out of D with the inputs argument of backward). D's loss reads the same fake "
           "batch through .detach(), so its backward stops at D."),
)

_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise
    "backward-twice": marked(
        "d_loss's backward ran down into the generator, whose graph g_loss's backward had already freed. "
        "D's loss must see the fake batch as a constant: discriminator(fake.detach())."
    ),
    "inplace-version": marked(
        "A backward needed weights that a step had already changed: typically d_loss's backward running into G "
        "after opt_g.step() (retain_graph=True on g_loss's backward), or through D's outputs from before D "
        "changed. Detach the fake batch in D's loss, so its backward stops at D."
    ),
}


def _is_empty(grads: Gradients) -> bool:
    return all(g is None or not bool(g.abs().sum()) for g in grads)


def _scaled(recorded: Gradients, expected: List[torch.Tensor]) -> Optional[float]:
    return scale_factor(flattened(recorded, expected), flattened(expected, expected))


def candidate_gradients(generator: nn.Module, discriminator: nn.Module, real: torch.Tensor,
                        noise: torch.Tensor) -> Dict[str, Any]:
    """What a G-first step could step each model with, on copies at the current weights (nothing is touched).

    ``"G"``, ``"D"``: the right gradients. ``"g_loss->D"``: what g_loss's backward writes into D's ``.grad``.
    ``"d_loss->G"``: d_loss's gradient for G if its fake batch is not detached. ``"saturating->G"``. ``"fake"``:
    the fake batch (detached), for the next step's check of a cached batch.
    """
    g_copy, d_copy = copy.deepcopy(generator), copy.deepcopy(discriminator)
    with torch.enable_grad():
        fake = g_copy(noise)
        g_loss = generator_loss(d_copy(fake))
        d_loss = discriminator_loss(d_copy(real), d_copy(fake))
        return {"G": gradients_of(g_loss, g_copy), "g_loss->D": gradients_of(g_loss, d_copy),
                "D": gradients_of(d_loss, d_copy), "d_loss->G": gradients_of(d_loss, g_copy),
                "saturating->G": gradients_of(saturating_generator_loss(d_copy(fake)), g_copy),
                "fake": fake.detach(), "D copy": d_copy}


def d_gradient_with(d_copy: nn.Module, real: torch.Tensor, fake: torch.Tensor) -> List[torch.Tensor]:
    """d_loss's gradient for D (as copied before the step) with another fake batch, held constant."""
    with torch.enable_grad():
        return gradients_of(discriminator_loss(d_copy(real), d_copy(fake.detach())), d_copy)


def _diagnose_g(recorded: Gradients, cand: Dict[str, Any], leftover: Gradients, computed: bool,
                where: str) -> str:
    if _is_empty(recorded):
        if computed:
            return tr("{where}, a gradient for G was computed, but G's .grad was empty when opt_g stepped: call "
                      "opt_g.zero_grad() before g_loss.backward(), and opt_g.step() after it.", where=where)
        return tr("{where}, G was stepped with no gradient at all: no backward reached the generator, so G never "
                  "learns - silently. Was the fake batch detached in g_loss too? Detach it only in D's loss.",
                  where=where)
    if same_gradients(recorded, added(cand["G"], cand["d_loss->G"])):
        return tr("{where}, G was stepped with g_loss's gradient plus d_loss's: d_loss's backward ran into G "
                  "(its fake batch was not detached) before opt_g.step(). G is being trained to help D. "
                  "Detach the fake batch in D's loss: discriminator(fake.detach()).", where=where)
    if not _is_empty(leftover) and same_gradients(recorded, added(cand["G"], leftover)):
        return tr("{where}, G's gradient still held what its .grad held before this step: gradients pile up. "
                  "Call opt_g.zero_grad() before g_loss.backward().", where=where)
    if same_gradients(recorded, cand["saturating->G"]):
        return tr("{where}, G was stepped with the gradient of the saturating loss log(1 - D(fake)). Use the "
                  "non-saturating g_loss = BCE(D(fake), 1): its gradient does not vanish when D wins.", where=where)
    if same_gradients(recorded, [-g for g in cand["G"]]):
        return tr("{where}, G was stepped with minus g_loss's gradient: G climbed its loss. "
                  "g_loss = BCE(D(fake), 1) with ones as labels, minimised.", where=where)
    factor = _scaled(recorded, cand["G"])
    if factor is not None:
        return tr("{where}, G was stepped with {factor} times the gradient of g_loss. Did you scale the loss?",
                  where=where, factor=f"{factor:.3g}")
    return tr("{where}, G's gradient differs from that of g_loss = BCE(D(fake), 1) through D as the step found it "
              "(D steps after G), with fake = generator(noise) from the current G and this step's noise.", where=where)


def _diagnose_d(recorded: Gradients, cand: Dict[str, Any], leftover: Gradients, computed: bool,
                later_fake: List[torch.Tensor], cached: List[List[torch.Tensor]], where: str) -> str:
    if _is_empty(recorded):
        if computed:
            return tr("{where}, a gradient for D was computed, but D's .grad was empty when opt_d stepped: clear "
                      "D's gradients before d_loss.backward(), never between it and opt_d.step().", where=where)
        return tr("{where}, D was stepped with no gradient at all: call d_loss.backward() before opt_d.step().",
                  where=where)
    with_g_loss = added(cand["D"], cand["g_loss->D"])
    if same_gradients(recorded, with_g_loss):
        return tr("{where}, D was stepped with d_loss's gradient plus g_loss's: g_loss.backward() runs "
                  "through D on its way to G and writes g_loss's gradient into D's .grad too. A zero_grad() at the "
                  "top of the step came before that. Clear D's gradients right before d_loss.backward() "
                  "(opt_d.zero_grad() there), or keep G's backward out of D: "
                  "g_loss.backward(inputs=[p for p in generator.parameters() if p.requires_grad]).", where=where)
    if same_gradients(recorded, added(with_g_loss, leftover)):
        return tr("{where}, D was stepped with d_loss's gradient plus g_loss's (and what it held from the step "
                  "before): g_loss.backward() runs through D on its way to G and writes g_loss's gradient into D's "
                  ".grad too. A zero_grad() at the top of the step came before that. Clear D's gradients right "
                  "before d_loss.backward() (opt_d.zero_grad() there), or keep G's backward out of D: "
                  "g_loss.backward(inputs=[p for p in generator.parameters() if p.requires_grad]).", where=where)
    if not _is_empty(leftover) and same_gradients(recorded, added(cand["D"], leftover)):
        return tr("{where}, D's gradient still held what its .grad held before this step: gradients pile up. "
                  "Call opt_d.zero_grad() before d_loss.backward().", where=where)
    if same_gradients(recorded, later_fake):
        return tr("{where}, D's loss used a new fake batch, made by G after its step. The contract's D step uses "
                  "the fake batch made at the start of the step, before G's step, held constant: reuse it with "
                  "fake.detach() instead of calling the generator again.", where=where)
    if any(same_gradients(recorded, old) for old in cached):
        return tr("{where}, D's loss used a fake batch from an earlier step: something kept it between calls "
                  "(a cache, a global, a default argument). Make the fake batch inside the step, from this step's "
                  "noise, every time.", where=where)
    factor = _scaled(recorded, cand["D"])
    if factor is not None:
        return tr("{where}, D was stepped with {factor} times the gradient of d_loss. D's loss is "
                  "BCE(D(real), 1) + BCE(D(fake), 0), the two batch means summed, not averaged or scaled.",
                  where=where, factor=f"{factor:.3g}")
    return tr("{where}, D's gradient differs from that of d_loss = BCE(D(real), 1) + BCE(D(fake), 0), with fake "
              "the batch made at the start of this step (before G's step), held constant, at D's weights as the "
              "step found them.", where=where)


def _run_session(step_function: Callable[..., Any], session: Session,
                 earlier_fakes: List[torch.Tensor]) -> Optional[str]:
    """Run one session of consecutive steps; the diagnosis, or None when every step was right."""
    generator, discriminator = make_gan(session.seed)
    models = {"G": generator, "D": discriminator}
    log: List[str] = []
    opt_g = step_watch.kind(session.kind_g)(generator.parameters())
    opt_d = step_watch.kind(session.kind_d)(discriminator.parameters())
    records = {"G": step_watch.watch(opt_g, "G", log), "D": step_watch.watch(opt_d, "D", log)}
    real, noise = make_batch(session.seed * 10)
    for step in range(1, STEPS + 1):
        where = tr("On step {step} ({session})", step=step, session=session.describe())
        new_real, new_noise = make_batch(session.seed * 10 + step)
        if session.refill_in_place:
            real, noise = step_watch.fill_in_place((real, noise), (new_real, new_noise))
        else:
            real, noise = new_real, new_noise
        cand = candidate_gradients(generator, discriminator, real, noise)
        leftover = {name: [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
                    for name, model in models.items()}
        start = {name: [p.detach().clone() for p in model.parameters()] for name, model in models.items()}
        counts = {name: len(record.calls) for name, record in records.items()}
        inputs = {"real": real, "noise": noise}
        named_models = {marked("the generator"): generator, marked("the discriminator"): discriminator}
        named_optimizers = {"opt_g": opt_g, "opt_d": opt_d}
        before = step_watch.snapshot(inputs, named_models, named_optimizers)
        first_event = len(log)
        with log_backward_passes(models, log):
            run_step(step_function, step, generator, discriminator, opt_g, opt_d, real, noise,
                     explanations=_ERROR_EXPLANATIONS)
        events = log[first_event:]
        calls = {name: step_watch.calls_in(record, counts[name]) for name, record in records.items()}
        for name in ("G", "D"):
            if not calls[name] and step_watch.moved_outside_step(list(models[name].parameters()), start[name], []):
                return tr("{where}, {model}'s weights changed, but not through the optimizer you were given: step "
                          "with {optimizer}; do not build your own (nor keep one between calls).", where=where,
                          model=name, optimizer=f"opt_{name.lower()}")
            if not calls[name]:
                return tr("{where}, {model}'s optimizer was never stepped; one step steps each optimizer exactly "
                          "once: the optimizers passed in, on every call (one kept from an earlier call holds "
                          "another model).", where=where, model=name)
            if len(calls[name]) != 1:
                return tr("{where}, {model}'s optimizer was stepped {count} times; one step steps each optimizer "
                          "exactly once: the optimizers passed in, on every call (one kept from an earlier call "
                          "holds another model).", where=where, model=name, count=len(calls[name]))
        if events.index("D: step") < events.index("G: step"):
            return tr("{where}, D was stepped before G. This exercise reverses the worked fix: G steps first, "
                      "through D as the step found it; then D steps on the fake batch made before G's step.",
                      where=where)
        change = step_watch.changed(before, inputs, named_models, named_optimizers)
        if change is not None:
            return tr("{where}, your step {change}.", where=where, change=change)
        for name, model in models.items():
            if step_watch.moved_outside_step(list(model.parameters()), start[name], calls[name]):
                return tr("{where}, {model}'s parameters changed other than through the optimizer you were given. "
                          "Change weights only with its step(); do not build your own optimizer.", where=where,
                          model=name)
        g_step = events.index("G: step")
        recorded_g = calls["G"][0].grads
        if not same_gradients(recorded_g, cand["G"]):
            return _diagnose_g(recorded_g, cand, leftover["G"], "G: backward" in events[:g_step], where)
        recorded_d = calls["D"][0].grads
        if not same_gradients(recorded_d, cand["D"]):
            d_step = events.index("D: step")
            with torch.no_grad():
                later_fake = d_gradient_with(cand["D copy"], real, generator(noise))
            cached = [d_gradient_with(cand["D copy"], real, fake) for fake in earlier_fakes]
            return _diagnose_d(recorded_d, cand, leftover["D"], "D: backward" in events[g_step:d_step],
                               later_fake, cached, where)
        if "G: backward" in events[g_step + 1:]:
            return tr("{where}, both models were stepped with the right gradients, but after opt_g.step() a "
                      "backward ran into G again: d_loss's backward went through a fake batch that was not "
                      "detached, computing a gradient for G that nothing uses (and leaving it in G's .grad). "
                      "Detach the fake batch in D's loss: discriminator(fake.detach()).", where=where)
        for name, model in models.items():
            if step_watch.leftover_grad(list(model.parameters()), calls[name][0].grads):
                return tr("{where}, both models were stepped with the right gradients, but afterwards {model}'s "
                          ".grad held something else than the gradient its optimizer was stepped with: a backward "
                          "after the step wrote into {model}. Leave no gradient behind that nothing uses.",
                          where=where, model=name)
        earlier_fakes.append(cand["fake"])
    return None


def check_gan_step(step_function: Callable[..., Any]) -> CheckResult:
    """Run the learner's G-first GAN step in several sessions of consecutive steps; compare each optimizer's
    gradient with plain torch and check that nothing else changed."""
    earlier_fakes: List[torch.Tensor] = []
    for session in SESSIONS:
        diagnosis = _run_session(step_function, session, earlier_fakes)
        if diagnosis is not None:
            return failed(EXERCISE_ID, diagnosis)
    return passed(EXERCISE_ID, tr("In {runs} runs of {steps} consecutive steps (SGD, Adam, AdamW; new data every "
                                  "step), G was stepped first with exactly g_loss's gradient through D as the step "
                                  "found it, then D with exactly d_loss's gradient on the fake batch made before G's "
                                  "step - nothing of g_loss in it, no backward into G - and nothing else changed.",
                                  runs=len(SESSIONS), steps=STEPS))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="gan_step",
    checker=check_gan_step,
    hints=HINTS,
    contract=CONTRACT,
)

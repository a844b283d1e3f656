"""Exercise of notebook 06, case 1 (a GAN): one D step, then one G step, each with the gradient it should get.

Fixed contract: ``gan_step(generator, discriminator, opt_g, opt_d, real, noise) -> None``.

- D step: ``d_loss = BCE(D(real), 1) + BCE(D(fake), 0)`` with ``fake = generator(noise)`` (batch means, summed);
  ``opt_d`` steps with exactly d_loss's gradient, and d_loss's backward does not run into the generator.
- G step, after D's step: the non-saturating ``g_loss = BCE(D(fake), 1)`` through the *updated* D (the
  convention of PyTorch's DCGAN example); ``opt_g`` steps with exactly g_loss's gradient for G.

The checker steps the learner's function with optimizers that record the gradient they are stepped with, and
logs every backward pass that reaches G or D, so it sees wasted backward passes as well as wrong gradients.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import torch

from helpers.course.exercises.compare import added, close, flattened, same_gradients, scale_factor
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson06_bug_clinic.gan import (
    LEARNING_RATE,
    Gradients,
    RecordingSGD,
    log_backward_passes,
    make_batch,
    make_gan,
    reference_gradients,
)

EXERCISE_ID = "gan_step"
STEPS = 3
SEED = 61

HINTS = (
    "Written the usual way, the G step raises error 1 (backward through the graph a second time). "
    "retain_graph=True on d_loss's backward makes it run, but then d_loss's backward also runs through the "
    "generator, computing gradients G never uses - and if opt_g.zero_grad() comes earlier, G is trained on them.",
    "fake = generator(noise) carries G's graph. d_loss.backward() runs down through D into that graph and frees "
    "it; g_loss needs it later. D's loss only trains D, so it should see the fake batch as a constant; G's loss "
    "must see it with its history, through D as it is after opt_d.step().",
    "Make the fake batch once. D's loss reads it through .detach(), so D's backward stops at D; step D. Then "
    "G's loss reads the same fake batch without detach, through D again (the updated D), with the target 'real'; "
    "zero G's gradients, backward, step G.",
)


_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise
    "backward-twice": (
        "d_loss's backward ran down into the generator and freed the fake batch's history, which "
        "g_loss needs. Detach the fake batch in D's loss: discriminator(fake.detach()) "
        "(retain_graph=True would silence the error, but d_loss's backward would still run through G "
        "for nothing)."
    ),
    "inplace-version": (
        "g_loss was computed through D before opt_d.step() changed D's weights in place, and its "
        "backward needs the old ones. Compute g_loss with a fresh discriminator(fake) after "
        "opt_d.step()."
    ),
}


def _is_empty(grads: Gradients) -> bool:
    return all(g is None or not bool(g.abs().sum()) for g in grads)


def _leftover_matches(recorded: Gradients, expected: List[torch.Tensor], leftover: Gradients) -> bool:
    """True when ``recorded`` is ``expected`` plus a non-empty ``leftover`` (what .grad held before the step)."""
    return not _is_empty(leftover) and same_gradients(recorded, added(expected, leftover))


def _scaled(recorded: Gradients, expected: List[torch.Tensor]) -> Optional[float]:
    return scale_factor(flattened(recorded, expected), flattened(expected, expected))


def _diagnose_d(recorded: Gradients, ref: Dict[str, List[torch.Tensor]], leftover: Gradients,
                backward_before_step: int, step: int) -> str:
    if _is_empty(recorded):
        if backward_before_step:
            return (f"On step {step}, a gradient for D was computed, but D's .grad was empty when opt_d stepped: "
                    "call opt_d.zero_grad() before d_loss.backward(), and opt_d.step() after it.")
        return f"On step {step}, D was stepped with no gradient at all: call d_loss.backward() before opt_d.step()."
    if _leftover_matches(recorded, ref["D"], leftover):
        return (f"On step {step}, D's gradient still held what its .grad held before this step: gradients pile up. "
                "The previous G step's backward passes through D and fills D's .grad too. "
                "Call opt_d.zero_grad() before d_loss.backward().")
    if same_gradients(recorded, added(ref["D"], ref["pre-step g_loss->D"])):
        return (f"On step {step}, D was stepped with the gradient of d_loss + g_loss: g_loss's backward also "
                "fills D's .grad, and D stepped after it. Step D on d_loss alone, before G's backward.")
    factor = _scaled(recorded, ref["D"])
    if factor is not None:
        return (f"On step {step}, D was stepped with {factor:.3g} times the gradient of d_loss. D's loss is "
                "BCE(D(real), 1) + BCE(D(fake), 0), the two batch means summed, not averaged or scaled.")
    return (f"On step {step}, D's gradient differs from that of d_loss = BCE(D(real), 1) + BCE(D(fake), 0) with "
            "fake = generator(noise) from the current G. Use binary_cross_entropy_with_logits on D's logits, "
            "real labelled 1 and fake 0.")


def _diagnose_g(recorded: Gradients, ref: Dict[str, List[torch.Tensor]], leftover: Gradients,
                backward_after_d_step: int, step: int) -> str:
    if _is_empty(recorded):
        if backward_after_d_step:
            return (f"On step {step}, a gradient for G was computed, but G's .grad was empty when opt_g stepped: "
                    "call opt_g.zero_grad() before g_loss.backward(), and opt_g.step() after it.")
        return (f"On step {step}, G was stepped with no gradient at all: no backward after D's step reached the "
                "generator, so G never learns - silently. Did you detach the fake batch in g_loss too? "
                "discriminator(fake.detach()) cuts G out of its own loss: detach only in D's loss.")
    with_d_loss = added(ref["G"], ref["d_loss->G"])
    if same_gradients(recorded, with_d_loss) or _leftover_matches(recorded, with_d_loss, leftover):
        return (f"On step {step}, G was stepped with g_loss's gradient plus d_loss's: D's loss was not detached, "
                "so its backward (kept running by retain_graph=True, or on a second forward) put d_loss's "
                "gradient into G's .grad, and no opt_g.zero_grad() came between it and g_loss's backward. "
                "G is being trained to help D. Detach the fake batch in D's loss: discriminator(fake.detach()).")
    if same_gradients(recorded, ref["G via pre-step D"]):
        return (f"On step {step}, G's gradient was taken through D as it was before opt_d.step(). This exercise "
                "follows the standard alternating algorithm (PyTorch's DCGAN example): after D's step, compute "
                "g_loss with a fresh discriminator(fake), so G answers the updated D.")
    if _leftover_matches(recorded, ref["G"], leftover):
        return (f"On step {step}, G's gradient still held what its .grad held before this step: gradients pile "
                "up. Call opt_g.zero_grad() before g_loss.backward().")
    if same_gradients(recorded, ref["saturating->G"]):
        return (f"On step {step}, G was stepped with the gradient of the saturating loss log(1 - D(fake)). "
                "Use the non-saturating g_loss = BCE(D(fake), 1): its gradient does not vanish when D wins.")
    if same_gradients(recorded, [-g for g in ref["G"]]):
        return (f"On step {step}, G was stepped with minus g_loss's gradient: G climbed its loss. "
                "g_loss = BCE(D(fake), 1) with ones as labels, minimised.")
    factor = _scaled(recorded, ref["G"])
    if factor is not None:
        return (f"On step {step}, G was stepped with {factor:.3g} times the gradient of g_loss. "
                "Did you scale the loss, or average it with something?")
    return (f"On step {step}, G's gradient differs from that of g_loss = BCE(D(fake), 1) through the updated D, "
            "with fake = generator(noise) from the current G.")


def _check_steps(step_function: Callable[..., Any]) -> Optional[str]:
    """Run the learner's step for several consecutive steps; the diagnosis, or None if right."""
    generator, discriminator = make_gan(SEED)
    models = {"G": generator, "D": discriminator}
    log: List[str] = []
    optimizers = {"G": RecordingSGD(generator.parameters(), LEARNING_RATE, name="G", log=log),
                  "D": RecordingSGD(discriminator.parameters(), LEARNING_RATE, name="D", log=log)}
    for step in range(1, STEPS + 1):
        real, noise = make_batch(SEED + step)
        ref = reference_gradients(generator, discriminator, real, noise, LEARNING_RATE)
        leftover = {name: [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
                    for name, model in models.items()}
        before = {name: [p.detach().clone() for p in model.parameters()] for name, model in models.items()}
        counts = {name: len(optimizer.records) for name, optimizer in optimizers.items()}
        start = len(log)
        with log_backward_passes(models, log):
            run_step(step_function, step, generator, discriminator, optimizers["G"], optimizers["D"],
                      real, noise, explanations=_ERROR_EXPLANATIONS)
        events = log[start:]
        for name, optimizer in optimizers.items():
            calls = len(optimizer.records) - counts[name]
            if calls != 1:
                what = "never stepped" if calls == 0 else f"stepped {calls} times"
                return f"On step {step}, {name}'s optimizer was {what}; one step steps each optimizer exactly once."
        if events.index("G: step") < events.index("D: step"):
            return (f"On step {step}, G was stepped before D. One GAN step here is a D step first (on the fakes of "
                    "the current G), then a G step through the updated D.")
        for name, model in models.items():
            stepped_with = optimizers[name].records[-1]
            expected = [b - LEARNING_RATE * (torch.zeros_like(b) if g is None else g)
                        for b, g in zip(before[name], stepped_with)]
            if not all(close(p.detach(), e) for p, e in zip(model.parameters(), expected)):
                return (f"On step {step}, {name}'s parameters changed other than through its optimizer's step(). "
                        "Change weights only with opt.step().")
        d_step = events.index("D: step")
        recorded_d = optimizers["D"].records[-1]
        if not same_gradients(recorded_d, ref["D"]):
            return _diagnose_d(recorded_d, ref, leftover["D"], events[:d_step].count("D: backward"), step)
        recorded_g = optimizers["G"].records[-1]
        if not same_gradients(recorded_g, ref["G"]):
            return _diagnose_g(recorded_g, ref, leftover["G"], events[d_step:].count("G: backward"), step)
        wasted = events[:d_step].count("G: backward")
        if wasted:
            return (f"On step {step}, both models were stepped with the right gradients, but d_loss's backward also "
                    "ran through the generator (the fake batch was not detached in D's loss): it computed gradients "
                    "for G that opt_g.zero_grad() then threw away: a wasted backward through G on every step. "
                    "That is the cost of the retain_graph=True fix (which also keeps d_loss's saved tensors alive "
                    "after their last use). Detach the fake batch in D's loss: discriminator(fake.detach()).")
    return None


def check_gan_step(step_function: Callable[..., Any]) -> CheckResult:
    """Run the learner's GAN step for several consecutive steps and compare each optimizer's gradient."""
    diagnosis = _check_steps(step_function)
    if diagnosis is not None:
        return failed(EXERCISE_ID, diagnosis)
    return passed(EXERCISE_ID, f"For {STEPS} consecutive steps, D was stepped with exactly the gradient of d_loss "
                               "(and its backward never ran into G), then G with exactly the gradient of the "
                               "non-saturating g_loss through the updated D, with nothing left over from earlier "
                               "steps.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="gan_step",
    checker=check_gan_step,
    hints=HINTS,
)

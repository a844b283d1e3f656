"""Case 1 of notebook 06: a tiny GAN on 2-D points, its broken training step and the reference step.

The generator G maps 4-d noise to 2-d points; the discriminator D scores a point with one logit.
One training step is the standard alternating algorithm (as in PyTorch's DCGAN example):

1. D step: ``d_loss = BCE(D(real), 1) + BCE(D(fake.detach()), 0)``, backward, ``opt_d.step()``;
2. G step through the *updated* D, with the non-saturating loss ``g_loss = BCE(D(fake), 1)``.

Recording optimizers and a per-model backward log let the notebook and the checker see which gradient
each optimizer was stepped with, and which backward passes reached which model, in order.
"""
from __future__ import annotations

import copy
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.recording import RecordingSGD
from helpers.course.seeds import fresh
from helpers.tools.gradients import gradients_of, relative_error, same_gradients  # noqa: F401 (notebook)

NOISE_DIM = 4
DATA_DIM = 2
HIDDEN = 16
BATCH = 64
MODES = 8          # the real data: 8 small Gaussian blobs on a ring
RING_RADIUS = 2.0
BLOB_STD = 0.05
LEARNING_RATE = 0.1

Gradients = List[Optional[torch.Tensor]]
StepFunction = Callable[..., Any]


def _seeded(seed: int, build: Callable[[], nn.Module], device: Optional[torch.device]) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        return build().to(device or "cpu")


def make_generator(seed: int = 0, device: Optional[torch.device] = None) -> nn.Sequential:
    """G: ``Linear(4, 16) -> ReLU -> Linear(16, 2)``, from noise to a 2-d point (global RNG untouched)."""
    return _seeded(seed, lambda: nn.Sequential(nn.Linear(NOISE_DIM, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, DATA_DIM)),
                   device)


def make_discriminator(seed: int = 1, device: Optional[torch.device] = None) -> nn.Sequential:
    """D: ``Linear(2, 16) -> LeakyReLU(0.2) -> Linear(16, 1)``, a point's "real" logit (global RNG untouched)."""
    return _seeded(seed, lambda: nn.Sequential(nn.Linear(DATA_DIM, HIDDEN), nn.LeakyReLU(0.2), nn.Linear(HIDDEN, 1)),
                   device)


def make_gan(seed: int = 0, device: Optional[torch.device] = None) -> Tuple[nn.Sequential, nn.Sequential]:
    """A generator and a discriminator, the same for the same seed on every device."""
    return make_generator(seed, device), make_discriminator(seed + 1, device)


def make_batch(seed: int = 0, batch: int = BATCH,
               device: Optional[torch.device] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(real, noise)``: real points from a ring of 8 blobs, ``[batch, 2]``, and noise ``[batch, 4]``."""
    generator = torch.Generator().manual_seed(fresh(seed + 2000))
    angles = torch.randint(MODES, (batch,), generator=generator).float() * (2 * math.pi / MODES)
    centres = RING_RADIUS * torch.stack([angles.cos(), angles.sin()], dim=1)
    real = centres + BLOB_STD * torch.randn(batch, DATA_DIM, generator=generator)
    noise = torch.randn(batch, NOISE_DIM, generator=generator)
    return real.to(device or "cpu"), noise.to(device or "cpu")


def discriminator_loss(d_on_real: torch.Tensor, d_on_fake: torch.Tensor) -> torch.Tensor:
    """``BCE(D(real), 1) + BCE(D(fake), 0)``, each averaged over the batch, summed (as the DCGAN example)."""
    return (F.binary_cross_entropy_with_logits(d_on_real, torch.ones_like(d_on_real))
            + F.binary_cross_entropy_with_logits(d_on_fake, torch.zeros_like(d_on_fake)))


def generator_loss(d_on_fake: torch.Tensor) -> torch.Tensor:
    """The non-saturating generator loss ``BCE(D(fake), 1)``: G wants D to call its points real."""
    return F.binary_cross_entropy_with_logits(d_on_fake, torch.ones_like(d_on_fake))


def saturating_generator_loss(d_on_fake: torch.Tensor) -> torch.Tensor:
    """The original minimax loss ``log(1 - D(fake))`` = ``-BCE(D(fake), 0)``; its gradient vanishes early on."""
    return -F.binary_cross_entropy_with_logits(d_on_fake, torch.zeros_like(d_on_fake))


def reference_gan_step(generator: nn.Module, discriminator: nn.Module, opt_g: torch.optim.Optimizer,
                       opt_d: torch.optim.Optimizer, real: torch.Tensor, noise: torch.Tensor) -> None:
    """One D step on a detached fake batch, then one G step through the updated D (the standard algorithm)."""
    fake = generator(noise)
    opt_d.zero_grad()
    d_loss = discriminator_loss(discriminator(real), discriminator(fake.detach()))
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = generator_loss(discriminator(fake))   # a fresh pass through the updated D
    g_loss.backward()
    opt_g.step()


@contextmanager
def log_backward_passes(models: Mapping[str, nn.Module], log: List[str]) -> Iterator[List[str]]:
    """While inside, every backward pass (or ``autograd.grad``) that reaches a model logs ``"<name>: backward"``."""
    from torch.autograd.graph import register_multi_grad_hook

    handles = [register_multi_grad_hook(list(model.parameters()),
                                        lambda grad, name=name: log.append(f"{name}: backward"), mode="any")
               for name, model in models.items()]
    try:
        yield log
    finally:
        for handle in handles:
            handle.remove()


@dataclass
class StepRecord:
    """What one GAN step did: the gradient each optimizer was stepped with, and the order of events.

    Attributes:
        grads: ``{"G": [...], "D": [...]}``, the gradients of each optimizer's (last) step; None if never stepped.
        log: ``"G: backward"``, ``"D: step"`` and so on, in the order they happened.
        reference: the reference step's gradients from the same starting point (``reference_gradients``).
    """

    grads: Dict[str, Optional[Gradients]]
    log: List[str]
    reference: Dict[str, List[torch.Tensor]] = field(repr=False)

    def count(self, event: str) -> int:
        """How many times ``event`` (e.g. ``"G: backward"``) happened."""
        return self.log.count(event)

    def before(self, event: str, landmark: str) -> int:
        """How many times ``event`` happened before the first ``landmark`` (all of them if it never came)."""
        end = self.log.index(landmark) if landmark in self.log else len(self.log)
        return self.log[:end].count(event)

    def matches_reference(self, model: str) -> bool:
        """True when ``model``'s optimizer was stepped with exactly the reference gradient."""
        grads = self.grads[model]
        return grads is not None and same_gradients(grads, self.reference[model])

    def relative_error(self, model: str) -> float:
        """``|stepped - reference| / |reference|`` over all of ``model``'s parameters (a missing grad counts 0)."""
        return relative_error(self.grads[model] or [None] * len(self.reference[model]), self.reference[model])




def stepped_copy(model: nn.Module, grads: Sequence[torch.Tensor], lr: float = LEARNING_RATE) -> nn.Module:
    """A copy of ``model`` after one plain SGD step with ``grads`` (the same arithmetic as RecordingSGD)."""
    stepped = copy.deepcopy(model)
    with torch.no_grad():
        for param, grad in zip(stepped.parameters(), grads):
            param.add_(grad, alpha=-lr)
    return stepped


def reference_gradients(generator: nn.Module, discriminator: nn.Module, real: torch.Tensor, noise: torch.Tensor,
                        lr: float = LEARNING_RATE) -> Dict[str, List[torch.Tensor]]:
    """The gradients a right step steps each model with, computed on copies (the models are left untouched).

    ``"D"``: of d_loss at the current G and D. ``"G"``: of the non-saturating g_loss at the current G and the D
    that one SGD step (learning rate ``lr``) with ``"D"`` gives. The other entries are what common mistakes
    give instead: ``"G via pre-step D"`` (g_loss through D before its step), ``"d_loss->G"`` (d_loss without
    detach reaching G), ``"saturating->G"``, ``"g_loss->D"`` (g_loss's gradient for the updated D, which a
    plain ``g_loss.backward()`` leaves in D's ``.grad``) and ``"pre-step g_loss->D"`` (the same, D before its
    step).
    """
    g_copy, d_copy = copy.deepcopy(generator), copy.deepcopy(discriminator)
    fake = g_copy(noise)
    d_loss = discriminator_loss(d_copy(real), d_copy(fake))
    d_grads = gradients_of(d_loss, d_copy)
    d_after = stepped_copy(d_copy, d_grads, lr)
    g_loss_after = generator_loss(d_after(fake))
    g_loss_before = generator_loss(d_copy(fake))
    return {
        "D": d_grads,
        "G": gradients_of(g_loss_after, g_copy),
        "G via pre-step D": gradients_of(g_loss_before, g_copy),
        "d_loss->G": gradients_of(d_loss, g_copy),
        "saturating->G": gradients_of(saturating_generator_loss(d_after(fake)), g_copy),
        "g_loss->D": gradients_of(g_loss_after, d_after),
        "pre-step g_loss->D": gradients_of(g_loss_before, d_copy),
    }






def record_step(step: StepFunction, seed: int = 0, device: Optional[torch.device] = None,
                lr: float = LEARNING_RATE) -> StepRecord:
    """Run ``step(generator, discriminator, opt_g, opt_d, real, noise)`` once on a fresh seeded GAN.

    The optimizers are RecordingSGD, so the record holds the gradient each one was stepped with, next to the
    reference gradients from the same start; the log says which backward passes reached G and D, in order.
    Exceptions from ``step`` propagate.
    """
    generator, discriminator = make_gan(seed, device)
    real, noise = make_batch(seed, device=device)
    reference = reference_gradients(generator, discriminator, real, noise, lr)
    log: List[str] = []
    opt_g = RecordingSGD(generator.parameters(), lr, name="G", log=log)
    opt_d = RecordingSGD(discriminator.parameters(), lr, name="D", log=log)
    with log_backward_passes({"G": generator, "D": discriminator}, log):
        step(generator, discriminator, opt_g, opt_d, real, noise)
    grads = {"G": opt_g.records[-1] if opt_g.records else None, "D": opt_d.records[-1] if opt_d.records else None}
    return StepRecord(grads, log, reference)

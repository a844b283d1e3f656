"""Case 1 of notebook 07: knowledge distillation, with a teacher that must not train.

A small pre-trained teacher (``Linear -> BatchNorm1d -> ReLU -> Linear``) teaches a smaller student
(``Linear -> ReLU -> Linear``) to classify points from five Gaussian blobs. The student's loss is

    ``alpha * T**2 * KL(softmax(teacher / T) || softmax(student / T)) + (1 - alpha) * CE(student, y)``

(Hinton et al., 2015: when the logits are small next to ``T``, the ``T**2`` keeps the soft term's gradient about the
same size whatever ``T`` is; notebook 07 measures it for this teacher, ``T`` from 2 to 8).
The teacher is a fixed function: the reference step computes its logits in eval mode, without recording.
"""
from __future__ import annotations

import copy
import functools
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.seeds import fresh
from helpers.tools.saved import graph_nodes

IN_FEATURES = 8
CLASSES = 5
TEACHER_HIDDEN = 32
STUDENT_HIDDEN = 8
BATCH = 32
TEMPERATURE = 3.0
ALPHA = 0.7
LEARNING_RATE = 0.1
PRETRAIN_STEPS = 60
PRETRAIN_BATCH = 256
CENTRE_SEED = 4242
NOISE = 0.8

Gradients = List[torch.Tensor]


def _seeded(seed: int, build: Callable[[], nn.Module]) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        return build()


def make_batch(seed: int = 0, batch: int = BATCH,
               device: Optional[torch.device] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)``: ``batch`` points ``[batch, 8]`` from five Gaussian blobs (fixed centres) and their class."""
    centres = torch.randn(CLASSES, IN_FEATURES, generator=torch.Generator().manual_seed(CENTRE_SEED))
    generator = torch.Generator().manual_seed(fresh(seed + 3000))
    y = torch.randint(CLASSES, (batch,), generator=generator)
    x = centres[y] + NOISE * torch.randn(batch, IN_FEATURES, generator=generator)
    return x.to(device or "cpu"), y.to(device or "cpu")


def _teacher_architecture() -> nn.Sequential:
    return nn.Sequential(nn.Linear(IN_FEATURES, TEACHER_HIDDEN), nn.BatchNorm1d(TEACHER_HIDDEN), nn.ReLU(),
                         nn.Linear(TEACHER_HIDDEN, CLASSES))


def make_teacher(seed: int = 0, device: Optional[torch.device] = None) -> nn.Sequential:
    """The teacher, pre-trained on the blobs and handed over as if just loaded from a checkpoint.

    Like any freshly built or loaded module it is in train mode and its parameters require grad:
    keeping it fixed is the training step's job. The same for the same seed on every device.
    """
    teacher = _seeded(seed, _teacher_architecture)
    teacher.load_state_dict(_pretrained_state(seed))
    return teacher.train().to(device or "cpu")


@functools.lru_cache(maxsize=None)
def _pretrained_state(seed: int) -> Dict[str, torch.Tensor]:
    """The teacher's weights and BatchNorm statistics after pre-training: computed once per seed, on the CPU."""
    teacher = _seeded(seed, _teacher_architecture)
    optimizer = torch.optim.SGD(teacher.parameters(), lr=LEARNING_RATE)
    x, y = make_batch(seed=seed + 500, batch=PRETRAIN_BATCH)
    with torch.enable_grad():                    # also when the first make_teacher() runs under no_grad
        for _ in range(PRETRAIN_STEPS):
            optimizer.zero_grad()
            F.cross_entropy(teacher(x), y).backward()
            optimizer.step()
    return {name: value.detach().clone() for name, value in teacher.state_dict().items()}


def make_student(seed: int = 1, device: Optional[torch.device] = None) -> nn.Sequential:
    """The student: ``Linear(8, 8) -> ReLU -> Linear(8, 5)``, untrained (global RNG untouched)."""
    student = _seeded(seed, lambda: nn.Sequential(nn.Linear(IN_FEATURES, STUDENT_HIDDEN), nn.ReLU(),
                                                  nn.Linear(STUDENT_HIDDEN, CLASSES)))
    return student.to(device or "cpu")


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, y: torch.Tensor,
                      temperature: float = TEMPERATURE, alpha: float = ALPHA) -> torch.Tensor:
    """The student's loss: ``alpha * T**2 * KL(teacher || student) + (1 - alpha) * CE(student, y)``."""
    soft = F.kl_div(F.log_softmax(student_logits / temperature, dim=1),    # KL(softmax(t / T) || softmax(s / T))
                    F.softmax(teacher_logits / temperature, dim=1), reduction="batchmean")
    hard = F.cross_entropy(student_logits, y)
    return alpha * temperature ** 2 * soft + (1 - alpha) * hard


def soft_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The soft term alone, with its ``T**2``: what ``distillation_loss`` weighs by ``alpha``."""
    kl = F.kl_div(F.log_softmax(student_logits / temperature, dim=1), F.softmax(teacher_logits / temperature, dim=1),
                  reduction="batchmean")
    return temperature ** 2 * kl


def frozen_copy(teacher: nn.Module) -> nn.Module:
    """A copy of ``teacher`` in eval mode whose parameters need no gradient; ``teacher`` itself is untouched.

    Its forward records nothing as long as its input needs no gradient either; ``teacher_logits_fixed`` also runs
    it under ``torch.no_grad()``.
    """
    return copy.deepcopy(teacher).eval().requires_grad_(False)


def teacher_logits_fixed(teacher: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The teacher's logits as a constant: eval mode, no graph; the teacher's mode and buffers are untouched."""
    with torch.no_grad():
        return frozen_copy(teacher)(x)


def reference_gradients(student: nn.Module, teacher: nn.Module, x: torch.Tensor, y: torch.Tensor,
                        temperature: float = TEMPERATURE, alpha: float = ALPHA) -> Gradients:
    """The gradient a correct step gives the student's parameters; neither model nor any ``.grad`` changes."""
    loss = distillation_loss(student(x), teacher_logits_fixed(teacher, x), y, temperature, alpha)
    return list(torch.autograd.grad(loss, list(student.parameters())))


def gradient_reaching_teacher(student: nn.Module, teacher: nn.Module, x: torch.Tensor, y: torch.Tensor,
                              temperature: float = TEMPERATURE, alpha: float = ALPHA) -> Gradients:
    """What the student's loss gives the teacher's parameters when the teacher's forward (eval mode) is recorded.

    The gradient a broken step wastes (or steps the teacher with); computed on a copy, nothing changes.
    """
    recorded_teacher = copy.deepcopy(teacher).eval().requires_grad_(True)
    loss = distillation_loss(student(x), recorded_teacher(x), y, temperature, alpha)
    return list(torch.autograd.grad(loss, list(recorded_teacher.parameters())))


def snapshot(module: nn.Module) -> Dict[str, torch.Tensor]:
    """A copy of every parameter and buffer of ``module``, by name."""
    return {name: value.detach().clone() for name, value in module.state_dict().items()}


def changed_entries(module: nn.Module, before: Dict[str, torch.Tensor]) -> List[str]:
    """The names of the parameters and buffers of ``module`` that differ from ``before`` (a ``snapshot``)."""
    now = module.state_dict()
    return [name for name, value in before.items() if not torch.equal(now[name].detach().cpu(), value.cpu())]


def parameter_names(module: nn.Module) -> List[str]:
    """The names of ``module``'s parameters (as opposed to its buffers)."""
    return [name for name, _ in module.named_parameters()]


def relative_error(actual: Gradients, expected: Gradients) -> float:
    """``|actual - expected| / |expected|`` over all tensors together."""
    difference = sum(float((a.detach() - e.detach()).pow(2).sum()) for a, e in zip(actual, expected))
    size = sum(float(e.detach().pow(2).sum()) for e in expected)
    return (difference / max(size, 1e-30)) ** 0.5


def reached_parameters(loss: torch.Tensor, params: Dict[str, torch.Tensor]) -> List[str]:
    """The names in ``params`` (``named_parameters(...)``) whose gradient a backward from ``loss`` would compute."""
    leaves = {id(node.variable) for node in graph_nodes(loss) if getattr(node, "variable", None) is not None}
    return [name for name, param in params.items() if id(param) in leaves]

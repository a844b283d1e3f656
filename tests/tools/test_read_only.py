"""Every tool is read-only, proven: each tool call is made on real models, and everything it could change is hashed
before and after (tests/tools/state_hash.py): tensors, buffers, parameters, ``.grad``, version counters, training
flags, the RNG state.

The models include the cases where looking used to change things: a non-reentrant checkpoint with BatchNorm inside
(reading its saved tensors recomputes the block: ``num_batches_tracked`` moves), one with dropout inside (the RNG
advances), a reentrant checkpoint, a compiled module, and tests/tools/real_models.py's architectures. Each is looked
at twice: right after the forward pass, and after a backward and an optimizer step (freed and stale tensors).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Dict, List

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from helpers.tools import (
    VersionTimeline,
    diagnose,
    draw_graph,
    draw_module_graph,
    draw_saved_graph,
    forward_trace,
    graph_as_text,
    record_parameters,
    saved_bytes,
    saved_tensors,
)
from tests.tools.real_models import ResnetGenerator, diffusion_losses, make_dcgan, make_text_unet
from tests.tools.state_hash import assert_same_state, state_of


@dataclass
class Case:
    """A model after its forward pass: what to look at, and how to take a step afterwards."""

    modules: Dict[str, nn.Module]
    loss: torch.Tensor
    held: List[torch.Tensor]  # tensors the test holds (inputs, outputs): hashed too
    inputs: List[torch.Tensor]  # for the inputs= and autograd.grad forms
    retain: bool = True  # a compiled backward with donated buffers refuses retain_graph=True


def _block(dropout: bool = False) -> nn.Module:
    layers: List[nn.Module] = [nn.Linear(6, 6), nn.BatchNorm1d(6), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(0.5))
    return nn.Sequential(*layers, nn.Linear(6, 1))


def checkpointed(reentrant: bool, dropout: bool = False) -> Case:
    torch.manual_seed(0)
    stem, block = nn.Linear(4, 6), _block(dropout)
    x = torch.randn(8, 4)
    hidden = stem(x)
    out = checkpoint(block, hidden, use_reentrant=reentrant)
    return Case({"stem": stem, "block": block}, out.pow(2).mean(), [x, hidden, out], [hidden])


def compiled() -> Case:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.3), nn.Linear(8, 1))
    x = torch.randn(8, 4, requires_grad=True)
    out = torch.compile(model, backend="aot_eager")(x)
    return Case({"model": model}, out.pow(2).mean(), [x, out], [x], retain=False)


def dropout_model() -> Case:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 1))
    x = torch.randn(8, 4, requires_grad=True)
    out = model(x)
    return Case({"model": model}, out.pow(2).mean(), [x, out], [x])


def dcgan() -> Case:
    netg, netd, noise, real = make_dcgan()
    fake = netg(noise)
    on_fake = netd(fake)
    loss = F.binary_cross_entropy(on_fake, torch.ones_like(on_fake))
    return Case({"G": netg, "D": netd}, loss, [noise, real, fake, on_fake], [fake])


def resnet() -> Case:
    torch.manual_seed(0)
    model = ResnetGenerator(ngf=8, blocks=2)
    image = torch.randn(1, 3, 32, 32)
    out = model(image)
    return Case({"G": model}, out.abs().mean(), [image, out], [out])


def text_unet() -> Case:
    tenc, unet, tokens, images, noise = make_text_unet()
    l1, l2 = diffusion_losses(tenc, unet, tokens, images, noise)
    return Case({"tenc": tenc, "unet": unet}, l1 + l2, [images, noise, l1, l2], [l1])


CASES: Dict[str, Callable[[], Case]] = {
    "non-reentrant checkpoint with BatchNorm": lambda: checkpointed(False),
    "non-reentrant checkpoint with BatchNorm and dropout": lambda: checkpointed(False, dropout=True),
    "reentrant checkpoint with BatchNorm": lambda: checkpointed(True),
    "compiled (aot_eager)": compiled,
    "dropout": dropout_model,
    "DCGAN": dcgan,
    "ResNet generator": resnet,
    "text UNet": text_unet,
}


def tool_calls(case: Case) -> Dict[str, Callable[[], object]]:
    """Every tool, in each form it is called in, on ``case``."""
    params = case.modules
    loss = case.loss
    record = record_parameters(params)
    timeline = VersionTimeline(params)
    return {
        "diagnose": lambda: str(diagnose(loss, params)),
        "diagnose(recorded=...)": lambda: str(diagnose(loss, params, recorded=record)),
        "diagnose(inputs=...)": lambda: str(diagnose(loss, params, case.inputs)),
        "diagnose(autograd_grad=True)": lambda: str(diagnose(loss, params, case.inputs, autograd_grad=True)),
        "saved_tensors": lambda: [s.describe() for s in saved_tensors(loss, params)],
        "saved_bytes": lambda: saved_bytes(loss, params),
        "record_parameters": lambda: record_parameters(params),
        "record.changed_without_a_bump": record.changed_without_a_bump,
        "VersionTimeline.record": lambda: (timeline.record("now", {"loss": loss}), str(timeline)),
        "draw_graph": lambda: str(draw_graph(loss, params)),
        "draw_saved_graph": lambda: str(draw_saved_graph({"loss": loss}, None, params)),
        "draw_module_graph": lambda: str(draw_module_graph({"loss": loss}, params)),
        "graph_as_text": lambda: graph_as_text(loss, params),
        "forward_trace": lambda: forward_trace(loss, params),
    }


def _look_at_everything(case: Case, moment: str) -> None:
    modules = list(case.modules.values())
    for name, call in tool_calls(case).items():
        before = state_of(modules, case.held)
        call()
        assert_same_state(before, state_of(modules, case.held), f"{name} ({moment})")


def _step(case: Case) -> None:
    """A backward (keeping the graph where it can), then an optimizer step: stale or freed tensors for the second
    look."""
    case.loss.backward(retain_graph=case.retain)
    params = [p for module in case.modules.values() for p in module.parameters()]
    torch.optim.SGD(params, lr=0.1).step()


@pytest.mark.parametrize("name", list(CASES))
def test_no_tool_call_changes_anything(name: str) -> None:
    started = time.perf_counter()
    try:
        case = CASES[name]()
    except Exception as error:  # torch.compile needs a working compiler stack
        if name.startswith("compiled"):
            pytest.skip(f"torch.compile could not compile here: {type(error).__name__}: {error}")
        raise
    if name.startswith("compiled") and time.perf_counter() - started > 60:
        pytest.skip("torch.compile took over a minute to compile here")
    _look_at_everything(case, "after the forward pass")
    _step(case)
    _look_at_everything(case, "after a backward and a step")


def test_the_harness_sees_what_a_read_of_a_checkpoint_would_change() -> None:
    """The check can fail: unpacking one saved tensor of a non-reentrant checkpoint (what the tools never do)
    recomputes the block, and the harness names BatchNorm's num_batches_tracked."""
    case = checkpointed(False)
    modules = list(case.modules.values())
    before = state_of(modules, case.held)
    _ = case.loss.grad_fn.next_functions[0][0].next_functions[0][0]._saved_mat1  # AddmmBackward0 inside the block
    with pytest.raises(AssertionError, match="num_batches_tracked"):
        assert_same_state(before, state_of(modules, case.held), "unpacking")


def test_the_harness_sees_rng_and_flag_changes() -> None:
    model = _block(dropout=True)
    before = state_of([model])
    torch.rand(1)
    model.eval()
    with pytest.raises(AssertionError, match="rng cpu") as caught:
        assert_same_state(before, state_of([model]), "a stray call")
    assert "training" in str(caught.value)

"""Checkpointed and compiled regions: ``diagnose`` answers what it can prove, and says "cannot tell" otherwise.

Each case is built, ``diagnose`` asked, then the real call run: the verdict must be PyTorch's outcome (the error it
raises, or that it runs; a silently different gradient checked against a reference), or "cannot tell"
(``will_fail is None``), never a confident wrong answer.
"""
from __future__ import annotations

import copy
import re
import time
from typing import Any, Callable, Dict, List, Tuple

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from helpers.tools import diagnose, expect_error, hook_probe, record_parameters, relative_error
from helpers.tools.diagnosis import Diagnosis
from helpers.tools.opaque import REENTRANT_REFUSAL


def agree(report: Diagnosis, call: Callable[[], Any]) -> None:
    """Run ``call``: it must do what ``report`` says, unless the report says it cannot tell."""
    if report.cannot_tell:
        try:
            call()
        except RuntimeError:
            pass
        return
    if report.refusals and not report.possible_errors:
        with pytest.raises(RuntimeError, match=re.escape(REENTRANT_REFUSAL)):
            call()
        return
    if report.prediction is None:
        call()
        return
    with expect_error(report.prediction, show=False):
        call()


class Net(nn.Module):
    """A stem, a block (checkpointed or compiled) and a head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Linear(4, 8)
        self.block = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor, how: str) -> torch.Tensor:
        hidden = self.stem(x)
        if how == "reentrant":
            hidden = checkpoint(self.block, hidden, use_reentrant=True)
        elif how == "non-reentrant":
            hidden = checkpoint(self.block, hidden, use_reentrant=False)
        else:
            hidden = self.block(hidden)
        return self.head(hidden)


def data() -> torch.Tensor:
    return torch.randn(16, 4, generator=torch.Generator().manual_seed(1))


def reference_gradients(net: Net) -> Dict[str, torch.Tensor]:
    """The gradients of the forward-time weights: a copy, no checkpoint."""
    twin = copy.deepcopy(net)
    twin(data(), "plain").pow(2).mean().backward()
    return {name: p.grad.clone() for name, p in twin.named_parameters()}


def step_between(net: Net, fused: bool = False, modules: Tuple[str, ...] = ("stem", "block", "head")) -> None:
    """An Adam step on ``modules``' weights between the forward pass and its backward (another loss's gradients)."""
    params = [p for name, p in net.named_parameters() if name.split(".")[0] in modules]
    optimizer = torch.optim.Adam(params, lr=0.05, fused=fused)
    twin_loss = net(data() + 1, "plain").pow(2).mean()
    for p, g in zip(params, torch.autograd.grad(twin_loss, params), strict=True):
        p.grad = g
    optimizer.step()
    optimizer.zero_grad()


def gradients(net: Net) -> Dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in net.named_parameters() if p.grad is not None}


# ---------------------------------------------------------------- checkpoints: a step between forward and backward


@pytest.mark.parametrize("how", ["non-reentrant", "reentrant"])
@pytest.mark.parametrize("fused", [False, True], ids=["adam", "fused adam"])
def test_a_step_on_a_checkpointed_block_is_a_silently_different_gradient(how: str, fused: bool) -> None:
    """The issue's case: the block's optimizer steps between the forward and the backward. Nothing saved outside
    the checkpoint moved, so backward runs; it recomputes the block with the new weights."""
    net = Net()
    reference = reference_gradients(net)
    loss = net(data(), how).pow(2).mean()
    record = record_parameters(net)
    step_between(net, fused, modules=("block",))
    report = diagnose(loss, net, recorded=record)
    changed = {change.parameter for change in report.silent_changes}
    assert changed == {"block.0.weight", "block.0.bias", "block.2.weight", "block.2.bias"}, str(report)
    assert report.wrong_values and "silently differ" in str(report), str(report)
    if how == "non-reentrant" and not hook_probe.hooks_shown():  # torch 2.4: the checkpoint's inputs cannot be found
        assert report.will_fail is None and all("inputs are kept" in line for line in report.unseen) and \
            report.unseen, str(report)
    else:
        assert report.will_fail is False and not report.unseen, str(report)
    loss.backward()
    assert relative_error(net.stem.weight.grad, reference["stem.weight"]) > 0.01
    assert relative_error(net.block[0].weight.grad, reference["block.0.weight"]) > 0.01


@pytest.mark.parametrize("how", ["non-reentrant", "reentrant"])
def test_a_step_on_every_weight_is_error_2_outside_the_checkpoint_and_a_change_inside(how: str) -> None:
    net = Net()
    loss = net(data(), how).pow(2).mean()
    record = record_parameters(net)
    step_between(net)
    report = diagnose(loss, net, recorded=record)
    assert report.prediction == "inplace-version", str(report)
    assert "head.weight" in {s.parameter for s in report.problems}, str(report)
    assert "block.0.weight" in {change.parameter for change in report.silent_changes}, str(report)
    agree(report, loss.backward)


@pytest.mark.parametrize("how", ["non-reentrant", "reentrant"])
def test_without_a_record_a_checkpoint_is_said_unseen(how: str) -> None:
    net = Net()
    loss = net(data(), how).pow(2).mean()
    report = diagnose(loss, net)
    assert report.cannot_tell and report.will_fail is None, str(report)
    assert any(f"use_reentrant={how == 'reentrant'}" in line and "record_parameters" in line
               for line in report.unseen), report.unseen
    assert "Cannot tell" in str(report)
    agree(report, loss.backward)


def test_no_change_with_a_record_is_a_confident_run_for_a_module_block() -> None:
    net = Net()
    reference = reference_gradients(net)
    loss = net(data(), "reentrant").pow(2).mean()
    report = diagnose(loss, net, recorded=record_parameters(net))
    assert report.will_fail is False and not report.wrong_values and not report.unseen, str(report)
    agree(report, loss.backward)
    assert relative_error(net.block[0].weight.grad, reference["block.0.weight"]) < 1e-5


# ---------------------------------------------------------------- reentrant: calls PyTorch refuses


def _reentrant_case() -> Tuple[Net, torch.Tensor, torch.Tensor]:
    net = Net()
    hidden = net.stem(data())
    out = net.head(checkpoint(net.block, hidden, use_reentrant=True))
    return net, out.pow(2).mean(), hidden


def test_reentrant_with_backward_inputs_is_refused() -> None:
    net, loss, hidden = _reentrant_case()
    report = diagnose(loss, net, [net.stem.weight])
    assert report.will_fail and report.refusals, str(report)
    agree(report, lambda: loss.backward(inputs=[net.stem.weight]))


def test_reentrant_with_autograd_grad_is_refused() -> None:
    net, loss, hidden = _reentrant_case()
    report = diagnose(loss, net, [hidden], autograd_grad=True)
    assert report.will_fail and report.refusals, str(report)
    agree(report, lambda: torch.autograd.grad(loss, [hidden]))


def test_reentrant_off_the_way_of_inputs_is_no_refusal() -> None:
    net, loss, _ = _reentrant_case()
    report = diagnose(loss, net, [net.head.weight])
    assert not report.refusals and report.will_fail is False, str(report)
    agree(report, lambda: loss.backward(inputs=[net.head.weight]))


@pytest.mark.parametrize("how", ["non-reentrant", "reentrant"])
def test_a_checkpoints_second_backward_is_error_1(how: str) -> None:
    net = Net()
    loss = net(data(), how).pow(2).mean()
    loss.backward()
    report = diagnose(loss, net)
    assert report.prediction == "backward-twice", str(report)
    agree(report, loss.backward)


@pytest.mark.parametrize("how", ["non-reentrant", "reentrant"])
def test_a_checkpoints_input_changed_in_place_is_error_2(how: str) -> None:
    net = Net()
    hidden = net.stem(data()) * 1
    out = net.head(checkpoint(net.block, hidden, use_reentrant=how == "reentrant"))
    loss = out.pow(2).mean()
    with torch.no_grad():
        hidden.add_(1)
    report = diagnose(loss, net)
    if how == "non-reentrant" and not hook_probe.hooks_shown():  # torch 2.4: the inputs cannot be found
        assert report.cannot_tell and any("inputs are kept where this tool cannot read them" in line
                                          for line in report.unseen), str(report)
        agree(report, loss.backward)
        return
    assert report.prediction == "inplace-version", str(report)
    agree(report, loss.backward)


# ---------------------------------------------------------------- torch.compile


_COMPILED: Dict[str, Any] = {}


def compiled_net() -> Tuple[Net, Callable[[torch.Tensor], torch.Tensor]]:
    """A Net whose block is compiled (aot_eager); skipped when it cannot compile within a minute."""
    net = Net()
    started = time.perf_counter()
    try:
        block = torch.compile(net.block, backend="aot_eager")
        block(torch.zeros(2, 8))
    except Exception as error:
        pytest.skip(f"torch.compile could not compile here: {type(error).__name__}: {error}")
    if time.perf_counter() - started > 60:
        pytest.skip("torch.compile took over a minute to compile here")
    return net, lambda x: net.head(block(net.stem(x)))


def _outputs_through(run: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    return run(data()).pow(2).mean()


def _compiled_nodes(loss: torch.Tensor) -> List[str]:
    from helpers.tools.traversal import graph_nodes

    return [type(node).__name__ for node in graph_nodes([loss])]


def test_compiled_two_backward_passes_is_error_1() -> None:
    net, run = compiled_net()
    loss = _outputs_through(run)
    assert "CompiledFunctionBackward" in _compiled_nodes(loss)
    loss.backward()
    report = diagnose(loss, net)
    assert report.prediction == "backward-twice", str(report)
    agree(report, loss.backward)


def test_compiled_step_between_is_error_2_naming_the_weight() -> None:
    net, run = compiled_net()
    loss = _outputs_through(run)
    step_between(net, modules=("block",))
    report = diagnose(loss, net)
    assert report.prediction == "inplace-version", str(report)
    if hasattr(torch._C._autograd.SavedTensor, "data"):  # older torch: a stale tensor is named only when one fits
        assert any(s.parameter and s.parameter.startswith("block.") for s in report.problems), str(report)
    else:
        assert "next to block.0" in str(report), str(report)
    agree(report, loss.backward)


def test_compiled_fused_step_between_is_a_silent_change_with_a_record() -> None:
    net, run = compiled_net()
    loss = _outputs_through(run)
    record = record_parameters(net)
    step_between(net, fused=True, modules=("block",))
    report = diagnose(loss, net, recorded=record)
    if report.prediction is not None:  # this build's fused Adam bumps versions: error 2, as for the plain step
        agree(report, loss.backward)
        return
    changed = {change.parameter for change in report.silent_changes}
    assert {"block.0.weight", "block.2.weight"} <= changed, str(report)
    assert report.wrong_values
    agree(report, loss.backward)


def test_compiled_with_retain_graph_says_it_cannot_see_donated_buffers() -> None:
    net, run = compiled_net()
    loss = _outputs_through(run)
    report = diagnose(loss, net, retain_graph=True)
    assert report.cannot_tell and any("donated" in line for line in report.unseen), str(report)
    agree(report, lambda: loss.backward(retain_graph=True))
    plain = diagnose(loss, net)
    assert plain.will_fail is False and not plain.unseen, str(plain)


# ---------------------------------------------------------------- out of reach (said in the docstrings and README)


def test_a_data_write_on_a_saved_activation_is_out_of_reach_as_the_docstrings_say() -> None:
    """A ``.data`` write on a saved activation after the forward: backward reads it, no version moves, and the record
    (parameters only) shows nothing. The tool's "will run" is PyTorch's outcome; the values are what it cannot see."""
    net = Net()
    reference = reference_gradients(net)
    hidden = net.block[1](net.block[0](net.stem(data())))  # tanh's output, saved by TanhBackward0
    loss = net.head(net.block[2](hidden)).pow(2).mean()
    record = record_parameters(net)
    hidden.data.mul_(0.5)
    report = diagnose(loss, net, recorded=record)
    assert report.will_fail is False and not report.wrong_values, str(report)
    import helpers.tools.diagnosis as diagnosis_module
    import helpers.tools.fingerprint as fingerprint_module
    for doc in (diagnosis_module.__doc__, fingerprint_module.record_parameters.__doc__):
        assert "saved activation" in " ".join((doc or "").split())
    loss.backward()
    assert relative_error(net.stem.weight.grad, reference["stem.weight"]) > 0.01

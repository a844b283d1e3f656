"""``hook_probe.read_saved``: reads a saved tensor no hook packed, and stops a hook before its first line."""
from __future__ import annotations

import gc
import sys

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from helpers.tools import hook_probe
from helpers.tools.regions import CHECKPOINT_MODULE, checkpoint_packed


def test_a_plain_saved_tensor_is_read() -> None:
    x = torch.randn(3, requires_grad=True)
    y = x.exp()
    probe = hook_probe.read_saved(y.grad_fn, "_saved_result")
    assert probe.hook_module is None and probe.error is None and torch.equal(probe.value, y)


def test_a_changed_saved_tensor_gives_pytorchs_error() -> None:
    x = torch.randn(3, requires_grad=True)
    y = x.exp()
    with torch.no_grad():
        y.add_(1)
    probe = hook_probe.read_saved(y.grad_fn, "_saved_result")
    assert probe.value is None and "modified by an inplace operation" in str(probe.error)


def test_a_users_hook_is_stopped_before_its_first_line() -> None:
    calls = []

    def unpack(tensor: torch.Tensor) -> torch.Tensor:
        calls.append(tensor)
        return tensor

    x = torch.randn(3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda tensor: tensor, unpack):
        y = x.exp()
    previous = sys.gettrace()
    probe = hook_probe.read_saved(y.grad_fn, "_saved_result")
    assert probe.hook_module == __name__ and probe.value is None and not calls
    assert sys.gettrace() is previous and gc.isenabled()
    y.sum().backward()  # the hook still works: the backward unpacks through it
    assert len(calls) == 1 and torch.allclose(x.grad, x.exp())


@pytest.mark.parametrize("with_batch_norm", [False, True])
def test_a_checkpoints_hook_is_stopped_and_nothing_is_recomputed(with_batch_norm: bool) -> None:
    block = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4) if with_batch_norm else nn.Tanh())
    x = torch.randn(8, 4, requires_grad=True)
    out = checkpoint(block, x, use_reentrant=False)
    state = {name: value.clone() for name, value in block.state_dict().items()}
    rng = torch.get_rng_state()
    names = hook_probe.saved_names(out.grad_fn)
    probes = [hook_probe.read_saved(out.grad_fn, name) for name in names]
    assert names and all(probe.hook_module == CHECKPOINT_MODULE for probe in probes)
    assert checkpoint_packed(out.grad_fn)
    assert all(torch.equal(value, state[name]) for name, value in block.state_dict().items())
    assert torch.equal(rng, torch.get_rng_state())
    out.sum().backward()  # the stopped hook left the checkpoint able to recompute
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_a_custom_functions_saved_tensors_are_read_by_saved_tensors() -> None:
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor):
            ctx.save_for_backward(tensor)
            return tensor * tensor

        @staticmethod
        def backward(ctx, grad):
            (tensor,) = ctx.saved_tensors
            return 2 * tensor * grad

    x = torch.randn(3, requires_grad=True)
    y = Square.apply(x)
    assert hook_probe.saved_names(y.grad_fn) == ["saved_tensors"]
    probe = hook_probe.read_saved(y.grad_fn, "saved_tensors")
    assert probe.hook_module is None and torch.equal(probe.value[0], x)


def test_a_tensor_subclass_that_wraps_in_python_is_read() -> None:
    """On torch 2.4, unpacking a ``__torch_dispatch__`` subclass runs Python (its detach) after the point where a
    hook would run: the read goes on."""
    if hook_probe.hooks_shown():  # newer torch dispatches through Python first; the tools read without the probe
        pytest.skip("this torch shows unpack hooks: the tools do not probe")
    two_tensor = pytest.importorskip("torch.testing._internal.two_tensor")
    t = two_tensor.TwoTensor(torch.randn(3), torch.randn(3)).requires_grad_()
    y = t.exp()
    probe = hook_probe.read_saved(y.grad_fn, "_saved_result")
    assert probe.hook_module is None and probe.error is None and type(probe.value).__name__ == "TwoTensor"


def test_a_c_function_hook_that_fails_is_reported_as_a_hook() -> None:
    """A hook written in C cannot be stopped (no Python frame starts); when it raises, the read says a hook ran."""
    store: dict = {}

    def pack(tensor: torch.Tensor) -> int:
        store[id(tensor)] = tensor
        return id(tensor)

    x = torch.randn(3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, store.pop):
        y = x.exp()
    first = hook_probe.read_saved(y.grad_fn, "_saved_result")
    assert first.hook_module is None and first.value is not None  # it ran: the documented limit
    second = hook_probe.read_saved(y.grad_fn, "_saved_result")
    assert second.hook_module is not None and "KeyError" in second.hook_module

"""A digest of everything a tool must not change: to prove a tool call read-only, compare it before and after.

It covers, for each module given: every parameter's and buffer's bytes and version counter, every ``.grad``'s bytes
and version, every submodule's ``training`` flag; for each extra tensor: its bytes, version and ``.grad``; and the
RNG states (CPU, and CUDA's when CUDA is initialised). It reads bytes only (``detach``: no version moves), never a
saved tensor of a graph (that would be the side effect under test).

    before = state_of([model], [loss, x])
    diagnose(loss, model)
    assert_same_state(before, state_of([model], [loss, x]), "diagnose")
"""
from __future__ import annotations

import hashlib
from typing import Dict, Iterable, Optional

import torch
from torch import nn

State = Dict[str, str]


def tensor_digest(tensor: Optional[torch.Tensor]) -> str:
    """Shape, dtype, version and bytes of ``tensor`` ("None" for None)."""
    if tensor is None:
        return "None"
    flat = tensor.detach().reshape(-1).contiguous()
    data = flat.view(torch.uint8) if flat.element_size() > 1 and flat.numel() else flat
    digest = hashlib.blake2b(digest_size=16)
    digest.update(data.cpu().numpy().tobytes() if data.numel() else b"")
    return f"{tuple(tensor.shape)} {tensor.dtype} v{tensor._version} {digest.hexdigest()}"


def _rng_state() -> State:
    found = {"rng cpu": tensor_digest(torch.get_rng_state())}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for index, state in enumerate(torch.cuda.get_rng_state_all()):
            found[f"rng cuda:{index}"] = tensor_digest(state)
    return found


def state_of(modules: Iterable[nn.Module] = (), tensors: Iterable[Optional[torch.Tensor]] = ()) -> State:
    """A digest of each module's parameters, buffers, grads and flags, of ``tensors`` (and theirs grads), and RNG."""
    found: State = {}
    for number, module in enumerate(modules):
        for name, param in module.named_parameters(remove_duplicate=False):
            found[f"m{number}.{name}"] = tensor_digest(param)
            found[f"m{number}.{name}.grad"] = tensor_digest(param.grad)
        for name, buffer in module.named_buffers(remove_duplicate=False):
            found[f"m{number}.buffer {name}"] = tensor_digest(buffer)
        for name, sub in module.named_modules():
            found[f"m{number}.training {name or '<top>'}"] = str(sub.training)
    for number, tensor in enumerate(tensors):
        if isinstance(tensor, torch.Tensor):
            found[f"tensor {number}"] = tensor_digest(tensor)
            if tensor.is_leaf:
                found[f"tensor {number}.grad"] = tensor_digest(tensor.grad)
    found.update(_rng_state())
    return found


def assert_same_state(before: State, after: State, what: str) -> None:
    """Fail, naming what moved, when ``after`` differs from ``before``."""
    moved = [f"{key}: {before.get(key)} -> {after.get(key)}" for key in sorted(set(before) | set(after))
             if before.get(key) != after.get(key)]
    assert not moved, f"{what} changed what it looked at:\n  " + "\n  ".join(moved[:12])

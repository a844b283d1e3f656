"""The chained case under DDP: a text encoder feeding a UNet, ``loss_tenc`` for tenc and ``loss_unet`` for unet.

Notebook 05's recipes (``helpers.course.lesson05_chained_amp``), on every rank of a process group, with both
modules wrapped in DDP, each rank given its shard of one global batch. In float32: the question here is which
gradients DDP averages, and autocast's round-off would only blur the comparison.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch
from torch import nn

from helpers.course.lesson05_chained_amp.chain import chain_losses, make_batch, make_tenc, make_unet
from helpers.course.lesson08_past_one_machine.replicas import Gradients, named_grads, rank_device, wrap

ROWS_PER_RANK = 8
Batch = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # x, target, mask


def _copied_fix(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> None:
    loss_tenc, loss_unet = chain_losses(unet(tenc(x)), target, mask)
    loss_tenc.backward(retain_graph=True)
    loss_unet.backward()


def _keep_the_graph(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                    mask: torch.Tensor) -> None:
    loss_tenc, loss_unet = chain_losses(unet(tenc(x)), target, mask)
    loss_tenc.backward(retain_graph=True, inputs=list(tenc.parameters()))
    loss_unet.backward(inputs=list(unet.parameters()))


def _run_unet_twice(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                    mask: torch.Tensor) -> None:
    hidden_state = tenc(x)
    loss_tenc, _ = chain_losses(unet(hidden_state), target, mask)
    loss_tenc.backward(inputs=list(tenc.parameters()))
    _, loss_unet = chain_losses(unet(hidden_state.detach()), target, mask)
    loss_unet.backward()


def _autograd_grad(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                   mask: torch.Tensor) -> None:
    loss_tenc, loss_unet = chain_losses(unet(tenc(x)), target, mask)
    tenc_params, unet_params = list(tenc.parameters()), list(unet.parameters())
    for parameter, gradient in zip(tenc_params, torch.autograd.grad(loss_tenc, tenc_params, retain_graph=True)):
        parameter.grad = gradient
    for parameter, gradient in zip(unet_params, torch.autograd.grad(loss_unet, unet_params)):
        parameter.grad = gradient


CHAINED_RECIPES: Dict[str, Callable[..., None]] = {
    "copied fix: loss_tenc.backward(retain_graph=True); loss_unet.backward()": _copied_fix,
    "keep the graph: backward(retain_graph=True, inputs=tenc), then backward(inputs=unet)": _keep_the_graph,
    "run unet twice: backward(inputs=tenc), then unet(hidden_state.detach())": _run_unet_twice,
    "torch.autograd.grad for each module, written into .grad": _autograd_grad,
}


def chained_batch(seed: int, world_size: int) -> Batch:
    """``x``, ``target`` and ``mask`` for the whole global batch: ROWS_PER_RANK rows per rank."""
    return make_batch(seed, batch=ROWS_PER_RANK * world_size)


def chained_gradients(rank: int, world_size: int, seed: int = 0) -> Dict[str, Gradients]:
    """On one rank of a started process group: each chained recipe's gradients on this rank."""
    device = rank_device(rank)
    shard = tuple(t.chunk(world_size)[rank].to(device) for t in chained_batch(seed, world_size))
    found = {}
    for name, recipe in CHAINED_RECIPES.items():
        tenc, unet = make_tenc(seed), make_unet(seed + 1)
        recipe(wrap(tenc, rank), wrap(unet, rank), *shard)
        found[name] = named_grads(tenc=tenc, unet=unet)
    return found


def chained_reference(seed: int, world_size: int) -> Gradients:
    """In this process, no DDP: tenc's gradient of loss_tenc and unet's of loss_unet, on the whole global batch."""
    tenc, unet = make_tenc(seed), make_unet(seed + 1)
    loss_tenc, loss_unet = chain_losses(unet(tenc(chained_batch(seed, world_size)[0])),
                                        *chained_batch(seed, world_size)[1:])
    tenc_grads = torch.autograd.grad(loss_tenc, list(tenc.parameters()), retain_graph=True)
    unet_grads = torch.autograd.grad(loss_unet, list(unet.parameters()))
    names = [f"tenc.{n}" for n, _ in tenc.named_parameters()] + [f"unet.{n}" for n, _ in unet.named_parameters()]
    return dict(zip(names, [*tenc_grads, *unet_grads]))

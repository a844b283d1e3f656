"""Seed 2's question, "how do I do this without retain_graph?": three ways to give tenc and unet their own gradients.

``loss_tenc`` needs its gradient carried back *through* unet to tenc; ``loss_unet`` needs its gradient for unet's
weights. Those are two different vectors pulled back through unet, so unet's backward work is done twice, one way
or another:

- ``keep_the_graph``: one forward; the first backward keeps the graph (``retain_graph=True``) for the second.
- ``run_unet_twice``: the first backward frees everything on its way; unet runs a second forward on the detached
  hidden state for its own loss. One more unet forward, nothing kept.
- ``one_batched_backward``: both vectors pulled back through unet in one batched call (``is_grads_batched=True``),
  where every operation of unet has a batching rule.

Each is a step for ``helpers.course.measure``: ``strategy(tenc, unet, x, target, mask, losses, use_autocast)`` with
``losses(prediction, target, mask) -> (loss_tenc, loss_unet)``; it fills ``.grad`` and returns the losses.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch
from torch import nn

from helpers.course.measure import Step

Losses = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]
Strategy = Callable[..., Tuple[torch.Tensor, torch.Tensor]]


def _zero(*modules: nn.Module) -> None:
    for module in modules:
        module.zero_grad(set_to_none=True)


def keep_the_graph(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                   losses: Losses, use_autocast: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """One forward; the first backward keeps the graph for the second."""
    _zero(tenc, unet)
    with torch.autocast(x.device.type, enabled=use_autocast):
        prediction = unet(tenc(x))
    loss_tenc, loss_unet = losses(prediction, target, mask)
    loss_tenc.backward(retain_graph=True, inputs=list(tenc.parameters()))
    loss_unet.backward(inputs=list(unet.parameters()))
    return loss_tenc, loss_unet


def run_unet_twice(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                   losses: Losses, use_autocast: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """loss_tenc's backward frees its graph; unet runs again, on the detached hidden state, for loss_unet."""
    _zero(tenc, unet)
    with torch.autocast(x.device.type, enabled=use_autocast):
        hidden_state = tenc(x)
        prediction = unet(hidden_state)
    loss_tenc, _ = losses(prediction, target, mask)
    loss_tenc.backward(inputs=list(tenc.parameters()))  # the only backward through this graph: nothing to keep
    with torch.autocast(x.device.type, enabled=use_autocast):
        prediction_again = unet(hidden_state.detach())  # the same values; a graph of unet alone
    _, loss_unet = losses(prediction_again, target, mask)
    loss_unet.backward()
    return loss_tenc, loss_unet


def one_batched_backward(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                         mask: torch.Tensor, losses: Losses, use_autocast: bool = True
                         ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Both losses' gradients at unet's output, pulled back through unet together in one batched call."""
    _zero(tenc, unet)
    with torch.autocast(x.device.type, enabled=use_autocast):
        hidden_state = tenc(x)
        prediction = unet(hidden_state)
    loss_tenc, loss_unet = losses(prediction, target, mask)
    at_prediction = [torch.autograd.grad(loss, prediction, retain_graph=True)[0] for loss in (loss_tenc, loss_unet)]
    unet_params = list(unet.parameters())
    pulled_back = torch.autograd.grad(prediction, [hidden_state, *unet_params],
                                      grad_outputs=torch.stack(at_prediction), is_grads_batched=True)
    hidden_state.backward(pulled_back[0][0])  # row 0: loss_tenc's vector, on into tenc
    for param, grads in zip(unet_params, pulled_back[1:]):
        param.grad = grads[1]  # row 1: loss_unet's vector
    return loss_tenc, loss_unet


STRATEGIES: Dict[str, Strategy] = {
    "keep the graph (retain_graph)": keep_the_graph,
    "run unet twice": run_unet_twice,
    "one batched backward": one_batched_backward,
}


def strategy_steps(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                   use_autocast: bool = True) -> Dict[str, Step]:
    """Each strategy as a step for ``helpers.course.measure``."""
    return {name: _as_step(strategy, tenc, unet, x, target, mask, use_autocast)
            for name, strategy in STRATEGIES.items()}


def _as_step(strategy: Strategy, tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
             mask: torch.Tensor, use_autocast: bool) -> Step:
    def step(losses: Losses) -> Tuple[torch.Tensor, torch.Tensor]:
        return strategy(tenc, unet, x, target, mask, losses, use_autocast)
    return step

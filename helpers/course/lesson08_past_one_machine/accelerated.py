"""The chained case as diffusion fine-tuning scripts write it with Hugging Face Accelerate, on every rank.

``accelerator.prepare`` on both modules and both optimizers, ``accelerator.accumulate(tenc, unet)`` over
``GRADIENT_ACCUMULATION_STEPS`` micro-batches, ``accelerator.backward``, bf16 mixed precision, and each optimizer's
``step()`` and ``zero_grad()`` on every micro-batch (Accelerate skips them until the gradients are synchronised).
Run on the processes of ``helpers.tools.spawn.run_distributed``: ``Accelerator`` joins their process group when
``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` are set, as ``torchrun`` sets them. That is Accelerate's DDP path
(MULTI_CPU here, MULTI_GPU with a GPU per process); ``backward_paths`` reads from Accelerate's source what
``accelerator.backward`` does on its other paths (DeepSpeed, Megatron-LM), which nothing here runs. Accelerate is
imported on the ranks only; the notebook's process never loads it.
"""
from __future__ import annotations

import ast
import inspect
import os
import textwrap
from typing import Any, Callable, Dict, List

import torch
from torch import nn

from helpers.course.lesson05_chained_amp.chain import chain_losses, make_batch, make_tenc, make_unet
from helpers.course.lesson08_past_one_machine.chained import ROWS_PER_RANK
from helpers.course.lesson08_past_one_machine.replicas import Gradients, peak_memory_mib

GRADIENT_ACCUMULATION_STEPS = 2
MIXED_PRECISION = "bf16"


def _copied_fix(accelerator: Any, tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                mask: torch.Tensor) -> None:
    loss_tenc, loss_unet = chain_losses(unet(tenc(x)), target, mask)
    accelerator.backward(loss_tenc, retain_graph=True)
    accelerator.backward(loss_unet)


def _keep_the_graph(accelerator: Any, tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                    mask: torch.Tensor) -> None:
    loss_tenc, loss_unet = chain_losses(unet(tenc(x)), target, mask)
    accelerator.backward(loss_tenc, retain_graph=True, inputs=list(tenc.parameters()))  # kwargs reach backward()
    accelerator.backward(loss_unet, inputs=list(unet.parameters()))


def _run_unet_twice(accelerator: Any, tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                    mask: torch.Tensor) -> None:
    hidden_state = tenc(x)
    loss_tenc, _ = chain_losses(unet(hidden_state), target, mask)
    accelerator.backward(loss_tenc, inputs=list(tenc.parameters()))
    _, loss_unet = chain_losses(unet(hidden_state.detach()), target, mask)
    accelerator.backward(loss_unet)


def _autograd_grad(accelerator: Any, tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                   mask: torch.Tensor) -> None:
    """As accelerator.backward would: each loss divided by the accumulation steps, added into .grad."""
    loss_tenc, loss_unet = chain_losses(unet(tenc(x)), target, mask)
    steps = accelerator.gradient_accumulation_steps
    tenc_params, unet_params = list(tenc.parameters()), list(unet.parameters())
    pairs = [*zip(tenc_params, torch.autograd.grad(loss_tenc / steps, tenc_params, retain_graph=True)),
             *zip(unet_params, torch.autograd.grad(loss_unet / steps, unet_params))]
    for parameter, gradient in pairs:
        parameter.grad = gradient if parameter.grad is None else parameter.grad + gradient


ACCELERATE_RECIPES: Dict[str, Callable[..., None]] = {
    "copied fix: backward(loss_tenc, retain_graph=True); backward(loss_unet)": _copied_fix,
    "keep the graph: inputs=tenc with retain_graph, then inputs=unet": _keep_the_graph,
    "run unet twice: inputs=tenc, then unet(hidden_state.detach())": _run_unet_twice,
    "torch.autograd.grad, divided and added into .grad": _autograd_grad,
}


def _micro_batch(seed: int, micro: int, world_size: int) -> tuple:
    return make_batch(seed + micro, batch=ROWS_PER_RANK * world_size)


def _record(optimizer: torch.optim.Optimizer, label: str, names: List[str], found: List[Gradients]) -> None:
    """Keep the gradients each real ``optimizer.step()`` is given (Accelerate calls it on synchronised steps only)."""
    def hook(opt: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        params = [p for group in opt.param_groups for p in group["params"]]
        found.append({f"{label}.{n}": None if p.grad is None else p.grad.detach().float().cpu().clone()
                      for n, p in zip(names, params)})
    optimizer.register_step_pre_hook(hook)


def _calls(statements: List[ast.stmt]) -> List[str]:
    """The calls these statements make, as written (``loss.backward(**kwargs)``, ``self.engine.step()``)."""
    return [ast.unparse(node) for statement in statements for node in ast.walk(statement)
            if isinstance(node, ast.Call)]


def _branches(function: Callable[..., Any]) -> List[Dict[str, Any]]:
    """Each branch of every ``if``/``elif``/``else`` in ``function``'s source: its test (``"else"`` for a final
    else), the functions it calls, and whether it returns."""
    found = []
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
        if not isinstance(node, ast.If):
            continue
        arms = [(ast.unparse(node.test), node.body)]
        if node.orelse and not (len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If)):
            arms.append(("else", node.orelse))
        for test, body in arms:
            found.append({"test": test, "calls": _calls(body),
                          "returns": any(isinstance(n, ast.Return) for s in body for n in ast.walk(s))})
    return found


def backward_paths() -> Dict[str, Any]:
    """What ``Accelerator.backward`` does on each of its paths, read from the installed Accelerate's source:
    ``"version"``, ``"branches"`` (``_branches`` of ``Accelerator.backward``), and under ``"deepspeed"`` every call
    in its DeepSpeed wrapper's ``backward`` (``"calls"``) and that method's ``"branches"``."""
    import accelerate
    from accelerate.utils.deepspeed import DeepSpeedEngineWrapper

    wrapper = ast.parse(textwrap.dedent(inspect.getsource(DeepSpeedEngineWrapper.backward))).body
    return {"version": accelerate.__version__, "branches": _branches(accelerate.Accelerator.backward),
            "deepspeed": {"calls": _calls(wrapper), "branches": _branches(DeepSpeedEngineWrapper.backward)}}


def accelerated_gradients(rank: int, world_size: int, seed: int = 0) -> Dict[str, Any]:
    """On one rank: each recipe in a diffusers-style Accelerate loop. Under ``"recipes"``, per recipe, what each
    optimizer really stepped with and what Accelerate set up ({"grads", "steps", "synchronised" per micro-batch,
    "wrapped", "distributed", "processes", "mixed_precision", "scaler"}); under ``"backward"``, ``backward_paths``;
    and ``"peak MiB"``."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world_size))
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))  # else Accelerate resets the threads
    from accelerate import Accelerator  # imported on the ranks only: the notebook never loads it

    on_gpus = torch.distributed.get_backend() == "nccl"   # one GPU per process; else the CPU
    accelerator = Accelerator(cpu=not on_gpus, gradient_accumulation_steps=GRADIENT_ACCUMULATION_STEPS,
                              mixed_precision=MIXED_PRECISION)
    found = {}
    for name, recipe in ACCELERATE_RECIPES.items():
        tenc, unet = make_tenc(seed), make_unet(seed + 1)
        opt_tenc = torch.optim.SGD(tenc.parameters(), lr=0.1)
        opt_unet = torch.optim.SGD(unet.parameters(), lr=0.1)
        stepped: List[Gradients] = []
        _record(opt_tenc, "tenc", [n for n, _ in tenc.named_parameters()], stepped)
        _record(opt_unet, "unet", [n for n, _ in unet.named_parameters()], stepped)
        tenc_p, unet_p, opt_tenc_p, opt_unet_p = accelerator.prepare(tenc, unet, opt_tenc, opt_unet)
        synchronised = []
        for micro in range(GRADIENT_ACCUMULATION_STEPS):
            x, target, mask = (t.chunk(world_size)[rank].to(accelerator.device)
                               for t in _micro_batch(seed, micro, world_size))
            with accelerator.accumulate(tenc_p, unet_p):
                synchronised.append(accelerator.sync_gradients)   # False: this backward runs under no_sync()
                recipe(accelerator, tenc_p, unet_p, x, target, mask)
                for optimizer in (opt_tenc_p, opt_unet_p):
                    optimizer.step()
                    optimizer.zero_grad()
        found[name] = {"grads": {k: v for record in stepped for k, v in record.items()}, "steps": len(stepped),
                       "synchronised": synchronised,
                       "wrapped": [type(m).__name__ for m in (tenc_p, unet_p)],
                       "distributed": str(accelerator.distributed_type), "processes": accelerator.num_processes,
                       "mixed_precision": accelerator.mixed_precision, "scaler": accelerator.scaler is not None}
    return {"recipes": found, "backward": backward_paths(), "peak MiB": peak_memory_mib()}


def accelerated_reference(seed: int, world_size: int) -> Gradients:
    """In this process, no Accelerate: under the same bf16 autocast, tenc's gradient of loss_tenc and unet's of
    loss_unet on the whole global batch, averaged over the micro-batches (the weights move only after the last)."""
    tenc, unet = make_tenc(seed), make_unet(seed + 1)
    total: Dict[str, torch.Tensor] = {}
    for micro in range(GRADIENT_ACCUMULATION_STEPS):
        x, target, mask = _micro_batch(seed, micro, world_size)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            prediction = unet(tenc(x))
        loss_tenc, loss_unet = chain_losses(prediction, target, mask)
        grads = {**dict(zip([f"tenc.{n}" for n, _ in tenc.named_parameters()],
                            torch.autograd.grad(loss_tenc, list(tenc.parameters()), retain_graph=True))),
                 **dict(zip([f"unet.{n}" for n, _ in unet.named_parameters()],
                            torch.autograd.grad(loss_unet, list(unet.parameters()))))}
        for key, value in grads.items():
            total[key] = total.get(key, 0) + value.float() / GRADIENT_ACCUMULATION_STEPS
    return total

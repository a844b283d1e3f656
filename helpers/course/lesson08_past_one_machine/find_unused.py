"""What ``find_unused_parameters=True`` does on a rank, seen from the outside: section 3 of notebook 08.

``sink_view`` shows how a head that this step's loss leaves out gets marked ready (the outputs pass through DDP's
``_DDPSink``, and the head's gradient accumulators run with an undefined gradient); ``uneven_use`` shows what DDP
shares between the processes when one uses a head and the other does not; ``cost`` times the forward and the
backward with the flag off and on and counts the all-reduces per step with ``torch.profiler``; ``reaches`` walks
an output's autograd graph, as DDP's search for unused parameters does.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import nn

from helpers.course.lesson08_past_one_machine.replicas import reduction_finished, wrap
from helpers.course.models import make_two_models, own_term, shared_term

ALL_REDUCE_EVENT = "c10d::allreduce_"  # the profiler's name for one all-reduce call, on gloo and on NCCL
NO_UNUSED_WARNING = "did not find any unused parameters"  # the reducer's warning, on the native stderr


def accumulator(parameter: torch.Tensor) -> Any:
    """The autograd node that adds a gradient into ``parameter.grad`` (the one DDP's hooks sit on)."""
    return parameter.view_as(parameter).grad_fn.next_functions[0][0]


def reaches(output: torch.Tensor, parameters: Sequence[torch.Tensor]) -> List[bool]:
    """For each parameter: does ``output``'s autograd graph lead to its gradient accumulator?"""
    seen, stack = set(), [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return [accumulator(parameter) in seen for parameter in parameters]


@contextlib.contextmanager
def native_stderr(into: Optional[List[str]] = None) -> Iterator[None]:
    """Redirect this process's file descriptor 2 (where C++ code writes) for the block: to a temporary file whose
    text is appended to ``into``, or to nowhere when ``into`` is None (the profiler's start and stop lines)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if into is not None:
                capture.seek(0)
                into.append(capture.read())


def sink_view(rank: int, world_size: int, x: torch.Tensor, make_model: Callable[[], nn.Module],
              **ddp: Any) -> Dict[str, Dict[str, Any]]:
    """A two-head model in DDP, one step whose loss uses head ``a`` only, with the flag on and off. Per setting:
    the type of ``b``'s output's ``grad_fn``; whether the outputs' graph (what DDP searches after the forward) and
    the loss's graph (what the backward runs) lead to ``b``'s gradient accumulators; the gradients the hook on
    ``b.weight``'s accumulator saw; ``b.weight.grad``; whether the reduction finished; the native stderr."""
    found = {}
    for flag in (True, False):
        model = wrap(make_model(), rank, find_unused_parameters=flag, **ddp)
        head_b = list(model.module.b.parameters())
        seen: List[List[Optional[tuple]]] = []
        accumulator(head_b[0]).register_hook(
            lambda grad_inputs, grad_outputs, seen=seen: seen.append([None if g is None else tuple(g.shape)
                                                                      for g in grad_outputs]))
        printed: List[str] = []
        with native_stderr(printed):
            a, b = model(x)
            loss = own_term(a)
            reached = {"outputs reach b": [any(pair) for pair in zip(reaches(a, head_b), reaches(b, head_b))],
                       "loss reaches b": reaches(loss, head_b)}
            loss.backward()
        grad = head_b[0].grad
        found[f"find_unused_parameters={flag}"] = {
            "grad_fn": type(b.grad_fn).__name__, **reached, "hook on b.weight saw": seen,
            "b.weight.grad": None if grad is None else grad.detach().cpu(),
            "reduction finished": reduction_finished(model), "stderr": printed[0]}
        dist.barrier()
    return found


def uneven_use(rank: int, world_size: int, x: torch.Tensor, make_model: Callable[[], nn.Module],
               **ddp: Any) -> Dict[str, Optional[torch.Tensor]]:
    """With the flag on, rank 0's loss uses both heads, the other ranks' head ``a`` only: ``b.weight.grad`` on this
    rank, and head ``b``'s gradient on this rank's shard without DDP (what rank 0 contributes)."""
    model = wrap(make_model(), rank, find_unused_parameters=True, **ddp)
    a, b = model(x)
    (own_term(a) + (own_term(b) if rank == 0 else 0)).backward()
    plain = make_model().to(x.device)
    _, plain_b = plain(x)
    own_gradient = torch.autograd.grad(own_term(plain_b), plain.b.weight)[0]
    grad = model.module.b.weight.grad
    return {"b.weight.grad": None if grad is None else grad.detach().cpu(), "own": own_gradient.detach().cpu()}


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _forward(d1: nn.Module, d2: nn.Module, x1: torch.Tensor,
             x2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    return d1(x1), d2(x2)


def _backward(o1: torch.Tensor, o2: torch.Tensor) -> None:
    """The detach recipe's one backward."""
    (shared_term(o1, o2.detach()) + own_term(o1) + shared_term(o1.detach(), o2) + own_term(o2)).backward()


def _timed_step(d1: nn.Module, d2: nn.Module, x1: torch.Tensor, x2: torch.Tensor) -> Dict[str, float]:
    """One step of the detach recipe; seconds in the forward and in the backward."""
    dist.barrier()
    start = time.perf_counter()
    o1, o2 = _forward(d1, d2, x1, x2)
    _synchronize(x1.device)
    middle = time.perf_counter()
    _backward(o1, o2)
    _synchronize(x1.device)
    return {"forward": middle - start, "backward": time.perf_counter() - middle}


def _all_reduces(run: Callable[[], Any]) -> Tuple[Any, int]:
    """What ``run()`` returns, and how many all-reduce calls the profiler saw it make."""
    from torch.profiler import ProfilerActivity, profile

    with native_stderr(), profile(activities=[ProfilerActivity.CPU]) as profiler:
        value = run()
    return value, sum(event.name == ALL_REDUCE_EVENT for event in profiler.events())


def cost(rank: int, world_size: int, x1: torch.Tensor, x2: torch.Tensor, steps: int = 20,
         profiled: int = 2) -> Dict[str, Dict[str, Any]]:
    """M1 and M2, one DDP each, the detach recipe, with ``find_unused_parameters`` off and on: per setting, the
    seconds of every step's ``"forward"`` and ``"backward"`` (``steps`` steps, the settings alternating step by step,
    so both see the same machine), then the all-reduce calls the profiler counted in the forward and in the backward
    of ``profiled`` more steps (``"all-reduces per step"``: {"forward": n, "backward": n})."""
    settings = {}
    for flag in (False, True):
        m1, m2 = make_two_models(0)
        settings[f"find_unused_parameters={flag}"] = (wrap(m1, rank, find_unused_parameters=flag),
                                                       wrap(m2, rank, find_unused_parameters=flag))
    found: Dict[str, Dict[str, Any]] = {name: {"forward": [], "backward": []} for name in settings}
    for _ in range(steps):
        for name, (d1, d2) in settings.items():
            for part, seconds in _timed_step(d1, d2, x1, x2).items():
                found[name][part].append(seconds)
    for name, (d1, d2) in settings.items():
        counted = {"forward": 0, "backward": 0}
        for _ in range(profiled):
            outputs, in_forward = _all_reduces(functools.partial(_forward, d1, d2, x1, x2))
            _, in_backward = _all_reduces(functools.partial(_backward, *outputs))
            counted["forward"] += in_forward
            counted["backward"] += in_backward
        found[name]["all-reduces per step"] = {part: count / profiled for part, count in counted.items()}
    return found

"""Measuring a training step so that a noisy run cannot contradict what a lesson says about it.

A *step* here is a function that runs one training step, computing its losses with the function it is given, and
returns the losses it built (as a training loop's names would hold them). Each measurement wraps that function.

- **Backward nodes run**: every node of the step's graphs counted each time a backward pass runs it (``AccumulateGrad``
  left out). Deterministic: lessons make their statements about work from it.
- **Time**: ``torch.utils.benchmark``'s blocked autorange (median of many blocks, synchronised on a GPU). It varies on a
  shared machine: lessons only report it, in words generated from the figures.
- **Saved memory**: the activations and inputs the graph holds (``helpers.tools.saved_bytes``), at the peak of the step,
  and still alive after it while its losses are held.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch
from torch import nn
from torch.utils import benchmark as torch_benchmark

from helpers.tools.saved import graph_nodes, saved_bytes

Pair = Tuple[torch.Tensor, ...]
LossFunction = Callable[..., Pair]
Step = Callable[[LossFunction], Pair]  # runs one step with the loss function it is given; returns the losses


def _measuring(losses: LossFunction, on_losses: Callable[[Pair], None]) -> LossFunction:
    """``losses``, calling ``on_losses(result)`` each time the step computes them."""
    def measured(*args: Any) -> Pair:
        result = losses(*args)
        on_losses(result)
        return result
    return measured


def backward_nodes_run(step: Step, losses: LossFunction) -> int:
    """How many times the step's backward passes run a node (``AccumulateGrad`` nodes left out)."""
    runs = 0
    kept: List[Any] = []  # holding the nodes keeps their hooks (and ids) alive on every torch version
    hooked: Set[int] = set()
    handles: List[Any] = []

    def count(*_: Any) -> None:
        nonlocal runs
        runs += 1

    def hook_graph(result: Pair) -> None:
        for node in graph_nodes(list(result)):
            if id(node) not in hooked and getattr(node, "variable", None) is None:
                hooked.add(id(node))
                kept.append(node)
                handles.append(node.register_prehook(count))

    try:
        step(_measuring(losses, hook_graph))
    finally:
        for handle in handles:
            handle.remove()
    return runs


def step_seconds(step: Step, losses: LossFunction, min_run_time: float = 0.5) -> float:
    """Median seconds of one step, by ``torch.utils.benchmark``'s blocked autorange, after one warm-up step."""
    step(losses)
    timer = torch_benchmark.Timer(stmt="step(losses)", globals={"step": step, "losses": losses},
                                  num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def peak_saved_bytes(step: Step, losses: LossFunction, params: Sequence[torch.Tensor] = (),
                     held: Sequence[torch.Tensor] = ()) -> int:
    """The largest saved-tensor memory while the step runs, counting the graph behind ``held`` tensors too.

    Sampled each time the step computes its losses: the whole forward graph exists then, before any backward frees
    part of it. ``held``: what a loop still holds from its previous step while this step's forward runs.
    ``params``: their storages are not counted (weights are not activations).
    """
    roots: List[torch.Tensor] = list(held)
    peak = 0

    def sample(result: Pair) -> None:
        nonlocal peak
        roots.extend(result)
        peak = max(peak, saved_bytes(roots, list(params)))

    step(_measuring(losses, sample))
    return peak


def left_alive_bytes(step: Step, losses: LossFunction, params: Sequence[torch.Tensor] = ()) -> int:
    """Saved-tensor memory still alive after the step, while the losses it returned are held."""
    held = step(losses)
    return saved_bytes(list(held), list(params))


def cuda_peak_bytes(step: Step, losses: LossFunction, device: torch.device) -> int:
    """On CUDA: the allocator's peak while the step runs, above what was allocated before it started."""
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step(losses)
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - base


def measure(steps: Dict[str, Step], losses: LossFunction, modules: Sequence[nn.Module], limit: Optional[str] = None,
            min_run_time: float = 0.5, ratio_column: str = "x one-pass") -> List[Dict[str, Any]]:
    """One row per step: backward nodes run, median time (and its ratio to ``limit``'s), saved memory in MiB."""
    params = [p for module in modules for p in module.parameters()]
    device = params[0].device if params else torch.device("cpu")
    rows = []
    for name, step in steps.items():
        row: Dict[str, Any] = {
            "step": name,
            "backward nodes": backward_nodes_run(step, losses),
            "seconds": step_seconds(step, losses, min_run_time),
            "peak saved MiB": peak_saved_bytes(step, losses, params) / 2**20,
            "left alive MiB": left_alive_bytes(step, losses, params) / 2**20,
        }
        if device.type == "cuda":
            row["CUDA peak MiB"] = cuda_peak_bytes(step, losses, device) / 2**20
        rows.append(row)
    if limit is not None:
        limit_seconds = next(row["seconds"] for row in rows if row["step"] == limit)
        for row in rows:
            row[ratio_column] = row["seconds"] / limit_seconds
    return rows


def format_table(rows: List[Dict[str, Any]]) -> str:
    """The rows as a text table."""
    columns = list(rows[0])
    width = max(len(str(row[columns[0]])) for row in rows) + 2
    lines = ["  ".join(f"{c:>{width}}" if i == 0 else f"{c:>14}" for i, c in enumerate(columns))]
    for row in rows:
        cells = [f"{row[c]:>{width}}" if i == 0 else (f"{row[c] * 1000:>11.2f} ms" if c == "seconds"
                                                      else f"{row[c]:>14}" if isinstance(row[c], int)
                                                      else f"{row[c]:>14.2f}")
                 for i, c in enumerate(columns)]
        lines.append("  ".join(cells))
    return "\n".join(lines)

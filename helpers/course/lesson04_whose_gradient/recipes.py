"""Ways to compute two models' gradients from two losses that share a term, and a benchmark of them.

Each recipe is a function ``recipe(m1, m2, x1, x2, losses)`` that runs the forward pass itself and leaves
the gradients in ``.grad`` (zeroed first). ``losses(o1, o2)`` returns ``(l1, l2)``.

Usage, for the benchmark at larger sizes::

    python -m helpers.course.lesson04_whose_gradient.recipes --hidden 1024 --batch 2048 --repeats 20
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from helpers.tools.saved import State, saved_tensors

Losses = Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]
Recipe = Callable[[nn.Module, nn.Module, torch.Tensor, torch.Tensor, Losses], None]


def _zero(*models: nn.Module) -> None:
    for model in models:
        model.zero_grad(set_to_none=True)


def copied_fix(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> None:
    """The widely copied fix: both backward passes into both models. Each model gets the gradient of L1 + L2."""
    _zero(m1, m2)
    l1, l2 = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True)
    l2.backward()


def recipe_a_inputs(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> None:
    """(a) Each backward restricted to its own model's parameters with ``inputs=``."""
    _zero(m1, m2)
    l1, l2 = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))


def recipe_b_autograd_grad(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> None:
    """(b) ``torch.autograd.grad`` for each loss and its own model; the first call still needs retain_graph."""
    _zero(m1, m2)
    l1, l2 = losses(m1(x1), m2(x2))
    grads1 = torch.autograd.grad(l1, list(m1.parameters()), retain_graph=True)
    grads2 = torch.autograd.grad(l2, list(m2.parameters()))
    for param, grad in zip([*m1.parameters(), *m2.parameters()], [*grads1, *grads2]):
        param.grad = grad


def recipe_c_detach(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> None:
    """(c) Each loss sees the other model's output detached: one backward pass, no retain_graph."""
    _zero(m1, m2)
    o1, o2 = m1(x1), m2(x2)
    l1, _ = losses(o1, o2.detach())
    _, l2 = losses(o1.detach(), o2)
    (l1 + l2).backward()


def recipe_d_sum(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> None:
    """(d) The summed loss: both models trained on L1 + L2 - right only when the objective is joint."""
    _zero(m1, m2)
    l1, l2 = losses(m1(x1), m2(x2))
    (l1 + l2).backward()


ONE_PASS_LIMIT = "(d) sum = one-pass limit"
RECIPES: Dict[str, Recipe] = {
    "copied fix": copied_fix,
    "(a) backward(inputs=)": recipe_a_inputs,
    "(b) autograd.grad": recipe_b_autograd_grad,
    "(c) detach the other": recipe_c_detach,
    ONE_PASS_LIMIT: recipe_d_sum,
}


def saved_bytes(outputs: Sequence[torch.Tensor], params: Sequence[torch.Tensor] = ()) -> int:
    """Bytes of the storages the graph's alive saved tensors use, each storage once, parameters' excluded.

    It counts activations and the inputs the graph saved. It reads the graph and keeps nothing alive, unlike a
    saved-tensor pack hook that stores tensors. (Tensors saved by a custom autograd.Function are not seen.)
    """
    parameter_storages = {p.untyped_storage().data_ptr() for p in params}
    storages: Dict[int, int] = {}
    for saved in saved_tensors(list(outputs)):
        if saved.state is not State.ALIVE:
            continue
        node_value = getattr(saved.node, f"_saved_{saved.attribute.split('[')[0]}")
        for value in node_value if isinstance(node_value, (tuple, list)) else [node_value]:
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                if storage.data_ptr() not in parameter_storages:
                    storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def peak_saved_bytes(recipe: Recipe, m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor,
                     losses: Losses) -> int:
    """The largest saved-activation memory while ``recipe`` runs.

    Sampled each time the recipe computes its losses, over every graph built so far (both models' outputs
    and all losses): the whole forward graph exists then, before any backward pass frees part of it.
    """
    roots: List[torch.Tensor] = []
    peak = 0

    def measuring_losses(o1: torch.Tensor, o2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        nonlocal peak
        l1, l2 = losses(o1, o2)
        roots.extend([l1, l2])
        peak = max(peak, saved_bytes(roots, [*m1.parameters(), *m2.parameters()]))
        return l1, l2

    handles = [model.register_forward_hook(lambda _m, _i, output: roots.append(output)) for model in (m1, m2)]
    try:
        recipe(m1, m2, x1, x2, measuring_losses)
    finally:
        for handle in handles:
            handle.remove()
    return peak


def time_recipe(recipe: Recipe, m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor,
                losses: Losses, repeats: int) -> float:
    """Median seconds of one forward-and-backward step, after one warm-up."""
    recipe(m1, m2, x1, x2, losses)
    times = []
    for _ in range(repeats):
        if x1.is_cuda:
            torch.cuda.synchronize()
        started = time.perf_counter()
        recipe(m1, m2, x1, x2, losses)
        if x1.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def cuda_peak_bytes(recipe: Recipe, m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor,
                    losses: Losses) -> int:
    """On CUDA: the allocator's peak while ``recipe`` runs, above what was allocated before it started."""
    m1.zero_grad(set_to_none=True)
    m2.zero_grad(set_to_none=True)
    torch.cuda.synchronize(x1.device)
    base = torch.cuda.memory_allocated(x1.device)
    torch.cuda.reset_peak_memory_stats(x1.device)
    recipe(m1, m2, x1, x2, losses)
    torch.cuda.synchronize(x1.device)
    return torch.cuda.max_memory_allocated(x1.device) - base


def benchmark(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses,
              repeats: int = 10, recipes: Optional[Dict[str, Recipe]] = None,
              limit: str = ONE_PASS_LIMIT) -> List[dict]:
    """One row per recipe: median step time, its ratio to the ``limit`` recipe's, and peak saved memory."""
    recipes = recipes or RECIPES
    rows = []
    for name, recipe in recipes.items():
        row = {"recipe": name, "seconds": time_recipe(recipe, m1, m2, x1, x2, losses, repeats),
               "saved MiB": peak_saved_bytes(recipe, m1, m2, x1, x2, losses) / 2**20}
        if x1.is_cuda:
            row["CUDA peak MiB"] = cuda_peak_bytes(recipe, m1, m2, x1, x2, losses) / 2**20
        rows.append(row)
    limit_seconds = next(row["seconds"] for row in rows if row["recipe"] == limit)
    for row in rows:
        row["x one-pass"] = row["seconds"] / limit_seconds
    return rows


def format_table(rows: List[dict]) -> str:
    """The benchmark rows as a text table."""
    columns = list(rows[0])
    lines = ["  ".join(f"{c:>24}" if i == 0 else f"{c:>13}" for i, c in enumerate(columns))]
    for row in rows:
        cells = [f"{row[c]:>24}" if i == 0 else (f"{row[c] * 1000:>10.2f} ms" if c == "seconds" else f"{row[c]:>13.2f}")
                 for i, c in enumerate(columns)]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: benchmark the recipes on models of a chosen size."""
    from helpers.course.device import pick_device
    from helpers.course.models import make_model, two_losses

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-features", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    m1 = make_model(0, args.in_features, args.hidden).to(device)
    m2 = make_model(1, args.in_features, args.hidden).to(device)
    generator = torch.Generator().manual_seed(0)
    x1 = torch.randn(args.batch, args.in_features, generator=generator).to(device)
    x2 = torch.randn(args.batch, args.in_features, generator=generator).to(device)
    print(f"device {device}, in_features {args.in_features}, hidden {args.hidden}, batch {args.batch}")
    print(format_table(benchmark(m1, m2, x1, x2, two_losses, args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

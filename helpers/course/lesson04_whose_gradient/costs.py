"""What each recipe costs: backward nodes run (deterministic), step time, saved memory (``helpers.course.measure``).

Usage, for the table at larger sizes::

    python -m helpers.course.lesson04_whose_gradient.costs --hidden 1024 --batch 2048
"""
from __future__ import annotations

import argparse
import functools
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from helpers.course.lesson04_whose_gradient.recipes import ONE_PASS_LIMIT, RECIPES, Losses, Pair, Recipe
from helpers.course.measure import Step, format_table, measure


def _run(recipe: Recipe, m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> Pair:
    return recipe(m1, m2, x1, x2, losses)


def recipe_steps(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor,
                 recipes: Optional[Dict[str, Recipe]] = None) -> Dict[str, Step]:
    """Each recipe as a step for ``helpers.course.measure``: it runs with whatever loss function it is given."""
    return {name: functools.partial(_run, recipe, m1, m2, x1, x2) for name, recipe in (recipes or RECIPES).items()}


def recipe_costs(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses,
                 recipes: Optional[Dict[str, Recipe]] = None, min_run_time: float = 0.5) -> List[Dict[str, Any]]:
    """One row per recipe: backward nodes run, median step time and its ratio to recipe (d)'s, saved memory."""
    steps = recipe_steps(m1, m2, x1, x2, recipes)
    limit = ONE_PASS_LIMIT if ONE_PASS_LIMIT in steps else None
    return measure(steps, losses, [m1, m2], limit=limit, min_run_time=min_run_time)


def larger_models(in_features: int = 256, hidden: int = 512, batch: int = 1024,
                  device: Optional[torch.device] = None) -> Tuple[nn.Module, nn.Module, torch.Tensor, torch.Tensor]:
    """The course's two models at a size where timing means something, and a batch for each."""
    from helpers.course.models import make_model

    device = device or torch.device("cpu")
    m1 = make_model(0, in_features, hidden).to(device)
    m2 = make_model(1, in_features, hidden).to(device)
    generator = torch.Generator().manual_seed(0)
    x1 = torch.randn(batch, in_features, generator=generator).to(device)
    x2 = torch.randn(batch, in_features, generator=generator).to(device)
    return m1, m2, x1, x2


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: the table for models of a chosen size."""
    from helpers.course.device import pick_device
    from helpers.course.models import two_losses

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-features", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--min-run-time", type=float, default=1.0, help="seconds of timing per recipe")
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    m1, m2, x1, x2 = larger_models(args.in_features, args.hidden, args.batch, device)
    print(f"device {device}, in_features {args.in_features}, hidden {args.hidden}, batch {args.batch}")
    print(format_table(recipe_costs(m1, m2, x1, x2, two_losses, min_run_time=args.min_run_time)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

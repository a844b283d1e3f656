"""Notebook 08, section 6: ``helpers.tools.ReductionWatch`` on each way of taking two losses' gradients under DDP."""
from __future__ import annotations

from typing import Dict

from helpers.course.lesson08_past_one_machine.recipes import RECIPES, global_batch
from helpers.course.lesson08_past_one_machine.replicas import rank_device, wrap
from helpers.course.models import make_two_models
from helpers.tools.ddp_watch import ReductionWatch


def watched(rank: int, world_size: int, seed: int = 0) -> Dict[str, Dict[str, object]]:
    """On one rank: each recipe once more, watched by ``helpers.tools.ReductionWatch``; per recipe its ``"report"``
    and its ``"unreduced"`` (parameter, how) pairs."""
    x1, x2 = (x.chunk(world_size)[rank].to(rank_device(rank)) for x in global_batch(seed, world_size))
    reports = {}
    for name, recipe in RECIPES.items():
        m1, m2 = make_two_models(seed)
        d1, d2 = wrap(m1, rank), wrap(m2, rank)
        watch = ReductionWatch(M1=d1, M2=d2)
        recipe(d1, d2, d1(x1), d2(x2))
        reports[name] = {"report": watch.report(), "unreduced": [(u.parameter, u.how) for u in watch.unreduced()]}
        watch.remove()
    return reports

"""Notebook 08, section 6: ``helpers.tools.ReductionWatch`` on each recipe, on one DDP around both models with M1's
step between the two backward passes, and on wrappers with ``static_graph=True`` (which it cannot follow). Each time
one SGD step follows, then ``replicas_differ`` says whether the replicas really moved apart, so that the notebook can
hold the watch's words against the ranks."""
from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Tuple

import torch
from torch import nn

from helpers.course.lesson08_past_one_machine.failures import BothModels
from helpers.course.lesson08_past_one_machine.replicas import rank_device, wrap
from helpers.course.models import make_two_models, two_losses
from helpers.tools.ddp_watch import ReductionWatch, replicas_differ

STEP_BETWEEN = "one DDP around both models: inputs=M1, opt1.step(), then inputs=M2"
STATIC_GRAPH = "the recipe with inputs=, in DDP with static_graph=True"


def step_between(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, rank: int,
                  opt1: torch.optim.Optimizer, opt2: torch.optim.Optimizer) -> ReductionWatch:
    """Both models in one wrapper; M1's optimizer steps between the two restricted backward passes."""
    both = wrap(BothModels(m1, m2), rank)
    watch = ReductionWatch(both=both)
    l1, l2 = two_losses(*both(x1, x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    opt1.step()                                           # before DDP has averaged M1's gradient
    l2.backward(inputs=list(m2.parameters()))
    opt2.step()
    return watch


Recipe = Callable[[nn.Module, nn.Module, torch.Tensor, torch.Tensor], None]


def watched(rank: int, world_size: int, recipes: Mapping[str, Recipe],
            global_batch: Callable[[int, int], Tuple[torch.Tensor, torch.Tensor]],
            seed: int = 0) -> Dict[str, Dict[str, object]]:
    """On one rank: each of ``recipes`` (``recipes.RECIPES``, with ``recipes.global_batch``), then one SGD step per
    model, watched; the step-between scenario; and ``static_graph=True``. Per scenario:
    ``"report"``, ``"cannot_see"`` (what the watch cannot follow, and why), ``"unreduced"`` as (parameter, how, fate)
    triples, and ``"differ"``: the parameters whose value
    or ``.grad`` differs between the ranks after the step (``replicas_differ``, named like the watch names them)."""
    x1, x2 = (x.chunk(world_size)[rank].to(rank_device(rank)) for x in global_batch(seed, world_size))
    found: Dict[str, Dict[str, object]] = {}
    inputs_recipe = next(name for name in recipes if "inputs=" in name)
    for name in [*recipes, STEP_BETWEEN, STATIC_GRAPH]:
        m1, m2 = make_two_models(seed)
        opt1, opt2 = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (m1, m2))
        if name == STEP_BETWEEN:
            watch = step_between(m1, m2, x1, x2, rank, opt1, opt2)
            labelled: List[Tuple[str, nn.Module]] = [("both.m1", m1), ("both.m2", m2)]
        else:
            options = {"static_graph": True} if name == STATIC_GRAPH else {}
            d1, d2 = wrap(m1, rank, **options), wrap(m2, rank, **options)
            watch = ReductionWatch(M1=d1, M2=d2)
            recipes[inputs_recipe if name == STATIC_GRAPH else name](d1, d2, d1(x1), d2(x2))
            opt1.step()
            opt2.step()
            labelled = [("M1", m1), ("M2", m2)]
        found[name] = {"report": watch.report(), "cannot_see": watch.cannot_see(),
                       "unreduced": [(u.parameter, u.how, u.fate) for u in watch.unreduced()],
                       "differ": [f"{label}.{entry}" for label, model in labelled for entry in replicas_differ(model)]}
        watch.remove()
    return found

"""The contract of notebook 08's exercise, judged on every rank of the checker's own processes.

``ddp_two_loss_step(m1, m2, opt1, opt2, x1, x2)`` gets M1 and M2 wrapped in DDP, their optimizers and this rank's
shard; it may change the two models' weights and ``.grad`` and the optimizers' state, nothing else. On each rank
the engine builds twin DDP pairs for a situation, runs the learner's step on one and the solution on the other, and
compares the whole state; the ranks agree after every situation (an all-reduce) so they stop together.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import torch
import torch.distributed as dist

from helpers.course.exercises.engine.build import mlp, randn, refill_with, seeded
from helpers.course.exercises.engine.contract import TRAINING_STEP_TRIED, Contract, returns_nothing, training_step
from helpers.course.exercises.engine.judge import judge
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import GRADS, MODE, Situation, batch, calls, optimizers
from helpers.course.exercises.engine.step_watch import kind
from helpers.course.lesson08_past_one_machine.replicas import rank_device, wrap
from helpers.course.models import BATCH, HIDDEN, IN_FEATURES
from helpers.language import tr

AXES: tuple = (
    batch(BATCH, 1, 5),
    GRADS,
    MODE,
    calls(1, 3),
    optimizers("SGD", "Adam", "fused AdamW"),  # fused where this torch has it (step_watch.kind)
)


def build(situation: Situation) -> World:
    """This rank's twin: M1 and M2 in DDP, their optimizers, this rank's shard of a global batch."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    device = rank_device(rank)
    m1 = seeded(situation.seed, lambda: mlp((IN_FEATURES, HIDDEN, 1))).to(device)
    m2 = seeded(situation.seed + 1, lambda: mlp((IN_FEATURES, HIDDEN, 1))).to(device)
    d1, d2 = wrap(m1, rank), wrap(m2, rank)
    if situation["mode"] == "eval":
        d1.eval()
        d2.eval()
    make = kind(situation["optimizer"])
    opt1, opt2 = make(m1.parameters()), make(m2.parameters())
    rows = situation["batch"]

    def shard(call: int) -> Dict[str, torch.Tensor]:
        return {name: randn(situation.seed + 10 * call + offset, rows * world_size, IN_FEATURES).chunk(
            world_size)[rank].contiguous().to(device) for offset, name in enumerate(("x1", "x2"))}

    data = shard(1)
    return World(args=(d1, d2, opt1, opt2, data["x1"], data["x2"]), modules={"m1": m1, "m2": m2},
                 optimizers={"opt1": opt1, "opt2": opt2}, inputs=data, refill=refill_with(data, shard))


def any_rank(found_here: bool) -> bool:
    """True on every rank when any rank found a difference."""
    flag = torch.tensor([1.0 if found_here else 0.0], device=rank_device(dist.get_rank()))
    dist.all_reduce(flag)
    return bool(flag.item() > 0)


def _judge_on_ranks(rank: int, world_size: int, payload: bytes, seed: int, combinations: int) -> Optional[str]:
    import pickle

    return judge(CONTRACT, pickle.loads(payload), seed=seed, combinations=combinations)


def judge_in_processes(contract: Contract, answer: Callable[..., Any], seed: Optional[int] = None,
                       combinations: Optional[int] = None) -> Optional[str]:
    """The engine on 2 processes of their own (the mutation benchmark's wider sweep): the first rank's diagnosis."""
    import cloudpickle

    from helpers.tools.spawn import run_distributed

    found: List[Optional[str]] = run_distributed(
        _judge_on_ranks, world_size=2, timeout_s=180.0,
        args=(cloudpickle.dumps(answer), contract.seed if seed is None else seed,
              contract.combinations if combinations is None else combinations))
    return next((tr("On rank {rank}: {problem}", rank=rank, problem=text) for rank, text in enumerate(found)
                 if text is not None), None)


CONTRACT = Contract(
    exercise_id="ddp_two_loss_step",
    answer_name="ddp_two_loss_step",
    build=build,
    axes=AXES,
    may_change=training_step(("m1", "m2"), ("opt1", "opt2")),
    generic_axes=True,
    combinations=3,
    seed=830,
    sync=any_rank,
    judged_in_checker=True,
    wider_judge=judge_in_processes,
    returns=returns_nothing,
    tried_extra=(TRAINING_STEP_TRIED,),
)

"""Workers for tests/tools/test_spawn.py: at the top of a module, so that spawned processes can import them."""
from __future__ import annotations

import time

import torch
import torch.distributed as dist


def all_reduce_rank(rank: int, world_size: int) -> torch.Tensor:
    """Each rank contributes rank + 1; every rank gets the sum."""
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    return value


def fail_on_rank_one(rank: int, world_size: int) -> int:
    if rank == 1:
        raise ValueError("rank one says no")
    dist.barrier()  # rank 0 waits for a partner that will never come: the launcher must end it
    return rank


def sleep_for(rank: int, world_size: int, seconds: float) -> int:
    time.sleep(seconds)
    return rank

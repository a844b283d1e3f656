"""A two-loss training script as ``torchrun`` starts it, one process per GPU (or 2 on the CPU):

    torchrun --standalone --nproc_per_node 2 -m helpers.course.lesson08_past_one_machine.torchrun_script

``torchrun`` starts the processes and sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT`` in each one's environment; the script joins the group, trains, and leaves it. Each rank prints a
checksum of its weights at the end (the replicas stay equal). tests/course/test_ddp_recipes.py runs it.
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from helpers.course.models import BATCH, make_inputs, make_two_models, two_losses


def main(steps: int = 3) -> None:
    """Join the group torchrun set up, train M1 and M2 for ``steps`` steps, print a checksum, leave the group."""
    on_gpus = torch.cuda.is_available()
    dist.init_process_group("nccl" if on_gpus else "gloo")   # reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])                 # this process's GPU on its machine
    device = torch.device("cuda", local_rank) if on_gpus else torch.device("cpu")
    if on_gpus:
        torch.cuda.set_device(device)
    m1, m2 = make_two_models(0, device)
    d1, d2 = (DistributedDataParallel(m, device_ids=[local_rank] if on_gpus else None) for m in (m1, m2))
    opt1, opt2 = torch.optim.SGD(m1.parameters(), lr=0.1), torch.optim.SGD(m2.parameters(), lr=0.1)
    for step in range(steps):
        x1, x2 = (x.chunk(world_size)[rank].to(device) for x in make_inputs(step, batch=BATCH * world_size))
        opt1.zero_grad()
        opt2.zero_grad()
        l1, l2 = two_losses(d1(x1), d2(x2))
        l1.backward(retain_graph=True, inputs=list(m1.parameters()))
        l2.backward(inputs=list(m2.parameters()))
        opt1.step()
        opt2.step()
    checksum = sum(float(p.detach().double().sum()) for m in (m1, m2) for p in m.parameters())
    print(f"rank {rank} of {world_size}: weights checksum {checksum:.12e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

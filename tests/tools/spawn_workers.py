"""Workers for tests/tools/test_spawn.py: at the top of a module, so that spawned processes can import them."""
from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

AT_IMPORT = os.environ.get("COURSE_SPAWN_PROBE")  # what a module that reads the environment as it loads sees


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


def surroundings(rank: int, world_size: int, variable: str) -> tuple:
    """What this rank sees of its parent: an environment variable (now, and as this module loaded), the working
    folder, how it was started, torch's seed, and torch.distributed's debug level."""
    import multiprocessing

    import torch.distributed as dist

    return (os.environ.get(variable), AT_IMPORT, os.getcwd(), multiprocessing.get_start_method(),
            torch.initial_seed(), str(dist.get_debug_level()))


def sleep_for(rank: int, world_size: int, seconds: float) -> int:
    time.sleep(seconds)
    return rank


def _watched_steps(models, loss_pair, rank):
    """For two real models in DDP: each way of taking two losses' gradients, then one SGD step per model, with what
    ReductionWatch reported and which parameters differ between the ranks (helpers of ``watch_real_architectures``)."""
    from torch.nn.parallel import DistributedDataParallel

    from helpers.tools.ddp_watch import ReductionWatch, replicas_differ

    found = {}
    for way in ("restricted", "second backward", "autograd.grad", "through .module"):
        built = models()
        # broadcast_buffers=False, as GAN scripts under DDP set it: on torch 2.4, the buffer broadcast at D's second
        # forward rewrites BatchNorm's running statistics, which that torch saved for backward (error 2).
        wrapped = {name: DistributedDataParallel(model, broadcast_buffers=False) for name, model in built.items()}
        watch = ReductionWatch(**wrapped)
        use = {name: (model.module if way == "through .module" else model) for name, model in wrapped.items()}
        first, second = loss_pair(use, rank)
        names = list(wrapped)
        first_params = list(wrapped[names[0]].module.parameters())
        second_params = list(wrapped[names[1]].module.parameters())
        if way in ("restricted", "through .module"):
            first.backward(retain_graph=True, inputs=first_params)
            second.backward(inputs=second_params)
        elif way == "second backward":
            first.backward(retain_graph=True)
            second.backward()
        else:
            for p, g in zip(first_params, torch.autograd.grad(first, first_params, retain_graph=True)):
                p.grad = g
            for p, g in zip(second_params, torch.autograd.grad(second, second_params)):
                p.grad = g
        for model in wrapped.values():                      # one plain SGD step per model: what a loop does next
            torch.optim.SGD(model.module.parameters(), lr=0.01).step()
        differ = [f"{name}.{p}" for name, model in wrapped.items() for p in replicas_differ(model)]
        unreduced = watch.unreduced()
        found[way] = {"unreduced": sorted({u.parameter for u in unreduced}), "how": sorted({u.how for u in unreduced}),
                      "differ": differ, "parameters": sorted(f"{n}.{p}" for n, m in built.items()
                                                             for p, _ in m.named_parameters())}
        watch.remove()
    return found


def watch_real_architectures(rank: int, world_size: int):
    """ReductionWatch on DCGAN (clashing parameter names, BatchNorm) and a text encoder -> UNet (LayerNorm,
    GroupNorm, skip connections, cross-attention), each rank on its own data."""
    import torch.nn.functional as F

    from tests.tools.real_models import diffusion_losses, make_dcgan, make_text_unet

    def dcgan():
        netg, netd, _, _ = make_dcgan(seed=0)
        return {"G": netg, "D": netd}

    def gan_losses(use, rank):
        _, _, noise, real = make_dcgan(seed=10 + rank)
        fake = use["G"](noise)
        d_loss = F.softplus(-use["D"](real)).mean() + F.softplus(use["D"](fake)).mean()
        g_loss = F.softplus(-use["D"](fake)).mean()
        return g_loss, d_loss  # G is trained by g_loss (first), D by d_loss (second)

    def text_unet():
        tenc, unet, _, _, _ = make_text_unet(seed=0)
        return {"tenc": tenc, "unet": unet}

    def chain_losses(use, rank):
        _, _, tokens, images, noise = make_text_unet(seed=10 + rank)
        return diffusion_losses(use["tenc"], use["unet"], tokens, images, noise)

    return {"dcgan": _watched_steps(dcgan, gan_losses, rank),
            "text_unet": _watched_steps(text_unet, chain_losses, rank)}

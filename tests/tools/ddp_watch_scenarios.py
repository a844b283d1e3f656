"""Workers for tests/tools/test_ddp_watch.py: every way two losses' gradients meet DDP, each watched by
ReductionWatch and checked with replicas_differ (at the top of a module, so that spawned processes import them).

Each scenario builds fresh models, runs one or more training steps the way people write them, and returns what the
watch reported (its ``unreduced()`` as (parameter, how, fate) triples, ``pending()``, ``cannot_see()``, ``report()``)
and what really happened: ``replicas_differ`` on every model, after the steps.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

from helpers.course.lesson08_past_one_machine.failures import BothModels, TwoHeads
from helpers.course.lesson08_past_one_machine.recipes import global_batch
from helpers.course.models import make_two_models, own_term, shared_term, two_losses
from helpers.tools.ddp_watch import ReductionWatch, replicas_differ

Scenario = Callable[[int, int], Tuple[ReductionWatch, Dict[str, nn.Module]]]


def _shard(rank: int, world_size: int, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    return tuple(x.chunk(world_size)[rank] for x in global_batch(seed, world_size))


def _sgd(*models: nn.Module) -> List[torch.optim.Optimizer]:
    return [torch.optim.SGD(model.parameters(), lr=0.1) for model in models]


def _per_model(first: str, second: str, steps: int = 2) -> Scenario:
    """One DDP per model; ``first`` and ``second`` say how far each backward reaches ("own", "all")."""
    def scenario(rank: int, world_size: int):
        m1, m2 = make_two_models(0)
        d1, d2 = DDP(m1), DDP(m2)
        watch = ReductionWatch(M1=d1, M2=d2)
        opt1, opt2 = _sgd(m1, m2)
        for step in range(steps):
            x1, x2 = _shard(rank, world_size, step)
            opt1.zero_grad()
            opt2.zero_grad()
            l1, l2 = two_losses(d1(x1), d2(x2))
            l1.backward(retain_graph=True, inputs=list(m1.parameters()) if first == "own" else None)
            l2.backward(inputs=list(m2.parameters()) if second == "own" else None)
            opt1.step()
            opt2.step()
        return watch, {"M1": m1, "M2": m2}
    return scenario


def _per_model_autograd_grad(rank: int, world_size: int):
    m1, m2 = make_two_models(0)
    d1, d2 = DDP(m1), DDP(m2)
    watch = ReductionWatch(M1=d1, M2=d2)
    opt1, opt2 = _sgd(m1, m2)
    x1, x2 = _shard(rank, world_size)
    l1, l2 = two_losses(d1(x1), d2(x2))
    p1, p2 = list(m1.parameters()), list(m2.parameters())
    for p, g in zip(p1 + p2, torch.autograd.grad(l1, p1, retain_graph=True) + torch.autograd.grad(l2, p2)):
        p.grad = g
    opt1.step()
    opt2.step()
    return watch, {"M1": m1, "M2": m2}


def _per_model_detach(rank: int, world_size: int):
    m1, m2 = make_two_models(0)
    d1, d2 = DDP(m1), DDP(m2)
    watch = ReductionWatch(M1=d1, M2=d2)
    opt1, opt2 = _sgd(m1, m2)
    for step in range(2):
        x1, x2 = _shard(rank, world_size, step)
        opt1.zero_grad()
        opt2.zero_grad()
        o1, o2 = d1(x1), d2(x2)
        (shared_term(o1, o2.detach()) + own_term(o1) + shared_term(o1.detach(), o2) + own_term(o2)).backward()
        opt1.step()
        opt2.step()
    return watch, {"M1": m1, "M2": m2}


def _one_wrapper(step_between: bool, copied_fix: bool = False) -> Scenario:
    """Both models in one DDP: restricted backward passes, with or without M1's step between them; or the copied
    fix (both backward passes over everything)."""
    def scenario(rank: int, world_size: int):
        m1, m2 = make_two_models(0)
        both = DDP(BothModels(m1, m2))
        watch = ReductionWatch(both=both)
        opt1, opt2 = _sgd(m1, m2)
        for step in range(2):
            x1, x2 = _shard(rank, world_size, step)
            opt1.zero_grad()
            opt2.zero_grad()
            l1, l2 = two_losses(*both(x1, x2))
            l1.backward(retain_graph=True, inputs=None if copied_fix else list(m1.parameters()))
            if step_between:
                opt1.step()
            l2.backward(inputs=None if copied_fix else list(m2.parameters()))
            if not step_between:
                opt1.step()
            opt2.step()
        return watch, {"both": both.module}
    return scenario


def _through_module(rank: int, world_size: int):
    """M1 run through ``.module`` (the wrapper skipped), each backward restricted, then both steps."""
    m1, m2 = make_two_models(0)
    d1, d2 = DDP(m1), DDP(m2)
    watch = ReductionWatch(M1=d1, M2=d2)
    opt1, opt2 = _sgd(m1, m2)
    x1, x2 = _shard(rank, world_size)
    l1, l2 = two_losses(d1.module(x1), d2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    opt1.step()
    opt2.step()
    return watch, {"M1": m1, "M2": m2}


def _copied_fix_no_step(rank: int, world_size: int):
    """The copied fix, watched before any step: the gradients are not averaged, and no step has used them."""
    m1, m2 = make_two_models(0)
    d1, d2 = DDP(m1), DDP(m2)
    watch = ReductionWatch(M1=d1, M2=d2)
    l1, l2 = two_losses(d1(_shard(rank, world_size)[0]), d2(_shard(rank, world_size)[1]))
    l1.backward(retain_graph=True)
    l2.backward()
    return watch, {"M1": m1, "M2": m2}


def _actor_critic_through_module(zero_before_step: bool) -> Scenario:
    """SAC's actor update runs the critic through ``critic.module``: a local gradient lands in the critic's .grad.
    The usual loop clears it (critic_opt.zero_grad() before the critic's own backward); a loop that does not steps
    the critic with it."""
    def scenario(rank: int, world_size: int):
        torch.manual_seed(0)
        actor, critic = nn.Sequential(nn.Linear(16, 4), nn.Tanh()), nn.Sequential(nn.Linear(20, 32), nn.ReLU(),
                                                                                   nn.Linear(32, 1))
        d_actor, d_critic = DDP(actor), DDP(critic)
        watch = ReductionWatch(actor=d_actor, critic=d_critic)
        opt_actor, opt_critic = _sgd(actor, critic)
        for step in range(2):
            states, _ = _shard(rank, world_size, step)
            target = torch.ones(states.shape[0], 1) * (rank + 1)
            actions = d_actor(states)
            actor_loss = -d_critic.module(torch.cat([states, actions], 1)).mean()   # the critic as a function
            opt_actor.zero_grad()
            actor_loss.backward()
            opt_actor.step()
            if zero_before_step:
                opt_critic.zero_grad()
            critic_loss = F.mse_loss(d_critic(torch.cat([states, actions.detach()], 1)), target)
            critic_loss.backward()
            opt_critic.step()
            opt_critic.zero_grad()
        return watch, {"actor": actor, "critic": critic}
    return scenario


def _accumulation(step_inside_no_sync: bool) -> Scenario:
    """Gradient accumulation over 2 micro-batches, the first under no_sync(); the step after the second (right), or
    after each (a step inside no_sync uses a local gradient)."""
    def scenario(rank: int, world_size: int):
        m1, _ = make_two_models(0)
        d1 = DDP(m1)
        watch = ReductionWatch(M1=d1)
        (opt1,) = _sgd(m1)
        for micro in range(2):
            x1, _ = _shard(rank, world_size, micro)
            if micro == 0:
                with d1.no_sync():
                    own_term(d1(x1)).backward()
                if step_inside_no_sync:
                    opt1.step()
            else:
                own_term(d1(x1)).backward()
                opt1.step()
        return watch, {"M1": m1}
    return scenario


def _unused_head(rank: int, world_size: int):
    """One trunk, two heads, find_unused_parameters=True; the loss uses head a only; two steps."""
    model = DDP(TwoHeads(0), find_unused_parameters=True)
    watch = ReductionWatch(heads=model)
    (opt,) = _sgd(model.module)
    for step in range(2):
        x1, _ = _shard(rank, world_size, step)
        opt.zero_grad()
        a, _b = model(x1)
        own_term(a).backward()
        opt.step()
    return watch, {"heads": model.module}


def _static_graph(rank: int, world_size: int):
    m1, _ = make_two_models(0)
    d1 = DDP(m1, static_graph=True)
    watch = ReductionWatch(M1=d1)
    x1, _ = _shard(rank, world_size)
    own_term(d1(x1)).backward()
    return watch, {"M1": m1}


def _one_model(options: Dict[str, Any], step: Callable[..., None]) -> Scenario:
    """M1 in DDP with ``options``, two iterations of ``step(d1, m1, opt, x, rank)``."""
    def scenario(rank: int, world_size: int):
        m1, _ = make_two_models(0)
        d1 = DDP(m1, **options)
        watch = ReductionWatch(M1=d1)
        (opt,) = _sgd(m1)
        for iteration in range(2):
            step(d1, m1, opt, _shard(rank, world_size, iteration)[0], rank, iteration)
        return watch, {"M1": m1}
    return scenario


def _plain(d1, m1, opt, x, rank, iteration):
    opt.zero_grad()
    own_term(d1(x)).backward()
    opt.step()


def _clipped_out_of_place(d1, m1, opt, x, rank, iteration):
    opt.zero_grad()
    own_term(d1(x)).backward()
    for p in m1.parameters():
        p.grad = p.grad.clamp(-0.05, 0.05)          # an averaged .grad, replaced by a new tensor
    opt.step()


def _autograd_grad_copied_in(d1, m1, opt, x, rank, iteration):
    if iteration == 0:
        return _plain(d1, m1, opt, x, rank, iteration)
    opt.zero_grad(set_to_none=False)
    grads = torch.autograd.grad(own_term(d1(x)), list(m1.parameters()))
    for p, g in zip(m1.parameters(), grads):
        p.grad.copy_(g)                             # the same .grad tensor, this rank's own values
    opt.step()


def _func_grads(d1, m1, opt, x, rank, iteration):
    if iteration == 0:
        return _plain(d1, m1, opt, x, rank, iteration)
    weights = {name: p.detach() for name, p in m1.named_parameters()}
    grads = torch.func.grad(lambda w: own_term(torch.func.functional_call(d1.module, w, (x,))))(weights)
    for name, p in m1.named_parameters():
        p.grad = grads[name]
    opt.step()


def _zero_on_rank_0(d1, m1, opt, x, rank, iteration):
    if iteration == 0:
        return _plain(d1, m1, opt, x, rank, iteration)
    opt.zero_grad()
    (rank * own_term(d1.module(x))).backward()     # rank 0's local gradient is all zeros
    opt.step()


def _copied_fix_in_a_closure(d1, m1, opt, x, rank, iteration):
    def closure():
        opt.zero_grad()
        out = d1(x)
        own_term(out).backward(retain_graph=True)
        own_term(out).backward()
        return own_term(out)
    opt.step(closure)                               # the closure's gradients are computed inside step()


def _no_average_hook(rank: int, world_size: int):
    m1, _ = make_two_models(0)
    d1 = DDP(m1)
    d1.register_comm_hook(None, noop_hook)          # the buckets are never all-reduced
    watch = ReductionWatch(M1=d1)
    (opt,) = _sgd(m1)
    _plain(d1, m1, opt, _shard(rank, world_size)[0], rank, 0)
    return watch, {"M1": m1}


def _frozen_after_wrapping(rank: int, world_size: int):
    m1, _ = make_two_models(0)
    d1 = DDP(m1)
    m1[2].weight.requires_grad_(False)              # DDP still waits for it
    watch = ReductionWatch(M1=d1)
    (opt,) = _sgd(m1)
    _plain(d1, m1, opt, _shard(rank, world_size)[0], rank, 0)
    return watch, {"M1": m1}


def _update_by_hand(rank: int, world_size: int):
    m1, m2 = make_two_models(0)
    d1, d2 = DDP(m1), DDP(m2)
    watch = ReductionWatch(M1=d1, M2=d2)
    l1, l2 = two_losses(d1(_shard(rank, world_size)[0]), d2(_shard(rank, world_size)[1]))
    l1.backward(retain_graph=True)
    l2.backward()
    with torch.no_grad():                           # SGD written out: no torch.optim step to see
        for p in [*m1.parameters(), *m2.parameters()]:
            p -= 0.1 * p.grad
            p.grad = None
    return watch, {"M1": m1, "M2": m2}


def _rank_dependent_head(rank: int, world_size: int):
    """find_unused_parameters=True; head b feeds the loss on rank 1 only (DDP writes its average on rank 0 too)."""
    model = DDP(TwoHeads(0), find_unused_parameters=True)
    watch = ReductionWatch(heads=model)
    (opt,) = _sgd(model.module)
    a, b = model(_shard(rank, world_size)[0])
    (own_term(a) if rank == 0 else own_term(a) + own_term(b)).backward()
    opt.step()
    return watch, {"heads": model.module}


@dataclass
class _Heads:
    a: torch.Tensor
    b: torch.Tensor


class _DataclassHeads(TwoHeads):
    def forward(self, x: torch.Tensor) -> _Heads:  # type: ignore[override]
        return _Heads(*super().forward(x))


def _dataclass_output_copied_fix(rank: int, world_size: int):
    model = DDP(_DataclassHeads(0), find_unused_parameters=True)
    watch = ReductionWatch(heads=model)
    (opt,) = _sgd(model.module)
    out = model(_shard(rank, world_size)[0])
    l1, l2 = two_losses(out.a, out.b)
    l1.backward(retain_graph=True)
    l2.backward()
    opt.step()
    return watch, {"heads": model.module}


class _Checkpointed(nn.Module):
    def __init__(self, model: nn.Module, reentrant: bool) -> None:
        super().__init__()
        self.model, self.reentrant = model, reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.model, x, use_reentrant=self.reentrant)


def _checkpointed(reentrant: bool, copied_fix: bool) -> Scenario:
    def scenario(rank: int, world_size: int):
        m1, _ = make_two_models(0)
        d1 = DDP(_Checkpointed(m1, reentrant))
        watch = ReductionWatch(M1=d1)
        (opt,) = _sgd(m1)
        x = _shard(rank, world_size)[0].requires_grad_(reentrant)
        out = d1(x)
        own_term(out).backward(retain_graph=copied_fix)
        if copied_fix:
            own_term(out).backward()
        opt.step()
        return watch, {"M1": d1.module}
    return scenario


def _scaled(rank: int, world_size: int):
    """GradScaler: scale, backward, unscale_ and clip in place, scaler.step, update."""
    m1, _ = make_two_models(0)
    d1 = DDP(m1)
    watch = ReductionWatch(M1=d1)
    (opt,) = _sgd(m1)
    scaler = torch.amp.GradScaler("cpu")
    for iteration in range(2):
        opt.zero_grad()
        scaler.scale(own_term(d1(_shard(rank, world_size, iteration)[0]))).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(m1.parameters(), 0.5)
        scaler.step(opt)
        scaler.update()
    return watch, {"M1": m1}


SCENARIOS: Dict[str, Scenario] = {
    "per model, both restricted": _per_model("own", "own"),
    "per model, copied fix": _per_model("all", "all"),
    "per model, inputs=M1 then full": _per_model("own", "all"),
    "per model, autograd.grad": _per_model_autograd_grad,
    "per model, detach": _per_model_detach,
    "one wrapper, restricted, steps after": _one_wrapper(step_between=False),
    "one wrapper, restricted, M1 steps between": _one_wrapper(step_between=True),
    "one wrapper, copied fix": _one_wrapper(step_between=False, copied_fix=True),
    "copied fix, before any step": _copied_fix_no_step,
    "M1 through .module, restricted": _through_module,
    "actor-critic through .module, cleared": _actor_critic_through_module(zero_before_step=True),
    "actor-critic through .module, not cleared": _actor_critic_through_module(zero_before_step=False),
    "accumulation, step after the synced micro-batch": _accumulation(step_inside_no_sync=False),
    "accumulation, step inside no_sync": _accumulation(step_inside_no_sync=True),
    "unused head, find_unused_parameters=True": _unused_head,
    "static_graph=True": _static_graph,
    "a comm hook that does not average": _no_average_hook,
    "clipped out of place": _one_model({}, _clipped_out_of_place),
    "autograd.grad copied into .grad": _one_model({}, _autograd_grad_copied_in),
    "torch.func gradients, gradient_as_bucket_view=True": _one_model({"gradient_as_bucket_view": True}, _func_grads),
    "zero local gradient on rank 0": _one_model({}, _zero_on_rank_0),
    "copied fix in a closure": _one_model({}, _copied_fix_in_a_closure),
    "frozen after wrapping": _frozen_after_wrapping,
    "an update by hand": _update_by_hand,
    "head b used on rank 1 only": _rank_dependent_head,
    "dataclass output, copied fix": _dataclass_output_copied_fix,
    "reentrant checkpoint": _checkpointed(reentrant=True, copied_fix=False),
    "non-reentrant checkpoint, copied fix": _checkpointed(reentrant=False, copied_fix=True),
    "GradScaler, clipping in place": _scaled,
}


def run_scenarios(rank: int, world_size: int) -> Dict[str, Dict[str, Any]]:
    """Every scenario on this rank: what the watch said, and which parameters really differ between the ranks."""
    found = {}
    for name, scenario in SCENARIOS.items():
        watch, models = scenario(rank, world_size)
        found[name] = {"unreduced": [(u.parameter, u.how, u.fate) for u in watch.unreduced()],
                       "pending": watch.pending(), "cannot_see": watch.cannot_see(), "report": watch.report(),
                       "differ": [f"{label}.{entry}" for label, model in models.items()
                                  for entry in replicas_differ(model)]}
        watch.remove()
    return found

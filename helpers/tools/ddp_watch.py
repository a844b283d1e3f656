"""Tell which gradients of ``DistributedDataParallel`` models DDP did not average, and whether a step used them.

How DDP averages (its design note, "Internal Design"): a forward through the DDP wrapper prepares the wrapper's
*reducer* for one backward. A hook on each parameter's gradient accumulator marks the parameter ready; when all of
a bucket's parameters are ready the bucket is all-reduced, and when **all** of the wrapper's buckets are ready, at
the end of that backward, the averages are written into ``.grad``. So, per wrapper and per forward:

- a gradient that arrives before the wrapper has finished, into a parameter already marked, makes DDP raise
  ("Expected to mark a variable ready only once");
- one that arrives after it has finished (a second backward, such as ``l1.backward(retain_graph=True);
  l2.backward()``) is not averaged, and nothing is raised;
- a step between two backward passes of one wrapper (``l1.backward(inputs=M1)``, ``opt1.step()``,
  ``l2.backward(inputs=M2)``) uses M1's gradient before DDP averaged it, though the average arrives later;
- ``torch.autograd.grad`` never accumulates into ``.grad``, and a forward through ``ddp_model.module`` prepares no
  reduction: neither is averaged.

``ReductionWatch`` follows, on the process it runs in, the forwards through each wrapper, every gradient computed
and accumulated, each reduction it completes, and every ``torch.optim`` step (a global hook, run after the step, so
a closure's gradients count; an update written by hand is invisible to it)::

    watch = ReductionWatch(generator=ddp_g, discriminator=ddp_d)
    ...                                   # your forward passes, backward passes and steps
    print(watch.report())                 # what DDP did not average, and whether a step used it

It only adds hooks (``remove()`` takes them off). Where it cannot follow DDP (``static_graph=True``, a communication
hook, ``requires_grad`` changed after wrapping, a ``.grad`` replaced after its backward, a forward that ran before
the watch began), its report says so rather than guess.
``replicas_differ`` checks the result instead: called on every process (it is a collective), it names the
parameters whose value or ``.grad`` is not the same on all of them.
"""
from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.nn.parallel.distributed import _find_tensors  # DDP's own search of a forward's outputs
from torch.optim.optimizer import register_optimizer_step_post_hook

from helpers.language import marked, tr, translated
from helpers.tools import traversal

# How a gradient escaped averaging, and why the watch cannot see: kept English (code and tests compare them, and
# ``unreduced`` and ``cannot_see`` return them); ``report`` shows them translated.
SECOND_BACKWARD = marked("a backward after DDP had averaged this wrapper's gradients for its last forward "
                         "(a second backward)")
THROUGH_MODULE = marked("a backward from a forward through .module, which skipped the DDP wrapper")
AUTOGRAD_GRAD = marked("torch.autograd.grad: computed, never accumulated into .grad, so DDP's hook never saw it")
SET_BY_HAND = marked("a .grad that no backward accumulated (set by hand, e.g. from torch.autograd.grad): "
                     "DDP never saw it")
UNDER_NO_SYNC = marked("a backward under no_sync(), stepped before a synchronised backward averaged it")
NOT_YET = marked("a step before DDP had averaged it ({wrapper} still waited for {missing})")
BEFORE_WATCH = marked("a backward whose forward ran before the watch began: the watch cannot see whether DDP "
                      "averaged it")
ALL_AVERAGED = marked("DDP averaged every gradient these models received before any step used it.")  # report()
STATIC_GRAPH = marked("static_graph=True: DDP decides from its first iteration which gradients to wait for")
OTHER_REDUCER = marked("this wrapper reduces outside the reducer the watch follows")
COMM_HOOK = marked("a communication hook decides what its all-reduce does with the gradients")
REQUIRES_GRAD_CHANGED = marked("DDP reduces {reduced} parameters and {watched} require grad now: requires_grad "
                               "changed after DDP wrapped the model")
REPLACED = marked("a step used a .grad put there after the backward (clipping out of place, or set by hand): the "
                  "watch cannot see whether it was averaged")

STEPPED, HELD, CLEARED = "stepped", "held", "cleared"


@dataclass(frozen=True)
class Unreduced:
    """One gradient DDP did not average: which parameter, how it arrived, and what became of it.

    ``fate``: ``"stepped"`` (an optimizer step used it), ``"held"`` (still in ``.grad``: a step now would use it) or
    ``"cleared"`` (its ``.grad`` was set to None or zero before any step used it).
    """

    parameter: str
    how: str
    fate: str = HELD


@dataclass
class _Parameter:
    name: str
    computed: int = 0                        # gradients computed for it since its wrapper's last forward
    accumulated: int = 0                     # of those, accumulated into .grad (autograd.grad never does)
    grad_seen: Optional[weakref.ref] = None  # the .grad tensor the last accumulation left
    after_step: Optional[Tuple[weakref.ref, int]] = None  # its .grad and that tensor's version after the last step
    local: Dict[str, Optional[weakref.ref]] = field(default_factory=dict)  # how -> the .grad it went into
    stepped: Set[str] = field(default_factory=set)
    cleared: Set[str] = field(default_factory=set)                         # hows whose .grad was cleared
    replaced: bool = False                   # a step used a .grad put there after the backward: cannot see it


@dataclass
class _Wrapper:
    name: str
    model: DistributedDataParallel
    parameters: Dict[int, _Parameter]        # id(parameter) -> its state
    cannot_see: Optional[str] = None
    entering: bool = False                   # its pre-hook ran; the module's own is next
    last_forward: Optional[str] = None       # "wrapper", "no_sync" or "module"
    expecting: bool = False                  # a reduction is prepared and not finished
    expected: Set[int] = field(default_factory=set)
    marked: Set[int] = field(default_factory=set)
    reduced_since_forward: bool = False      # DDP wrote this iteration's averages into .grad
    accumulated_since_forward: Set[int] = field(default_factory=set)


def _reducer_parameters(model: DistributedDataParallel) -> Dict[str, nn.Parameter]:
    """The parameters DDP's reducer averages: those that require grad and are not ignored, by name."""
    ignored = getattr(model, "parameters_to_ignore", set())
    return {name: p for name, p in model.module.named_parameters() if p.requires_grad and name not in ignored}


@functools.lru_cache(maxsize=1)
def _post_accumulate_hook_sees_no_gradient() -> bool:
    """Whether this torch calls a post-accumulate-grad hook when a backward brings a leaf no gradient (None): torch
    2.13 does, 2.4 does not. Measured once, on a tensor of its own."""
    class NoGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, tensor: torch.Tensor) -> torch.Tensor:
            return tensor.clone()

        @staticmethod
        def backward(ctx: Any, gradient: torch.Tensor) -> None:
            return None

    called: List[bool] = []
    leaf = torch.zeros(1, requires_grad=True)
    leaf.register_post_accumulate_grad_hook(lambda tensor: called.append(True))
    with torch.enable_grad():
        NoGradient.apply(leaf).sum().backward()
    return bool(called)


def _accumulator(parameter: torch.Tensor) -> Any:
    """The node that accumulates ``parameter``'s gradient (the one DDP hooks)."""
    with torch.enable_grad():
        return parameter.view_as(parameter).grad_fn.next_functions[0][0]


def _reached_leaves(output: Any) -> Set[int]:
    """``id`` of every leaf tensor the autograd graph of ``output`` leads to, finding tensors in ``output`` as DDP
    does (lists, tuples, dicts, dataclasses)."""
    nodes = traversal.graph_nodes([t for t in _find_tensors(output) if t.grad_fn is not None])
    return {id(node.variable) for node in nodes if getattr(node, "variable", None) is not None}


def _why_it_cannot_see(model: DistributedDataParallel, watched: int) -> Optional[Tuple[str, Dict[str, int]]]:
    """Why the watch cannot follow ``model``'s reduction, as a message (English, with fields) and its fields."""
    if getattr(model, "static_graph", False):
        return STATIC_GRAPH, {}
    if getattr(model, "_delay_all_reduce_all_params", False) or getattr(model, "_use_python_reducer", False):
        return OTHER_REDUCER, {}
    if getattr(model, "_comm_hooks", None):
        return COMM_HOOK, {}
    try:
        reduced = int(model._get_ddp_logging_data().get("num_parameter_tensors", watched))
    except Exception:  # a private call that may change between releases: then trust the count
        reduced = watched
    if reduced != watched:
        return REQUIRES_GRAD_CHANGED, {"reduced": reduced, "watched": watched}
    return None


class ReductionWatch:
    """Hooks on DDP models that record every gradient DDP did not average, and every step that used one.

    Args:
        **models: name -> a ``DistributedDataParallel`` model (names keep clashing parameter names apart).
    """

    def __init__(self, **models: DistributedDataParallel) -> None:
        for name, model in models.items():
            if not isinstance(model, DistributedDataParallel):
                raise TypeError(tr("{name} is a {type}, not a DistributedDataParallel model", name=name,
                                   type=type(model).__name__))
        self.models = dict(models)
        self._wrappers: Dict[str, _Wrapper] = {}
        self._owner: Dict[int, _Wrapper] = {}
        self._tensors: Dict[int, torch.Tensor] = {}
        self._handles: List[Any] = []
        self._accumulators: List[Any] = []
        self._shown: Dict[str, Callable[[], str]] = {}  # an English message with its fields filled -> it, translated
        for label, model in self.models.items():
            reduced = _reducer_parameters(model)
            parameters = {id(p): _Parameter(f"{label}.{name}") for name, p in reduced.items()}
            why = _why_it_cannot_see(model, len(reduced))
            cannot_see = None if why is None else self._said(why[0], **why[1])
            wrapper = _Wrapper(label, model, parameters, cannot_see=cannot_see)
            self._wrappers[label] = wrapper
            self._handles += [model.register_forward_pre_hook(self._wrapper_starts(wrapper)),
                              model.register_forward_hook(self._wrapper_ends(wrapper)),
                              model.module.register_forward_pre_hook(self._module_starts(wrapper))]
            for parameter in reduced.values():
                self._owner[id(parameter)] = wrapper
                self._tensors[id(parameter)] = parameter
                self._handles.append(parameter.register_hook(self._computed(wrapper.parameters[id(parameter)])))
                self._handles.append(parameter.register_post_accumulate_grad_hook(self._accumulated(wrapper)))
                if parameter.requires_grad and not _post_accumulate_hook_sees_no_gradient():
                    accumulator = _accumulator(parameter)  # held, as DDP holds it: the same node every backward
                    self._accumulators.append(accumulator)
                    self._handles.append(accumulator.register_hook(self._no_gradient(wrapper, id(parameter))))
        # After the step, not before it: a closure passed to step() computes the gradients the step uses.
        self._handles.append(register_optimizer_step_post_hook(self._after_step))

    def _said(self, message: str, **fields: Any) -> str:
        """``message`` with its fields filled, in English (what ``unreduced`` and ``cannot_see`` return); ``report``
        shows it translated. A field that is a list of names is shown as ``a, b, c and 2 more``."""
        english = message.format(**{key: _listed(value, 3, english=True) if isinstance(value, list) else value
                                    for key, value in fields.items()}) if fields else message
        self._shown.setdefault(english, lambda: translated(message, **{
            key: _listed(value, 3) if isinstance(value, list) else value for key, value in fields.items()}))
        return english

    def _text(self, english: str) -> str:
        """An English message of the watch (``how`` or why it cannot see), as ``report`` shows it."""
        return self._shown[english]() if english in self._shown else translated(english)

    # ------------------------------------------------------------------ forwards

    def _wrapper_starts(self, wrapper: _Wrapper) -> Any:
        def hook(module: nn.Module, args: Any) -> None:
            wrapper.entering = True
        return hook

    def _wrapper_ends(self, wrapper: _Wrapper) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            wrapper.entering = False
            if not torch.is_grad_enabled():
                return
            self._new_iteration(wrapper)
            if not wrapper.model.require_backward_grad_sync:
                wrapper.last_forward = "no_sync"
                return
            wrapper.last_forward = "wrapper"
            wrapper.expecting, wrapper.marked = True, set()
            wrapper.expected = set(wrapper.parameters)
            if getattr(wrapper.model, "find_unused_parameters", False):
                wrapper.expected &= _reached_leaves(output)   # DDP marks the others ready at once
        return hook

    def _module_starts(self, wrapper: _Wrapper) -> Any:
        def hook(module: nn.Module, args: Any) -> None:
            if wrapper.entering:                              # DDP's own call of its module
                wrapper.entering = False
            elif torch.is_grad_enabled():
                self._new_iteration(wrapper)
                wrapper.last_forward = "module"
        return hook

    def _new_iteration(self, wrapper: _Wrapper) -> None:
        self._flush_autograd_grad(wrapper)
        wrapper.reduced_since_forward = False
        wrapper.accumulated_since_forward = set()

    # ------------------------------------------------------------------ gradients

    def _computed(self, state: _Parameter) -> Any:
        def hook(gradient: Optional[torch.Tensor]) -> None:
            if gradient is not None:  # None: an output the loss does not use (DDP's _DDPSink passes None for it)
                state.computed += 1
        return hook

    def _no_gradient(self, wrapper: _Wrapper, key: int) -> Any:
        """For torch that calls no post-accumulate hook when a backward brings a parameter no gradient: DDP's hook
        on the parameter's accumulator still marks it ready, and so does this one, on the same node."""
        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            if wrapper.expecting and all(gradient is None for gradient in grad_outputs):  # else: post-accumulate
                self._mark_ready(wrapper, key)
        return hook

    def _mark_ready(self, wrapper: _Wrapper, key: int) -> None:
        """DDP marks the parameter ready; the last one it expects starts the averaging at this backward's end."""
        if key in wrapper.marked or key not in wrapper.expected:
            return  # DDP raises "mark a variable ready only once", or does not wait for it
        wrapper.marked.add(key)
        if wrapper.marked >= wrapper.expected:
            self._reduction_done(wrapper)

    def _accumulated(self, wrapper: _Wrapper) -> Any:
        def hook(parameter: torch.Tensor) -> None:
            state = wrapper.parameters[id(parameter)]
            state.accumulated += 1
            state.grad_seen = weakref.ref(parameter.grad) if parameter.grad is not None else None
            wrapper.accumulated_since_forward.add(id(parameter))
            if wrapper.expecting:
                self._mark_ready(wrapper, id(parameter))
                return
            how = {"module": THROUGH_MODULE, "no_sync": UNDER_NO_SYNC, "wrapper": SECOND_BACKWARD,
                   None: BEFORE_WATCH}[wrapper.last_forward]
            state.local[how] = state.grad_seen
        return hook

    def _reduction_done(self, wrapper: _Wrapper) -> None:
        """DDP averages what ``.grad`` holds now, earlier local gradients included: they are no longer local."""
        wrapper.expecting = False
        wrapper.reduced_since_forward = True
        for key in wrapper.marked:
            state = wrapper.parameters[key]
            self._forget_cleared(state, self._tensors[key])
            state.local.clear()

    def _flush_autograd_grad(self, wrapper: _Wrapper) -> None:
        """Gradients computed but never accumulated since the last forward: torch.autograd.grad."""
        for key, state in wrapper.parameters.items():
            if state.computed > state.accumulated:
                state.local[AUTOGRAD_GRAD] = None
            state.computed = state.accumulated = 0

    # ------------------------------------------------------------------ steps

    def _after_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                wrapper = self._owner.get(id(parameter))
                if wrapper is not None and parameter.grad is not None:
                    self._judge_step(wrapper, wrapper.parameters[id(parameter)], parameter)

    def _judge_step(self, wrapper: _Wrapper, state: _Parameter, parameter: torch.Tensor) -> None:
        """What the gradient this step used was: averaged, local (and how), not yet averaged, or unknown."""
        if state.computed > state.accumulated:
            self._flush_autograd_grad(wrapper)
        grad = parameter.grad
        unchanged = state.after_step is not None and state.after_step[0]() is grad \
            and state.after_step[1] == grad._version            # the same .grad the last step used, untouched
        accumulated = id(parameter) in wrapper.accumulated_since_forward
        self._forget_cleared(state, parameter, keep_autograd_grad=not accumulated and not unchanged)
        live = self._live_local(state, parameter)
        state.stepped.update(live)
        if wrapper.expecting and id(parameter) in wrapper.marked:
            state.stepped.add(self._said(NOT_YET, wrapper=wrapper.name, missing=self._missing(wrapper)))
        elif not live and not unchanged:
            if not accumulated and not wrapper.reduced_since_forward:
                state.stepped.add(SET_BY_HAND if wrapper.last_forward else BEFORE_WATCH)
            elif accumulated and not getattr(wrapper.model, "gradient_as_bucket_view", False) and (
                    state.grad_seen is not None and state.grad_seen() is not grad):   # (None: DDP wrote it)
                state.replaced = True                         # clipping out of place, or set by hand
        state.after_step = (weakref.ref(grad), grad._version)

    def _forget_cleared(self, state: _Parameter, parameter: torch.Tensor, keep_autograd_grad: bool = False) -> None:
        """Move the local gradients that ``.grad`` no longer holds (set to None, replaced) to ``cleared``."""
        live = self._live_local(state, parameter)
        for how in [how for how in state.local if how not in live]:
            if how == AUTOGRAD_GRAD and keep_autograd_grad and parameter.grad is not None:
                continue
            state.cleared.add(how)
            del state.local[how]

    def _missing(self, wrapper: _Wrapper) -> List[str]:
        return sorted(wrapper.parameters[key].name for key in wrapper.expected - wrapper.marked)

    def _live_local(self, state: _Parameter, parameter: torch.Tensor) -> List[str]:
        """The local gradients still in ``parameter.grad``: it is still the tensor they went into (a gradient of
        torch.autograd.grad counts while no backward has accumulated into .grad since). With
        ``gradient_as_bucket_view=True`` the watch cannot tell the tensors apart and counts them all."""
        grad = parameter.grad
        if grad is None:
            return []
        blind = bool(getattr(self._owner[id(parameter)].model, "gradient_as_bucket_view", False))
        accumulated = id(parameter) in self._owner[id(parameter)].accumulated_since_forward
        return [how for how, ref in state.local.items()
                if blind or (not accumulated if how == AUTOGRAD_GRAD else ref is not None and ref() is grad)]

    # ------------------------------------------------------------------ answers

    def unreduced(self) -> List[Unreduced]:
        """Every gradient DDP did not average since the watch began (or since ``clear()``), with its fate."""
        found = []
        for wrapper in self._wrappers.values():
            if any(state.computed > state.accumulated for state in wrapper.parameters.values()):
                self._flush_autograd_grad(wrapper)
            for key, state in wrapper.parameters.items():
                live = self._live_local(state, self._tensors[key])
                found += [Unreduced(state.name, how, STEPPED) for how in sorted(state.stepped)]
                found += [Unreduced(state.name, how, HELD if how in live else CLEARED)
                          for how in state.local if how not in state.stepped]
                found += [Unreduced(state.name, how, CLEARED) for how in sorted(state.cleared)
                          if how not in state.stepped and how not in state.local]
        return [u for u in found if not (u.how == UNDER_NO_SYNC and u.fate != STEPPED)]

    def pending(self) -> Dict[str, List[str]]:
        """Wrapper -> the parameters it still waits for, where a reduction has begun and not finished."""
        return {w.name: sorted(w.parameters[k].name for k in w.expected - w.marked)
                for w in self._wrappers.values() if w.expecting and w.marked}

    def cannot_see(self) -> Dict[str, str]:
        """Wrapper or parameter -> why the watch cannot tell whether DDP averaged what a step used."""
        found = {w.name: w.cannot_see for w in self._wrappers.values() if w.cannot_see}
        for wrapper in self._wrappers.values():
            for state in wrapper.parameters.values():
                if state.replaced:
                    found[state.name] = REPLACED
        return found

    def report(self) -> str:
        """What DDP did not average, grouped by what became of it and how it arrived; or that it averaged all."""
        found, pending, blind = self.unreduced(), self.pending(), self.cannot_see()
        lines: List[str] = [tr("Cannot see {name}: {why}.", name=name, why=self._text(why))
                            for name, why in blind.items()]
        sections = [(STEPPED, marked("An optimizer step used gradients DDP had not averaged ({n}): this rank's "
                                     "replica moved with its own gradient, so the replicas now differ unless every "
                                     "rank computed the same.")),
                    (HELD, marked("Not averaged, still in .grad ({n}): a step now would use this rank's own "
                                  "gradient.")),
                    (CLEARED, marked("Not averaged, but cleared before any torch.optim step used them ({n}): no "
                                     "optimizer step moved the replicas with them (an update written by hand, outside "
                                     "torch.optim, is invisible to the watch)."))]
        for fate, title in sections:
            by_how: Dict[str, List[str]] = {}
            for problem in found:
                if problem.fate == fate:
                    by_how.setdefault(problem.how, []).append(problem.parameter)
            if by_how:
                lines.append(translated(title, n=len({p for names in by_how.values() for p in names})))
                lines += [f"- {self._text(how)}: {_shown(names)}" for how, names in by_how.items()]
        for name, missing in pending.items():
            lines.append(tr("{name}: DDP has not averaged its gradients yet; it waits for {parameters} (it "
                            "averages when every parameter it expects has a gradient).", name=name,
                            parameters=_shown(missing)))
        if not lines:
            return translated(ALL_AVERAGED)
        return "\n".join(lines)

    def clear(self) -> None:
        """Forget what was found so far (the hooks stay; a reduction under way is still followed)."""
        for wrapper in self._wrappers.values():
            for state in wrapper.parameters.values():
                state.local.clear()
                state.stepped.clear()
                state.cleared.clear()
                state.replaced = False

    def remove(self) -> None:
        """Take every hook off the models and the optimizers."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._accumulators.clear()


def _shown(names: List[str]) -> str:
    return _listed(list(dict.fromkeys(names)), 4)


def _listed(names: List[str], most: int, english: bool = False) -> str:
    """``a, b, c and 2 more``: at most ``most`` names; in English with ``english=True``."""
    if len(names) <= most:
        return ", ".join(names)
    shown, count = ", ".join(names[:most]), len(names) - most
    return f"{shown} and {count} more" if english else tr("{names} and {count} more", names=shown, count=count)


def replicas_differ(model: nn.Module, tolerance: float = 1e-6, group: Optional[Any] = None) -> List[str]:
    """The parameters of ``model`` whose value or ``.grad`` differs between the processes (a collective: call it
    on every process, in the same order).

    Each process compares with process 0. A missing ``.grad`` counts as zeros. A name is followed by what differs:
    ``"0.weight (value)"``, ``"0.weight (.grad)"`` or ``"0.weight (value, .grad)"``.
    """
    module = model.module if isinstance(model, DistributedDataParallel) else model
    differ = []
    for name, parameter in module.named_parameters():
        grad = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
        what = [label for label, tensor in (("value", parameter.detach()), (".grad", grad.detach()))
                if _differs(tensor, tolerance, group)]
        if what:
            differ.append(f"{name} ({', '.join(what)})")
    return differ


def _differs(tensor: torch.Tensor, tolerance: float, group: Optional[Any]) -> bool:
    """True on every process when ``tensor`` differs, on any process, from process 0's beyond ``tolerance``."""
    first = tensor.clone()
    dist.broadcast(first, src=0 if group is None else dist.get_global_rank(group, 0), group=group)
    scale = max(float(first.abs().max()), 1.0) if first.numel() else 1.0
    mismatch = torch.tensor(float(bool((tensor - first).abs().max() > tolerance * scale)) if first.numel() else 0.0,
                            device=tensor.device)
    dist.all_reduce(mismatch, op=dist.ReduceOp.MAX, group=group)
    return mismatch.item() > 0

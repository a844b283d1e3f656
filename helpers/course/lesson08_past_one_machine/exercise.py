"""Exercise of notebook 08: a two-model, two-loss step under DDP, checked on 2 processes the checker starts itself.

Fixed contract: ``ddp_two_loss_step(m1, m2, opt1, opt2, x1, x2)`` returns nothing. ``m1`` and ``m2`` are M1 and M2
wrapped in ``DistributedDataParallel``; ``opt1`` holds M1's parameters, ``opt2`` M2's; ``x1``, ``x2`` are this
rank's shard of the global batch. With ``l1, l2 = two_losses(m1(x1), m2(x2))``: each optimizer steps once, M1 with
the gradient of L1 and M2 with the gradient of L2, both averaged over the ranks (which is the gradient on the whole
global batch), so every replica makes the same step.

The checker sends the learner's function to 2 new processes (by value, with cloudpickle: a new process cannot
import a notebook's cells), runs it there for 2 consecutive steps on seeds the notebook never used, and records on
every rank the gradient each optimizer is stepped with. Back here, it reads each recorded gradient as a mixture of
four parts, computed with plain torch on copies of the models: L1's and L2's gradients averaged over the ranks, and
L1's and L2's gradients on that rank's shard alone. The mixture names the mistake, whatever code made it: a part of
a rank's own shard means DDP never averaged it; the other loss's part means a loss reached the wrong model.
"""
from __future__ import annotations

import ast
import inspect
import io
import pickle
import textwrap
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from helpers.course.exercises.compare import as_combination, describe_combination
from helpers.course.exercises.engine.judge import judge, situations_tried
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import STUB_MESSAGES, LearnerError, NotAttempted, is_unanswered, run_step
from helpers.course.exercises.result import CheckResult, failed, not_attempted, passed
from helpers.course.lesson08_past_one_machine.contract import CONTRACT
from helpers.course.lesson08_past_one_machine.replicas import rank_device, wrap
from helpers.course.models import BATCH, make_inputs, make_two_models, two_losses
from helpers.language import marked, tr
from helpers.tools.spawn import WorkerFailed, run_distributed

EXERCISE_ID = "ddp_two_loss_step"
WORLD_SIZE = 2
STEPS = 2
SEED = 83  # the notebook uses 0 to 5: these models and batches are new to the answer
TIMEOUT_S = 90.0
MODELS = ("M1", "M2")
OWN = {"M1": "L1", "M2": "L2"}
OTHER = {"M1": "L2", "M2": "L1"}
# the parts a recorded gradient is read as a mixture of (shown translated by describe_combination)
AVERAGED = {"L1": marked("L1 averaged"), "L2": marked("L2 averaged")}
OF_THE_SHARD = {"L1": marked("L1 of this rank's shard"), "L2": marked("L2 of this rank's shard")}
PREVIOUS = marked("the previous step's gradient")

HINTS = (
    marked("Under DDP a right step leaves both replicas with the same gradient: M1's is the gradient of L1 on the "
           "whole global batch (each rank's own-shard gradient, averaged by DDP), M2's that of L2. Each optimizer "
           "steps once."),
    marked("Each DDP wrapper marks a parameter ready when a backward accumulates a gradient into its .grad, and "
           "writes the averages into .grad when all of the wrapper's parameters are ready, at the end of that "
           "backward. A gradient that arrives after that stays on its rank, and nothing raises; one that arrives "
           "before it raises \"marked ready twice\"; torch.autograd.grad never reaches the hooks, so nothing is "
           "averaged. Step an optimizer only after its model's wrapper has averaged."),
    marked("Give each model one backward per forward: restrict L1's backward to M1's parameters with inputs= (and "
           "keep the graph for the next one with retain_graph=True), then L2's backward to M2's parameters; or "
           "detach the other model's output in each shared term and run one backward of the sum. Zero both "
           "optimizers first, step both last."),
)

_ERROR_EXPLANATIONS = {
    "ddp-unfinished-reduction": marked(
        "A backward left some of a DDP model's parameters without a gradient (inputs= that leaves part of a model "
        "out, or a loss that never reaches one), and DDP waits for every parameter before its next forward. Each "
        "model's backward must reach all of its parameters."
    ),
    "inplace-version": marked(
        "An optimizer stepped (in place) while a later backward still needed its model's old weights: run every "
        "backward before any step."
    ),
    "backward-twice": marked(
        "The first backward freed the graph the second one walks through: keep it with retain_graph=True on the "
        "first backward, or detach the other model's output in each shared term and run one backward."
    ),
}

Grads = List[Optional[torch.Tensor]]


# ----------------------------------------------------------------------------------------- on every rank


def _shard(step: int, rank: int, world_size: int) -> Tuple[torch.Tensor, torch.Tensor]:
    x1, x2 = make_inputs(SEED + 10 * step, batch=BATCH * world_size)
    return x1.chunk(world_size)[rank], x2.chunk(world_size)[rank]


def _parts(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor) -> Dict[str, Dict[str, Grads]]:
    """Plain torch, on copies at the current weights: each loss's gradient for each model, on this shard."""
    copies = {"M1": _copy(m1), "M2": _copy(m2)}
    l1, l2 = two_losses(copies["M1"](x1), copies["M2"](x2))
    found: Dict[str, Dict[str, Grads]] = {}
    for loss_name, loss in (("L1", l1), ("L2", l2)):
        for model in MODELS:
            params = list(copies[model].parameters())
            grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
            found.setdefault(model, {})[loss_name] = [None if g is None else g.detach().cpu() for g in grads]
    return found


def _copy(model: nn.Module) -> nn.Module:
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def _record(optimizer: torch.optim.Optimizer, calls: List[Grads]) -> None:
    """Append the gradients each ``optimizer.step()`` is given."""
    def pre_hook(opt: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        calls.append([None if p.grad is None else p.grad.detach().cpu().clone()
                      for group in opt.param_groups for p in group["params"]])
    optimizer.register_step_pre_hook(pre_hook)


def run_answer(rank: int, world_size: int, payload: bytes) -> List[Dict[str, Any]]:
    """On one rank: the learner's step for STEPS consecutive steps; per step, what each optimizer was given, the
    four parts at the weights the step started from, or the error the step raised."""
    step_function = pickle.loads(payload)  # made by cloudpickle; plain pickle reads it
    device = rank_device(rank)
    m1, m2 = make_two_models(SEED, device)
    d1, d2 = wrap(m1, rank), wrap(m2, rank)
    opt1, opt2 = torch.optim.SGD(m1.parameters(), lr=0.1), torch.optim.SGD(m2.parameters(), lr=0.1)
    calls: Dict[str, List[Grads]] = {"M1": [], "M2": []}
    _record(opt1, calls["M1"])
    _record(opt2, calls["M2"])
    steps = []
    for step in range(1, STEPS + 1):
        x1, x2 = (x.to(device) for x in _shard(step, rank, world_size))
        parts = _parts(m1, m2, x1, x2)
        done = {model: len(calls[model]) for model in MODELS}
        try:
            run_step(step_function, step, d1, d2, opt1, opt2, x1, x2, explanations=_ERROR_EXPLANATIONS)
        except NotAttempted:
            return [{"not attempted": True}]
        except LearnerError as error:
            steps.append({"error": error.diagnosis})
            return steps
        left = {label: [None if p.grad is None else p.grad.detach().cpu().clone() for p in model.parameters()]
                for label, model in (("M1", m1), ("M2", m2))}   # what .grad holds after the call
        steps.append({"parts": parts, "calls": {model: calls[model][done[model]:] for model in MODELS}, "left": left,
                      "names": {"M1": [n for n, _ in m1.named_parameters()],
                                "M2": [n for n, _ in m2.named_parameters()]}})
    steps.append({"engine": judge(CONTRACT, step_function)})  # every situation the contract allows, on every rank
    return steps


# ----------------------------------------------------------------------------------------- back here


def _mean(grads: Sequence[Grads]) -> Grads:
    return [None if any(g[i] is None for g in grads) else sum(g[i] for g in grads) / len(grads)
            for i in range(len(grads[0]))]


def _close(a: Grads, b: Grads) -> bool:
    return all(x is not None and y is not None and torch.allclose(x, y, rtol=1e-4, atol=1e-6) for x, y in zip(a, b))


def _empty(grads: Grads) -> bool:
    return all(g is None or not bool(g.abs().sum()) for g in grads)


def _largest_difference(a: Grads, b: Grads) -> float:
    zero = torch.zeros(())
    return max(float(((x if x is not None else zero) - (y if y is not None else zero)).abs().max())
               for x, y in zip(a, b))


def _read_mixture(model: str, weights: Dict[str, float]) -> str:
    """What the mixture a rank stepped ``model`` with says about the answer."""
    own, other = OWN[model], OTHER[model]
    averaged = {k: weights.get(AVERAGED[k], 0.0) for k in (own, other)}
    local = {k: weights.get(OF_THE_SHARD[k], 0.0) for k in (own, other)}
    got = tr("{model} was stepped with {combination}.", model=model, combination=describe_combination(weights))
    if any(abs(v) > 1e-3 for v in local.values()):
        if all(abs(v) <= 1e-3 for v in averaged.values()):
            return tr("{got} DDP never averaged it: each rank stepped with its own shard's gradient, so the replicas "
                      "drift apart. A gradient from torch.autograd.grad, from a backward through the unwrapped model "
                      "(.module) or from one under no_sync() reaches .grad without DDP's all-reduce.", got=got)
        return tr("{got} A second backward added to it after {model}'s DDP wrapper had written its averages (a "
                  "wrapper averages once per forward, when every one of its parameters has a gradient), and what a "
                  "later backward adds stays on its rank, so the replicas drift apart. Give each model exactly one "
                  "backward pass per forward (inputs=, or the other model's output detached).", got=got, model=model)
    if _near(averaged[own], 1.0) and _near(averaged[other], -1.0):
        return tr("{got} That is the gradient of own({output}) alone: the shared term's gradient is missing, as when "
                  "both outputs are detached in it. Detach only the *other* model's output in each shared term, so "
                  "that it still trains this model.", got=got, output=model.replace("M", "O"))
    if _near(averaged[own], 0.0) and _near(averaged[other], 1.0):
        return tr("{got} The losses are swapped: {model} got {other}'s gradient. Check which loss's backward lists "
                  "which model's parameters in inputs=: {own} goes with {model}.", got=got, model=model, other=other,
                  own=own)
    if abs(averaged[other]) > 1e-3:
        return tr("{got} {other} reached {model}: {model} must get the gradient of {own} only. Restrict each "
                  "backward to its model's parameters (inputs=), or detach the other model's output in the shared "
                  "term.", got=got, other=other, model=model, own=own)
    if _near(averaged[own], float(WORLD_SIZE)):
        return tr("{got} That is the sum over the {ranks} ranks, not their average: an all_reduce sums (divide by "
                  "the world size after it), and DDP itself already averages (so a loss needs no factor).", got=got,
                  ranks=WORLD_SIZE)
    if abs(averaged[own] - 1.0) > 1e-3:
        return tr("{got} The size is off: DDP already averages over the ranks, so use {own} as it is (no division "
                  "by the world size, no extra factor).", got=got, own=own)
    return got


def _near(value: float, target: float) -> bool:
    return abs(value - target) <= 1e-3 * max(1.0, abs(target))


def _diagnose_model(model: str, per_rank: List[Dict[str, Any]], previous: Optional[List[Grads]]) -> Optional[str]:
    """None when every rank stepped ``model`` once with its own loss's averaged gradient; else what went wrong."""
    optimizer = "opt1" if model == "M1" else "opt2"
    for rank, step in enumerate(per_rank):
        count = len(step["calls"][model])
        if count == 0:
            return tr("On rank {rank}, {optimizer} was never stepped: each optimizer steps exactly once per call.",
                      rank=rank, optimizer=optimizer)
        if count != 1:
            return tr("On rank {rank}, {optimizer} was stepped {count} times: each optimizer steps exactly once per "
                      "call.", rank=rank, optimizer=optimizer, count=count)
    shard_parts = [step["parts"][model] for step in per_rank]
    averaged = {loss: _mean([parts[loss] for parts in shard_parts]) for loss in ("L1", "L2")}
    recorded = [step["calls"][model][0] for step in per_rank]
    if all(_close(g, averaged[OWN[model]]) for g in recorded):
        return None
    for rank, grads in enumerate(recorded):
        if _empty(grads):
            if not _empty(per_rank[rank]["left"][model]):
                return tr("On rank {rank}, {optimizer} stepped before {model}'s gradient arrived: .grad was empty "
                          "at {optimizer}.step() and filled afterwards. Run every backward first, then step.",
                          rank=rank, optimizer=optimizer, model=model)
            return tr("On rank {rank}, {model} was stepped with no gradient: zero the gradients before the backward "
                      "passes, not between backward() and step(), and let its loss reach it.", rank=rank, model=model)
        missing = [name for name, g in zip(per_rank[rank]["names"][model], grads) if g is None]
        if missing:
            return tr("On rank {rank}, {model}'s {missing} got no gradient. DDP waits for every parameter of a "
                      "wrapper before it averages, so the gradients that did arrive were not averaged either, and its "
                      "next forward raises \"Expected to have finished reduction in the prior iteration\". Let "
                      "{loss}'s backward reach all of {model}'s parameters (inputs= must list them all).", rank=rank,
                      model=model, missing=", ".join(missing), loss=OWN[model])
    for rank, grads in enumerate(recorded):
        if _close(grads, averaged[OWN[model]]):
            continue
        parts = {AVERAGED[loss]: averaged[loss] for loss in ("L1", "L2")}
        parts.update({OF_THE_SHARD[loss]: shard_parts[rank][loss] for loss in ("L1", "L2")})
        if previous is not None:
            parts[PREVIOUS] = previous[rank]
        weights = as_combination(grads, parts)
        if weights is not None and abs(weights.get(PREVIOUS, 0.0)) > 1e-3:
            return tr("On rank {rank}, {model}'s gradient still held the previous step's: gradients pile up in "
                      ".grad. Zero both optimizers' gradients at the start of each step.", rank=rank, model=model)
        if weights is not None:
            return tr("On rank {rank}: {problem}", rank=rank, problem=_read_mixture(model, weights))
    if not all(_close(g, recorded[0]) for g in recorded[1:]):
        return tr("The replicas drifted apart: rank 0 and rank 1 stepped {model} with different gradients (largest "
                  "difference {largest}), and nothing raised. Under DDP every rank's .grad must come out of DDP's own "
                  "all-reduce.", model=model, largest=f"{_largest_difference(recorded[0], recorded[1]):.2g}")
    return tr("{model}'s gradient differs from the gradient of {loss} averaged over the ranks (largest difference "
              "{largest}).", model=model, loss=OWN[model],
              largest=f"{_largest_difference(recorded[0], averaged[OWN[model]]):.2g}")


def diagnose(per_rank_steps: List[List[Dict[str, Any]]]) -> Optional[str]:
    """None when every step on every rank was right; else the first problem, for the learner."""
    previous: Dict[str, Optional[List[Grads]]] = {model: None for model in MODELS}
    for index in range(STEPS):
        for rank, steps in enumerate(per_rank_steps):
            if index < len(steps) and "error" in steps[index]:
                return tr("On rank {rank}, step {step}: {problem}", rank=rank, step=index + 1,
                          problem=steps[index]["error"])
        per_rank = [steps[index] for steps in per_rank_steps]
        for model in MODELS:
            problem = _diagnose_model(model, per_rank, previous[model])
            if problem is not None:
                return tr("Step {step}: {problem}", step=index + 1, problem=problem)
            previous[model] = [step["calls"][model][0] for step in per_rank]
    return None


def is_stub(function: Any) -> bool:
    """True for the student copy's untouched stub (a docstring and ``raise NotImplementedError(...)`` only): no
    process need start to find it not attempted."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, ast.FunctionDef):
        return False
    body = [node for node in definition.body
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    raised = body[0].exc
    name = raised.func if isinstance(raised, ast.Call) else raised
    arguments = raised.args if isinstance(raised, ast.Call) else []
    return (isinstance(name, ast.Name) and name.id == "NotImplementedError"
            and all(isinstance(a, ast.Constant) and a.value in STUB_MESSAGES for a in arguments))


def _payload(step_function: Any) -> bytes:
    """The learner's function, by value, for a process that cannot import the notebook."""
    import cloudpickle  # noqa: PLC0415 - only the checker needs it

    try:
        return cloudpickle.dumps(step_function)
    except Exception as error:  # noqa: BLE001 - any failure to pickle is the learner's to fix
        raise LearnerError(tr("Your function could not be sent to the worker processes ({error}). Use only its "
                              "arguments and what you import; don't reach for models, optimizers or open files "
                              "defined elsewhere in the notebook.",
                              error=f"{type(error).__name__}: {str(error)[:160]}")) from error


def run_answers(rank: int, world_size: int, payloads: Sequence[bytes]) -> List[List[Dict[str, Any]]]:
    """On one rank: ``run_answer`` for each answer in turn, in one process group."""
    return [run_answer(rank, world_size, payload) for payload in payloads]


def _verdict(per_rank_steps: List[List[Dict[str, Any]]]) -> CheckResult:
    if any(steps and "not attempted" in steps[0] for steps in per_rank_steps):
        return not_attempted(EXERCISE_ID)
    problem = diagnose(per_rank_steps)
    if problem is not None:
        return failed(EXERCISE_ID, problem)
    engine = [steps[-1].get("engine") for steps in per_rank_steps if steps]
    problem = next((tr("On rank {rank}: {problem}", rank=rank, problem=text) for rank, text in enumerate(engine)
                    if text is not None), None)
    if problem is not None:
        return failed(EXERCISE_ID, problem)
    return passed(EXERCISE_ID, tr("{steps} consecutive steps on {processes} processes (gloo, or NCCL with a GPU per "
                                  "process), on models and batches the notebook never used: on every rank, opt1 "
                                  "stepped once with the gradient of L1 and opt2 with that of L2, each averaged over "
                                  "the ranks by DDP. The replicas stay identical. It also matched the reference on "
                                  "every rank in all {situations} situations the check generates.", steps=STEPS,
                                  processes=WORLD_SIZE, situations=situations_tried(CONTRACT)))


def check_answers(step_functions: Sequence[Any]) -> List[CheckResult]:
    """Check several answers with one pair of processes (the tests, a grader); one result per answer."""
    results: List[Optional[CheckResult]] = [None] * len(step_functions)
    payloads, where = [], []
    for index, function in enumerate(step_functions):
        try:
            if is_unanswered(function) or is_stub(function):
                raise NotAttempted()
            if not callable(function):
                raise LearnerError(tr("The answer should be a function, but it is {type}.",
                                      type=type(function).__name__))
            payloads.append(_payload(function))
            where.append(index)
        except NotAttempted:
            results[index] = not_attempted(EXERCISE_ID)
        except LearnerError as error:
            results[index] = failed(EXERCISE_ID, error.diagnosis)
    if payloads:
        try:
            per_rank = run_distributed(run_answers, world_size=WORLD_SIZE, args=(payloads,), timeout_s=TIMEOUT_S)
        except TimeoutError:
            stuck = failed(EXERCISE_ID, tr("The ranks did not finish within {seconds} s: one rank is waiting for the "
                                           "other in a collective (do both ranks run the same backward passes?), or "
                                           "the step never returns.", seconds=f"{TIMEOUT_S:.0f}"))
            per_rank = None
        except WorkerFailed as error:
            stuck = failed(EXERCISE_ID, tr("A worker process failed outside your step: {error}",
                                           error=str(error).splitlines()[0]))
            per_rank = None
        for position, index in enumerate(where):
            results[index] = stuck if per_rank is None else _verdict([rank[position] for rank in per_rank])
    return [result for result in results if result is not None]


def check_ddp_two_loss_step(step_function: Any) -> CheckResult:
    """Run the learner's step on 2 processes for 2 steps and compare every rank's stepped gradients."""
    return check_answers([step_function])[0]


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="ddp_two_loss_step",
    checker=check_ddp_two_loss_step,
    hints=HINTS,
    contract=CONTRACT,
)

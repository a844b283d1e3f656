"""Exercise of notebook 07, case 2: a multi-task step with task weights and three optimizers.

Fixed contract: ``multitask_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b, weight_a, weight_b)``
returns nothing; ``opt_trunk`` holds only the trunk, ``opt_a`` only head A, ``opt_b`` only head B. With
``feats = trunk(x)``, ``loss_a = mse_loss(head_a(feats), y_a)``, ``loss_b = cross_entropy(head_b(feats), y_b)`` and
``total = weight_a * loss_a + weight_b * loss_b``: every optimizer is stepped once with the gradient of ``total``
for its parameters, all at the weights the step started from. So the trunk gets ``weight_a * grad loss_a +
weight_b * grad loss_b``, head A ``weight_a * grad loss_a`` and head B ``weight_b * grad loss_b``.

The checker runs three runs of three consecutive steps, each with fresh models, its own task weights and its own
optimizer kinds (SGD, SGD with momentum, Adam, AdamW fused where supported), a new batch every step. It records the
gradient each optimizer is stepped with (``helpers.course.exercises.engine.step_watch``), replays every step on a twin
optimizer (``helpers.course.exercises.engine.twins``), and compares with plain torch; a wrong trunk gradient is taken
apart as ``alpha * grad loss_a + beta * grad loss_b``, a wrong head gradient as a multiple of its task's.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from helpers.course.exercises.compare import added, close, flattened, same_gradients, scale_factor
from helpers.course.exercises.engine import step_watch
from helpers.course.exercises.engine.twins import TwinOptimizer, copy_module, weights
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson07_bug_clinic_continued.multitask import (
    make_batch,
    make_multitask_model,
    reference_gradients,
    relative_error,
)
from helpers.course.lesson07_bug_clinic_continued.multitask_contract import CONTRACT
from helpers.language import marked, space, tr, translated

EXERCISE_ID = "multitask_step"
STEPS = 3
SEED = 51
PARTS = ("trunk", "head_a", "head_b")
NAMES = {"trunk": marked("the trunk"), "head_a": marked("head A"), "head_b": marked("head B")}  # shown translated
NAMES_FIRST = {"trunk": marked("The trunk"), "head_a": marked("Head A"), "head_b": marked("Head B")}  # to start with
# where a part's weights changed other than through its optimizer's step (``TwinOptimizer.replay``)
WHERE_MOVED = {"before": marked("before its step"), "between": marked("between its step"),
               "after": marked("after its step"), "in": marked("in its step")}
OPTIMIZER_NAMES = {"trunk": "opt_trunk", "head_a": "opt_a", "head_b": "opt_b"}
# (weight_a, weight_b, then the optimizer kind of the trunk, head A and head B): one run of STEPS steps each
RUNS: Tuple[Tuple[float, float, str, str, str], ...] = (
    (0.3, 2.0, "SGD", "SGD", "SGD"),
    (1.5, 0.25, "Adam", "SGD with momentum", "Adam"),
    (0.6, 0.8, "fused AdamW", "fused AdamW", "SGD"),     # plain AdamW where this torch has no fused one
)
CARRY_OVER = marked("Your earlier steps were right, so look for something kept from one call to the next (a global, "
                    "a cache, a function attribute, an optimizer made once): each call must use only its own "
                    "arguments.")

HINTS = (
    marked("A right step moves each of the three parameter sets once, with the gradient of weight_a * loss_a + "
           "weight_b * loss_b for those parameters, taken at the weights the step started from: the trunk gets both "
           "tasks' weighted gradients, summed; head A gets weight_a times the gradient of loss_a; head B weight_b "
           "times that of loss_b."),
    marked("The trunk's gradient must be complete (both weighted tasks) before opt_trunk steps, and a weight "
           "belongs in the loss once: scaling a loss scales every gradient that flows from it, the heads' included. "
           "Stepping the trunk between two backward passes raises error 1 or 2; where it raises nothing (a trunk "
           "that saved none of its weights), the trunk takes two steps, one per task; after a second forward, the "
           "gradients are at moved weights."),
    marked("As in the worked fix, but with three optimizers: zero all three; one forward through the trunk and both "
           "heads; one backward of the weighted sum of the two losses; then step each optimizer once."),
)

Step = Callable[..., Any]
Grads = List[torch.Tensor]
Records = List[Optional[torch.Tensor]]


def _gradients(at: Dict[str, Sequence[torch.Tensor]], modules: Dict[str, nn.Module],
               batch: Tuple[torch.Tensor, ...], weight_a: float, weight_b: float) -> Dict[str, Grads]:
    """At the weights ``at``: the unweighted parts (``reference_gradients``) and, under ``"want:<part>"``, what
    each part must get."""
    parts = reference_gradients(*[copy_module(modules[part], at[part]) for part in PARTS], *batch)
    parts["want:trunk"] = [weight_a * a + weight_b * b for a, b in zip(parts["trunk<-a"], parts["trunk<-b"])]
    parts["want:head_a"] = [weight_a * g for g in parts["head_a"]]
    parts["want:head_b"] = [weight_b * g for g in parts["head_b"]]
    return parts


def _empty(records: Records) -> bool:
    return all(g is None or not bool(g.abs().sum()) for g in records)


def _task_mix(records: Records, task_a: Grads, task_b: Grads) -> Optional[Tuple[float, float]]:
    """``(alpha, beta)`` when ``records`` is ``alpha * task_a + beta * task_b``; else None."""
    got, a, b = flattened(records, task_a), flattened(task_a, task_a), flattened(task_b, task_b)
    gram = torch.tensor([[a.dot(a), a.dot(b)], [a.dot(b), b.dot(b)]], dtype=torch.float64)
    rhs = torch.tensor([a.dot(got), b.dot(got)], dtype=torch.float64)
    if abs(float(torch.linalg.det(gram))) < 1e-12:
        return None
    alpha, beta = (float(v) for v in torch.linalg.solve(gram, rhs))
    return (alpha, beta) if close(got, alpha * a + beta * b) else None


def _near(value: float, target: float) -> bool:
    return abs(value - target) <= 1e-3 * max(1.0, abs(target))


def _mix_problem(alpha: float, beta: float, weight_a: float, weight_b: float) -> str:
    """What the coefficients of loss_a's and loss_b's gradients in the trunk's gradient say."""
    got = tr("The trunk was stepped with {alpha} x the gradient of loss_a + {beta} x that of loss_b; it should be "
             "weight_a = {weight_a} x and weight_b = {weight_b} x.", alpha=f"{alpha:.3g}", beta=f"{beta:.3g}",
             weight_a=f"{weight_a:g}", weight_b=f"{weight_b:g}")
    total = weight_a + weight_b
    known = [
        ((1.0, 1.0), tr("The task weights are missing: that is the gradient of loss_a + loss_b.")),
        ((weight_b, weight_a), tr("weight_a and weight_b are swapped: weight_a goes with loss_a.")),
        ((weight_a ** 2, weight_b ** 2), tr("Each task weight was applied twice (the losses weighted, then their "
                                            "gradients or the total weighted again): weight each loss once.")),
        ((weight_a / total, weight_b / total), tr("The weights were normalised (divided by weight_a + weight_b): use "
                                                  "them as given.")),
        ((weight_a / 2, weight_b / 2), tr("The weighted sum was halved (an average?): use weight_a * loss_a + "
                                          "weight_b * loss_b as it is.")),
    ]
    for (want_alpha, want_beta), meaning in known:
        if _near(alpha, want_alpha) and _near(beta, want_beta):
            return f"{got} {meaning}"
    if _near(beta, 0.0):
        return tr("{got} loss_b never reached the trunk: a feats.detach() for head B, or backward(inputs=...) that "
                  "leaves out the trunk, silences the errors this way, and then task B no longer trains the shared "
                  "features.", got=got)
    if _near(alpha, 0.0):
        return tr("{got} loss_a never reached the trunk (a detach, or backward(inputs=...) that leaves out the "
                  "trunk?).", got=got)
    return got


def _diagnose_trunk(recorded: Records, now: Dict[str, Grads], moved_heads: Dict[str, Grads],
                    previous_record: Optional[Records], previous_wanted: Optional[Grads], weight_a: float,
                    weight_b: float, earlier_right: bool) -> str:
    if _empty(recorded):
        return tr("The trunk was stepped with an empty gradient. Call zero_grad() before the backward pass, not "
                  "between backward() and step(), and don't detach feats from both heads.")
    if previous_wanted is not None and same_gradients(recorded, previous_wanted):
        return tr("The trunk was stepped with the previous step's gradient: compute this step's gradients before "
                  "stepping, from this call's batch.")
    if previous_record is not None and same_gradients(recorded, added(now["want:trunk"], previous_record)):
        return tr("The trunk's gradient still contained the previous step's: gradients pile up in .grad. Call "
                  "zero_grad() on every optimizer (opt_trunk too) at the start of each step.")
    if same_gradients(recorded, moved_heads["want:trunk"]):
        return tr("The trunk's gradient was taken after the heads had stepped (a second forward pass after "
                  "opt_a.step() or opt_b.step()?). Take every gradient at the weights the step started from, then "
                  "step.")
    mix = _task_mix(recorded, now["trunk<-a"], now["trunk<-b"])
    if mix is not None:
        return _mix_problem(*mix, weight_a, weight_b)
    return (tr("The trunk's gradient differs from the gradient of weight_a * loss_a + weight_b * loss_b at the "
               "weights the step started from (relative error {error}). Compute both losses from one forward pass, "
               "and run every backward before any step.", error=f"{relative_error(recorded, now['want:trunk']):.1%}")
            + (space() + translated(CARRY_OVER) if earlier_right else ""))


def _diagnose_head(part: str, recorded: Records, now: Dict[str, Grads], moved: Dict[str, Grads],
                   previous_record: Optional[Records], previous_wanted: Optional[Grads], weight_a: float,
                   weight_b: float, earlier_right: bool) -> str:
    head, loss = translated(NAMES[part]), ("loss_a" if part == "head_a" else "loss_b")
    Head = translated(NAMES_FIRST[part])  # the same name, at the start of a sentence
    weight_name, own, other = (("weight_a", weight_a, weight_b) if part == "head_a" else
                               ("weight_b", weight_b, weight_a))
    wanted = now[f"want:{part}"]
    if _empty(recorded):
        return tr("{Head} was stepped with an empty gradient. Call zero_grad() before the backward pass, not between "
                  "backward() and step(), and make sure {loss} reaches {head}.", Head=Head, loss=loss, head=head)
    if previous_wanted is not None and same_gradients(recorded, previous_wanted):
        return tr("{Head} was stepped with the previous step's gradient: compute this step's gradients before "
                  "stepping.", Head=Head)
    if previous_record is not None and same_gradients(recorded, added(wanted, previous_record)):
        return tr("{Head}'s gradient still contained the previous step's: gradients pile up in .grad. Call "
                  "zero_grad() on every optimizer at the start of each step.", Head=Head)
    if same_gradients(recorded, moved[f"want:{part}"]):
        return tr("{Head}'s gradient of {loss} was taken at the trunk after opt_trunk.step() had moved it (a second "
                  "forward pass after stepping?). Take every gradient before any step.", Head=Head, loss=loss)
    unweighted = now[part]
    factor = scale_factor(flattened(recorded, unweighted), flattened(unweighted, unweighted))
    if factor is None:
        return (tr("{Head}'s gradient differs from {weight_name} x the gradient of {loss} at the weights the step "
                   "started from (relative error {error}).", Head=Head, weight_name=weight_name, loss=loss,
                   error=f"{relative_error(recorded, wanted):.1%}")
                + (space() + translated(CARRY_OVER) if earlier_right else ""))
    got = tr("{Head} was stepped with {factor} x the gradient of {loss}; it should be {weight_name} = {own} x.",
             Head=Head, factor=f"{factor:.3g}", loss=loss, weight_name=weight_name, own=f"{own:g}")
    if _near(factor, 1.0):
        return tr("{got} {Head} is trained by the weighted total too: the gradient of weight_a * loss_a + weight_b * "
                  "loss_b for {head}'s parameters is {weight_name} x the gradient of {loss}. Weight the loss, not "
                  "only the trunk's share.", got=got, Head=Head, head=head, weight_name=weight_name, loss=loss)
    if _near(factor, own ** 2):
        return tr("{got} The task weight was applied twice: weight each loss once.", got=got)
    if _near(factor, other):
        return tr("{got} That is the other task's weight: weight_a goes with loss_a, weight_b with loss_b.", got=got)
    return got


def _diagnose_trunk_steps(records: List[Records], start: Dict[str, List[torch.Tensor]], after_first: List[torch.Tensor],
                          modules: Dict[str, nn.Module], batch: Tuple[torch.Tensor, ...], now: Dict[str, Grads],
                          weight_a: float, weight_b: float) -> str:
    """opt_trunk stepped more than once: say whether it was once per task, and where the second gradient was taken."""
    calls = len(records)
    if calls == 2:
        then = _gradients({**start, "trunk": after_first}, modules, batch, weight_a, weight_b)
        for first, second in (("a", "b"), ("b", "a")):
            first_weight = weight_a if first == "a" else weight_b
            second_weight = weight_b if first == "a" else weight_a
            first_grad = [first_weight * g for g in now[f"trunk<-{first}"]]
            at_start = [second_weight * g for g in now[f"trunk<-{second}"]]
            at_moved = [second_weight * g for g in then[f"trunk<-{second}"]]
            if same_gradients(records[0], first_grad) and (same_gradients(records[1], at_moved)
                                                            or same_gradients(records[1], at_start)):
                if same_gradients(records[1], at_moved):
                    return tr("opt_trunk was stepped 2 times: first with task {first}'s weighted gradient, then with "
                              "task {second}'s, taken at the trunk the first step had already moved (a second "
                              "forward pass after stepping). That is not one step with the gradient of weight_a * "
                              "loss_a + weight_b * loss_b: with Adam or momentum each step has its own size. Run the "
                              "backward of the weighted sum first, then step the trunk once.", first=first.upper(),
                              second=second.upper())
                return tr("opt_trunk was stepped 2 times: first with task {first}'s weighted gradient, then with task "
                          "{second}'s, taken at the weights the step started from (the one forward pass's graph). "
                          "That is not one step with the gradient of weight_a * loss_a + weight_b * loss_b: with Adam "
                          "or momentum each step has its own size. Run the backward of the weighted sum first, then "
                          "step the trunk once.", first=first.upper(), second=second.upper())
    return tr("opt_trunk was stepped {count} times; each optimizer steps exactly once per call, the trunk with the "
              "gradient of weight_a * loss_a + weight_b * loss_b.", count=calls)


_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise
    "inplace-version": marked(
        "The trunk was stepped (in place) while a later backward still needed its old weights: the graph saved some "
        "of the trunk's weights themselves, not copies, and retain_graph=True only keeps those references. Run one "
        "backward of weight_a * loss_a + "
        "weight_b * loss_b before any step."
    ),
    "backward-twice": marked(
        "The first backward freed the trunk's part of the graph, which the second backward needs too: add the two "
        "weighted losses and call backward() once."
    ),
}


def _on(step: int, problem: str) -> str:
    return tr("On step {step}: {problem}", step=step, problem=problem)


def _check_run(step_function: Step, run: int, weight_a: float, weight_b: float, kinds: Sequence[str],
               earlier_right: List[bool], keep: List[Any]) -> Optional[str]:
    """Run the learner's step STEPS times on fresh models; the diagnosis, or None if every step was right."""
    trunk, head_a, head_b = make_multitask_model(seed=SEED + run)
    modules = {"trunk": trunk, "head_a": head_a, "head_b": head_b}
    makes = {part: step_watch.kind(kind) for part, kind in zip(PARTS, kinds)}
    optimizers = {OPTIMIZER_NAMES[part]: makes[part](modules[part].parameters()) for part in PARTS}
    records = {part: step_watch.watch(optimizers[OPTIMIZER_NAMES[part]], OPTIMIZER_NAMES[part]) for part in PARTS}
    twins = {part: TwinOptimizer(makes[part], modules[part].parameters()) for part in PARTS}
    keep += [modules, optimizers, twins]         # alive until the check ends: no id() is ever reused
    previous_record: Dict[str, Optional[Records]] = {part: None for part in PARTS}
    previous_now: Optional[Dict[str, Grads]] = None
    for step in range(1, STEPS + 1):
        batch = make_batch(seed=SEED + 10 * run + step)
        keep.append(batch)
        inputs = dict(zip(("x", "y_a", "y_b"), batch))
        start = {part: weights(modules[part].parameters()) for part in PARTS}
        now = _gradients(start, modules, batch, weight_a, weight_b)
        counts = {part: len(records[part].calls) for part in PARTS}
        before = step_watch.snapshot(inputs, modules, optimizers)
        run_step(step_function, step, trunk, head_a, head_b, *optimizers.values(), *batch, weight_a, weight_b,
                 explanations=_ERROR_EXPLANATIONS)
        change = step_watch.changed(before, inputs, modules, optimizers)
        if change is not None:
            return _on(step, tr("Your step {change}.", change=change))
        new = {part: step_watch.calls_in(records[part], counts[part]) for part in PARTS}
        if len(new["trunk"]) > 1:
            return _on(step, _diagnose_trunk_steps([r.grads for r in new["trunk"]], start, new["trunk"][0].after,
                                                   modules, batch, now, weight_a, weight_b))
        for part in PARTS:
            name = OPTIMIZER_NAMES[part]
            if not new[part]:
                return _on(step, tr("{optimizer} was never stepped: each optimizer steps exactly once per call (and "
                                    "only the optimizers you are given).", optimizer=name))
            if len(new[part]) != 1:
                return _on(step, tr("{optimizer} was stepped {count} times: each optimizer steps exactly once per call "
                                    "(and only the optimizers you are given).", optimizer=name, count=len(new[part])))
            where = twins[part].replay(list(modules[part].parameters()), start[part], new[part])
            if where is not None:
                return _on(step, tr("{part}'s parameters changed other than through {optimizer}.step() ({where}). "
                                    "Change weights only through the optimizers you are given.",
                                    part=translated(NAMES_FIRST[part]), optimizer=name,
                                    where=translated(WHERE_MOVED[where])))
        after = {part: new[part][0].after for part in PARTS}
        for part in PARTS:
            recorded = new[part][0].grads
            if same_gradients(recorded, now[f"want:{part}"]):
                continue
            previous_wanted = previous_now[f"want:{part}"] if previous_now is not None else None
            if part == "trunk":
                moved_heads = _gradients({**start, "head_a": after["head_a"], "head_b": after["head_b"]}, modules,
                                         batch, weight_a, weight_b)
                return _on(step, _diagnose_trunk(recorded, now, moved_heads, previous_record[part], previous_wanted,
                                                 weight_a, weight_b, any(earlier_right)))
            moved = _gradients({**start, "trunk": after["trunk"]}, modules, batch, weight_a, weight_b)
            return _on(step, _diagnose_head(part, recorded, now, moved, previous_record[part], previous_wanted,
                                            weight_a, weight_b, any(earlier_right)))
        earlier_right.append(True)
        previous_record = {part: new[part][0].grads for part in PARTS}
        previous_now = now
    return None


def check_multitask_step(step_function: Step) -> CheckResult:
    """Run the learner's step for several runs of consecutive steps and compare every optimizer's gradient."""
    earlier_right: List[bool] = []
    keep: List[Any] = []
    for run, (weight_a, weight_b, *kinds) in enumerate(RUNS):
        diagnosis = _check_run(step_function, run, weight_a, weight_b, kinds, earlier_right, keep)
        if diagnosis is not None:
            shown = [translated(step_watch.available(kind)) for kind in kinds]  # names, some marked by the engine
            return failed(EXERCISE_ID, tr("With weight_a = {weight_a}, weight_b = {weight_b} and opt_trunk {trunk}, "
                                          "opt_a {head_a}, opt_b {head_b}: {diagnosis}", weight_a=f"{weight_a:g}",
                                          weight_b=f"{weight_b:g}", trunk=shown[0], head_a=shown[1], head_b=shown[2],
                                          diagnosis=diagnosis))
    return passed(EXERCISE_ID, tr("{runs} runs of {steps} consecutive steps, each with fresh models, its own task "
                                  "weights and optimizer kinds: every optimizer was stepped once with exactly the "
                                  "gradient of weight_a * loss_a + weight_b * loss_b for its parameters (the trunk "
                                  "both tasks' weighted gradients, each head its own task's, weighted), all taken at "
                                  "the weights the step started from.", runs=len(RUNS), steps=STEPS))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="multitask_step",
    checker=check_multitask_step,
    hints=HINTS,
    contract=CONTRACT,
)

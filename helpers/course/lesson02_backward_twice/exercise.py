"""Exercise of notebook 02: each loss's gradient for its own model, with torch.autograd.grad."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch

from helpers.course.exercises.compare import same_gradients
from helpers.course.exercises.engine.step_watch import changed, fill_in_place, snapshot
from helpers.course.exercises.engine.untouched import grad_change, put_grads, settings, settings_change
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import LearnerError, run_learner
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson02_backward_twice.contract import CONTRACT
from helpers.course.models import make_inputs, make_two_models, two_losses
from helpers.language import marked, tr
from helpers.tools import count_states, named_parameters, saved_tensors
from helpers.tools.errors import KINDS
from helpers.tools.saved import State

EXERCISE_ID = "two_grads"

HINTS = (
    marked("A right answer returns two tuples - the gradients of l1 for params1 and of l2 for params2 - without "
           "error 1, leaves every .grad as it was, and leaves the graph whole: the caller's own backward afterwards "
           "still runs."),
    marked("Both losses share the graph of the shared term (and of both models). Each autograd.grad call frees the "
           "saved tensors of everything it passes through unless told to keep them - and here your function is never "
           "the last to walk the graph: the caller's backward comes after it."),
    marked("Two calls to torch.autograd.grad, one per loss, each asking only for its own parameters. It takes the "
           "same retain_graph flag as backward(); since the caller walks the graph again after you, none of your "
           "calls may free it. autograd.grad returns the gradients and never touches .grad."),
)


def _grads(loss: torch.Tensor, params: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    return list(torch.autograd.grad(loss, list(params), retain_graph=True))


def _diagnose_model(grads: Sequence[Any], model: str, refs: dict) -> str:
    """What one model's returned gradients are, when they are not its own loss's."""
    own, other = ("L1", "L2") if model == "M1" else ("L2", "L1")
    key = model[-1]
    if any(g is None for g in grads):
        return tr("Some of {model}'s gradients are None: .grad stays None until a backward reaches it. "
                  "torch.autograd.grad returns the gradients directly.", model=model)
    if same_gradients(grads, refs[f"{other.lower()}_m{key}"]):
        return tr("{model} got the gradient of {other}; it should get the gradient of {own}.", model=model,
                  other=other, own=own)
    if same_gradients(grads, refs[f"sum_m{key}"]):
        return tr("{model} received the gradient of L1 + L2: backward() adds every loss into the same .grad. "
                  "Differentiate {own} alone for {model}'s parameters.", model=model, own=own)
    return tr("{model}'s gradients differ from the reference computed with torch.autograd.grad({loss}, ...).",
              model=model, loss=own.lower())


def _cases() -> List[Tuple[str, Tuple[str, str], Any, Any]]:
    """(description, (first loss, second loss) names, models, inputs): one pair of models for every case, new data
    written into the same input tensors, and the losses in both orders."""
    m1, m2 = make_two_models(seed=21)
    x1, x2 = make_inputs(seed=21)
    return [(tr("L1 for M1, L2 for M2"), ("L1", "L2"), (m1, m2), (x1, x2)),
            (tr("L1 for M1, L2 for M2 on new data"), ("L1", "L2"), (m1, m2), (x1, x2)),
            (tr("L2 for M2, L1 for M1 (the other order, new data)"), ("L2", "L1"), (m1, m2), (x1, x2))]


def _run_case(two_grads: Callable[..., Any], index: int, order: Tuple[str, str], models: Any,
              inputs: Any, earlier: List[dict]) -> Optional[str]:
    """One call of the learner's function; the diagnosis, or None when right."""
    m1, m2 = models
    if index:
        fill_in_place(inputs, make_inputs(seed=21 + index))
    x1, x2 = inputs
    p = {"M1": list(m1.parameters()), "M2": list(m2.parameters())}
    l1, l2 = two_losses(m1(x1), m2(x2))
    refs = {f"{loss.lower()}_m{model[-1]}": _grads(value, p[model]) for loss, value in (("L1", l1), ("L2", l2))
            for model in ("M1", "M2")}
    refs.update({f"sum_m{model[-1]}": _grads(l1 + l2, p[model]) for model in ("M1", "M2")})
    first, second = order
    owner = {"L1": "M1", "L2": "M2"}
    losses = {"L1": l1, "L2": l2}
    names = [f"{model}.{name}" for model, net in (("M1", m1), ("M2", m2)) for name, _ in net.named_parameters()]
    all_params = p["M1"] + p["M2"]
    grads_before = put_grads(all_params, seed=200 + index)
    states = count_states(saved_tensors((l1, l2), named_parameters(M1=m1, M2=m2)))
    before, global_settings = snapshot({"x1": x1, "x2": x2}, {"M1": m1, "M2": m2}, {}), settings()
    try:
        result = run_learner(tr("Your function"), two_grads, losses[first], losses[second], p[owner[first]],
                             p[owner[second]])
    except LearnerError as error:
        if error.__cause__ is not None and KINDS["backward-twice"].matches(error.__cause__):
            raise LearnerError(tr("{diagnosis} - the first call freed the graph both losses share: pass "
                                  "retain_graph=True to it.", diagnosis=error.diagnosis)) from error.__cause__
        raise
    problem = settings_change(global_settings)  # first: it also puts the settings back
    if problem is not None:
        return tr("your function {problem}.", problem=problem)
    problem = grad_change(names, all_params, grads_before)
    if problem is not None:
        return tr("your function {problem}. The caller had gradients there; backward() adds into .grad. "
                  "torch.autograd.grad returns the gradients and leaves .grad alone.", problem=problem)
    problem = changed(before, {"x1": x1, "x2": x2}, {"M1": m1, "M2": m2}, {})
    if problem is not None:
        return tr("your function {problem}.", problem=problem)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        return tr("return a pair: (gradients of the first loss for the first parameters, of the second for the "
                  "second).")
    grads = [list(g) if isinstance(g, (tuple, list)) else [g] for g in result]
    for position, (loss, got) in enumerate(zip(order, grads)):
        model = owner[loss]
        if len(got) != len(p[model]):
            if position == 0:
                return tr("return one gradient per parameter: {count} for {model}; your answer's first part has "
                          "{got}.", count=len(p[model]), model=model, got=len(got))
            return tr("return one gradient per parameter: {count} for {model}; your answer's second part has {got}.",
                      count=len(p[model]), model=model, got=len(got))
        if not same_gradients(got, refs[f"{loss.lower()}_m{model[-1]}"]):
            if any(same_gradients(got, old.get(f"{loss.lower()}_m{model[-1]}", [])) for old in earlier):
                return tr("{model}'s gradients are those of an earlier call, not of this one's losses: your "
                          "function remembers an earlier call (a cache, a global, a default argument). Differentiate "
                          "the losses it is given, every time.", model=model)
            return _diagnose_model(got, model, refs)
    now = count_states(saved_tensors((l1, l2), named_parameters(M1=m1, M2=m2)))
    if now[State.STALE] > states[State.STALE]:
        return tr("the gradients are right, but your function wrote in place into a tensor the graph saved (a "
                  "parameter, even with the same values: its version counter moved): the caller's own backward "
                  "afterwards raises error 2. Leave every parameter and input as it is.")
    if now != states:
        return tr("the gradients are right, but your function freed the graph: the caller's own backward "
                  "afterwards raises error 1 (its last autograd.grad call ran without retain_graph=True). The caller "
                  "walks the graph after you, so keep it on every call.")
    earlier.append(refs)
    return None


def check_two_grads(two_grads: Callable[..., Any]) -> CheckResult:
    """Call the learner's ``two_grads(la, lb, params_a, params_b)`` three times on one pair of models (new data,
    the losses in both orders); compare, and check the graph and .grad are left for the caller."""
    earlier: List[dict] = []
    for index, (description, order, models, inputs) in enumerate(_cases()):
        diagnosis = _run_case(two_grads, index, order, models, inputs, earlier)
        if diagnosis is not None:
            return failed(EXERCISE_ID, tr("With {case}: {diagnosis}", case=description, diagnosis=diagnosis))
    return passed(EXERCISE_ID, tr("Each model got exactly its own loss's gradient, in both orders, without error 1, "
                                  "with .grad untouched and the graph still whole for the caller's backward."))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="two_grads",
    checker=check_two_grads,
    hints=HINTS,
    contract=CONTRACT,
)

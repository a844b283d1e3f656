"""The checking engine: situations smallest first, twins observed without being changed, differences named."""
import pytest
import torch
from torch import nn

from helpers.course.exercises.engine.compare import ContractBroken, differences
from helpers.course.exercises.engine.contract import Change, Contract
from helpers.course.exercises.engine.judge import judge, run_situation
from helpers.course.exercises.engine.observe import Key, World, observe
from helpers.course.exercises.engine.situations import FROZEN, GRADS, MODE, batch, calls, generate


def _world(situation):
    torch.manual_seed(situation.seed)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    x = torch.randn(situation["batch"], 4)
    return World(args=(model, x), modules={"model": model}, inputs={"x": x},
                 refill=lambda call: x.copy_(torch.randn(x.shape, generator=torch.Generator().manual_seed(call))))


def _mean_grad(model, x):
    return torch.autograd.grad(model(x).mean(), model[-1].weight)[0]


CONTRACT = Contract("toy", "toy", _world, (batch(8, 1, 3), GRADS, MODE, FROZEN, calls(1, 2)),
                    reference_function=_mean_grad, combinations=2)


def test_the_notebooks_situation_comes_first_then_one_axis_at_a_time():
    situations = list(generate(CONTRACT.axes, 1, combinations=2))
    assert [len(s.changed_axes(CONTRACT.axes)) for s in situations[:8]] == [0] + [1] * 7
    assert len(situations) == 1 + 7 + 2


def test_the_reference_passes_and_observing_changes_nothing():
    assert judge(CONTRACT, _mean_grad) is None
    situation = next(generate(CONTRACT.axes, 1))
    world = _world(situation)
    first = observe(world)
    assert not differences(CONTRACT, first, observe(world), observe(world), first)


def test_a_batch_size_written_into_the_code_is_named_with_the_batch_that_shows_it():
    def fixed(model, x):
        return torch.autograd.grad(model(x).sum() / 8, model[-1].weight)[0]

    message = judge(CONTRACT, fixed)
    assert message.startswith("With a batch of 1 row (the notebook used 8)")
    assert "is a batch size written into your code?" in message


@pytest.mark.parametrize("mistake, words", [
    (lambda model: model.train(), "came back in training mode; it was handed to you in eval mode"),
    (lambda model: [p.requires_grad_(True) for p in model.parameters()], "it was handed to you False (frozen)"),
    (lambda model: [setattr(p, "grad", torch.zeros_like(p)) for p in model.parameters() if p.grad is None],
     "was None before your call and is a tensor after it"),
])
def test_flags_and_grads_left_changed_are_named(mistake, words):
    def answer(model, x):
        result = _mean_grad(model, x)
        mistake(model)
        return result

    assert words in judge(CONTRACT, answer)


def test_a_mistake_seen_only_in_a_mixture_is_reported_with_only_the_axes_it_needs():
    def wrong_in_eval_with_one_row(model, x):
        result = _mean_grad(model, x)
        return 2 * result if x.shape[0] == 1 and not model.training else result

    wide = Contract("toy", "toy", _world, CONTRACT.axes, reference_function=_mean_grad, combinations=40)
    message = judge(wide, wrong_in_eval_with_one_row)
    assert message.startswith("With a batch of 1 row (the notebook used 8) and the models handed over in eval mode:")
    assert "2x the right one" in message


def test_a_reference_that_breaks_its_own_contract_is_a_course_mistake():
    def writes_the_input(model, x):
        x.add_(1)
        return _mean_grad(model, x)

    broken = Contract("toy", "toy", _world, CONTRACT.axes, reference_function=writes_the_input)
    with pytest.raises(ContractBroken):
        run_situation(broken, writes_the_input, next(generate(CONTRACT.axes, 1)))


def test_what_a_contract_lets_change_is_compared_with_the_reference():
    def steps(model, x):
        result = _mean_grad(model, x)
        with torch.no_grad():
            model[0].weight.add_(1)
        return result

    allowed = Contract("toy", "toy", _world, CONTRACT.axes, may_change=(Change("model.0.weight"),),
                       reference_function=_mean_grad)
    assert "`model.0.weight` after your call" in judge(allowed, steps)
    assert "changed `model.0.weight`, which it must leave as it was" in judge(CONTRACT, steps)
    assert Key("x", "input") in observe(_world(next(generate(CONTRACT.axes, 1))))


def _text_before_exercise_cells(folder):
    """exercise id -> the markdown cell just before its exercise cell."""
    import nbformat

    from tests.paths import ROOT

    texts = {}
    for path in sorted((ROOT / folder).glob("*.ipynb")):
        cells = nbformat.read(str(path), as_version=4).cells
        for before, cell in zip(cells, cells[1:]):
            if cell.cell_type == "code" and cell.source.startswith("# EXERCISE:"):
                exercise_id = cell.source.split("# EXERCISE:", 1)[1].split()[0]
                texts[exercise_id] = before.source if before.cell_type == "markdown" else ""
    return texts


def _engine_exercises():
    from helpers import exercises
    from helpers.course.exercises.registry import get_exercise

    return [(i, get_exercise(i).contract) for i in exercises.ids() if get_exercise(i).contract is not None]


@pytest.mark.parametrize("exercise_id, contract", _engine_exercises())
def test_each_exercise_text_says_what_its_check_tries(exercise_id, contract):
    for folder in ("solutions", "notebooks"):
        assert contract.tried_line() in _text_before_exercise_cells(folder)[exercise_id], (folder, exercise_id)

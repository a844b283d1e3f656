"""The recipes give the gradients they promise; their costs are measured without keeping tensors alive."""
import gc
import weakref

import pytest
import torch

from helpers.course import measure
from helpers.course.lesson04_whose_gradient import costs, recipes
from helpers.course.models import make_inputs, make_two_models, two_losses
from helpers.tools import saved_bytes, traversal


def _reference(which, m1, m2, x1, x2, model):
    l1, l2 = two_losses(m1(x1), m2(x2))
    loss = {"L1": l1, "L2": l2, "sum": l1 + l2}[which]
    return torch.autograd.grad(loss, list(model.parameters()))


@pytest.mark.parametrize("name, expected", [
    ("copied fix", ("sum", "sum")), ("(a) backward(inputs=)", ("L1", "L2")), ("(b) autograd.grad", ("L1", "L2")),
    ("(c) detach the other", ("L1", "L2")), ("(d) sum = one-pass limit", ("sum", "sum")),
])
def test_each_recipe_gives_the_gradient_it_promises(name, expected):
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    recipes.RECIPES[name](m1, m2, x1, x2, two_losses)
    for model, which in zip((m1, m2), expected):
        reference = _reference(which, m1, m2, x1, x2, model)
        assert all(torch.allclose(p.grad, g, rtol=1e-4, atol=1e-6) for p, g in zip(model.parameters(), reference))


def test_saved_bytes_counts_activations_once_and_nothing_after_backward():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    l1, l2 = two_losses(m1(x1), m2(x2))
    params = [*m1.parameters(), *m2.parameters()]
    per_model = (32 * 16 + 32 * 64) * 4  # the input, and the ReLU output (also the head's mat1: one storage)
    assert saved_bytes([l1, l2], params) == 2 * per_model + 3 * 32 * 4  # plus the three pow inputs
    assert saved_bytes([l1, l2]) > saved_bytes([l1, l2], params)  # saved weights count otherwise
    (l1 + l2).backward()
    assert saved_bytes([l1, l2], params) == 0


def _steps():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    return m1, m2, x1, x2, costs.recipe_steps(m1, m2, x1, x2)


def test_measuring_keeps_no_activation_alive():
    m1, m2, x1, x2, steps = _steps()
    outputs = []
    hook = m1[1].register_forward_hook(lambda _m, _i, out: outputs.append(weakref.ref(out)))
    for measurement in (measure.peak_saved_bytes, measure.left_alive_bytes, measure.backward_nodes_run):
        measurement(steps["copied fix"], two_losses)
    hook.remove()
    gc.collect()
    assert len(outputs) == 3 and all(ref() is None for ref in outputs), "a ReLU output outlived the measurement"


def _compute_nodes(nodes):
    return [node for node in nodes if getattr(node, "variable", None) is None]


def test_backward_nodes_run_follow_the_rule_of_what_a_backward_visits():
    """Counted by hooks while each recipe runs, and predicted from the graph by helpers.tools.traversal."""
    m1, m2, x1, x2, steps = _steps()
    counted = {name: measure.backward_nodes_run(step, two_losses) for name, step in steps.items()}
    l1, l2 = two_losses(m1(x1), m2(x2))
    whole = {name: len(_compute_nodes(traversal.graph_nodes([loss]))) for name, loss in (("l1", l1), ("l2", l2))}
    restricted = (len(_compute_nodes(traversal.nodes_backward_runs([l1], list(m1.parameters()))))
                  + len(_compute_nodes(traversal.nodes_backward_runs([l2], list(m2.parameters())))))
    assert counted["copied fix"] == whole["l1"] + whole["l2"]
    assert counted["(a) backward(inputs=)"] == counted["(b) autograd.grad"] == restricted
    assert counted["(d) sum = one-pass limit"] == len(_compute_nodes(traversal.graph_nodes([l1, l2])))  # each once
    assert counted["copied fix"] > counted["(c) detach the other"] > counted["(d) sum = one-pass limit"]


def test_after_a_restricted_last_backward_the_first_ones_part_stays_alive_while_the_losses_are_held():
    m1, m2, x1, x2, steps = _steps()
    params = [*m1.parameters(), *m2.parameters()]
    left = {name: measure.left_alive_bytes(step, two_losses, params) for name, step in steps.items()}
    m1_part = (32 * 16 + 32 * 64) * 4 + 32 * 4  # M1's input and ReLU output, and own(O1)'s pow input
    assert left["(a) backward(inputs=)"] == left["(b) autograd.grad"] == m1_part
    assert left["copied fix"] == 32 * 4, "the plain last backward freed all but own(O1), which only L1 reaches"
    assert left["(c) detach the other"] == left["(d) sum = one-pass limit"] == 0
    held = steps["(a) backward(inputs=)"](two_losses)  # as a loop's names hold them into the next forward
    next_peak = measure.peak_saved_bytes(steps["(a) backward(inputs=)"], two_losses, params, held=held)
    same_input = x1.numel() * 4  # the old and the new graph save the same x1: one storage
    alone = measure.peak_saved_bytes(steps["(a) backward(inputs=)"], two_losses, params)
    assert next_peak == alone + m1_part - same_input


def test_peak_saved_memory_covers_both_graphs_of_the_detach_recipe():
    m1, m2, x1, x2, steps = _steps()
    peaks = {name: measure.peak_saved_bytes(step, two_losses) for name, step in steps.items()}
    assert peaks["(c) detach the other"] >= peaks["(a) backward(inputs=)"] > 0


def test_costs_table_and_command(capsys):
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    rows = costs.recipe_costs(m1, m2, x1, x2, two_losses, min_run_time=0.01)
    assert [row["step"] for row in rows] == list(recipes.RECIPES) and rows[-1]["x one-pass"] == 1.0
    assert all(row["seconds"] > 0 and row["backward nodes"] > 0 for row in rows)
    assert "copied fix" in measure.format_table(rows)
    assert costs.main(["--in-features", "8", "--hidden", "16", "--batch", "8", "--min-run-time", "0.01"]) == 0
    assert "one-pass" in capsys.readouterr().out

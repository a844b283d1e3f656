"""The recipes give the gradients they promise, and the benchmark measures without keeping tensors alive."""
import pytest
import torch

from helpers.course.lesson04_whose_gradient import recipes
from helpers.course.models import make_inputs, make_two_models, two_losses


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
    assert recipes.saved_bytes([l1, l2], params) == 2 * per_model + 3 * 32 * 4  # plus the three pow inputs
    assert recipes.saved_bytes([l1, l2]) > recipes.saved_bytes([l1, l2], params)  # saved weights count otherwise
    (l1 + l2).backward()
    assert recipes.saved_bytes([l1, l2], params) == 0


def test_measuring_keeps_no_activation_alive():
    import gc
    import weakref

    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    outputs = []
    hook = m1[1].register_forward_hook(lambda _m, _i, out: outputs.append(weakref.ref(out)))
    recipes.peak_saved_bytes(recipes.copied_fix, m1, m2, x1, x2, two_losses)
    hook.remove()
    gc.collect()
    assert outputs and all(ref() is None for ref in outputs), "the ReLU output outlived the recipe"


def test_peak_saved_memory_covers_both_graphs_of_the_detach_recipe():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    peaks = {name: recipes.peak_saved_bytes(recipe, m1, m2, x1, x2, two_losses)
             for name, recipe in recipes.RECIPES.items()}
    assert peaks["(c) detach the other"] >= peaks["(a) backward(inputs=)"] > 0


def test_benchmark_table_and_command(capsys):
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    rows = recipes.benchmark(m1, m2, x1, x2, two_losses, repeats=2)
    assert [row["recipe"] for row in rows] == list(recipes.RECIPES) and rows[-1]["x one-pass"] == 1.0
    reversed_recipes = dict(reversed(list(recipes.RECIPES.items())))
    rows = recipes.benchmark(m1, m2, x1, x2, two_losses, repeats=1, recipes=reversed_recipes)
    assert rows[0]["recipe"] == recipes.ONE_PASS_LIMIT and rows[0]["x one-pass"] == 1.0
    assert "copied fix" in recipes.format_table(rows)
    assert recipes.main(["--in-features", "8", "--hidden", "16", "--batch", "8", "--repeats", "1"]) == 0
    assert "one-pass" in capsys.readouterr().out

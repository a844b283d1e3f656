"""``diagnose`` takes the whole signature of ``backward`` and ``torch.autograd.grad``, with PyTorch's meaning.

Each test builds a call on a small model, asks ``diagnose`` with the call's own arguments, then runs the real call
and checks the prediction is PyTorch's outcome: the error kind ``classify`` gives, or success.
"""
from __future__ import annotations

import inspect
import re
import warnings
from typing import Any, Callable, Dict, Optional

import pytest
import torch
from torch import nn

from helpers.tools import classify, diagnose
from helpers.tools.diagnosis import Diagnosis


def outcome(call: Callable[[], Any]) -> Optional[str]:
    """The error kind the real call raises, None when it runs, or ``other: ...`` for an error of no known kind."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # only_inputs=False, create_graph=True on backward: warnings, not errors
        try:
            call()
        except Exception as error:  # the outcome under test, whatever it is
            kind = classify(error)
            return kind.name if kind else f"other: {type(error).__name__}: {error}"
    return None


def versions(*tensors: torch.Tensor) -> list:
    return [(t._version, t.requires_grad) for t in tensors]


def agrees(report: Diagnosis, call: Callable[[], Any], *untouched: torch.Tensor) -> Optional[str]:
    """Assert the prediction is what ``call`` then does (and ``untouched`` kept versions and flags); return it."""
    before = versions(*untouched)
    predicted = report.prediction
    assert versions(*untouched) == before, "diagnose changed a tensor it looked at"
    actual = outcome(call)
    assert predicted == actual, f"diagnose said {predicted}, PyTorch did {actual}\n{report}"
    assert report.will_fail == (actual is not None)
    return actual


class Critic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def wgan_batch(seed: int = 0):
    torch.manual_seed(seed)
    generator, critic = nn.Linear(3, 6), Critic()
    real = torch.randn(5, 6)
    fake = generator(torch.randn(5, 3)).detach()
    eps = torch.rand(5, 1)
    return critic, real, fake, eps


def test_the_wgan_gp_penalty_with_grad_outputs_is_predicted_to_run_and_does() -> None:
    critic, real, fake, eps = wgan_batch()
    x_hat = (eps * real + (1 - eps) * fake).requires_grad_(True)
    out = critic(x_hat)
    ones = torch.ones_like(out)
    report = diagnose(out, critic, inputs=x_hat, autograd_grad=True, grad_outputs=ones, create_graph=True)
    assert "grad_outputs=..." in report.call and "create_graph=True" in report.call
    assert any("create_graph=True" in note for note in report.notes)
    grads = []
    agrees(report, lambda: grads.append(torch.autograd.grad(out, x_hat, grad_outputs=ones, create_graph=True)[0]),
           out, ones, x_hat)
    penalty = ((grads[0].norm(2, dim=1) - 1) ** 2).mean()
    d_loss = critic(fake).mean() - critic(real).mean() + 10 * penalty
    # create_graph=True kept the critic's saved tensors alive: the backward through the penalty runs.
    agrees(diagnose(d_loss, critic), d_loss.backward)


def test_the_penalty_without_grad_outputs_is_the_non_scalar_error() -> None:
    critic, real, fake, eps = wgan_batch()
    x_hat = (eps * real + (1 - eps) * fake).requires_grad_(True)
    out = critic(x_hat)
    report = diagnose(out, critic, inputs=x_hat, autograd_grad=True, create_graph=True)
    assert agrees(report, lambda: torch.autograd.grad(out, x_hat, create_graph=True)) == "non-scalar-output"


def test_retain_graph_false_with_create_graph_frees_the_graph_for_the_next_backward() -> None:
    critic, real, fake, eps = wgan_batch()
    x_hat = (eps * real + (1 - eps) * fake).requires_grad_(True)
    out = critic(x_hat)
    ones = torch.ones_like(out)
    report = diagnose(out, critic, inputs=x_hat, autograd_grad=True, grad_outputs=ones, create_graph=True,
                      retain_graph=False)
    assert any("retain_graph=False" in note for note in report.notes)
    grads = []
    agrees(report, lambda: grads.append(torch.autograd.grad(out, x_hat, ones, retain_graph=False,
                                                            create_graph=True)[0]))
    loss = out.mean() + grads[0].pow(2).mean()
    assert agrees(diagnose(loss, critic), loss.backward) == "backward-twice"


@pytest.mark.parametrize("case", ["with grad_outputs", "without grad_outputs", "critic under no_grad"])
def test_x_hat_without_requires_grad_names_the_error_pytorch_raises_first(case: str) -> None:
    critic, real, fake, eps = wgan_batch()
    x_hat = eps * real + (1 - eps) * fake  # requires_grad_ forgotten, fake detached: x_hat needs no grad
    if case == "critic under no_grad":
        with torch.no_grad():
            out = critic(x_hat)
    else:
        out = critic(x_hat)
    given: Dict[str, Any] = {} if case == "without grad_outputs" else {"grad_outputs": torch.ones_like(out)}
    report = diagnose(out, critic, inputs=x_hat, autograd_grad=True, create_graph=True, **given)
    kind = agrees(report, lambda: torch.autograd.grad(out, x_hat, create_graph=True, **given))
    assert kind == {"with grad_outputs": "input-needs-no-grad", "without grad_outputs": "non-scalar-output",
                    "critic under no_grad": "no-grad-fn"}[case]


def per_sample_loss(size: int = 4):
    torch.manual_seed(1)
    model = nn.Linear(3, 1)
    return model, (model(torch.randn(size, 3)).squeeze(1) - torch.randn(size)) ** 2


@pytest.mark.parametrize("shape, expected", [((4,), None), ((1,), "grad-output-shape"), ((5,), "grad-output-shape"),
                                             ((4, 1), "grad-output-shape")])
def test_backward_with_a_gradient_of_each_shape(shape, expected) -> None:
    model, losses = per_sample_loss(4)
    gradient = torch.ones(shape)
    report = diagnose(losses, model, gradient=gradient)
    assert agrees(report, lambda: losses.backward(torch.ones(shape)), gradient) == expected
    assert report.call == "backward(gradient=...)"


def test_a_scalar_loss_with_a_one_element_gradient_is_the_old_wgan_mismatch() -> None:
    model, losses = per_sample_loss(4)
    loss = losses.mean()
    report = diagnose(loss, model, gradient=torch.ones(1))  # one = torch.FloatTensor([1]); loss.backward(one)
    assert agrees(report, lambda: loss.backward(torch.ones(1))) == "grad-output-shape"


def test_grad_tensors_is_torch_autograd_backwards_name() -> None:
    model, losses = per_sample_loss(4)
    parts = [losses[:2].sum(), losses[2:]]
    report = diagnose(parts, model, grad_tensors=[None, torch.ones(2)])
    assert agrees(report, lambda: torch.autograd.backward(parts, grad_tensors=[None, torch.ones(2)])) is None


def two_inputs():
    torch.manual_seed(2)
    x = torch.randn(4, 3, requires_grad=True)
    unused = torch.randn(3, requires_grad=True)
    return x, unused, nn.Linear(3, 2)(x).pow(2).sum()


@pytest.mark.parametrize("given, expected", [
    ({}, "unused-input"), ({"allow_unused": False}, "unused-input"), ({"allow_unused": True}, None),
    ({"materialize_grads": True}, None), ({"materialize_grads": True, "allow_unused": True}, None),
    ({"materialize_grads": True, "allow_unused": False}, "materialize-needs-allow-unused"),
])
def test_an_unreached_input_with_allow_unused_and_materialize_grads(given, expected) -> None:
    x, unused, loss = two_inputs()
    report = diagnose(loss, inputs=[x, unused], autograd_grad=True, **given)
    result = []
    assert agrees(report, lambda: result.append(torch.autograd.grad(loss, [x, unused], **given))) == expected
    if expected is None:
        assert (result[0][1] is None) == (not given.get("materialize_grads"))
        assert any("not reached" in note for note in report.notes)


def two_outputs():
    torch.manual_seed(3)
    x = torch.randn(4, 3, requires_grad=True)
    y = nn.Linear(3, 2)(x)
    return x, y, (y * 2).sum()


@pytest.mark.parametrize("name, grads, expected", [
    ("one per output", lambda: [torch.ones(4, 2), None], None),
    ("too few", lambda: [torch.ones(4, 2)], "grad-output-count"),
    ("one tensor for two outputs", lambda: torch.ones(4, 2), "grad-output-count"),
    ("too many", lambda: [torch.ones(4, 2), None, torch.ones(7)], None),
    ("wrong shape", lambda: [torch.ones(4, 3), None], "grad-output-shape"),
    ("broadcastable is not enough", lambda: [torch.ones(2), None], "grad-output-shape"),
    ("float64 for float32", lambda: [torch.ones(4, 2, dtype=torch.float64), None], None),
    ("complex for real", lambda: [torch.ones(4, 2, dtype=torch.complex64), None], "grad-output-complex"),
    ("a number in the list", lambda: [1.0, None], "grad-output-type"),
    ("None for the non-scalar output", lambda: [None, None], "non-scalar-output"),
])
def test_grad_outputs_of_every_form(name, grads, expected) -> None:
    x, y, s = two_outputs()
    report = diagnose([y, s], inputs=x, autograd_grad=True, grad_outputs=grads())
    assert agrees(report, lambda: torch.autograd.grad([y, s], x, grad_outputs=grads())) == expected, name
    if name == "too many":
        assert any("ignores the extra" in note for note in report.notes)


def test_a_mismatch_past_the_first_output_is_named_though_pytorch_words_it_otherwise() -> None:
    x, y, s = two_outputs()
    grads = [torch.ones(4, 2), torch.ones(4, 3)]
    report = diagnose([y, y * 3], inputs=x, autograd_grad=True, grad_outputs=grads)
    assert report.prediction == "grad-output-shape" and any("garbled" in note for note in report.notes)
    first = diagnose([y * 3, y], inputs=x, autograd_grad=True, grad_outputs=grads[::-1])
    assert first.prediction == "grad-output-shape" and not any("garbled" in note for note in first.notes)
    with pytest.raises(RuntimeError) as raised:
        torch.autograd.grad([y, y * 3], x, grad_outputs=grads)
    assert re.search(r"Mismatch in shape|Boolean value of Tensor|The size of tensor a", str(raised.value))


def test_grad_outputs_that_is_a_number_is_the_type_error() -> None:
    x, y, s = two_outputs()
    report = diagnose(s, inputs=x, autograd_grad=True, grad_outputs=1.0)
    assert report.prediction == "grad-output-type"
    assert any("'float' object is not iterable" in note for note in report.notes)
    with pytest.raises(TypeError, match="'float' object is not iterable"):
        torch.autograd.grad(s, x, grad_outputs=1.0)


def test_a_complex_scalar_without_a_gradient() -> None:
    x, y, s = two_outputs()
    loss = s * (1 + 1j)
    assert agrees(diagnose(loss), loss.backward) == "complex-output"


@pytest.mark.parametrize("name, grads, expected", [
    ("a batch of 5", lambda: torch.ones(5, 4, 2), None),
    ("no batch dimension", lambda: torch.ones(4, 2), "grad-output-shape"),
    ("two outputs, one batch size", lambda: [torch.ones(5, 4, 2), torch.ones(5)], None),
    ("two outputs, two batch sizes", lambda: [torch.ones(5, 4, 2), torch.ones(3)], "batched-grad-outputs"),
    ("None for the scalar", lambda: [torch.ones(5, 4, 2), None], "batched-grad-outputs"),
])
def test_is_grads_batched_puts_a_batch_dimension_first(name, grads, expected) -> None:
    x, y, s = two_outputs()
    outputs = y if name in ("a batch of 5", "no batch dimension") else [y, s]
    report = diagnose(outputs, inputs=x, autograd_grad=True, grad_outputs=grads(), is_grads_batched=True)
    call = lambda: torch.autograd.grad(outputs, x, grad_outputs=grads(), is_grads_batched=True)  # noqa: E731
    assert agrees(report, call) == expected, name
    if expected is None:
        assert any("under vmap" in note for note in report.notes), "says what it does not see"


def test_is_grads_batched_with_a_0_dim_gradient() -> None:
    x, y, s = two_outputs()
    report = diagnose(s, inputs=x, autograd_grad=True, grad_outputs=torch.ones(()), is_grads_batched=True)
    assert report.prediction == "batched-grad-outputs" and any("IndexError" in note for note in report.notes)
    with pytest.raises(IndexError):
        torch.autograd.grad(s, x, grad_outputs=torch.ones(()), is_grads_batched=True)


@pytest.mark.parametrize("autograd_grad, given", [
    (False, {"grad_outputs": torch.ones(4, 2)}), (False, {"allow_unused": True}),
    (False, {"is_grads_batched": True}), (False, {"materialize_grads": True}), (False, {"only_inputs": False}),
    (True, {"gradient": torch.ones(4, 2)}),
])
def test_a_keyword_of_the_other_call_is_pytorchs_type_error(autograd_grad, given) -> None:
    x, y, s = two_outputs()
    report = diagnose(y, inputs=x, autograd_grad=autograd_grad, **given)
    call = (lambda: torch.autograd.grad(y, x, **given)) if autograd_grad else (lambda: y.backward(inputs=x, **given))
    assert agrees(report, call) == "unexpected-keyword"


def test_only_inputs_false_is_ignored_as_pytorch_ignores_it() -> None:
    x, y, s = two_outputs()
    report = diagnose(s, inputs=x, autograd_grad=True, only_inputs=False)
    assert any("only_inputs" in note for note in report.notes)
    assert agrees(report, lambda: torch.autograd.grad(s, x, only_inputs=False)) is None


@pytest.mark.parametrize("given, second", [({}, "backward-twice"), ({"retain_graph": True}, None),
                                           ({"create_graph": True}, None),
                                           ({"create_graph": True, "retain_graph": False}, "backward-twice")])
def test_retain_and_create_graph_change_the_next_call_not_this_one(given, second) -> None:
    x, y, s = two_outputs()
    loss = (y ** 2).sum()
    report = diagnose(loss, **given)
    assert bool(report.notes) == bool(given), "said only when given"
    agrees(report, lambda: loss.backward(**given))
    assert agrees(diagnose(loss), loss.backward) == second


def test_the_default_call_reads_as_before() -> None:
    x, y, s = two_outputs()
    assert diagnose(s).call == "backward()" and diagnose(s, inputs=x).call == "backward(inputs=...)"
    assert diagnose(s, inputs=x, autograd_grad=True).call == "torch.autograd.grad(...)"
    assert diagnose(s).notes == ()


def test_diagnose_takes_every_parameter_of_the_real_calls_with_their_defaults() -> None:
    """A new PyTorch argument (or a changed default) fails this test."""
    ours = inspect.signature(diagnose).parameters
    theirs = {
        "Tensor.backward": (inspect.signature(torch.Tensor.backward).parameters, {"self"}),
        "torch.autograd.grad": (inspect.signature(torch.autograd.grad).parameters, {"outputs"}),
        # tensors= is diagnose's outputs; grad_variables= is grad_tensors' deprecated name (PyTorch warns).
        "torch.autograd.backward": (inspect.signature(torch.autograd.backward).parameters,
                                    {"tensors", "grad_variables"}),
    }
    for call, (parameters, outside) in theirs.items():
        for name, parameter in parameters.items():
            if name in outside:
                continue
            assert name in ours, f"diagnose does not take {call}'s {name}="
            if parameter.default is not inspect.Parameter.empty:
                assert ours[name].default == parameter.default, f"{name}= defaults differently from {call}'s"


OLDER_SHAPE_WORDINGS = [
    # torch 1.12.0, https://github.com/natanielruiz/deep-head-pose/issues/124
    "Mismatch in shape: grad_output[0] has a shape of torch.Size([1]) and output[0] has a shape of torch.Size([]).",
    # torch not stated (2021), https://github.com/chr5tphr/zennit/issues/58
    "Mismatch in shape: grad_output[0] has a shape of torch.Size([1, 1, 80, 80]) and output[0] has a shape of "
    "torch.Size([1, 1, 96, 96]).",
]


@pytest.mark.parametrize("message", OLDER_SHAPE_WORDINGS)
def test_older_shape_mismatch_wordings_are_the_same_kind(message: str) -> None:
    assert classify(RuntimeError(message)).name == "grad-output-shape"


def test_a_graph_it_cannot_read_is_cannot_tell_never_will_run(monkeypatch) -> None:
    import helpers.tools.diagnosis as diagnosis

    def unreadable(*args: Any, **kwargs: Any) -> Diagnosis:
        raise RuntimeError("a node of a kind never seen")

    monkeypatch.setattr(diagnosis, "_diagnose", unreadable)
    x, y, s = two_outputs()
    report = diagnose(s, grad_tensors=None, retain_graph=True)
    assert report.will_fail is None and "could not read it" in str(report) and "will run" not in str(report)


def test_a_gradient_edge_is_something_it_cannot_read_not_an_error() -> None:
    """PyTorch takes a GradientEdge as an input or an output; the tool reads tensors only, and says so."""
    x = torch.randn(3, requires_grad=True)
    h = x * 2
    y = h.sin().sum()
    edge = torch.autograd.graph.get_gradient_edge(h)
    report = diagnose(y, inputs=[edge], autograd_grad=True)
    assert report.cannot_tell and report.will_fail is None and "GradientEdge" in str(report)
    torch.autograd.grad(y, [edge])                       # and PyTorch runs it


def test_a_custom_function_under_is_grads_batched_is_out_of_sight() -> None:
    """vmap runs the custom backward; whether it can is not visible, so no 'will run' (here PyTorch raises)."""

    class CopiesInto(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[override]
            return x * 2

        @staticmethod
        def backward(ctx, grad):  # type: ignore[override]
            out = torch.zeros(3)
            out.copy_(grad)                              # an in-place copy into a plain tensor: vmap refuses it
            return out * 2

    x = torch.randn(3, requires_grad=True)
    report = diagnose(CopiesInto.apply(x), inputs=x, autograd_grad=True, grad_outputs=torch.eye(3),
                      is_grads_batched=True)
    assert report.cannot_tell and "vmap" in str(report)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(CopiesInto.apply(x), x, grad_outputs=torch.eye(3), is_grads_batched=True)

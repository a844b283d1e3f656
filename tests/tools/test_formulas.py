"""Backward formulas PyTorch does not have (helpers.tools.formulas): the verdict is what PyTorch then does.

Each case builds a real graph, asks ``diagnose`` with the call's own arguments, then makes the call: the tool must
predict what this build then does, the error ("no-derivative") or a run, and leave every tensor as it found it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from helpers.tools import classify, diagnose, formulas
from tests.tools.real_training_codes import cdist_differentiates_twice
from tests.tools.state_hash import assert_same_state, state_of

RAISES, RUNS = "no-derivative", "runs"


@dataclass
class Case:
    """A call about to be made: ``torch.autograd.grad`` when ``autograd_grad``, else ``outputs.backward``."""

    outputs: torch.Tensor
    inputs: Optional[List[torch.Tensor]] = None
    autograd_grad: bool = False
    kwargs: Dict[str, Any] = field(default_factory=dict)
    keep: Tuple[Any, ...] = ()  # modules and tensors whose state the tool must not change

    def run(self) -> None:
        if self.autograd_grad:
            torch.autograd.grad(self.outputs, self.inputs, **self.kwargs)
        else:
            self.outputs.backward(**({} if self.inputs is None else {"inputs": self.inputs}), **self.kwargs)


def _penalty(forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, *keep: Any) -> Case:
    """A gradient penalty: the gradient of ``forward`` at ``x`` with create_graph, then backward of its norm."""
    (gradient,) = torch.autograd.grad(forward(x).sum(), x, create_graph=True)
    return Case(gradient.pow(2).sum(), keep=(x, *keep))


def cdist_penalty() -> Case:
    x, y = torch.randn(6, 3, requires_grad=True), torch.randn(5, 3)
    return _penalty(lambda t: torch.cdist(t, y), x)


def cdist_penalty_for_other_inputs_only() -> Case:
    """The cdist node's backward is in the graph, but backward(inputs=[w]) does not run it."""
    x, w = torch.randn(6, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    (gradient,) = torch.autograd.grad(torch.cdist(x, torch.randn(5, 3)).sum(), x, create_graph=True)
    loss = gradient.pow(2).sum() + (w * 2).sum()
    return Case(loss, [w], keep=(x, w))


def pdist_penalty() -> Case:
    return _penalty(lambda t: F.pdist(t), torch.randn(6, 3, requires_grad=True))


class Once(torch.autograd.Function):
    """x squared, with a backward marked @once_differentiable."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def once_differentiable_penalty() -> Case:
    return _penalty(lambda t: Once.apply(t) * t, torch.randn(4, requires_grad=True))


def igamma(which: str) -> Case:
    a, b = torch.rand(5, requires_grad=True) + 0.5, torch.rand(5, requires_grad=True) + 0.5
    out = torch.igamma(a, b).sum()
    if which == "all":
        return Case(out, keep=(a, b))
    if which == "backward(inputs=other)":
        return Case(out, [b], keep=(a, b))
    return Case(out, [b], autograd_grad=True, keep=(a, b))


def in_place_acosh() -> Case:
    x = torch.rand(4, requires_grad=True)
    y = (x + 1.5).acosh_()
    return Case(y.sum(), keep=(x,))


def unique_backward() -> Case:
    x = torch.tensor([1.0, 2.0, 2.0, 3.0], requires_grad=True)
    return Case(torch.unique(x).sum(), keep=(x,))


def gamma_rsample_penalty() -> Case:
    """A penalty through Gamma's reparameterised sample: _standard_gamma_grad has no backward for its input."""
    concentration = torch.tensor([1.5, 2.0, 3.0], requires_grad=True)
    torch.manual_seed(0)
    sample = torch.distributions.Gamma(concentration, torch.ones(3)).rsample()
    (gradient,) = torch.autograd.grad(sample.sum(), concentration, create_graph=True)
    return Case(gradient.pow(2).sum(), keep=(concentration,))


def embedding_bag_penalty() -> Case:
    bag = nn.EmbeddingBag(10, 4, mode="sum")
    indices, offsets = torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 3])
    weights = torch.rand(6, requires_grad=True)
    (gradient,) = torch.autograd.grad(bag(indices, offsets, per_sample_weights=weights).pow(2).sum(), weights,
                                      create_graph=True)
    return Case(gradient.pow(2).sum(), keep=(bag, weights))


def norms_and_dropout_penalty() -> Case:
    """LayerNorm, BatchNorm and dropout: formulas missing for their saved statistics, whose edges are never used."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.BatchNorm1d(8), nn.Dropout(0.2), nn.Tanh(),
                        nn.Linear(8, 1))
    x = torch.randn(6, 4, requires_grad=True)
    return _penalty(net, x, net)


def penalty_through_the_generated_cdist_with_inputs() -> Case:
    """autograd.grad of the penalty, for the weight behind the cdist: the cdist node's edges are needed."""
    w = torch.randn(3, 3, requires_grad=True)
    x, y = torch.randn(6, 3, requires_grad=True), torch.randn(5, 3)
    (gradient,) = torch.autograd.grad(torch.cdist(x @ w, y).sum(), x, create_graph=True)
    return Case(gradient.pow(2).sum(), [w], autograd_grad=True, keep=(x, w))


class NoBackward(torch.autograd.Function):
    """A custom Function that defines no backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def custom_function_without_backward() -> Case:
    x = torch.randn(3, requires_grad=True)
    return Case(NoBackward.apply(x).sum(), keep=(x,))


def operator_without_autograd() -> Case:
    """An Error node made as torch._higher_order_ops makes them for an operator whose autograd is not implemented."""
    x = torch.randn(3, requires_grad=True)
    error = torch._C._functions.DelayedError("Autograd not implemented for my_operator", 1)
    return Case(error(x * 2).sum(), keep=(x,))


def transformer_critic_penalty() -> Case:
    """WGAN-GP's penalty on a Transformer critic: its attention runs scaled_dot_product_attention's fused CPU
    kernel, whose backward has no formula (a NotImplemented node)."""
    torch.manual_seed(0)
    critic = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    return _penalty(critic, torch.randn(2, 5, 8, requires_grad=True), critic)


def transformer_critic_penalty_in_eval_mode() -> Case:
    """The same with the default dropout, in eval mode: the fused kernel again (in train mode dropout takes the
    math path, which has a double backward)."""
    torch.manual_seed(0)
    critic = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()
    return _penalty(critic, torch.randn(2, 5, 8, requires_grad=True), critic)


def ctc_penalty() -> Case:
    torch.manual_seed(0)
    log_probs = torch.randn(6, 1, 5).log_softmax(2).detach().requires_grad_()
    targets, lengths = torch.randint(1, 5, (1, 3)), (torch.tensor([6]), torch.tensor([3]))
    return _penalty(lambda t: F.ctc_loss(t, targets, *lengths), log_probs)


def multi_margin_penalty() -> Case:
    return _penalty(lambda t: F.multi_margin_loss(t, torch.tensor([1, 0])), torch.randn(2, 3, requires_grad=True))


CASES: Dict[str, Tuple[Callable[[], Case], str]] = {
    "custom Function without backward": (custom_function_without_backward, RAISES),
    "an operator without autograd": (operator_without_autograd, RAISES),
    "Transformer critic penalty": (transformer_critic_penalty, RAISES),
    "Transformer critic penalty, eval mode": (transformer_critic_penalty_in_eval_mode, RAISES),
    "CTC loss penalty": (ctc_penalty, RAISES),
    "multi_margin_loss penalty": (multi_margin_penalty, RAISES),
    "cdist penalty": (cdist_penalty, RAISES),
    "cdist penalty in the graph, backward(inputs=w)": (cdist_penalty_for_other_inputs_only, RUNS),
    "cdist penalty, autograd.grad for a weight": (penalty_through_the_generated_cdist_with_inputs, RAISES),
    "pdist penalty": (pdist_penalty, RAISES),
    "once_differentiable penalty": (once_differentiable_penalty, RAISES),
    "igamma, every input": (lambda: igamma("all"), RAISES),
    "igamma, backward(inputs=other)": (lambda: igamma("backward(inputs=other)"), RUNS),
    "igamma, autograd.grad(other)": (lambda: igamma("autograd.grad(other)"), RUNS),
    "in-place acosh_": (in_place_acosh, RAISES),
    "unique": (unique_backward, RAISES),
    "Gamma rsample penalty": (gamma_rsample_penalty, RAISES),
    "embedding_bag per_sample_weights penalty": (embedding_bag_penalty, RAISES),
    "LayerNorm, BatchNorm, dropout penalty": (norms_and_dropout_penalty, RUNS),
}

# Outcomes PyTorch has kept for years; the others' outcome is whatever this build does (a release may add a
# formula, as torch 2.15 did for cdist's backward), and the tool must agree with it.
STABLE = ("once_differentiable penalty", "igamma, every input", "igamma, backward(inputs=other)",
          "LayerNorm, BatchNorm, dropout penalty", "custom Function without backward")


def _state(case: Case) -> Dict[str, str]:
    modules = [k for k in case.keep if isinstance(k, nn.Module)]
    tensors = [k for k in case.keep if isinstance(k, torch.Tensor)]
    return state_of(modules, tensors)


def _outcome(case: Case) -> str:
    try:
        case.run()
    except Exception as error:  # the outcome under test
        kind = classify(error)
        return kind.name if kind else f"other: {type(error).__name__}: {error}"
    return RUNS


@pytest.mark.parametrize("name", list(CASES))
def test_the_verdict_is_what_pytorch_then_does(name: str) -> None:
    build, expected = CASES[name]
    case = build()
    before = _state(case)
    report = diagnose(case.outputs, inputs=case.inputs, autograd_grad=case.autograd_grad, **case.kwargs)
    assert_same_state(before, _state(case), "diagnose")
    actual = _outcome(case)
    if name in STABLE or (name.startswith("Transformer") and torch.__version__.startswith("2.13")):
        assert actual == expected, f"the case is not what it says: PyTorch gave {actual}"  # as the README says
    if actual == RUNS:
        assert report.will_fail is False, f"PyTorch runs; the tool said:\n{report}"
    else:
        assert actual == RAISES, f"the case is not what it says: PyTorch gave {actual}"
        assert report.will_fail is True and report.prediction == RAISES, f"PyTorch raises; the tool said:\n{report}"
        assert report.missing_formulas, str(report)


def test_the_report_names_the_node_and_pytorchs_message() -> None:
    if cdist_differentiates_twice():  # torch 2.15 added a backward for cdist's backward: igamma's is still missing
        text = str(diagnose(igamma("all").outputs))
        assert "IgammaBackward0" in text and "is not implemented" in text, text
        return
    report = diagnose(cdist_penalty().outputs)
    text = str(report)
    assert "CdistBackwardBackward0" in text
    assert "the derivative for '_cdist_backward' is not implemented." in text


def test_every_class_the_table_names_exists_in_this_build() -> None:
    """The names are made as PyTorch's generator makes them (prefix and per-prefix count): each is a real class."""
    known = formulas.table()
    if known is None:
        pytest.skip("this torch ships no torchgen/packaged/autograd/derivatives.yaml")
    classes = set(dir(torch._C._functions))
    assert "IgammaBackward0" in known
    assert ("CdistBackwardBackward0" in known) is not cdist_differentiates_twice()
    assert sorted(name for name in known if name not in classes) == []


@pytest.fixture
def no_table(monkeypatch: pytest.MonkeyPatch) -> Any:
    """As on a build whose table cannot be read (no torchgen beside torch, no PyYAML)."""
    formulas.table.cache_clear()
    monkeypatch.setattr(formulas, "_table_path", lambda: None)
    yield
    formulas.table.cache_clear()


@pytest.mark.parametrize("build", [cdist_penalty, lambda: igamma("all"), gamma_rsample_penalty,
                                   norms_and_dropout_penalty], ids=["cdist", "igamma", "Gamma rsample", "norms"])
def test_without_the_table_the_ops_known_to_lack_a_formula_are_cannot_tell(no_table: Any, build: Any) -> None:
    assert formulas.table() is None
    report = diagnose(build().outputs)
    assert report.will_fail is None and report.unseen, str(report)


def test_a_torchgen_other_than_the_one_beside_torch_is_not_read(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Any) -> None:
    """A PyTorch checkout as the working folder (or on PYTHONPATH) must not stand in for this build's table."""
    import importlib.machinery
    import importlib.util

    fake = tmp_path / "torchgen"
    (fake / "packaged" / "autograd").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "packaged" / "autograd" / "derivatives.yaml").write_text("- name: igamma(Tensor self, Tensor other)"
                                                                      " -> Tensor\n  self: grad\n  other: grad\n")
    spec = importlib.machinery.ModuleSpec("torchgen", None, origin=str(fake / "__init__.py"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "torchgen" else real(name, *a))
    formulas.table.cache_clear()
    try:
        assert formulas.table() is None
        assert diagnose(igamma("all").outputs).will_fail is None
    finally:
        formulas.table.cache_clear()


def test_an_in_place_op_on_a_view_is_said_to_be_out_of_sight() -> None:
    """CopySlices hides the op it wraps: the report names the in-place ops PyTorch has no formula for."""
    x = torch.rand(4, requires_grad=True)
    base = x + 1.5
    base[:2].acosh_()
    report = diagnose(base.sum())
    note = next((line for line in report.notes if line.startswith("CopySlices")), "")
    assert "acosh_" in note and "igamma_" in note, str(report)
    with pytest.raises(NotImplementedError):
        base.sum().backward()


def test_edges_that_cannot_be_matched_to_inputs_are_cannot_tell(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = formulas.Formula("CdistBackwardBackward0", ("grad", "x1"), {"x1": "_cdist_backward"}, False)
    monkeypatch.setattr(formulas, "table", lambda: {wrong.node: wrong})
    report = diagnose(cdist_penalty().outputs)
    assert report.will_fail is None, str(report)

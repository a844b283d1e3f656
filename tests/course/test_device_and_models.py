"""Device choice, mixed-precision facts, and the lessons' seeded models."""
import torch

from helpers.course.device import autocast_dtype, describe_device, needs_grad_scaler, pick_device
from helpers.course.lesson00_start_here.environment import check_environment, torch_item, widgets_item
from helpers.course.models import HIDDEN, make_inputs, make_model, make_two_models, two_losses


def test_pick_device_honours_the_argument_and_the_variable(monkeypatch):
    assert pick_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("COURSE_DEVICE", "meta")  # no machine picks meta by itself
    assert pick_device() == torch.device("meta")
    monkeypatch.delenv("COURSE_DEVICE")
    mps = getattr(torch.backends, "mps", None)
    expected = "cuda" if torch.cuda.is_available() else "mps" if mps and mps.is_available() else "cpu"
    assert pick_device().type == expected


def test_mixed_precision_facts():
    assert autocast_dtype(torch.device("cpu")) == torch.bfloat16 and not needs_grad_scaler(torch.device("cpu"))
    assert autocast_dtype(torch.device("cuda")) == torch.float16 and needs_grad_scaler(torch.device("cuda"))
    assert "bfloat16" in describe_device(torch.device("cpu"))


def test_cpu_autocast_really_runs_bfloat16():
    with torch.autocast("cpu", dtype=autocast_dtype(torch.device("cpu"))):
        out = make_model(0)(torch.ones(2, 16))
    assert out.dtype == torch.bfloat16


def test_models_end_in_a_64_to_1_head_and_are_seeded_without_touching_the_global_rng():
    state = torch.random.get_rng_state()
    m1, m2 = make_two_models(seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert isinstance(m1[-1], torch.nn.Linear) and (m1[-1].in_features, m1[-1].out_features) == (HIDDEN, 1) == (64, 1)
    again, _ = make_two_models(seed=3)
    assert all(torch.equal(a, b) for a, b in zip(m1.parameters(), again.parameters()))
    assert not torch.equal(m1[0].weight, m2[0].weight)
    x1, x2 = make_inputs(seed=3)
    assert torch.equal(x1, make_inputs(seed=3)[0]) and not torch.equal(x1, x2)


def test_both_losses_share_the_term_and_reach_both_models():
    m1, m2 = make_two_models()
    l1, l2 = two_losses(*(m(x) for m, x in zip((m1, m2), make_inputs())))
    grads = torch.autograd.grad(l1, [m1[-1].weight, m2[-1].weight])
    assert all(g.abs().sum() > 0 for g in grads), "L1 reaches M2 through the shared term"


def test_environment_report_flags_an_old_torch():
    assert not torch_item("2.3.1").ok and "torch >= 2.4" in torch_item("2.3.1").fix
    assert torch_item("2.13.0+cpu").ok and torch_item("2.4.0").ok
    report = check_environment()
    assert report.ready and "torch" in str(report) and "<table" in report._repr_html_()


def test_widgets_item_flags_ipywidgets_7_under_jupyterlab_4_only():
    assert widgets_item("7.7.5", "").ok  # e.g. Colab's own front end
    assert not widgets_item("7.7.5", "4.2.0").ok and "pip install -U ipywidgets" in widgets_item("7.7.5", "4.2.0").fix
    assert widgets_item("8.1.5", "4.2.0").ok
    assert not widgets_item("", "4.2.0").ok

"""The tools on real architectures: DCGAN at its real size, a ResNet generator, a text-conditioned UNet.

Each classic bug is run for real. ``diagnose`` must predict what PyTorch then does, ``expect_error`` must catch it
as that kind, an error 2's message must name a tensor ``diagnose`` listed, and the drawing must show the same states.
Silent cases (fused optimizers, ``.data`` writes) are checked against a reference gradient.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, List

import pytest
import torch
import torch.nn.functional as F

from helpers.tools import (
    State,
    VersionTimeline,
    diagnose,
    draw_graph,
    draw_saved_graph,
    expect_error,
    forward_trace,
    parse_version_error,
    record_parameters,
    relative_error,
)
from helpers.tools.arguments import read_parameters
from helpers.tools.diagnosis import MAX_LINES, Diagnosis
from tests.tools.real_models import ResnetGenerator, diffusion_losses, make_dcgan, make_text_unet


def agree(report: Diagnosis, call: Callable[[], Any], outputs: Any = None, params: Any = None) -> None:
    """Run ``call`` and check that ``report``, ``expect_error`` and the drawing agree with what PyTorch did."""
    if outputs is not None:
        picture_text = str(draw_saved_graph(outputs, None, params))
        freed = sum(1 for s in report.problems if s.state is State.FREED)
        stale = sum(1 for s in report.problems if s.state is State.STALE)
        assert picture_text.count("freed") >= freed and picture_text.count("stale v") >= stale, picture_text[-600:]
    if report.prediction is None:
        call()  # raises if the prediction was wrong
        return
    with expect_error(report.prediction, show=False) as caught:
        call()
    details = parse_version_error(str(caught.error))
    if details is not None:
        listed = {(s.shape, s.version_saved, s.version_now) for s in report.problems if s.state is State.STALE}
        assert (tuple(details.shape), details.version_expected, details.version_now) in listed, (details, listed)


def bce(probability: torch.Tensor, target: float) -> torch.Tensor:
    return F.binary_cross_entropy(probability, torch.full_like(probability, target))


# ---------------------------------------------------------------- DCGAN, real size


def test_dcgan_missing_detach_is_error_1_on_the_generators_saved_tensors() -> None:
    netg, netd, noise, real = make_dcgan()
    fake = netg(noise)
    d_loss = bce(netd(real), 1.0) + bce(netd(fake), 0.0)  # no fake.detach(): d_loss's backward runs into G
    d_loss.backward()
    torch.optim.Adam(netd.parameters(), lr=2e-4, betas=(0.5, 0.999)).step()
    g_loss = bce(netd(fake), 1.0)
    report = diagnose(g_loss, [netg, netd])
    assert report.prediction == "backward-twice"
    assert "in DCGANGenerator" in str(report), str(report)
    agree(report, g_loss.backward, {"g_loss": g_loss}, [netg, netd])


@pytest.mark.parametrize("fused", [False, True], ids=["adam", "fused adam"])
def test_dcgan_step_between_forward_and_the_generators_backward(fused: bool) -> None:
    """One D(fake) for both losses, D stepped before G's backward: error 2, or with a fused Adam, silence."""
    netg, netd, noise, real = make_dcgan()
    opt_d = torch.optim.Adam(netd.parameters(), lr=2e-4, betas=(0.5, 0.999), fused=fused)
    params = [*netg.named_parameters(), *netd.named_parameters()]  # names collide: main.0.weight in both
    fake = netg(noise)
    on_fake = netd(fake)
    d_loss = bce(netd(real), 1.0) + bce(on_fake, 0.0)
    g_loss = bce(on_fake, 1.0)
    record = record_parameters(params)
    reference = torch.autograd.grad(g_loss, list(netg.parameters()), retain_graph=True)
    d_loss.backward(retain_graph=True)
    opt_d.step()
    report = diagnose(g_loss, params, recorded=record)
    named = read_parameters(params).tensors
    d_tensors = {id(p) for p in netd.parameters()}
    if not fused:
        stale = {s.parameter for s in report.problems}
        assert report.prediction == "inplace-version" and stale
        assert all(id(named[name]) in d_tensors for name in stale), f"only D's weights are stale: {stale}"
        agree(report, g_loss.backward, g_loss, params)
        return
    assert not report.will_fail and report.silent_changes
    assert all(id(named[change.parameter]) in d_tensors for change in report.silent_changes)
    assert "Not seen from here" in str(diagnose(g_loss, params)), "without a record it says what it cannot see"
    netg.zero_grad()
    agree(report, g_loss.backward, g_loss, params)
    error = relative_error([p.grad for p in netg.parameters()], reference)
    assert error > 0.01, f"the fused step should have changed G's gradient silently (relative error {error:.3g})"


def test_dcgan_in_the_right_order_runs_and_says_so() -> None:
    netg, netd, noise, real = make_dcgan()
    fake = netg(noise)
    d_loss = bce(netd(real), 1.0) + bce(netd(fake.detach()), 0.0)
    d_loss.backward()
    torch.optim.Adam(netd.parameters(), lr=2e-4).step()
    g_loss = bce(netd(fake), 1.0)
    report = diagnose(g_loss, {"G": netg, "D": netd}, recorded=record_parameters({"G": netg, "D": netd}))
    assert not report.will_fail and not report.problems and not report.silent_changes
    agree(report, g_loss.backward, g_loss, {"G": netg, "D": netd})


def test_dcgan_version_timeline_and_forward_trace_take_modules_and_loss_dicts() -> None:
    netg, netd, noise, real = make_dcgan()
    opt_d = torch.optim.Adam(netd.parameters(), lr=2e-4)
    timeline = VersionTimeline({"G": netg, "D": netd})
    with torch.autograd.set_detect_anomaly(True):
        fake = netg(noise)
        on_fake = netd(fake)  # the forward line the trace must find
        losses = {"d_loss": bce(netd(real), 1.0) + bce(on_fake, 0.0), "g_loss": bce(on_fake, 1.0)}
    timeline.record("forward", losses)
    losses["d_loss"].backward(retain_graph=True)
    opt_d.step()
    timeline.record("opt_d.step", losses)
    assert timeline.value("D.main.0.weight", "opt_d.step") != timeline.value("D.main.0.weight", "forward")
    assert timeline.value("G.main.0.weight", "opt_d.step") == timeline.value("G.main.0.weight", "forward")
    assert any(row.startswith("saved") and timeline.value(row, "opt_d.step").startswith("stale")
               for row in timeline.rows)
    trace = forward_trace(losses["g_loss"], {"G": netg, "D": netd})
    assert trace is not None and any("on_fake = netd(fake)" in line for line in trace.learner_lines), trace


# ---------------------------------------------------------------- ResNet generator


def test_resnet_residual_plus_equals_is_error_2_on_an_activation_said_to_be_in_the_model() -> None:
    """CycleGAN's generator with ``x += block(x)``, judged by a discriminator: the stale tensors are G's."""
    torch.manual_seed(0)
    netg = ResnetGenerator(inplace_residual=True)
    _, netd, _, _ = make_dcgan()
    g_loss = bce(netd(netg(torch.randn(1, 3, 64, 64))), 1.0)
    params = {"G": netg, "D": netd}
    report = diagnose(g_loss, params)
    assert report.prediction == "inplace-version"
    activations = [s for s in report.problems if s.parameter is None]
    assert activations and all(report.places[id(s.node)].model == "G" for s in activations), str(report)
    assert "in G (next to G.model." in str(report)
    agree(report, g_loss.backward, g_loss, params)


def test_resnet_a_long_report_groups_its_lines() -> None:
    torch.manual_seed(0)
    netg = ResnetGenerator()
    loss = netg(torch.randn(1, 3, 64, 64)).pow(2).mean()
    loss.backward(retain_graph=True)
    torch.optim.SGD(netg.parameters(), lr=0.1).step()
    report = diagnose(loss, netg)
    stale_parameters = {s.parameter for s in report.problems}
    text = str(report)
    assert len(stale_parameters) > MAX_LINES
    assert f"and {len(stale_parameters) - MAX_LINES} more like it." in text
    assert len(text.splitlines()) <= MAX_LINES + 4, text
    agree(report, loss.backward, loss, netg)


def test_resnet_with_in_place_relus_and_a_proper_residual_runs() -> None:
    torch.manual_seed(0)
    netg = ResnetGenerator()
    loss = netg(torch.randn(1, 3, 64, 64)).pow(2).mean()
    report = diagnose(loss, netg)
    assert not report.will_fail
    agree(report, loss.backward, loss, netg)


# ---------------------------------------------------------------- text encoder -> UNet


def unet_params(tenc: torch.nn.Module, unet: torch.nn.Module) -> dict:
    return {"tenc": tenc, "unet": unet}


def test_unet_in_place_bias_on_a_saved_activation_is_error_2_in_the_unet() -> None:
    tenc, unet, tokens, images, noise = make_text_unet(inplace_bias=True)
    loss_tenc, _ = diffusion_losses(tenc, unet, tokens, images, noise)
    report = diagnose(loss_tenc, unet_params(tenc, unet))
    assert report.prediction == "inplace-version"
    assert any(str(place).startswith("in unet") for place in report.places.values()), str(report)
    agree(report, loss_tenc.backward, loss_tenc, unet_params(tenc, unet))


def test_unet_in_place_activation_on_a_skip_connection_is_error_2_in_the_unet() -> None:
    tenc, unet, tokens, images, noise = make_text_unet(inplace_skip_activation=True)
    loss_tenc, _ = diffusion_losses(tenc, unet, tokens, images, noise)
    report = diagnose(loss_tenc, unet_params(tenc, unet))
    assert report.prediction == "inplace-version" and all(s.parameter is None for s in report.problems)
    assert all(report.places[id(s.node)].model == "unet" for s in report.problems), str(report)
    agree(report, loss_tenc.backward, loss_tenc, unet_params(tenc, unet))


def test_unet_split_backward_without_retain_graph_is_error_1_seed_2s_recipe() -> None:
    tenc, unet, tokens, images, noise = make_text_unet()
    loss_tenc, loss_unet = diffusion_losses(tenc, unet, tokens, images, noise)
    loss_tenc.backward(inputs=list(tenc.parameters()))  # its path to tenc runs through unet, and frees it
    report = diagnose(loss_unet, unet_params(tenc, unet), inputs=list(unet.parameters()))
    assert report.prediction == "backward-twice"
    agree(report, lambda: loss_unet.backward(inputs=list(unet.parameters())))


def test_unet_stepping_tenc_before_unets_restricted_backward_is_harmless() -> None:
    tenc, unet, tokens, images, noise = make_text_unet()
    loss_tenc, loss_unet = diffusion_losses(tenc, unet, tokens, images, noise)
    reference = torch.autograd.grad(loss_unet, list(unet.parameters()), retain_graph=True)
    loss_tenc.backward(retain_graph=True, inputs=list(tenc.parameters()))
    torch.optim.AdamW(tenc.parameters(), lr=1e-2).step()
    report = diagnose(loss_unet, unet_params(tenc, unet), inputs=list(unet.parameters()))
    assert not report.will_fail
    agree(report, lambda: loss_unet.backward(inputs=list(unet.parameters())))
    assert relative_error([p.grad for p in unet.parameters()], reference) < 1e-5


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16 autocast"])
@pytest.mark.parametrize("fused", [False, True], ids=["adamw", "fused adamw"])
def test_unet_stepped_before_tencs_backward(autocast: bool, fused: bool) -> None:
    """tenc's backward passes through unet: stepping unet first is error 2, or with a fused AdamW, silent.

    Under autocast the convolutions and linears save bfloat16 copies of their weights, which the step does not
    touch; GroupNorm and LayerNorm run in float32 and save their weights as they are, which it does.
    """
    tenc, unet, tokens, images, noise = make_text_unet()
    params = unet_params(tenc, unet)
    loss_tenc, loss_unet = diffusion_losses(tenc, unet, tokens, images, noise, "cpu" if autocast else None)
    record = record_parameters(params)
    reference = torch.autograd.grad(loss_tenc, list(tenc.parameters()), retain_graph=True)
    loss_unet.backward(retain_graph=True, inputs=list(unet.parameters()))
    torch.optim.AdamW(unet.parameters(), lr=1e-2, fused=fused).step()
    inputs = list(tenc.parameters())
    report = diagnose(loss_tenc, params, inputs=inputs, recorded=record)
    changed = [s.parameter for s in report.problems] if not fused else [c.parameter for c in report.silent_changes]
    assert changed and all(name.startswith("unet.") for name in changed)
    named = read_parameters(params).tensors
    norm_weights = {id(p) for m in unet.modules() if isinstance(m, (torch.nn.GroupNorm, torch.nn.LayerNorm))
                    for p in m.parameters()}
    norms = [name for name in changed if id(named[name]) in norm_weights]
    if autocast:
        assert norms == changed, f"under autocast only the normalisation weights are saved as they are: {changed}"
    else:
        assert len(norms) < len(changed), f"in float32 the convolution weights are saved too: {changed}"
    assert report.will_fail is not fused and report.wrong_values is fused
    tenc.zero_grad()
    agree(report, lambda: loss_tenc.backward(inputs=inputs))
    if fused:
        assert relative_error([p.grad for p in inputs], reference) > 1e-3, "the silent change moved tenc's gradient"


def test_unet_an_ema_style_write_through_data_is_seen_only_with_a_record() -> None:
    tenc, unet, tokens, images, noise = make_text_unet()
    params = unet_params(tenc, unet)
    loss_tenc, _ = diffusion_losses(tenc, unet, tokens, images, noise)
    record = record_parameters(params)
    reference = torch.autograd.grad(loss_tenc, list(tenc.parameters()), retain_graph=True)
    with torch.no_grad():
        for parameter in unet.parameters():
            parameter.data.mul_(0.9)  # an EMA-style update through .data: no version bump
    assert not diagnose(loss_tenc, params).will_fail
    report = diagnose(loss_tenc, params, recorded=record)
    assert report.wrong_values and all(c.parameter.startswith("unet.") for c in report.silent_changes)
    agree(report, loss_tenc.backward)
    assert relative_error([p.grad for p in tenc.parameters()], reference) > 1e-3


# ---------------------------------------------------------------- any argument a user can pass


ODD_ARGUMENTS: List[Any] = [None, 0, 3.5, "loss", b"x", [], {}, (), [None], {"a": None}, {"a": [1, 2]}, object(),
                            torch.ones(3), torch.ones(3, requires_grad=True), lambda: None, iter([1, 2]),
                            {"m": torch.nn.Linear(2, 2)}, [torch.nn.Linear(2, 2), "x"], set([1]), float("nan")]


@pytest.mark.parametrize("odd", ODD_ARGUMENTS, ids=lambda value: type(value).__name__)
def test_no_tool_raises_for_any_argument(odd: Any) -> None:
    weight = torch.randn(3, requires_grad=True)
    loss = (weight * 2).sum()
    for outputs, params, inputs in ((odd, None, None), (loss, odd, None), (loss, None, odd), (odd, odd, odd)):
        str(diagnose(outputs, params, inputs))
        str(diagnose(outputs, params, inputs, recorded=record_parameters(params), autograd_grad=True))
        draw_saved_graph(outputs, odd, params)._repr_mimebundle_()
        draw_graph(outputs, params)._repr_mimebundle_()
        str(draw_saved_graph(outputs, None, params))
        timeline = VersionTimeline(params)
        timeline.record("moment", outputs, odd)
        str(timeline)
        forward_trace(outputs, params, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        forward_trace(odd)


"""diagnose, the version timeline and anomaly traces: each claim checked against a real run."""
import warnings

import torch

from helpers.course.models import make_inputs, make_two_models, two_losses
from helpers.course.predict import observe
from helpers.tools.anomaly import forward_trace
from helpers.tools.diagnosis import diagnose
from helpers.tools.graph import named_parameters
from helpers.tools.versions import VersionTimeline


def _setup():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    l1, l2 = two_losses(m1(x1), m2(x2))
    return m1, m2, l1, l2, named_parameters(M1=m1, M2=m2)


def test_diagnose_predicts_error_1_and_is_right():
    *_, l1, l2, params = _setup()
    l2.backward()
    report = diagnose(l1, params)
    assert report.prediction == "backward-twice" and "freed" in str(report)
    assert observe(l1.backward) == "backward-twice"


def test_diagnose_predicts_error_2_naming_the_parameter_and_is_right():
    m1, m2, l1, l2, params = _setup()
    l2.backward(retain_graph=True)
    torch.optim.Adam(m2.parameters()).step()
    report = diagnose(l1, params)
    assert report.prediction == "inplace-version" and "M2.2.weight" in str(report)
    assert observe(l1.backward) == "inplace-version"


def test_diagnose_says_a_healthy_graph_will_run_and_it_does():
    *_, l1, l2, params = _setup()
    report = diagnose((l1, l2), params)
    assert not report.will_fail and "will run" in report._repr_html_()
    assert observe(lambda: (l1 + l2).backward()) is None


def test_version_timeline_follows_parameters_and_every_saved_tensor():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    o1, o2 = m1(x1), m2(x2)
    l1, l2 = two_losses(o1, o2)
    losses = {"L1": l1, "L2": l2}
    timeline = VersionTimeline(named_parameters(M1=m1, M2=m2))
    timeline.record("forward", losses, {"M1": o1, "M2": o2})
    l2.backward(retain_graph=True)
    torch.optim.SGD(m2.parameters(), lr=0.1).step()
    timeline.record("step", losses)
    l1.backward(inputs=list(m1.parameters()))  # runs: never visits M2's stale head
    timeline.record("L1.backward", losses)
    assert timeline.value("M2.2.weight", "forward") == "v1" and timeline.value("M2.2.weight", "step") == "v2"
    assert timeline.value("M1.2.weight", "step") == "v1"
    assert timeline.value("saved AddmmBackward0.mat2 [64, 1] (M2.2.weight)", "step") == "stale v1->v2"
    assert timeline.value("saved ReluBackward0.result [32, 64] (M1)", "L1.backward") == "freed"
    assert timeline.value("saved ReluBackward0.result [32, 64] (M2)", "L1.backward") == "alive v0"
    assert timeline.value("saved PowBackward0.self [32, 1] (L1 & L2)", "forward") == "alive v0"
    rows = list(timeline.rows)
    assert len(rows) == len(set(rows)) == 8 + 11, "one row per parameter and per saved tensor"
    assert "stale v1-&gt;v2" in timeline._repr_html_() and "forward" in str(timeline)


def test_forward_trace_points_at_the_learners_forward_line():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    with torch.autograd.set_detect_anomaly(True), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        l1, l2 = two_losses(m1(x1), m2(x2))  # the forward line
        l2.backward(retain_graph=True)
        torch.optim.SGD(m2.parameters(), lr=0.1).step()
        assert observe(l1.backward) == "inplace-version"
    trace = forward_trace(warned)
    assert trace.node.startswith("Addmm")
    assert any("# the forward line" in line for line in trace.learner_lines)
    assert forward_trace([]) is None


def test_diagnose_with_inputs_ignores_nodes_a_restricted_backward_never_runs():
    m1, m2, l1, l2, params = _setup()
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    torch.optim.SGD(m1.parameters(), lr=0.1).step()  # M1's saved head weight is stale now
    assert diagnose(l2, params).prediction == "inplace-version"
    restricted = diagnose(l2, params, inputs=list(m2.parameters()))
    assert not restricted.will_fail
    assert observe(lambda: l2.backward(retain_graph=True, inputs=list(m2.parameters()))) is None
    assert observe(l2.backward) == "inplace-version"

"""The error catalogue recognises every wording PyTorch 2.4-2.14 uses, from real samples."""
import json

import pytest
import torch

from helpers.course.models import make_inputs, make_two_models, two_losses
from helpers.tools.errors import KINDS, classify, get_kind, parse_version_error, short_description
from tests.paths import FIXTURES

SAMPLES = json.loads((FIXTURES / "error_messages.json").read_text())["samples"]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["id"] for s in SAMPLES])
def test_each_real_sample_is_classified_as_its_kind_only(sample):
    error = RuntimeError(sample["message"])
    assert classify(error) is KINDS[sample["kind"]]
    assert [k for k in KINDS.values() if k.matches(error)] == [KINDS[sample["kind"]]]


VERSION_SAMPLES = [s for s in SAMPLES if s["kind"] == "inplace-version"]


@pytest.mark.parametrize("sample", VERSION_SAMPLES, ids=[s["id"] for s in VERSION_SAMPLES])
def test_version_error_details_are_parsed_from_each_wording(sample):
    details = parse_version_error(sample["message"])
    expected = sample["expect"]
    assert details is not None
    assert details.tensor_type == expected["tensor_type"]
    assert list(details.shape) == expected["shape"]
    assert details.output_nr == expected["output_nr"]
    assert details.grad_fn == expected["grad_fn"]
    assert details.op == expected["op"]
    assert (details.version_now, details.version_expected) == (expected["version_now"], expected["version_expected"])
    assert details.is_leaf == (expected["grad_fn"] is None)


def test_fixtures_cover_every_wording_the_course_promises():
    texts = " ".join(s["message"] for s in SAMPLES)
    for wording in ["ReluBackward0", "output 0 of Relu", "of AsStrided,", "set_detect_anomaly(True).",
                    "check_nan=False).", "Good luck!", "torch.cuda.FloatTensor", "buffers have already been freed",
                    "saved intermediate results have already been freed", "[64, 1]"]:
        assert wording in texts, wording
    assert any(s["expect"]["grad_fn"] is None for s in VERSION_SAMPLES), "a leaf tensor's message"


def test_a_different_runtime_error_is_no_course_kind():
    assert classify(RuntimeError("CUDA out of memory")) is None
    assert classify(ValueError("Trying to backward through the graph a second time")) is None


def test_unknown_kind_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="backward-twice"):
        get_kind("backwards-twice")


def test_parse_returns_none_for_other_messages():
    assert parse_version_error("Trying to backward through the graph a second time") is None


def _raise(function):
    try:
        function()
    except Exception as error:  # noqa: BLE001 - we want the error itself
        return error
    raise AssertionError("expected an error")


def test_this_torch_raises_error_1_in_the_two_model_loop():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    l1, l2 = two_losses(m1(x1), m2(x2))
    l2.backward()
    error = _raise(l1.backward)
    assert classify(error) is KINDS["backward-twice"]
    assert short_description(error).startswith("Error 1")


def test_this_torch_raises_error_2_naming_the_64_by_1_saved_weight():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    l1, l2 = two_losses(m1(x1), m2(x2))
    opt2 = torch.optim.Adam(m2.parameters())
    l2.backward(retain_graph=True)
    opt2.step()
    error = _raise(l1.backward)
    assert classify(error) is KINDS["inplace-version"]
    details = parse_version_error(str(error))
    assert details.shape == (64, 1) and details.tensor_type == "torch.FloatTensor"
    assert details.version_now > details.version_expected


def test_this_torch_raises_the_other_course_kinds():
    w = torch.ones(3, requires_grad=True)
    assert classify(_raise(lambda: w.add_(1))) is KINDS["leaf-inplace"]
    assert classify(_raise(lambda: torch.ones(2).sum().backward())) is KINDS["no-grad-fn"]
    unused = torch.ones(2, requires_grad=True)
    assert classify(_raise(lambda: torch.autograd.grad((w * 2).sum(), [w, unused]))) is KINDS["unused-input"]

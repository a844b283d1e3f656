"""expect_error: passes on the expected error, fails loudly on anything else, shows the learner's line."""
import subprocess
import sys

import pytest
import torch

from helpers import expect_error
from helpers.course.models import make_inputs, make_two_models, two_losses


def _backward_twice():
    weight = torch.ones(3, requires_grad=True)
    loss = (weight * weight).sum()
    loss.backward()
    loss.backward()  # the learner's line


def _version_error():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    l1, l2 = two_losses(m1(x1), m2(x2))
    opt2 = torch.optim.SGD(m2.parameters(), lr=0.1)
    l2.backward(retain_graph=True)
    opt2.step()
    l1.backward()


def test_expected_error_is_swallowed_and_reported(capsys):
    with expect_error("backward-twice") as caught:
        _backward_twice()
    assert caught.report is not None and caught.report.kind.name == "backward-twice"
    printed = capsys.readouterr().out
    assert "Trying to backward through the graph a second time" in printed
    assert "02_backward_twice" in printed


def test_no_error_fails_the_cell():
    with pytest.raises(AssertionError, match="ran without raising anything"):
        with expect_error("backward-twice", show=False):
            torch.ones(2, requires_grad=True).sum().backward()


def test_a_different_error_fails_the_cell_and_names_both():
    with pytest.raises(AssertionError, match=r"inplace.*different error: RuntimeError: Trying to backward"):
        with expect_error("inplace-version", show=False):
            _backward_twice()


def test_exception_class_with_regex():
    with expect_error(ZeroDivisionError, r"division by zero", show=False) as caught:
        1 / 0  # noqa: B018
    assert isinstance(caught.error, ZeroDivisionError)
    with pytest.raises(AssertionError, match="different error"):
        with expect_error(ValueError, r"^exactly this$", show=False):
            raise ValueError("something else")


def test_an_error_raised_from_the_expected_one_counts():
    def wrapper():
        try:
            _backward_twice()
        except RuntimeError as error:
            raise ValueError("training step failed") from error

    with expect_error("backward-twice", show=False) as caught:
        wrapper()
    assert isinstance(caught.error, ValueError)


def test_keyboard_interrupt_passes_through_untouched():
    with pytest.raises(KeyboardInterrupt):
        with expect_error("backward-twice", show=False):
            raise KeyboardInterrupt


def test_unknown_kind_and_bad_arguments_are_rejected():
    with pytest.raises(KeyError, match="known kinds"):
        expect_error("no-such-kind")
    with pytest.raises(TypeError):
        expect_error("backward-twice", match="x")
    with pytest.raises(TypeError):
        expect_error(42)
    with pytest.raises(TypeError, match="Exception subclass"):
        expect_error(SystemExit)


def test_raising_line_is_the_learners_not_torchs():
    with expect_error("backward-twice", show=False) as caught:
        _backward_twice()
    line = caught.report.raising_line
    assert line.filename == __file__
    assert line.code == "loss.backward()  # the learner's line"


def test_version_error_report_shows_type_shape_op_and_versions():
    with expect_error("inplace-version", show=False) as caught:
        _version_error()
    details = caught.report.details
    assert details.shape == (64, 1) and details.tensor_type == "torch.FloatTensor"
    assert details.version_now == details.version_expected + 1  # SGD changes the weight once per step
    text = str(caught.report)
    for part in ("[64, 1]", "torch.FloatTensor", f"version now (N): {details.version_now}", "03_inplace_version",
                 "l1.backward()"):
        assert part in text
    page = caught.report._repr_html_()
    assert "<details><summary>Full traceback</summary>" in page and "version when saved (M)" in page


def test_cell_magic_passes_on_the_error_and_fails_without_it():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("%load_ext helpers")
        shell.run_cell("import torch\nw = torch.ones(2, requires_grad=True)\nloss = (w * w).sum()\nloss.backward()")
        assert shell.run_cell("%%expect_error backward-twice\nloss.backward()").success
        assert shell.run_cell("%%expect_error backward-twice  # again\nloss.backward()").success
        failing = shell.run_cell("%%expect_error backward-twice\nx = 1")
        assert isinstance(failing.error_in_exec, AssertionError)
    finally:
        InteractiveShell.clear_instance()


def test_importing_helpers_changes_nothing():
    code = (
        "import warnings, torch\n"
        "filters = list(warnings.filters); state = torch.random.get_rng_state()\n"
        "import helpers, helpers.tools, helpers.course.device, helpers.course.models, authoring.generate, authoring.bench\n"
        "helpers.exercises.ids()  # imports every lesson's set-up and checkers\n"
        "assert warnings.filters == filters, 'warning filters changed'\n"
        "assert torch.equal(torch.random.get_rng_state(), state), 'random state changed'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""

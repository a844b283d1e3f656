"""The solved course as one learner's session in real JupyterLab (tests/browser/solved_session.py), run once.

From that one run: what a learner sees after Run All in each solved notebook (the checks the student copies get in
test_jupyterlab.py, strict here: a check that does not pass raises); Run All again in the same kernel, so that
each code cell runs a second time; the whole session's memory against Binder's budget, with tabs left open and
idle kernels culled; a busy kernel never culled; and a culled notebook brought back as its summary line says.

Binder's budget is asserted only in the Binder venv (always built on CI); run in this environment, the peak is
reported. Memory is the PSS of the server, every kernel and their children, summed: pages shared between processes
count once, as they do for the cgroup that enforces Binder's limit (docs/hosting.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from authoring.process_memory import MIB
from authoring.whole_session import course_notebooks
from tests.binder_venv import binder_python, binder_venv
from tests.browser.conftest import REPO_ROOT, in_ci
from tests.browser.solved_session import SolvedSession, run_solved_session, second_run_problems
from tests.browser.test_jupyterlab import (
    BrowserResult,
    NotebookCase,
    check_clicks,
    check_error_explanations,
    check_exercise_cards,
    check_graph_pictures,
    check_run_all,
    check_screenshot,
    check_widgets,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser

NOTEBOOKS = course_notebooks(REPO_ROOT / "solutions")
NAMES = [path.name for path in NOTEBOOKS]
LIMIT_MIB = 1.5e9 / MIB   # 1.5 GB: Binder restarts a session at 2 GB; the rest is headroom
BENCHMARK_FILE = "whole-session.txt"


@pytest.fixture(scope="module")
def session(chromium: Browser, tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path,
            benchmark_dir: Path) -> SolvedSession:
    """The session, run once for every test below (a module: pytest-xdist keeps it on one worker)."""
    python = binder_python()
    if python is None and in_ci():
        pytest.fail(f"CI is set and there is no Binder venv at {binder_venv()} (.ci/run builds it)", pytrace=False)
    found = run_solved_session(chromium, NOTEBOOKS, tmp_path_factory.mktemp("solved-session"), artifacts_dir, python)
    where = "the Binder venv" if python else "this environment (no Binder venv built)"
    lines = [*found.report.lines(), f"  (in the browser, in {where}; each notebook's seconds include its re-run)"]
    (benchmark_dir / BENCHMARK_FILE).write_text("\n".join(lines) + "\n")
    return found


def result(session: SolvedSession, name: str) -> BrowserResult:
    """One solved notebook's first Run All, as the per-notebook checks read it."""
    solved = session.notebooks.get(name)
    if solved is None:
        pytest.fail(f"the session did not reach {name}", pytrace=False)
    return BrowserResult(NotebookCase("solutions", name), solved.expected, solved.run)


@pytest.mark.parametrize("name", NAMES)
def test_run_all_runs_every_cell_without_unexpected_errors(session: SolvedSession, name: str) -> None:
    check_run_all(result(session, name))


@pytest.mark.parametrize("name", NAMES)
def test_every_expected_error_cell_shows_its_explanation(session: SolvedSession, name: str) -> None:
    check_error_explanations(result(session, name))


@pytest.mark.parametrize("name", NAMES)
def test_every_exercise_check_shows_its_card_passed(session: SolvedSession, name: str) -> None:
    check_exercise_cards(result(session, name))


@pytest.mark.parametrize("name", NAMES)
def test_every_graph_picture_renders_as_a_drawn_svg(session: SolvedSession, name: str) -> None:
    check_graph_pictures(result(session, name))


@pytest.mark.parametrize("name", NAMES)
def test_every_predict_and_hint_widget_renders_its_buttons(session: SolvedSession, name: str) -> None:
    check_widgets(result(session, name))


@pytest.mark.parametrize("name", NAMES)
def test_clicking_a_predict_choice_reveals_the_answer(session: SolvedSession, name: str) -> None:
    check_clicks(result(session, name))


@pytest.mark.parametrize("name", NAMES)
def test_screenshot_shows_the_whole_notebook(session: SolvedSession, name: str) -> None:
    check_screenshot(result(session, name))


@pytest.mark.parametrize("name", NAMES)
def test_run_all_runs_again_in_the_same_kernel(session: SolvedSession, name: str) -> None:
    """A learner runs the notebook again: Run All a second time, no restart, runs every code cell and raises nothing."""
    solved = session.notebooks.get(name)
    assert solved is not None, f"the session did not reach {name}"
    problems = second_run_problems(name, solved.expected.code_cells, solved.run.cells, solved.second)
    assert not problems, f"{name}, Run All again:\n" + "\n\n".join(problems)


def test_every_solved_notebook_ran_in_the_session(session: SolvedSession) -> None:
    assert list(session.notebooks) == NAMES and len(session.report.notebooks) == len(NAMES) > 0


def test_the_kernels_ran_in_the_intended_environment(session: SolvedSession) -> None:
    python = binder_python()
    expected = Path(python).parent if python else None
    assert session.report.kernel_python, "the first kernel's command line was not found"
    if expected is not None:
        assert Path(session.report.kernel_python).parent == expected, session.report.kernel_python


def test_server_and_kernels_stay_under_1_5_gb_at_every_point(session: SolvedSession) -> None:
    """Binder's budget, measured in Binder's environment. In a learner's own (a CUDA build of torch makes each kernel
    far bigger than Binder's CPU build) it is reported, not asserted: Binder's limit is not theirs."""
    if binder_python() is None:
        pytest.skip(f"Binder's {LIMIT_MIB:.0f} MiB budget applies to the Binder venv, which is not built here "
                    f"(`bash authoring/binder-venv`); in this environment the session peaked at "
                    f"{session.report.peak_mib:.0f} MiB (reported, not asserted)")
    assert session.report.peak_mib < LIMIT_MIB, "\n".join(session.report.lines())


def test_open_tabs_keep_their_kernels_for_a_while(session: SolvedSession) -> None:
    """The scenario is the one that hurts: several kernels alive at once, none shut down by hand."""
    assert session.report.most_kernels_alive >= 2, "\n".join(session.report.lines())


def test_idle_kernels_are_culled_although_their_tab_is_open(session: SolvedSession) -> None:
    assert session.report.culled, "no kernel was culled: is the course's jupyter_server_config.json loaded?"
    assert set(session.report.culled.values()) == {"idle"}, f"culled in these states: {session.report.culled}"


def test_a_kernel_running_a_cell_longer_than_the_timeout_is_not_culled(session: SolvedSession) -> None:
    assert session.report.busy_kernel_survived is True


def test_a_culled_notebook_comes_back_as_its_summary_says(session: SolvedSession) -> None:
    """Its tab open, its kernel culled: Kernel > Restart Kernel and Run All Cells runs every cell again from the top;
    the summary's button shuts the kernel down; reopened, the notebook runs with Run All."""
    assert not session.comeback_problems, "\n".join(session.comeback_problems)

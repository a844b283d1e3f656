"""A learner's whole session fits in Binder's memory: every notebook run in order, in one JupyterLab, tabs left open.

The server starts with the course's launch configuration (helpers/jupyter_config, as ``python -m helpers.lab`` and
binder/start give it), in the Binder venv when it is built (always on CI), else in this environment. Culling's timeout
is scaled down with the learner's pace (authoring/whole_session.py); its other settings are the course's own.
Binder's memory budget is asserted only in the Binder venv; run in this environment, the peak is reported.

Memory is the PSS of the server, every kernel and their children, summed: pages shared between processes count once,
as they do for the cgroup that enforces Binder's limit (Kubernetes' memory limit on the user's pod; docs/hosting.md).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from authoring.process_memory import MIB
from authoring.whole_session import SessionReport, course_notebooks, run_session
from tests.binder_venv import binder_python, binder_venv
from tests.browser.conftest import in_ci
from tests.paths import ROOT

LIMIT_MIB = 1.5e9 / MIB   # 1.5 GB: Binder restarts a session at 2 GB; the rest is headroom
BENCHMARK_FILE = "whole-session.txt"


@pytest.fixture(scope="module")
def session(benchmark_dir: Path) -> SessionReport:
    """One whole session, run once for all the tests below."""
    python = binder_python()
    if python is None and in_ci():
        pytest.fail(f"CI is set and there is no Binder venv at {binder_venv()} (.ci/run builds it)", pytrace=False)
    report = run_session(course_notebooks(ROOT / "solutions"), python=python)
    where = "the Binder venv" if python else "this environment (no Binder venv built)"
    (benchmark_dir / BENCHMARK_FILE).write_text("\n".join([*report.lines(), f"  (run in {where})"]) + "\n")
    return report


def test_every_notebook_runs_to_the_end_in_the_session(session: SessionReport) -> None:
    assert session.failed_cells == [], "\n".join(session.failed_cells)
    assert len(session.notebooks) == len(course_notebooks(ROOT / "solutions"))


def test_the_kernels_ran_in_the_intended_environment(session: SessionReport) -> None:
    python = binder_python()
    if python:
        assert Path(session.kernel_python).parent == Path(python).parent, session.kernel_python


def test_server_and_kernels_stay_under_1_5_gb_at_every_point(session: SessionReport) -> None:
    """Binder's budget, measured in Binder's environment. In a learner's own (a CUDA build of torch makes each kernel
    far bigger than Binder's CPU build) it is reported, not asserted: Binder's limit is not theirs."""
    if binder_python() is None:
        pytest.skip(f"Binder's {LIMIT_MIB:.0f} MiB budget applies to the Binder venv, which is not built here "
                    f"(`bash authoring/binder-venv`); in this environment the session peaked at "
                    f"{session.peak_mib:.0f} MiB (reported, not asserted)")
    assert session.peak_mib < LIMIT_MIB, "\n".join(session.lines())


def test_open_tabs_keep_their_kernels_for_a_while(session: SessionReport) -> None:
    """The scenario is the one that hurts: several kernels alive at once, none shut down by hand."""
    assert session.most_kernels_alive >= 2, "\n".join(session.lines())


def test_idle_kernels_are_culled_although_their_tab_is_open(session: SessionReport) -> None:
    assert session.culled, "no kernel was culled: is the course's jupyter_server_config.json loaded?"
    assert set(session.culled.values()) == {"idle"}, f"culled in these states: {session.culled}"


def test_a_kernel_running_a_cell_longer_than_the_timeout_is_not_culled(session: SessionReport) -> None:
    assert session.busy_kernel_survived is True

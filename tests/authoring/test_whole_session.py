"""``python -m authoring.whole_session`` (the figures docs/hosting.md sizes a room from), on two small notebooks:
each runs in its own kernel in one JupyterLab, a failing cell is reported, an idle kernel is culled and a busy one
is not, and memory is measured. The course's own session is tests/browser/test_solved_course.py."""
from __future__ import annotations

from pathlib import Path

import nbformat

from authoring.whole_session import run_session

CULL_S = 8.0  # idle this long, a kernel is culled: the first one is (it waits through the second notebook and
# the busy cell), not the second (the pace is shorter, and then it runs the busy cell)


def _notebook(path: Path, *sources: str) -> Path:
    node = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    nbformat.write(node, str(path))
    return path


def test_a_short_session_is_run_measured_and_culled(tmp_path: Path) -> None:
    first = _notebook(tmp_path / "00_first.ipynb", "import torch\nweights = torch.ones(1000, 1000)", "print('ok')")
    second = _notebook(tmp_path / "01_second.ipynb", "x = 1", "raise ValueError('on purpose')", "y = 2")
    report = run_session([first, second], cull_idle_timeout_s=CULL_S, learner_pace_s=1.0,
                         work_dir=tmp_path / "work")
    assert report.torch and report.kernel_python, report
    assert [row.notebook for row in report.notebooks] == ["00_first.ipynb", "01_second.ipynb"]
    assert report.failed_cells == ["01_second.ipynb: code cell 1: ValueError: on purpose"]
    assert report.most_kernels_alive == 2 and report.peak_mib > report.server_alone_mib > 0  # a kernel per notebook
    assert report.notebooks[1].kernels_alive == 2, "the first kernel was culled before the second notebook ended"
    assert len(report.culled) == 1 and set(report.culled.values()) == {"idle"}, report.culled  # the first only
    assert report.busy_kernel_survived is True
    assert any("whole session" in line for line in report.lines())

"""The documented benchmark command measures a notebook's time and peak memory."""

from authoring.bench import run_notebook
from tests.paths import ROOT


def test_bench_measures_time_and_kernel_peak_memory(monkeypatch):
    monkeypatch.delenv("COURSE_STRICT", raising=False)
    seconds, peak_mib = run_notebook(ROOT / "solutions" / "00_start_here.ipynb", strict=True)
    assert 0 < seconds < 120
    assert 100 < peak_mib < 4096  # a kernel with torch loaded weighs a few hundred MiB

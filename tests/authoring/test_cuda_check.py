"""The prepared CUDA check: on a machine without CUDA it says so, runs nothing and exits with 2."""
import subprocess
import sys

import pytest
import torch

from authoring import cuda_check
from tests.paths import ROOT


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine: the check would run the whole course")
def test_without_cuda_it_says_so_and_runs_nothing(tmp_path):
    report = tmp_path / "report.txt"
    done = subprocess.run([sys.executable, "-m", "authoring.cuda_check", "--report", str(report)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "No CUDA GPU here" in done.stdout, done.stdout + done.stderr
    assert not report.exists()


def test_the_cuda_tests_it_runs_exist():
    assert all((ROOT / path).is_file() for path in cuda_check.CUDA_TESTS)

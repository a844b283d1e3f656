"""binder/: what Binder (repo2docker) builds: graphviz, a pinned Python, CPU-only torch, the helpers installed."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.binder_venv import require_binder_python
from tests.paths import ROOT

BINDER = ROOT / "binder"
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Only for running the tests, or already in Binder's base environment (JupyterLab, ipykernel).
NOT_NEEDED_ON_BINDER = {
    "psutil", "pytest", "pytest-xdist", "nbval", "nbclient", "ipykernel", "jupyterlab", "playwright",
    "polib",  # the generator's (authors'), for the Chinese catalogs; notebooks never import it
}


def _lines(path: Path) -> List[str]:
    """The file's lines without comments and blank lines."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def _requirements(path: Path) -> Dict[str, Requirement]:
    return {
        Requirement(line).name.lower(): Requirement(line) for line in _lines(path) if not line.startswith("-")
    }


def test_apt_installs_graphviz_for_the_dot_program():
    assert "graphviz" in _lines(BINDER / "apt.txt")


def test_runtime_pins_a_python_minor_version_the_package_accepts():
    (runtime,) = _lines(BINDER / "runtime.txt")
    match = re.fullmatch(r"python-(3\.\d+)", runtime)
    assert match, f"runtime.txt must read python-3.X, not {runtime!r}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    requires_python = re.search(r'requires-python\s*=\s*"([^"]+)"', pyproject).group(1)
    assert f"{match.group(1)}.0" in SpecifierSet(requires_python)


def test_torch_is_the_cpu_only_build_from_pytorchs_cpu_index():
    lines = _lines(BINDER / "requirements.txt")
    assert f"--extra-index-url {PYTORCH_CPU_INDEX}" in lines
    torch = _requirements(BINDER / "requirements.txt")["torch"]
    (pin,) = torch.specifier
    assert pin.operator == "==" and pin.version.endswith("+cpu"), f"pin the CPU build, e.g. torch==2.13.0+cpu: {torch}"


def test_the_helpers_package_is_installed_from_the_repository():
    assert "-e ." in _lines(BINDER / "requirements.txt")


def test_binder_installs_every_package_the_course_needs():
    course = set(_requirements(ROOT / "requirements.txt")) - NOT_NEEDED_ON_BINDER
    binder = _requirements(BINDER / "requirements.txt")
    assert course <= set(binder), f"binder/requirements.txt lacks {sorted(course - set(binder))}"
    unpinned = [name for name, requirement in binder.items() if not str(requirement.specifier).startswith("==")]
    assert unpinned == [], f"pin these in binder/requirements.txt: {unpinned}"


def _dry_run(requirements: List[str], report: Path) -> subprocess.CompletedProcess:
    """``pip install --dry-run`` of ``requirements`` from the repository root, as repo2docker runs it."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
         *requirements],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )


def test_the_binder_requirements_resolve_to_cpu_torch_and_the_helpers(tmp_path):
    """``pip install --dry-run`` from the repository root, as repo2docker runs it.

    The PyTorch CPU index is left out here (tests reach only the package registries): CI finds the same
    ``torch==X+cpu`` wheel on its local disk. Elsewhere this test is skipped when pip cannot find that torch at all,
    whatever words pip uses to say so; any other failure to resolve fails it.
    """
    pinned_torch = str(_requirements(BINDER / "requirements.txt")["torch"])
    if not os.environ.get("CI") and _dry_run(["--no-deps", pinned_torch], tmp_path / "torch.json").returncode != 0:
        pytest.skip(f"{pinned_torch} cannot be found here without PyTorch's CPU index")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        "\n".join(line for line in (BINDER / "requirements.txt").read_text().splitlines() if PYTORCH_CPU_INDEX not in line)
    )
    report = tmp_path / "report.json"
    result = _dry_run(["-r", str(requirements)], report)
    assert result.returncode == 0, result.stderr[-3000:]
    installed = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in json.loads(report.read_text())["install"]}
    assert installed["torch"] == pinned_torch.split("==", 1)[1]
    assert not [name for name in installed if name.startswith(("nvidia-", "triton"))], "a CUDA torch slipped in"
    assert "two-losses-course-helpers" in installed and "torchviz" in installed


def _installed_versions(python: str) -> Dict[str, str]:
    """Every distribution in ``python``'s environment: name -> version."""
    code = ("import json, importlib.metadata as m\n"
            "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))")
    result = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_the_binder_venv_holds_exactly_the_pinned_versions():
    """The environment the whole-session test runs the notebooks in is the one binder/ pins, package for package."""
    python = require_binder_python()
    installed = _installed_versions(python)
    pinned = _requirements(BINDER / "requirements.txt")
    pins = {name: str(requirement.specifier)[2:] for name, requirement in pinned.items()}
    differing = {name: (pin, installed.get(name)) for name, pin in pins.items() if installed.get(name) != pin}
    assert differing == {}, f"pinned vs installed in {python}: {differing} (rebuild: bash authoring/binder-venv)"
    assert "two-losses-course-helpers" in installed and "jupyterlab" in installed


def test_the_binder_venv_runs_the_python_binder_pins():
    python = require_binder_python()
    (runtime,) = _lines(BINDER / "runtime.txt")
    version = subprocess.run([python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    assert f"python-{version}" == runtime

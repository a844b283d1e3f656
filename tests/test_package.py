"""The installed package, as a learner gets it: the Colab set-up cell installs it with pip, not editable.

The wheel must hold ``helpers`` with its data (solutions.json, for the last hint and the course order; the figures'
images, which notebooks show on Colab), and nothing of the authoring kit or the tests; ``authoring`` must not be
importable outside the repository.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.paths import ROOT

FIGURE_IMAGES = ROOT / "helpers" / "course" / "figures" / "images"

INSTALLED_USE = textwrap.dedent(
    """
    import importlib.util, json
    import helpers
    from helpers import exercises
    from helpers.course.figures import FIGURES, figure_path, show_figure
    print(json.dumps({
        "figures": {name: [len(show_figure(name)._repr_png_()[0]), figure_path(name, "svg").stat().st_size]
                    for name in FIGURES},
        "helpers_from": helpers.__file__,
        "ids": exercises.ids(),
        "last_hint": str(exercises.hint("head_weight_grad", level=4)),
        "authoring_importable": importlib.util.find_spec("authoring") is not None,
    }))
    """
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course's wheel, built from a copy of the sources (an in-tree build would write build/ into the repo)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out),
                             str(source)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_holds_the_helpers_and_their_data_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"helpers"}, top_level
    assert "helpers/course/exercises/solutions.json" in names
    images = {path.relative_to(ROOT).as_posix() for path in FIGURE_IMAGES.rglob("*") if path.is_file()}
    assert len(images) >= 6 and images <= set(names), f"figures missing from the wheel: {sorted(images - set(names))}"
    sources = {path.relative_to(ROOT).as_posix() for path in (ROOT / "helpers").rglob("*.py")}
    assert sources <= set(names), f"missing from the wheel: {sorted(sources - set(names))}"


def test_an_installed_copy_has_every_exercise_its_solutions_its_figures_and_no_authoring_kit(
    wheel: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                                str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    project = tmp_path / "project"
    project.mkdir()
    environment = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", INSTALLED_USE], cwd=project, env=environment,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert Path(report["helpers_from"]).is_relative_to(site)
    recorded = json.loads((ROOT / "helpers" / "course" / "exercises" / "solutions.json").read_text())
    assert sorted(report["ids"]) == sorted(recorded)
    assert recorded["head_weight_grad"]["source"] in report["last_hint"]
    assert report["authoring_importable"] is False
    shipped = {name: [(FIGURE_IMAGES / f"{name}.{kind}").stat().st_size for kind in ("png", "svg")]
               for name in report["figures"]}
    assert report["figures"] == shipped and len(shipped) >= 3

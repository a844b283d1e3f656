"""Opening the course on Colab and Binder: release.json is the one place, and the Colab cell is safe everywhere."""
import ast
import importlib.machinery
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Dict, List, Set

import nbformat
import pytest

from authoring import generate, release, release_json
from authoring.launch_cells import SETUP_TAG, setup_source
from tests.paths import FIXTURES, ROOT

FIXTURE = FIXTURES / "generator"
RELEASED = release_json.Release(repository="https://github.com/example-org/two-losses-course", ref="v1.2.0")
NOTEBOOKS = sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "notebooks").glob("*.ipynb"))
CHINESE_NOTEBOOKS = sorted((ROOT / "solutions" / "zh-CN").glob("*.ipynb")) + sorted(
    (ROOT / "notebooks" / "zh-CN").glob("*.ipynb"))
LAUNCH_ADDRESS = re.compile(
    r"https://(colab\.research\.google\.com/github|mybinder\.org/v2|kaggle\.com/kernels/welcome)[/?][^)\s\"']+")


@pytest.fixture
def released_course(tmp_path: Path) -> Path:
    """The generator's fixture course with a README and a filled-in release.json."""
    shutil.copytree(FIXTURE / "solutions", tmp_path / "solutions")
    (tmp_path / "README.md").write_text(
        "# Demo\n\n| notebook | what | open |\n|---|---|---|\n| `99_demo` | a demo |  |\n| `98_later` | planned |  |\n"
    )
    release_json.save(tmp_path, RELEASED)
    assert generate.main(["--root", str(tmp_path)]) == 0
    return tmp_path


def _setup_cell(path: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(str(path), as_version=4)
    return next(cell for cell in notebook.cells if cell.cell_type == "code")


@pytest.mark.parametrize("ref", ["main", "master", "refs/heads/v1", "origin/release", "abc123", "latest!"])
def test_a_branch_or_a_short_hash_is_refused_as_ref(ref):
    with pytest.raises(release_json.ReleaseError):
        release_json.validate(release_json.Release(repository=RELEASED.repository, ref=ref))


@pytest.mark.parametrize("ref", ["v1.0.0", "1.2", "v2.0.0-rc1", "0123456789abcdef0123456789abcdef01234567"])
def test_a_version_tag_or_a_full_commit_hash_is_accepted(ref):
    assert release_json.validate(release_json.Release(repository=RELEASED.repository, ref=ref)).ref == ref


@pytest.mark.parametrize(
    "repository, ref",
    [("https://gitlab.com/a/b", "v1.0.0"), ("github.com/a/b", "v1.0.0"), (RELEASED.repository, None)],
)
def test_a_non_github_address_or_a_half_filled_release_is_refused(repository, ref):
    with pytest.raises(release_json.ReleaseError):
        release_json.validate(release_json.Release(repository=repository, ref=ref))


def test_the_release_command_refuses_a_branch_and_writes_nothing(tmp_path, capsys):
    shutil.copytree(FIXTURE / "solutions", tmp_path / "solutions")
    assert release.main(["--repository", RELEASED.repository, "--ref", "main", "--root", str(tmp_path)]) == 2
    assert not (tmp_path / release_json.RELEASE_FILE).exists()
    assert "is a branch" in capsys.readouterr().err


def test_badges_in_the_first_cell_open_that_notebook_at_the_pinned_ref(released_course):
    for folder in ("solutions", "notebooks"):
        notebook = nbformat.read(str(released_course / folder / "99_demo.ipynb"), as_version=4)
        title_cell = notebook.cells[0].source
        assert title_cell.startswith("# ")
        assert (
            f"https://colab.research.google.com/github/example-org/two-losses-course/blob/v1.2.0/{folder}/99_demo.ipynb"
            in title_cell
        )
        assert "https://mybinder.org/v2/gh/example-org/two-losses-course/v1.2.0?urlpath=lab%2Ftree%2F" in title_cell


def test_the_readme_table_gets_badges_for_existing_notebooks_only(released_course):
    readme = (released_course / "README.md").read_text()
    demo_row = next(line for line in readme.splitlines() if line.startswith("| `99_demo`"))
    later_row = next(line for line in readme.splitlines() if line.startswith("| `98_later`"))
    assert "blob/v1.2.0/notebooks/99_demo.ipynb" in demo_row and "mybinder.org" in demo_row
    assert later_row.rstrip().endswith("|  |")
    under_title = "\n".join(readme.splitlines()[:4])
    assert "blob/v1.2.0/notebooks/00_start_here.ipynb" in under_title and "mybinder.org" in under_title


def test_the_setup_cell_carries_the_release_and_is_the_first_code_cell(released_course):
    for folder in ("solutions", "notebooks"):
        cell = _setup_cell(released_course / folder / "99_demo.ipynb")
        assert cell.metadata["tags"] == [SETUP_TAG]
        assert f'COURSE_HELPERS = "two-losses-course-helpers @ git+{RELEASED.repository}@v1.2.0"' in cell.source


def test_changing_release_json_makes_every_generated_part_stale(released_course):
    assert generate.check(released_course) == []
    release_json.save(released_course, release_json.Release(repository=RELEASED.repository, ref="v1.3.0"))
    stale = generate.check(released_course)
    assert {"solutions/99_demo.ipynb is stale", "notebooks/99_demo.ipynb is stale", "README.md is stale"} <= set(stale)
    assert generate.main(["--root", str(released_course)]) == 0
    assert "v1.2.0" not in (released_course / "README.md").read_text()


def test_regenerating_is_idempotent_and_keeps_one_setup_cell(released_course):
    before = {path: path.read_text() for path in released_course.rglob("*") if path.is_file()}
    assert generate.main(["--root", str(released_course)]) == 0
    after = {path: path.read_text() for path in released_course.rglob("*") if path.is_file()}
    assert before == after
    notebook = nbformat.read(str(released_course / "notebooks" / "99_demo.ipynb"), as_version=4)
    assert sum(SETUP_TAG in cell.metadata.get("tags", []) for cell in notebook.cells) == 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_repository_notebook_starts_with_the_current_setup_cell(path):
    cell = _setup_cell(path)
    assert cell.metadata.get("tags") == [SETUP_TAG] and cell.metadata.get("cellView") == "form"
    assert cell.source == setup_source(release_json.load(ROOT))


def test_no_launch_address_is_written_by_hand_anywhere():
    """Every Colab or Binder address in the repository is one that release.json generates."""
    current = release_json.load(ROOT)
    files = NOTEBOOKS + CHINESE_NOTEBOOKS + [ROOT / "README.md", ROOT / "README.zh-CN.md"]
    files += sorted((ROOT / "docs").glob("*.md"))
    files += sorted((ROOT / "book").glob("*.*")) + sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    files += sorted((ROOT / "authoring" / "site").glob("*.py"))
    for path in files:
        for match in LAUNCH_ADDRESS.finditer(path.read_text()):
            url = match.group(0)
            assert current.is_set, f"{path.name} has {url}, but release.json is not filled in"
            assert f"/{current.owner_and_name}/" in url and current.ref in url, f"{path.name}: {url}"


# ---- the set-up cell's behaviour ----

class _Recorder:
    """Stands in for subprocess.run and records each command."""

    def __init__(self) -> None:
        self.commands: List[List[str]] = []

    def __call__(self, command, check=False, **kwargs):
        self.commands.append([str(part) for part in command])
        return subprocess.CompletedProcess(command, 0)


@pytest.fixture
def colab(monkeypatch):
    """A stand-in ``google.colab`` module, and a machine where the course helpers are not installed yet."""
    for name in ("google", "google.colab"):
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        monkeypatch.setitem(sys.modules, name, module)
    real_version = importlib.metadata.version

    def version(distribution: str) -> str:
        if distribution == "two-losses-course-helpers":
            raise importlib.metadata.PackageNotFoundError(distribution)
        return real_version(distribution)

    monkeypatch.setattr(importlib.metadata, "version", version)
    recorder = _Recorder()
    monkeypatch.setattr(subprocess, "run", recorder)
    return recorder


def test_on_colab_the_cell_installs_the_pinned_helpers_without_dependencies_in_one_command(colab):
    exec(setup_source(RELEASED), {})
    assert len(colab.commands) == 1
    (pip,) = colab.commands
    assert pip[1:4] == ["-m", "pip", "install"] and "--no-deps" in pip
    installed = pip[pip.index("--no-deps") + 1:]
    assert installed[0] == f"two-losses-course-helpers @ git+{RELEASED.repository}@v1.2.0"
    assert "torchviz==0.0.3" in installed and "graphviz" in installed
    assert not any(re.fullmatch(r"(torch|ipywidgets)\b.*", package) for package in installed)


def test_the_setup_cell_is_short_folded_on_colab_and_collapsed_in_jupyterlab(released_course):
    for folder in ("solutions", "notebooks"):
        cell = _setup_cell(released_course / folder / "99_demo.ipynb")
        assert cell.source.startswith("#@title ") and len(cell.source.splitlines()) <= 20
        assert cell.metadata["cellView"] == "form" and cell.metadata["jupyter"]["source_hidden"] is True


@pytest.fixture
def kaggle(colab, monkeypatch):
    """A Kaggle notebook: Kaggle's run-type variable, and no ``google.colab``."""
    for name in ("google", "google.colab"):
        monkeypatch.delitem(sys.modules, name)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name.startswith("google") else real_find_spec(name, *args))
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    return colab


def test_on_kaggle_the_cell_installs_the_same_pinned_helpers(kaggle):
    exec(setup_source(RELEASED), {})
    assert len(kaggle.commands) == 1
    (pip,) = kaggle.commands
    assert "--no-deps" in pip and f"two-losses-course-helpers @ git+{RELEASED.repository}@v1.2.0" in pip


def test_on_colab_with_the_helpers_already_installed_the_cell_does_nothing(colab, monkeypatch):
    monkeypatch.setattr(importlib.metadata, "version", lambda distribution: "0.1.0")
    exec(setup_source(RELEASED), {})
    assert colab.commands == []


def test_on_colab_before_any_release_the_cell_explains_instead_of_fetching(colab):
    with pytest.raises(RuntimeError, match="no release yet"):
        exec(setup_source(release_json.Release()), {})
    assert colab.commands == []


_NO_PROCESS_PROBE = textwrap.dedent(
    """
    import importlib.metadata, json, sys

    def not_installed(distribution):  # as on a machine where the course's helpers are not installed yet
        raise importlib.metadata.PackageNotFoundError(distribution)

    importlib.metadata.version = not_installed
    events = []

    def block_processes(event, args):  # records, then blocks: the probe never really runs git or pip
        if event.startswith(("subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork")):
            events.append(event)
            raise PermissionError("blocked by the test")

    sys.addaudithook(block_processes)
    for source in json.loads(sys.stdin.read()):
        try:
            exec(source, {})
        except PermissionError:
            pass
    print(json.dumps(events))
    """
)


def test_off_colab_no_setup_cell_starts_any_process():
    """Every notebook's cell, and a released one, run in a fresh Python that records each process started."""
    sources = [_setup_cell(path).source for path in NOTEBOOKS + CHINESE_NOTEBOOKS] + [setup_source(RELEASED)]
    environment = {key: value for key, value in os.environ.items() if not key.startswith("KAGGLE_")}
    result = subprocess.run([sys.executable, "-c", _NO_PROCESS_PROBE], input=json.dumps(sources), capture_output=True,
                            text=True, check=True, env=environment)
    assert json.loads(result.stdout) == []


def test_the_probe_does_see_a_process_being_started():
    """The audit hook above would catch git or pip: proven with a harmless process."""
    started = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'])"
    result = subprocess.run(
        [sys.executable, "-c", _NO_PROCESS_PROBE], input=json.dumps([started]), capture_output=True, text=True, check=True
    )
    assert "subprocess.Popen" in json.loads(result.stdout)


# ---- Colab's Python (3.13): no distutils, nothing removed from the standard library ----

def _python_313() -> str:
    pyenv_builds = sorted(Path.home().glob(".pyenv/versions/3.13*/bin/python3.13"))  # before pyenv's shim
    found = pyenv_builds[-1] if pyenv_builds else shutil.which("python3.13")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("python3.13 is needed in CI to check the helpers against Colab's Python")
        pytest.skip("no python3.13 on this machine")
    return str(found)


GRADER = "helpers/grade/"


def _helpers_imports() -> Dict[str, Set[str]]:
    """Top-level module name -> the helpers files that import it (absolute imports only)."""
    imports: Dict[str, Set[str]] = {}
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                imports.setdefault(name.split(".")[0], set()).add(path.relative_to(ROOT).as_posix())
    return imports


_PY313_PROBE = textwrap.dedent(
    """
    import importlib.util, json, sys
    files, modules = json.loads(sys.stdin.read())
    problems = []
    for path in files:
        try:
            compile(open(path, encoding="utf-8").read(), path, "exec")
        except SyntaxError as error:
            problems.append(f"{path}: {error}")
    for name in modules:
        if name not in sys.stdlib_module_names or importlib.util.find_spec(name) is None:
            problems.append(f"{name} is not in Python {sys.version_info[0]}.{sys.version_info[1]}'s standard library")
    print(json.dumps([sys.version_info[:2], problems]))
    """
)


def test_the_helpers_compile_and_find_their_standard_library_on_python_313():
    imports = _helpers_imports()
    assert "distutils" not in imports, f"distutils is gone in Python 3.12+: {imports.get('distutils')}"
    stdlib = sorted(name for name in imports if name in sys.stdlib_module_names)
    files = [str(path) for path in sorted((ROOT / "helpers").rglob("*.py"))]
    result = subprocess.run(
        [_python_313(), "-I", "-c", _PY313_PROBE], input=json.dumps([files, stdlib]),
        capture_output=True, text=True, check=True,
    )
    version, problems = json.loads(result.stdout)
    assert version == [3, 13] and problems == []


def test_the_helpers_need_only_packages_colab_has_or_the_setup_cell_installs():
    # ipykernel runs Colab's notebooks; jupyter_core comes with nbformat. (kernel_shutdown imports both, guarded.)
    # accelerate and cloudpickle (notebook 08): in Colab's pip freeze, googlecolab/backend-info pip-freeze.txt at
    # a724079 (August 2026): accelerate==1.14.0, cloudpickle==3.1.2. yaml (PyYAML, helpers.tools.formulas): a
    # dependency of accelerate, so present wherever accelerate is.
    # matplotlib (helpers.course.plots, imported when a plot is shown): in the same pip freeze (matplotlib==3.7.1 at
    # 0042aa2, 2023), and the notebooks' own plots import it anyway.
    colab_has = {"torch", "ipywidgets", "IPython", "numpy", "nbformat", "nbclient", "ipykernel", "jupyter_core",
                 "accelerate", "cloudpickle", "yaml", "matplotlib"}
    installed_by_the_cell = {"graphviz", "torchviz", "helpers"}
    third_party = {name for name, files in _helpers_imports().items()
                   if name not in sys.stdlib_module_names and not all(f.startswith(GRADER) for f in files)}
    assert third_party <= colab_has | installed_by_the_cell, third_party - colab_has - installed_by_the_cell


def test_the_grader_needs_only_what_requirements_txt_installs():
    """helpers/grade is the teacher's tool, run from the repository after `pip install -r requirements.txt`
    (docs/workshop.md), never in a learner's Colab notebook: its imports must come from requirements.txt."""
    listed = {re.split(r"[<>=\s#\[]", line.strip())[0].lower().replace("-", "_")
              for line in (ROOT / "requirements.txt").read_text().splitlines() if line.strip()[:1].isalpha()}
    brought_along = {"jupyter_client": "nbclient", "IPython": "ipykernel"}  # dependencies of a listed package
    grader = {name for name, files in _helpers_imports().items()
              if name not in sys.stdlib_module_names and any(f.startswith(GRADER) for f in files)}
    assert grader, "the grader's imports were not found: update this test"
    missing = {name for name in grader - {"helpers"} if name.lower() not in listed
               and brought_along.get(name, "").lower() not in listed}
    assert not missing, missing


def test_the_helpers_use_only_core_ipywidgets_so_colab_needs_no_custom_widget_manager():
    """Colab renders the ipywidgets package's own widgets; a third-party widget would need
    ``google.colab.output.enable_custom_widget_manager()`` in the set-up cell."""
    import ipywidgets

    used = set()
    for path in sorted((ROOT / "helpers").rglob("*.py")):
        used |= set(re.findall(r"\bipywidgets\.([A-Z]\w+)", path.read_text()))
    assert used, "the helpers' widgets were not found: update this test"
    assert all(getattr(ipywidgets, name, None) is not None for name in used), used

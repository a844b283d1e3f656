"""The layout: the README's "Where things are" map matches the tree, and the three places stay apart.

- ``helpers/tools/``: tools a learner takes to their own code; they import nothing of the course;
- ``helpers/course/``: the lessons, one package per notebook;
- ``authoring/``: the authoring kit, which ``helpers`` never imports.
No module imports itself back through others (no import circles).
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

from helpers.course.exercises.exercise import LESSON_PACKAGE, notebook_of_package
from helpers.course.exercises.registry import exercise_module_names, exercises
from helpers.course.exercises.solutions import recorded_solutions
from tests.paths import ROOT

MAP_HEADING = "### Where things are"
CODE_SPAN = re.compile(r"`([^`]+)`")
FILE_TOKEN = re.compile(r"^[\w.-]+(/|\.(py|md|html|txt|json|ipynb))$")
PACKAGES = ("helpers", "authoring")


# ---------------------------------------------------------------- the map


def map_rows() -> Dict[str, str]:
    """The README map's rows: path (first column, without backticks) -> what it is (second column)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(MAP_HEADING, 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"^\| `([^`]+)` \| (.*) \|$", line)
        if match:
            rows[match[1]] = match[2]
    assert len(rows) >= 10, f"the map under {MAP_HEADING!r} has too few rows: {list(rows)}"
    return rows


def places(path: str) -> List[Path]:
    """What a map path stands for; ``NN_topic`` stands for every notebook's name."""
    pattern = path.replace("NN_topic", "[0-9][0-9]_*").rstrip("/")
    return sorted(ROOT.glob(pattern))


def named_files(description: str) -> List[str]:
    """The files and folders a row's description names in code spans, e.g. ``gan.py`` or ``exercises/``."""
    return [token for token in CODE_SPAN.findall(description) if FILE_TOKEN.match(token)]


def test_every_path_the_map_names_exists() -> None:
    for path, description in map_rows().items():
        found = places(path)
        assert found, f"the README map names {path}, which does not exist"
        folders = [place for place in found if place.is_dir()]
        for name in named_files(description):
            candidates = [folder / name for folder in folders] + [folder.parent / name for folder in folders]
            assert any(candidate.exists() for candidate in candidates), (
                f"the README map's row {path} names {name}, which is not in {path}")


def test_the_map_names_every_folder_and_module_of_the_three_places() -> None:
    rows = map_rows()
    top_level = {Path(name).parts[0] for name in tracked_files() if "/" in name}
    mapped = {Path(path).parts[0] for path in rows}
    assert top_level <= mapped, f"top-level folders missing from the README map: {sorted(top_level - mapped)}"
    for folder in ("helpers/tools/", "helpers/course/", "authoring/", "tests/"):
        described = set(named_files(rows[folder]))
        present = {entry.name + ("/" if entry.is_dir() else "") for entry in (ROOT / folder).iterdir()
                   if entry.name not in {"__init__.py", "__pycache__"} and not LESSON_PACKAGE.match(entry.name)
                   and (entry.is_dir() or entry.suffix == ".py" or folder == "authoring/")}
        if folder == "tests/":
            present = {name for name in present if name.endswith("/")}
        else:
            described |= set(CODE_SPAN.findall(rows[folder]))
        assert present <= described, f"the README map's row {folder} does not name {sorted(present - described)}"


def test_each_notebook_has_its_lesson_package_and_each_lesson_package_its_notebook() -> None:
    notebooks = {path.stem for path in (ROOT / "solutions").glob("*.ipynb")}
    lessons = {notebook_of_package(path.name) for path in (ROOT / "helpers" / "course").iterdir()
               if path.is_dir() and LESSON_PACKAGE.match(path.name)}
    assert lessons == notebooks


def test_every_exercise_lives_in_the_lesson_package_of_the_notebook_that_holds_its_cell() -> None:
    recorded = recorded_solutions()
    assert set(exercises()) == set(recorded), "run python -m authoring.generate"
    for exercise_id, exercise in exercises().items():
        assert exercise.notebook == recorded[exercise_id]["notebook"], (
            f"{exercise_id}: its checker is in the package of {exercise.notebook}, its cell in "
            f"{recorded[exercise_id]['notebook']}")
    assert len(exercise_module_names()) == len(exercises())


def test_exercises_come_in_course_order() -> None:
    recorded = recorded_solutions()
    order = [(recorded[i]["notebook"], recorded[i]["position"]) for i in exercises()]
    assert order == sorted(order)


# ---------------------------------------------------------------- imports between the places


def tracked_files() -> List[str]:
    """The files git tracks, relative to the root."""
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def module_name(path: Path) -> str:
    """``helpers/tools/saved.py`` -> ``helpers.tools.saved``; a package's ``__init__.py`` is the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> Dict[str, Path]:
    """Every module of ``helpers`` and ``authoring`` by name."""
    return {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def package_of(path: Path) -> str:
    """The package a project file's relative imports start from."""
    return module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]


def imported_names(path: Path, package: str) -> Iterator[Tuple[str, int]]:
    """(module, line) for every import in ``path``, at any depth (a function's import counts too).

    ``from a import b`` yields both ``a`` and ``a.b``, since ``b`` may be a module.
    """
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            yield base, node.lineno
            yield from ((f"{base}.{alias.name}", node.lineno) for alias in node.names)


def import_graph() -> Dict[str, Set[str]]:
    """Module -> the project modules it imports."""
    modules = project_modules()
    return {name: {imported for imported, _ in imported_names(path, package_of(path))
                   if imported in modules and imported != name}
            for name, path in modules.items()}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for child in sorted(graph.get(node, ())):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    graph = import_graph()
    graph_without_packages = {name: {child for child in children if not (ROOT / child.replace(".", "/")).is_dir()}
                              for name, children in graph.items()}
    assert cycles(graph_without_packages) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("importer, forbidden", [("helpers", "authoring"), ("helpers.tools", "helpers.course")])
def test_a_place_never_imports_the_one_it_must_not_need(importer: str, forbidden: str) -> None:
    offending = [f"{path.relative_to(ROOT)}:{line} imports {name}"
                 for module, path in project_modules().items() if module == importer or module.startswith(importer + ".")
                 for name, line in imported_names(path, package_of(path))
                 if name == forbidden or name.startswith(forbidden + ".")]
    assert offending == [], "\n".join(offending)


def test_the_import_reader_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text("import a.b\n\ndef main():\n    from helpers import generate\n    from .sibling import x\n")
    found = set(imported_names(source, "authoring"))
    assert {("a.b", 1), ("helpers.generate", 4), ("authoring.sibling", 5)} <= found


# ---------------------------------------------------------------- the tools, in a learner's own project

LEARNER_PROJECT = textwrap.dedent(
    """
    import json, sys
    import torch
    from torch import nn
    from helpers.tools import (VersionTimeline, diagnose, draw_saved_graph, expect_error, forward_trace,
                               gradients_of, named_parameters, same_gradients)

    encoder, head = nn.Linear(4, 8), nn.Linear(8, 1)          # a learner's own two models
    features = encoder(torch.randn(16, 4))
    loss_head = head(features.relu()).pow(2).mean()
    loss_encoder = features.pow(2).mean() + loss_head
    params = named_parameters(encoder=encoder, head=head)
    timeline = VersionTimeline(params)
    timeline.record("forward", {"loss_head": loss_head, "loss_encoder": loss_encoder})
    reference, other = gradients_of(loss_encoder, encoder), gradients_of(loss_head, encoder)
    loss_head.backward(retain_graph=True)
    torch.optim.SGD(head.parameters(), lr=0.1).step()
    diagnosis = diagnose(loss_encoder, params)
    picture = draw_saved_graph({"loss_encoder": loss_encoder}, {"encoder": features}, params)
    assert "stale" in str(picture) and "head.weight" in str(timeline)
    with expect_error("inplace-version", show=False):
        loss_encoder.backward()
    print(json.dumps({
        "prediction": diagnosis.prediction,
        "same": [same_gradients(reference, reference), same_gradients(reference, other)],
        "course_modules": sorted(m for m in sys.modules if m.startswith(("helpers.course", "authoring"))),
        "helpers_from": sys.modules["helpers"].__file__,
    }))
    """
)


def test_the_tools_work_in_a_learners_project_with_nothing_of_the_course(tmp_path: Path) -> None:
    """Run from an empty folder, with no course variables: the tools load, work, and bring no course module."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("COURSE_")}
    result = subprocess.run([sys.executable, "-c", LEARNER_PROJECT], cwd=tmp_path, env=environment,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["prediction"] == "inplace-version"
    assert report["course_modules"] == []
    assert report["same"] == [True, False]  # loss_head's gradient for the encoder is not loss_encoder's

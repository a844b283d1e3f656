"""The fast development loop, ``pytest -m "not kernel"``, leaves out exactly the tests that start a notebook kernel,
a Jupyter server or a browser, or run a notebook: a test module that does so is one of conftest's KERNEL_PATHS or
marks those tests ``kernel`` itself, and a helper module that does so is imported only by such test modules."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import conftest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
# What, in a test's source, starts a kernel, a server or a browser, or runs a notebook.
STARTS = {
    "a notebook client": re.compile(r"\b(NotebookClient|ExecutePreprocessor)\("),
    "a kernel": re.compile(r"\b(KernelManager|AsyncKernelManager|start_new_kernel|start_new_async_kernel)\("),
    "a Jupyter server": re.compile(r"\b(start_lab_server|start_session_server|run_session)\("),
    "a browser": re.compile(r"\bsync_playwright\(|\bprint_to_pdf\(|\bdef test_\w+\([^)]*\bchromium\b"),
    "the grader": re.compile(r"""["']-m["'],\s*["']helpers\.grade["']"""),
    "the site build": re.compile(r"""["']bash["'],\s*[^\]]*book["']?\s*(/|,)\s*["']?build"""),
}
# One line each pattern must recognise, and one it must not (a mention is not a call).
EXAMPLES = {
    "a notebook client": ("client = NotebookClient(node, timeout=60)", "# NotebookClient runs it"),
    "a kernel": ("manager = KernelManager(kernel_name='python3')", "from jupyter_client import KernelManager"),
    "a Jupyter server": ("server = start_lab_server(course, state, environment)", "from x import start_lab_server"),
    "a browser": ("def test_pages_open(chromium, tmp_path):", "def test_pages(tmp_path):  # chromium later"),
    "the grader": ('command = [sys.executable, "-m", "helpers.grade", str(folder)]', "python -m helpers.grade F"),
    "the site build": ('command = ["bash", str(root / "book" / "build")]', "bash book/build builds it"),
}
EXPLICIT_MARK = "pytest.mark.kernel"


def _modules() -> Dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(TESTS.rglob("*.py"))
            if "fixtures" not in path.relative_to(TESTS).parts and path != Path(__file__).resolve()}


def _what_it_starts(source: str) -> List[str]:
    return [what for what, pattern in STARTS.items() if pattern.search(source)]


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_every_module_that_starts_a_kernel_is_left_out_of_the_fast_loop() -> None:
    modules = _modules()
    wrong = []
    for path, source in modules.items():
        starts = _what_it_starts(source)
        if not starts:
            continue
        if path.name.startswith("test_"):
            if not conftest.starts_a_kernel(path) and EXPLICIT_MARK not in source:
                wrong.append(f"{path.relative_to(ROOT)} starts {', '.join(starts)}: add it to conftest.KERNEL_PATHS "
                             f"or mark those tests @{EXPLICIT_MARK}")
            continue
        importers = [other for other, text in modules.items() if other.name.startswith("test_")
                     and re.search(rf"\b(from|import) {re.escape(_dotted(path))}\b", text)]
        for importer in importers:
            if not conftest.starts_a_kernel(importer) and EXPLICIT_MARK not in modules[importer]:
                wrong.append(f"{importer.relative_to(ROOT)} imports {path.relative_to(ROOT)}, which starts "
                             f"{', '.join(starts)}: add it to conftest.KERNEL_PATHS or mark its tests")
    assert not wrong, "\n".join(wrong)


def test_the_patterns_find_what_they_look_for() -> None:
    """The guard's patterns recognise the calls this suite makes (and so cannot pass by matching nothing)."""
    assert set(EXAMPLES) == set(STARTS)
    for what, (call, mention) in EXAMPLES.items():
        assert _what_it_starts(call) == [what], call
        assert _what_it_starts(mention) == [], mention
    seen = {what for source in _modules().values() for what in _what_it_starts(source)}
    assert {"a notebook client", "a Jupyter server", "a browser", "the grader", "the site build"} <= seen


def test_every_kernel_path_exists_and_the_marker_is_registered() -> None:
    for kernel_path in conftest.KERNEL_PATHS:
        target = ROOT / kernel_path
        assert (target.is_dir() if kernel_path.endswith("/") else target.is_file()), f"{kernel_path} does not exist"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # (no tomllib on Python 3.10)
    markers = pyproject.split("[tool.pytest.ini_options]", 1)[1].split("markers = [", 1)[1].split("]", 1)[0]
    assert re.search(r'^\s*"kernel: ', markers, flags=re.MULTILINE), "the kernel marker is not registered"


def test_the_readme_documents_the_fast_loop() -> None:
    assert 'pytest -m "not kernel"' in (ROOT / "README.md").read_text(encoding="utf-8")


def test_each_test_counts_in_one_benchmark_group() -> None:
    """The end-of-run benchmark lines: the solved session and the student copies apart, the rest in the last group."""
    assert conftest.benchmark_group("tests/browser/test_solved_course.py::test_x[00]").startswith("browser, solved")
    assert conftest.benchmark_group("tests/browser/test_jupyterlab.py::TestA::test_x").startswith("browser, student")
    assert conftest.benchmark_group("tests/site/test_site.py::test_x") == "website"
    assert conftest.benchmark_group("solutions/00_start_here.ipynb::Cell 0") == "notebooks under nbval"
    assert conftest.benchmark_group("tests/tools/test_spawn.py::test_x").startswith("everything else")


def test_the_run_time_guard_sees_a_kernel_started_in_a_subprocess() -> None:
    """conftest's audit hook: what it records while an unmarked test runs (here, fed by hand, then cleared)."""
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "/tmp/kernel-1.json"]
    assert conftest.starts_a_kernel_command(" ".join(kernel))
    assert conftest.starts_a_kernel_command("/usr/bin/python -m helpers.grade room --jobs 2")
    assert conftest.starts_a_kernel_command("node cli.js run-driver")
    assert not conftest.starts_a_kernel_command("/usr/bin/python -m jupyter server --show-config")
    assert not conftest.starts_a_kernel_command("/usr/bin/python -c print(1)")
    assert conftest._watch["on"], "this unmarked test is watched"
    conftest._audit("subprocess.Popen", (sys.executable, kernel, None, None))
    subprocess.run([sys.executable, "-c", "pass", "ipykernel_launcher"], check=True)  # a real Popen, harmless
    seen, conftest._watch["seen"] = conftest._watch["seen"], []
    assert seen == [" ".join(kernel), f"{sys.executable} -c pass ipykernel_launcher"]

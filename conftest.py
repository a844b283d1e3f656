"""pytest set-up for the whole course.

- Under nbval (``pytest solutions notebooks``; the default run leaves the notebooks to tests/browser), solution
  notebooks run strict, student copies do not: nbval starts each notebook's kernel with this process's
  environment, so setting COURSE_STRICT just before a notebook's first cell decides how its checks behave.
- Tests run in parallel (pytest-xdist, ``--dist loadscope``), one worker per core. Each worker, and every kernel it
  starts, gets an equal share of the CPU cores, since oversubscribed torch thread pools run many times slower. (One
  worker more than there are cores, tried on 2 cores: 588 s instead of 661 s for the whole suite, but on torch 2.15 two
  runs of processes joined by gloo failed to connect or hung, once each, which this session's runs with one worker
  per core never showed.)
- ``run_distributed``'s ranks start from a fork server that imported torch once (``use_fork_server``), not as
  fresh interpreters that import torch again. tests/tools/test_spawn.py tests both ways, spawn (what a learner's
  notebook uses) included.
- Every test that starts a notebook kernel, a Jupyter server or a browser, or runs a notebook, is marked ``kernel``
  (by path here, or by an explicit ``pytest.mark.kernel`` where a module mixes both kinds); the fast development
  loop, ``pytest -m "not kernel"``, runs everything else. An audit hook fails an unmarked test that starts one in
  a subprocess of its own.
- The suite prints, as benchmark lines rather than assertions: each group's summed test time (BENCHMARK_GROUPS),
  the lines tests wrote into test-artifacts/benchmarks/ during this run (e.g. the whole-session figures), and its
  wall time against its target (the fast loop's own, for ``-m "not kernel"``).
"""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest

from authoring.generate import is_solution_notebook
from helpers.course.exercises.api import STRICT_VARIABLE

ROOT = Path(__file__).resolve().parent
collect_ignore_glob = ["tests/fixtures/*", "build/*", "*.ipynb_checkpoints*"]
SUITE_TARGET_S = 360  # on a 2-core machine, browser tests included
FAST_LOOP = "not kernel"  # pytest -m "not kernel": every test that starts no kernel, server or browser
FAST_LOOP_TARGET_S = 60  # on a 2-core machine
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# Test folders and modules whose every test starts a kernel, a Jupyter server or a browser, or runs a notebook.
KERNEL_PATHS = (
    "tests/browser/",  # JupyterLab in Chromium
    "tests/site/",  # bash book/build executes the notebooks, then Chromium reads the pages
    "tests/course/test_kernel_shutdown.py",  # nbclient kernels and a Jupyter server
    "tests/grade/test_grade_room.py",  # the grader runs a room of notebooks
    "tests/authoring/test_bench.py",  # runs a notebook to measure it
    "tests/authoring/test_chinese_notebooks_run.py",  # runs the Chinese notebooks
    "tests/authoring/test_whole_session.py",  # a JupyterLab session
)
# The groups the end-of-run benchmark lines sum test time over (the first prefix that matches a test's path).
BENCHMARK_GROUPS = (
    ("browser, solved course as one session", ("tests/browser/test_solved_course.py",)),
    ("browser, student copies", ("tests/browser/",)),
    ("website", ("tests/site/",)),
    ("grading room", ("tests/grade/test_grade_room.py",)),
    ("Chinese edition, solved notebooks", ("tests/authoring/test_chinese_notebooks_run.py",)),
    ("notebooks under nbval", ("solutions/", "notebooks/")),
    ("everything else: unit tests, the grader's parts, launch files, documents", ("",)),
)
_started = time.monotonic()
_started_wall = time.time()
_group_seconds: dict = {}
_machine: dict = {}


def artifacts_root() -> Path:
    """$COURSE_ARTIFACTS, else test-artifacts/ at the repository root."""
    return Path(os.environ["COURSE_ARTIFACTS"]) if os.environ.get("COURSE_ARTIFACTS") else ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def benchmark_dir() -> Path:
    """Where a test writes benchmark lines for the end of the run: test-artifacts/benchmarks/NAME.txt."""
    folder = artifacts_root() / "benchmarks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def threads_per_worker(cores: int, workers: int) -> int:
    """Each of ``workers`` parallel workers' share of ``cores``, at least one."""
    return max(1, cores // max(1, workers))


def starts_a_kernel(path: Path) -> bool:
    """Whether every test collected from ``path`` starts a kernel: a notebook (nbval), or one of KERNEL_PATHS."""
    if path.suffix == ".ipynb":
        return True
    try:
        relative = path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return False
    return any(relative == kernel or (kernel.endswith("/") and relative.startswith(kernel)) for kernel in KERNEL_PATHS)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list) -> None:
    """Marks ``kernel`` every test collected from a notebook or from one of KERNEL_PATHS."""
    for item in items:
        if starts_a_kernel(Path(str(item.fspath))):
            item.add_marker(pytest.mark.kernel)


# A command line that starts a kernel, a Jupyter server, a browser (or Playwright's driver), the grader or the site.
_STARTS = re.compile(r"ipykernel_launcher|-m jupyterlab\b|jupyter[- ](lab|server|notebook)\b|-m jupyter_server\b"
                     r"|chromium|run-driver|-m helpers\.grade(\.runner)?(\s|$)|book/build")
_watch: dict = {"on": False, "seen": []}


def starts_a_kernel_command(line: str) -> bool:
    """Whether the command ``line`` starts what the fast loop leaves out (``--show-config`` starts no server)."""
    return "--show-config" not in line and _STARTS.search(line) is not None


def _audit(event: str, args: Tuple[Any, ...]) -> None:
    """While an unmarked test runs: each subprocess it starts that starts a kernel, a server or a browser."""
    if event == "subprocess.Popen" and _watch["on"]:
        command = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
        line = " ".join(str(part) for part in command)
        if starts_a_kernel_command(line):
            _watch["seen"].append(line[:300])


@pytest.fixture(autouse=True)
def _the_fast_loop_starts_no_kernel(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test not marked ``kernel`` fails when it started a kernel, a Jupyter server or a browser in a subprocess of
    its own (module- and session-wide set-ups, and what those subprocesses start in turn, are not watched)."""
    watching = request.node.get_closest_marker("kernel") is None
    _watch.update(on=watching, seen=[])
    yield
    _watch["on"] = False
    if watching and _watch["seen"]:
        pytest.fail("this test is not marked kernel, yet it started:\n" + "\n".join(_watch["seen"]) +
                    "\nadd it to conftest.KERNEL_PATHS or mark it @pytest.mark.kernel", pytrace=False)


def reference_workload_s(repeats: int = 3) -> float:
    """Seconds this machine takes, on one thread, for a fixed piece of work like the suite's (Python, then a small
    model's forward and backward passes), the fastest of ``repeats``: runs on different machines compare through
    it."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
        batch = torch.randn(128, 64, generator=generator)
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            sum(number % 7 for number in range(1_000_000))
            for _ in range(150):
                model(batch).square().mean().backward()
            times.append(time.perf_counter() - started)
    finally:
        torch.set_num_threads(threads)
    return min(times)


def pytest_configure(config: pytest.Config) -> None:
    sys.addaudithook(_audit)  # audit hooks cannot be removed; _watch turns this one on per test
    if not hasattr(config, "workerinput"):  # once per run, before the workers start
        _machine["reference_s"] = reference_workload_s()
    from helpers.tools.spawn import FORK_SERVER_PRELOAD, use_fork_server

    use_fork_server((*FORK_SERVER_PRELOAD, "helpers.tools"))  # ranks start in milliseconds, not seconds
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None:
        return
    threads = threads_per_worker(usable_cores(), int(workers))
    for variable in THREAD_VARIABLES:
        os.environ.setdefault(variable, str(threads))  # kernels and servers started from here inherit it
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    path = Path(str(item.fspath))
    if path.suffix == ".ipynb":
        os.environ[STRICT_VARIABLE] = "1" if is_solution_notebook(path, ROOT) else "0"
    else:
        os.environ.pop(STRICT_VARIABLE, None)


def benchmark_group(nodeid: str) -> str:
    """The name of the benchmark group a test belongs to."""
    return next(name for name, prefixes in BENCHMARK_GROUPS if nodeid.startswith(prefixes))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sums each group's test time (set-up, call and tear-down; on xdist's controller, as the workers report it)."""
    group = benchmark_group(report.nodeid)
    seconds, count = _group_seconds.get(group, (0.0, 0))
    _group_seconds[group] = (seconds + report.duration, count + (report.when == "call" or report.outcome == "skipped"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller prints the lines
    for name, _ in BENCHMARK_GROUPS:
        if name in _group_seconds:
            seconds, count = _group_seconds[name]
            terminalreporter.write_line(f"benchmark: {name}: {count} tests, {seconds:.0f} s of test time "
                                        "(summed over the workers)")
    workers = getattr(config.option, "numprocesses", None) or 0
    seconds = time.monotonic() - _started
    for path in sorted((artifacts_root() / "benchmarks").glob("*.txt")):
        if path.stat().st_mtime >= _started_wall:
            for line in path.read_text(encoding="utf-8").splitlines():
                terminalreporter.write_line(line)
    if (config.option.markexpr or "").strip() == FAST_LOOP:
        target = f"the fast loop's target: at most {FAST_LOOP_TARGET_S} s on 2 cores"
    else:
        target = f"the whole suite's target: at most {SUITE_TARGET_S} s on 2 cores, browser tests included"
    if "reference_s" in _machine:
        terminalreporter.write_line(
            f"benchmark: this machine did the reference work (conftest.reference_workload_s) in "
            f"{_machine['reference_s']:.2f} s on one thread before the run (to compare runs made on different machines)")
    terminalreporter.write_line(
        f"benchmark: this run took {seconds:.0f} s on {usable_cores()} cores with {workers or 'no'} xdist workers "
        f"({target})"
    )

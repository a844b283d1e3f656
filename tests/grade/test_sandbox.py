"""The notebook's sandbox, from inside: it sees the Python installation and its private folder, writes only there,
and reaches no other folder, no process outside and no network; whatever runs in it ends with it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import psutil
import pytest

import helpers
from helpers.grade.sandbox import Isolation, described, isolation, sandboxed
from tests.paths import ROOT

RUN_TIMEOUT_S = 60


@pytest.fixture
def works() -> None:
    """Skip (with bubblewrap's reason) where the sandbox cannot run."""
    found = isolation()
    if not found.available:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"bubblewrap must run in CI: {found.reason}")
        pytest.skip(f"no sandbox here: {found.reason} (sudo apt-get install bubblewrap)")


@pytest.fixture
def private(tmp_path: Path) -> Path:
    """One notebook's private folder (with work/ and home/), beside another's and a graded folder, all in tmp_path."""
    mine = tmp_path / "run" / "notebook-1"
    for folder in (mine / "work", mine / "home", tmp_path / "run" / "notebook-2", tmp_path / "graded"):
        folder.mkdir(parents=True)
    (tmp_path / "run" / "notebook-2" / "secret.txt").write_text("another learner's answer", encoding="utf-8")
    (tmp_path / "graded" / "lesson.ipynb").write_text("{}", encoding="utf-8")
    return mine


def inside(code: str, private: Path, **options: Any) -> Any:
    """Run ``code`` with this Python (``-I``) in a new sandbox; what it prints, as JSON."""
    argv = sandboxed([sys.executable, "-I", "-c", code], private, **options)
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def attempts(action: str, paths: List[Path]) -> str:
    """Code that tries ``action`` (an expression of ``path``) on each path and prints each outcome (an errno name)."""
    return (f"import errno, json, os, socket\nout = {{}}\nfor path in {[str(path) for path in paths]!r}:\n"
            f"    try:\n        {action}\n        out[path] = 'ok'\n"
            "    except OSError as error:\n        out[path] = errno.errorcode.get(error.errno, str(error))\n"
            "print(json.dumps(out))")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids: List[int], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(gone(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def sleeps_under(root: int, seconds: float = 10.0) -> List[int]:
    """The pids (outside) of the ``sleep`` processes under ``root``, waiting for one to appear."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = [child.pid for child in psutil.Process(root).children(recursive=True) if child.name() == "sleep"]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("no sleep process started in the sandbox")


def test_the_argv_binds_only_what_it_must_in_an_order_that_holds(private: Path) -> None:
    argv = sandboxed(["true"], private, extra_read_only=[private.parent.parent / "graded" / "lesson.ipynb"],
                     env={"TMPDIR": str(private / "tmp")})
    options = described(argv)
    mounts = [option for option in options if option[0] in ("--ro-bind", "--bind", "--tmpfs", "--dev", "--proc")]
    places = [option[-1] for option in mounts]
    assert mounts[-1] == ("--bind", str(private), str(private)) and [o[0] for o in mounts].count("--bind") == 1
    assert places.index("/tmp") < places.index(str(private)) and ("--remount-ro", "/") in options
    read_only = {option[1] for option in options if option[0] == "--ro-bind"}
    assert os.path.realpath(Path(helpers.__file__).parent) in read_only | {"/usr"}
    assert str(ROOT) not in read_only and str(Path.home()) not in read_only and "/" not in read_only
    assert str(private.parent.parent / "graded" / "lesson.ipynb") in read_only
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert (flag,) in options
    environment = {option[1]: option[2] for option in options if option[0] == "--setenv"}
    assert environment["HOME"] == str(private / "home") and environment["TMPDIR"] == str(private / "tmp")
    assert set(environment) == {"PATH", "LANG", "HOME", "TMPDIR"}
    assert ("--chdir", str(private / "work")) in options and argv[-2:] == ["--", "true"]


@pytest.fixture
def fresh_isolation() -> Iterator[None]:
    """isolation() tried again in this test, and again after it."""
    isolation.cache_clear()
    yield
    isolation.cache_clear()


def test_isolation_says_why_not(fresh_isolation: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not sys.platform.startswith("linux"):
        assert isolation() == Isolation(False, f"the sandbox needs Linux (this is {sys.platform})")
        return
    monkeypatch.setenv("PATH", str(tmp_path))
    assert isolation() == Isolation(False, "bubblewrap (bwrap) is not installed")
    fake = tmp_path / "bwrap"
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "bubblewrap 0.0"; exit 0; }\n'
                    'echo "bwrap: No permissions to create a new namespace" >&2\nexit 1\n', encoding="utf-8")
    fake.chmod(0o755)
    isolation.cache_clear()
    assert isolation() == Isolation(False, "bubblewrap cannot make a sandbox here: bwrap: No permissions to create a "
                                           "new namespace")


def test_the_course_imports_inside(works: None, private: Path) -> None:
    seen = inside("import json, os, torch, helpers, nbclient, ipykernel\n"
                  "print(json.dumps([os.path.realpath(helpers.__file__), float(torch.ones(3).sum())]))", private)
    assert seen == [os.path.realpath(helpers.__file__), 3.0]


def test_the_private_folder_is_writable_and_tmp_is_fresh_and_gone(works: None, private: Path) -> None:
    mark = f"mark-{uuid.uuid4().hex}"
    Path("/dev/shm", f"{mark}-outside").write_text("outside", encoding="utf-8")
    try:
        seen = inside(f"import json, os\nopen('answer.txt', 'w').write('42')\nopen(os.environ['HOME'] + '/h', 'w')\n"
                      f"open('/tmp/{mark}', 'w').write('t')\nopen('/dev/shm/{mark}', 'w').write('s')\n"
                      f"print(json.dumps([os.getcwd(), os.listdir('/tmp'), os.path.exists('/dev/shm/{mark}-outside'),"
                      f" sorted(os.listdir('/dev/shm'))]))", private)
        assert seen[0] == str(private / "work") and mark in seen[1] and seen[2:] == [False, [mark]]
        assert (private / "work" / "answer.txt").read_text() == "42" and (private / "home" / "h").exists()
        assert not Path("/tmp", mark).exists() and not Path("/dev/shm", mark).exists()
        again = inside(f"import json, os\nprint(json.dumps([os.path.exists('/tmp/{mark}'), "
                       f"os.path.exists('/dev/shm/{mark}')]))", private)
        assert again == [False, False]
    finally:
        Path("/dev/shm", f"{mark}-outside").unlink()


def test_tmp_and_shm_are_capped_so_no_notebook_fills_memory_through_them(works: None, private: Path) -> None:
    """A tmpfs is RAM that no process's memory shows: each private one is capped."""
    from helpers.grade.sandbox import TMPFS_BYTES

    seen = inside("import errno, json\nfound = {}\nfor folder in ('/tmp', '/dev/shm'):\n"
                  "    try:\n        with open(folder + '/fill', 'wb') as file:\n"
                  f"            for _ in range({TMPFS_BYTES // 2**20 + 8}):\n"
                  "                file.write(bytes(2**20))\n        found[folder] = 'written'\n"
                  "    except OSError as error:\n        found[folder] = errno.errorcode[error.errno]\n"
                  "print(json.dumps(found))", private)
    assert seen == {"/tmp": "ENOSPC", "/dev/shm": "ENOSPC"}


def test_nothing_else_is_writable(works: None, private: Path) -> None:
    name = f"written-{uuid.uuid4().hex}"
    graded = private.parent.parent / "graded"
    targets = [graded / name, private.parent / "notebook-2" / name, Path.home() / name, Path("/etc") / name,
               ROOT / name, Path(helpers.__file__).resolve().parent / name, Path(sys.prefix) / name, Path("/") / name,
               Path("/usr") / name]
    seen = inside(attempts("open(path, 'x').close()", targets), private)
    # Under /tmp a write may succeed: the sandbox's /tmp is its own (a repository cloned under /tmp, as CI does,
    # is a folder there too); it must never show outside.
    assert all(outcome != "ok" or path.startswith("/tmp/") for path, outcome in seen.items()), seen
    assert not any(target.exists() for target in targets)


def test_other_notebooks_and_the_graded_folder_are_not_there(works: None, private: Path) -> None:
    graded = private.parent.parent / "graded"
    hidden = [private.parent / "notebook-2" / "secret.txt", graded / "lesson.ipynb", graded, ROOT / "tests",
              ROOT / "pyproject.toml", Path.home() / ".bashrc"]
    seen = inside(attempts("os.stat(path)", hidden), private)
    assert seen == {str(path): "ENOENT" for path in hidden}, seen


def test_no_process_outside_is_there(works: None, private: Path) -> None:
    code = (f"import json, os\ntry:\n    os.kill({os.getpid()}, 0)\n    reached = True\n"
            "except ProcessLookupError:\n    reached = False\n"
            "pids = sorted(int(name) for name in os.listdir('/proc') if name.isdigit())\n"
            "print(json.dumps([reached, os.getpid(), os.getppid(), pids]))")
    reached, pid, parent, pids = inside(code, private)
    assert not reached and parent == 1 and pids == sorted({1, pid}) and os.getpid() not in pids


def test_there_is_no_network_but_loopback(works: None, private: Path) -> None:
    code = ("import json, socket\nout = []\n"
            "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=3).close()\n    out.append('connected')\n"
            "except OSError as error:\n    out.append(type(error).__name__)\n"
            "server = socket.socket()\nserver.bind(('127.0.0.1', 0))\nserver.listen()\n"
            "client = socket.create_connection(server.getsockname(), timeout=3)\nconnection, _ = server.accept()\n"
            "client.sendall(b'gloo')\nout.append(connection.recv(4).decode())\nprint(json.dumps(out))")
    outcome, echoed = inside(code, private)
    assert outcome != "connected" and echoed == "gloo"


LEAVE_A_SLEEP = ("import subprocess, sys, time\nsubprocess.Popen(['sleep', '60'], start_new_session=True)\n"
                 "print('ready', flush=True)\ntime.sleep(60)")


def test_everything_inside_ends_with_the_outer_process(works: None, private: Path) -> None:
    outer = subprocess.Popen(sandboxed([sys.executable, "-I", "-c", LEAVE_A_SLEEP], private),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    try:
        assert outer.stdout is not None and outer.stdout.readline().strip() == b"ready"
        inner = [child.pid for child in psutil.Process(outer.pid).children(recursive=True)]
        assert sleeps_under(outer.pid)
        outer.send_signal(signal.SIGKILL)
        outer.wait(timeout=10)
        assert wait_gone(inner), [psutil.Process(pid).cmdline() for pid in inner if not gone(pid)]
    finally:
        outer.kill()
        outer.wait()


def test_the_sandbox_ends_with_the_process_that_started_it(works: None, private: Path) -> None:
    argv = sandboxed([sys.executable, "-I", "-c", LEAVE_A_SLEEP], private)
    starter = ("import json, subprocess, sys, time\n"
               "sandbox = subprocess.Popen(json.loads(sys.argv[1]), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)\n"
               "assert sandbox.stdout.readline().strip() == b'ready'\n"
               "print(sandbox.pid, flush=True)\ntime.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-I", "-c", starter, json.dumps(argv)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        sandbox_pid = int(parent.stdout.readline())
        everything: Dict[str, List[int]] = {"sleep": sleeps_under(sandbox_pid)}
        everything["sandbox"] = [sandbox_pid, *(p.pid for p in psutil.Process(sandbox_pid).children(recursive=True))]
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert wait_gone(everything["sandbox"] + everything["sleep"])
    finally:
        parent.kill()
        parent.wait()


def test_a_private_folder_reached_through_a_link_works(works: None, private: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(private, target_is_directory=True)
    seen = inside("import json, os\nopen('through-the-link', 'w').close()\nprint(json.dumps(os.getcwd()))", link)
    assert seen == str(private / "work") and (private / "work" / "through-the-link").exists()

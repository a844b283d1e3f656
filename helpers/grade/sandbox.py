"""A bubblewrap sandbox for one notebook's processes: they see the system, the Python installation and the course's
``helpers`` package read-only, their own private folder read-write, and nothing else.

Inside: new user, pid, ipc, network (loopback only), uts and cgroup namespaces; a fresh ``/tmp``, ``/dev``,
``/dev/shm`` and ``/proc``; no capabilities; a new session; a small environment given explicitly. The sandbox ends
with the process that started it (``--die-with-parent``), and everything in it ends with the sandbox's outer process
(its pid namespace goes with it).

Paths are bound at their real locations; where a bound path is reached through symbolic links, those links are made
again inside, so the path the caller used works there too.
"""
from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import helpers
from helpers.language import tr

# The system, read-only: each only where it exists; a link (``/bin -> usr/bin``) is made again as a link.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/libx32", "/lib64", "/etc", "/sys")
# Made fresh inside, in this order, before the folders bound from outside (a bind under /tmp must come after it).
FRESH_MOUNTS = (("--dev", "/dev"), ("--tmpfs", "/dev/shm"), ("--proc", "/proc"), ("--tmpfs", "/tmp"))
# Never re-made as links inside: they are the sandbox's own.
OWN_TREES = ("/dev", "/proc", "/sys")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
TMPFS_BYTES = 256 * 2**20  # each of the private /tmp and /dev/shm (the private folder itself is on disk)
TRIAL_TIMEOUT_S = 30
MAX_LINKS = 40


@dataclass(frozen=True)
class Isolation:
    """Whether notebooks can run in the sandbox here, and why not (or bubblewrap's version)."""

    available: bool
    reason: str


def _bwrap() -> str:
    return shutil.which("bwrap") or "bwrap"


@functools.lru_cache(maxsize=None)
def isolation() -> Isolation:
    """Whether the sandbox works here: Linux, ``bwrap`` on PATH, and a real sandbox (as :func:`sandboxed` makes it)
    that runs ``true``. Tried once per process."""
    if not sys.platform.startswith("linux"):
        return Isolation(False, tr("the sandbox needs Linux (this is {platform})", platform=sys.platform))
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Isolation(False, tr("bubblewrap (bwrap) is not installed"))
    try:
        version = subprocess.run([bwrap, "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                 timeout=TRIAL_TIMEOUT_S).stdout.strip() or "bubblewrap"
        with tempfile.TemporaryDirectory(prefix="course-sandbox-trial-") as private:
            trial = subprocess.run(sandboxed(["true"], Path(private)), stdin=subprocess.DEVNULL, capture_output=True,
                                   text=True, timeout=TRIAL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as error:
        return Isolation(False, tr("bubblewrap could not be started: {error}", error=str(error)))
    if trial.returncode != 0:
        lines = [line.strip() for line in trial.stderr.splitlines() if line.strip()]
        said = lines[-1] if lines else tr("it ended with exit status {status}", status=trial.returncode)
        return Isolation(False, tr("bubblewrap cannot make a sandbox here: {said}", said=said))
    return Isolation(True, version)


def _resolve(path: str, links: Dict[str, str], depth: int = 0) -> str:
    """The real path of absolute ``path``, recording each symbolic link met on the way (its place, its parent already
    real, and its target as written) in ``links``. Like ``os.path.realpath``, a step at a time, so that ``..`` goes
    up from where a link led."""
    if depth > MAX_LINKS:
        raise OSError(f"too many levels of symbolic links: {path}")
    current = "/"
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, part)
        if os.path.islink(step):
            links[step] = os.readlink(step)
            current = _resolve(os.path.join(current, links[step]), links, depth + 1)
        else:
            current = step
    return current


def _absolute(path: str) -> str:
    """``path`` from the working folder, its ``..`` left for :func:`_resolve` (a link's ``..`` is not its folder's)."""
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def python_paths() -> List[str]:
    """The Python installation and the folders it imports from: the prefixes, the executable's folder (as named and
    as real), every site-packages or dist-packages folder on sys.path (and the user's, where it exists), and the
    installed ``helpers`` package's own folder (for an editable install, that folder only: not the repository)."""
    executable = os.path.abspath(sys.executable)
    paths = [sys.base_prefix, sys.prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", sys.exec_prefix),
             os.path.dirname(executable), os.path.dirname(os.path.realpath(executable))]
    paths += [entry for entry in sys.path if entry and Path(entry).name in ("site-packages", "dist-packages")]
    user_site = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user_site:
        paths.append(user_site)
    paths.append(os.path.dirname(os.path.abspath(helpers.__file__)))
    return paths


def _folders(paths: Iterable[str], links: Dict[str, str]) -> List[str]:
    """The real paths of those of ``paths`` that exist, without repeats, outermost first; links recorded."""
    found: Set[str] = set()
    for path in paths:
        path = _absolute(os.fspath(path))
        if os.path.exists(path):
            found.add(_resolve(path, links))
    return sorted(found, key=lambda path: (path.count("/"), path))


# What a sandbox never reads, though /etc is bound: the password hashes and secrets some systems keep there, and
# (``not_for_everyone``) every file or folder of /etc that not everyone may read.
HIDDEN_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/.pwd.lock")
HIDDEN_FOLDERS = ("/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private")


@functools.lru_cache(maxsize=1)
def not_for_everyone(top: str = "/etc") -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """(files, folders) under ``top`` that not everyone may read, with HIDDEN_FILES and HIDDEN_FOLDERS: seen
    empty in a sandbox (a grader run as root must not hand root's secrets to a notebook)."""
    import stat

    files = {path for path in HIDDEN_FILES if os.path.isfile(path) and not os.path.islink(path)}
    folders = {path for path in HIDDEN_FOLDERS if os.path.isdir(path) and not os.path.islink(path)}
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if info.st_mode & 0o005 != 0o005:
                    folders.add(entry.path)
                else:
                    pending.append(entry.path)
            elif stat.S_ISREG(info.st_mode) and not info.st_mode & 0o004:
                files.add(entry.path)
    folders = {path for path in folders if not any(path != other and path.startswith(other + "/") for other in folders)}
    files = {path for path in files if not any(path.startswith(folder + "/") for folder in folders)}
    return tuple(sorted(files)), tuple(sorted(folders))


def sandboxed(command: List[str], private: Path, extra_read_only: Sequence[Path] = (),
              env: Optional[Mapping[str, str]] = None, replaced: Mapping[str, str] = (),
              writable_bytes: Optional[int] = None) -> List[str]:
    """The argv that runs ``command`` in a new sandbox whose only writable folder is ``private`` (which must exist),
    in ``private/work`` (where it exists, else ``private``), with HOME ``private/home``, PATH and LANG, and the
    variables in ``env`` (which may replace those) as its whole environment. ``extra_read_only``: more folders or
    files to see, read-only (those that do not exist are left out). ``replaced``: inside path -> outside file, seen
    in its place (read-only). The secrets of ``HIDDEN_FILES`` and ``HIDDEN_FOLDERS`` are never seen.

    With ``writable_bytes``, ``private`` is instead a fresh tmpfs of that size inside (memory, which the grader
    counts from outside: a file deleted but kept open counts too), with the outside ``private/in`` seen read-only at
    ``private/in``: what the sandbox is given, never what it writes."""
    named = _absolute(os.fspath(private))
    if not os.path.isdir(named):
        raise NotADirectoryError(f"the sandbox's private folder is not a folder: {named}")
    links: Dict[str, str] = {}
    argv = [_bwrap(), "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]

    system: List[str] = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
            system.append(path)
    for kind, path in FRESH_MOUNTS:
        # A tmpfs is memory no process's count shows: each gets a size, so a notebook cannot fill RAM through it.
        argv += (["--size", str(TMPFS_BYTES)] if kind == "--tmpfs" else []) + [kind, path]
    argv += ["--remount-ro", "/dev"]  # bwrap's /dev is a tmpfs of half the memory: nothing is written there

    read_only: List[str] = []
    for path in _folders([*python_paths(), *map(os.fspath, extra_read_only)], links):
        if not any(_inside(path, outer) for outer in system + read_only):
            read_only.append(path)
    writable = _resolve(named, links)
    if any(_inside(path, writable) for path in system + read_only):
        raise ValueError(f"the sandbox's private folder holds folders it must only read: {writable}")
    for path in read_only:
        argv += ["--ro-bind", path, path]

    # The links met on the way to a bound path, made again inside: not those the bound folders already hold, nor
    # those the system's own links stand for.
    bound = system + read_only + [writable] + list(OWN_TREES) + list(SYSTEM_PATHS)
    for place in sorted(links, key=lambda place: (place.count("/"), place)):
        if not any(_inside(place, folder) for folder in bound):
            argv += ["--symlink", links[place], place]
    hidden_files, hidden_folders = not_for_everyone()
    for path in hidden_files:
        argv += ["--ro-bind", os.devnull, path]
    for path in hidden_folders:
        argv += ["--size", "4096", "--tmpfs", path]
    for inside, outside in dict(replaced).items():  # a file seen in place of another (read-only)
        argv += ["--ro-bind", outside, inside]
    if writable_bytes is None:
        argv += ["--bind", writable, writable, "--remount-ro", "/"]
    else:
        given = os.path.join(writable, "in")
        argv += ["--size", str(int(writable_bytes)), "--tmpfs", writable, "--ro-bind", given, given,
                 "--remount-ro", "/"]

    work = os.path.join(named, "work")
    environment = {"PATH": f"{os.path.dirname(os.path.abspath(sys.executable))}:{DEFAULT_PATH}",
                   "LANG": os.environ.get("LANG", "C.UTF-8"), "HOME": os.path.join(named, "home")}
    environment.update(env or {})
    argv += ["--chdir", work if os.path.isdir(work) and writable_bytes is None else named, "--clearenv"]
    for key, value in environment.items():
        argv += ["--setenv", key, value]
    return argv + ["--", *command]


def described(argv: Sequence[str]) -> List[Tuple[str, ...]]:
    """A sandbox's argv as its options, one tuple each (for reading and for tests), up to the command."""
    arity = {"--symlink": 2, "--bind": 2, "--ro-bind": 2, "--setenv": 2, "--cap-drop": 1, "--chdir": 1, "--dev": 1,
             "--tmpfs": 1, "--proc": 1, "--remount-ro": 1}
    options: List[Tuple[str, ...]] = []
    index = 1
    while index < len(argv) and argv[index] != "--":
        count = arity.get(argv[index], 0)
        options.append(tuple(argv[index:index + 1 + count]))
        index += 1 + count
    return options


def files_bytes(outer_pid: int, folders: Sequence[str]) -> int:
    """What a sandbox holds in memory as files, read from outside: the used blocks of its own tmpfs ``folders``
    (through ``/proc/<pid>/root`` of one of its processes), and the memory files (``memfd_create``) its processes
    hold open, each once; 0 for what cannot be read."""
    import psutil

    try:
        inner = psutil.Process(outer_pid).children(recursive=True)
    except psutil.Error:
        return 0
    total = 0
    for process in inner:
        read = False
        for folder in folders:
            try:
                info = os.statvfs(f"/proc/{process.pid}/root{folder}")
            except OSError:
                continue
            total += (info.f_blocks - info.f_bfree) * info.f_frsize
            read = True
        if read:
            break
    return total + _memory_files(inner)


def _memory_files(processes: Sequence[Any]) -> int:
    seen: Set[Tuple[int, int]] = set()
    total = 0
    for process in processes:
        folder = f"/proc/{process.pid}/fd"
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            try:
                if not os.readlink(f"{folder}/{name}").startswith("/memfd:"):
                    continue
                info = os.stat(f"{folder}/{name}")
            except OSError:
                continue
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += max(info.st_size, info.st_blocks * 512)
    return total

"""The grader's private work folders: all under one parent (``$TMPDIR/course-grade``), one per grader process.

Each is ``run-<pid>-<start time>`` with an ``owner.json`` (the process's pid and start time, from psutil), so a later
grader can tell the folders of graders that ended (killed, crashed, the machine restarted) from those still running,
and remove only the former: never a live run's folder, never anything outside the parent, never through a link.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

import psutil

from helpers.language import tr

PARENT_NAME = "course-grade"
OWNER_FILE = "owner.json"
RUN_NAME = re.compile(r"run-(?P<pid>\d+)-(?P<start>\d+)(?:-\d+)?")
# psutil's start time is the boot time plus the start in clock ticks: it moves if the wall clock is stepped. A
# larger slack keeps a live run (the worse mistake to make); a reused pid started within it is kept until next time.
START_SLACK_S = 2.0


class WorkdirError(RuntimeError):
    """The parent folder cannot be used safely (a symbolic link, not a folder, another user's)."""


def default_parent() -> Path:
    """``$TMPDIR/course-grade`` (the system's temporary folder when TMPDIR is not set)."""
    return Path(tempfile.gettempdir()) / PARENT_NAME


def _checked_parent(parent: Optional[Path], create: bool) -> Optional[Path]:
    """The parent, made (mode 700) when asked; refused when it is a link, not a folder, or not this user's."""
    parent = Path(parent) if parent is not None else default_parent()
    if create:
        try:
            os.mkdir(parent, 0o700)
        except FileExistsError:
            pass
    try:
        info = os.lstat(parent)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise WorkdirError(tr("{folder} is a symbolic link: the grader does not use it for its work folders",
                              folder=parent))
    if not stat.S_ISDIR(info.st_mode):
        raise WorkdirError(tr("{folder} is not a folder", folder=parent))
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise WorkdirError(tr("{folder} belongs to another user: the grader does not use it for its work folders",
                              folder=parent))
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(parent, 0o700)
    return parent


def _identity() -> Dict[str, Any]:
    """What names this process: pid, start time, and where pids mean it (host, boot, pid namespace)."""
    me = psutil.Process()
    identity: Dict[str, Any] = {"pid": me.pid, "start_time": me.create_time(), "host": socket.gethostname()}
    for key, source in (("boot_id", "/proc/sys/kernel/random/boot_id"), ("pid_namespace", "/proc/self/ns/pid")):
        try:
            identity[key] = (os.readlink(source) if key == "pid_namespace"
                             else Path(source).read_text(encoding="ascii").strip())
        except OSError:
            pass
    return identity


def new_run_folder(parent: Optional[Path] = None) -> Path:
    """A new work folder for this grader process, ``<parent>/run-<pid>-<start time>``, holding its ``owner.json``."""
    parent = _checked_parent(parent, create=True)
    assert parent is not None
    identity = _identity()
    base = f"run-{identity['pid']}-{int(identity['start_time'])}"
    for number in range(1, 1000):
        folder = parent / (base if number == 1 else f"{base}-{number}")
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue  # this process asked before (or an old run's pid and second came back): the next name
        temporary = folder / f".{OWNER_FILE}.tmp"
        temporary.write_text(json.dumps(identity), encoding="utf-8")
        os.replace(temporary, folder / OWNER_FILE)  # whole or absent, for a clean_stale running meanwhile
        return folder
    raise WorkdirError(tr("{folder} holds too many work folders named {name}", folder=parent, name=base))


def _read_owner(folder: Path) -> Optional[Dict[str, Any]]:
    """owner.json as written, or None: never followed through a link, never read from a pipe, at most 64 KiB."""
    try:
        descriptor = os.open(folder / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        data = file.read(65536)
    try:
        owner = json.loads(data.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int) \
            or not isinstance(owner.get("start_time"), (int, float)):
        return None
    return owner


def _owner_alive(owner: Dict[str, Any], here: Dict[str, Any]) -> bool:
    """Whether the owner may still be running; True whenever this process cannot tell."""
    if owner.get("host", here["host"]) != here["host"]:
        return True  # another machine's run, over a shared folder: its pids are not ours to look up
    if "boot_id" in owner and "boot_id" in here and owner["boot_id"] != here["boot_id"]:
        return False  # the machine restarted since: every process of that boot has ended
    if owner.get("pid_namespace", here.get("pid_namespace")) != here.get("pid_namespace"):
        return True  # another container's run: its pids name other processes here
    try:
        started = psutil.Process(owner["pid"]).create_time()
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # it exists, but cannot be looked at
    return abs(started - float(owner["start_time"])) <= START_SLACK_S  # else the pid was reused


def clean_stale(parent: Optional[Path] = None) -> List[Path]:
    """Remove the run folders under ``parent`` whose owner process has ended (or whose pid names another process
    now); return them. A folder without a readable owner.json is judged by its name (the owner died while making
    it); links, files, and names that are not ``run-<pid>-<start>`` are left alone."""
    parent = _checked_parent(parent, create=False)
    if parent is None:
        return []
    here = _identity()
    removed: List[Path] = []
    with os.scandir(parent) as entries:
        candidates = [entry for entry in entries
                      if RUN_NAME.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)]
    for entry in sorted(candidates, key=lambda entry: entry.name):
        folder = parent / entry.name
        owner = _read_owner(folder)
        if owner is None:
            match = RUN_NAME.fullmatch(entry.name)
            assert match is not None
            owner = {"pid": int(match["pid"]), "start_time": int(match["start"])}
            if _owner_alive(dict(owner, start_time=owner["start_time"] + 0.5), here):
                continue  # the name keeps whole seconds: the start lies within the next one
        elif _owner_alive(owner, here):
            continue
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                continue  # replaced by a link (or a file) meanwhile
        except OSError:
            continue
        if remove_tree(folder):
            removed.append(folder)
    return removed


def remove_tree(folder: Path) -> bool:
    """Remove ``folder`` and everything under it (links inside, never what they point to), however deep; True
    when it is gone. Never raises: a tree a notebook made thousands of folders deep is ``rm -rf``'s to remove."""
    try:
        shutil.rmtree(folder)  # refuses a link itself
    except FileNotFoundError:
        return True
    except (OSError, RecursionError):
        try:
            if not os.path.islink(folder):
                subprocess.run(["rm", "-rf", "--", str(folder)], capture_output=True, timeout=300, check=False)
        except (OSError, subprocess.SubprocessError):
            pass
    return not os.path.lexists(folder)

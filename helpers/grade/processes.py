"""Keeping every process a notebook starts in reach: a child subreaper, a watch on the tree's memory, and a kill of
the whole tree that leaves nothing running (double forks and setsid included).

The tree is this process's descendants, or those of a given process (``root_pid``: a sandbox's outer process,
watched and killed from outside). Its memory counts each page once (PSS), so forked children that share their
parent's pages do not count them again.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import Callable, List, Optional, Tuple

import psutil

from helpers.language import tr

PR_SET_CHILD_SUBREAPER = 36
# Processes the course itself starts and that may outlive a kernel's last cell: not the learner's doing.
NORMAL_LEFTOVERS = ("multiprocessing.resource_tracker", "from multiprocessing", "dot ")
PSS_EVERY_S = 1.0  # how often TreeWatch reads the tree's PSS while its RSS is under the limit


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux), so none escapes the final kill."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def describe(process: psutil.Process) -> str:
    """A process's command line, short."""
    try:
        return " ".join(process.cmdline())[:160] or process.name()
    except psutil.Error:
        return "(ended)"


def process_memory(process: psutil.Process) -> int:
    """A process's memory, each page counted once across processes: its PSS (a page shared by n processes counts
    1/n in each), else its USS (where PSS cannot be read), else its RSS (where neither can: another user's process)."""
    try:
        full = process.memory_full_info()
    except psutil.AccessDenied:
        full = None
    for name in ("pss", "uss"):
        value = getattr(full, name, None)
        if value is not None:
            return int(value)
    return int(process.memory_info().rss)


def _descendants(root: Optional[psutil.Process]) -> List[psutil.Process]:
    """The living descendants of ``root`` (this process when None); zombies have ended."""
    found = (root or psutil.Process()).children(recursive=True)
    alive = []
    for process in found:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.Error:
            continue
    return alive


def tree_memory(root_pid: Optional[int] = None) -> Tuple[int, int]:
    """(bytes, processes): the memory of the tree (:func:`process_memory` summed, so each page counts once) and its
    process count. The tree is this process's descendants, or ``root_pid`` and its descendants."""
    root = psutil.Process(root_pid) if root_pid is not None else None
    processes = _descendants(root)
    return _sum(processes, root, process_memory), len(processes)


def _sum(processes: List[psutil.Process], root: Optional[psutil.Process],
         measure: Callable[[psutil.Process], int]) -> int:
    total = 0
    for process in processes + ([root] if root is not None else []):
        try:
            total += measure(process)
        except psutil.Error:
            continue
    return total


def _rss(process: psutil.Process) -> int:
    return int(process.memory_info().rss)


def _reap_orphans() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wait_gone(processes: List[psutil.Process], timeout_s: float) -> None:
    """Wait until each process has ended (a zombie has: its parent reaps it); reap the ones that are this
    process's children, by their own pid (never ``waitpid(-1)``, which would take another thread's child)."""
    deadline = time.monotonic() + timeout_s
    pending = list(processes)
    while pending:
        still = []
        for process in pending:
            try:
                if process.ppid() == os.getpid():
                    os.waitpid(process.pid, os.WNOHANG)
                if process.status() != psutil.STATUS_ZOMBIE:
                    still.append(process)
            except (psutil.Error, ChildProcessError):
                continue
        pending = still
        if not pending or time.monotonic() > deadline:
            return
        time.sleep(0.02)


def kill_tree(keep_pid: Optional[int] = None, rounds: int = 20, root_pid: Optional[int] = None) -> List[str]:
    """Stop, then kill, every descendant of this process, or of ``root_pid`` (repeatedly, until none is left);
    reap them. The root itself is left running (its owner ends and waits for it).

    With ``root_pid``, only the killed processes are reaped; without, every ended child of this process is (it is
    the subreaper of what the notebook started).
    Returns the command lines of what was still running, leaving out ``keep_pid`` and the course's normal leftovers.
    """
    try:
        root = psutil.Process(root_pid) if root_pid is not None else None
    except psutil.NoSuchProcess:
        return []
    found: List[str] = []
    for _ in range(rounds):
        if root is None:
            _reap_orphans()  # ended children of this process (it is their subreaper): gone, not to be killed
        elif not root.is_running():
            break  # ended, or its pid now names another process: nothing of this tree to find under it
        children = _descendants(root)
        if not children:
            break
        if not found:
            found = [describe(child) for child in children if child.pid != keep_pid]
        for child in children:  # stopped first: a stopped process cannot fork any more while we kill
            try:
                child.send_signal(signal.SIGSTOP)
            except psutil.Error:
                pass
        for child in children:
            try:
                child.kill()
            except psutil.Error:
                pass
        _wait_gone(children, timeout_s=2)
    if root is None:
        _reap_orphans()
    return [line for line in found if not any(normal in line for normal in NORMAL_LEFTOVERS)]


class TreeWatch(threading.Thread):
    """Samples a process tree; past the memory or process limit it calls ``on_limit(reason)`` once.

    The tree is this process's descendants, or, with ``root_pid`` (the sandbox's outer process, watched from
    outside), that process and its descendants. Memory is :func:`process_memory` summed, so the pages that forked
    children share with their parent count once, not once per child; processes are the descendants.
    """

    def __init__(self, memory_bytes: int, max_processes: int, on_limit: Callable[[str], None],
                 interval_s: float = 0.2, root_pid: Optional[int] = None,
                 files_bytes: Optional[Callable[[], int]] = None) -> None:
        super().__init__(daemon=True)
        self.memory_bytes, self.max_processes, self.on_limit = memory_bytes, max_processes, on_limit
        self.interval_s = interval_s
        self.root_pid = root_pid
        self.files_bytes = files_bytes or (lambda: 0)  # files held in memory (a sandbox's tmpfs), counted too
        self.peak_bytes = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.root_pid) if self.root_pid is not None else None
        except psutil.NoSuchProcess:
            return
        measured_at = 0.0
        while not self.stopped.wait(self.interval_s):
            if root is not None and not root.is_running():
                return  # the tree ended (or the pid is another process's now): nothing left to watch
            try:
                processes = _descendants(root)
            except psutil.Error:
                continue
            # PSS costs about 20 ms per GiB mapped, RSS nothing: the sum of RSS bounds the sum of PSS, so PSS is
            # read when RSS says the limit may be passed, and otherwise once a PSS_EVERY_S for the peak.
            files = self.files_bytes()
            if _sum(processes, root, _rss) + files > self.memory_bytes or \
                    time.monotonic() - measured_at >= PSS_EVERY_S:
                measured_at = time.monotonic()
                total = _sum(processes, root, process_memory) + files
                self.peak_bytes = max(self.peak_bytes, total)
                if total > self.memory_bytes:
                    used, held, limit = total >> 20, files >> 20, self.memory_bytes >> 20
                    self.on_limit(tr("it used {used} MiB of memory, {held} MiB of it in files (the limit is {limit} "
                                     "MiB)", used=used, held=held, limit=limit) if held else
                                  tr("it used {used} MiB of memory (the limit is {limit} MiB)", used=used, limit=limit))
                    return
            if len(processes) > self.max_processes:
                self.on_limit(tr("it started {count} processes at once (the limit is {limit})", count=len(processes),
                                 limit=self.max_processes))
                return

    def stop(self) -> None:
        self.stopped.set()

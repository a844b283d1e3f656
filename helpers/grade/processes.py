"""Keeping every process a notebook starts in reach: a child subreaper, a watch on the tree's memory, and a kill of
the whole tree that leaves nothing running (double forks and setsid included)."""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from typing import Callable, List, Optional

import psutil

PR_SET_CHILD_SUBREAPER = 36
# Processes the course itself starts and that may outlive a kernel's last cell: not the learner's doing.
NORMAL_LEFTOVERS = ("multiprocessing.resource_tracker", "from multiprocessing", "dot ")


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


def _reap_orphans() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(keep_pid: Optional[int] = None, rounds: int = 20) -> List[str]:
    """Stop, then kill, every descendant of this process (repeatedly, until none is left); reap them.

    Returns the command lines of what was still running, leaving out ``keep_pid`` and the course's normal leftovers.
    """
    me = psutil.Process()
    found: List[str] = []
    for _ in range(rounds):
        children = me.children(recursive=True)
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
        psutil.wait_procs(children, timeout=2)
        _reap_orphans()
    return [line for line in found if not any(normal in line for normal in NORMAL_LEFTOVERS)]


class TreeWatch(threading.Thread):
    """Samples this process's descendants; past the memory or process limit it calls ``on_limit(reason)`` once."""

    def __init__(self, memory_bytes: int, max_processes: int, on_limit: Callable[[str], None],
                 interval_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.memory_bytes, self.max_processes, self.on_limit = memory_bytes, max_processes, on_limit
        self.interval_s = interval_s
        self.peak_bytes = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self.stopped.wait(self.interval_s):
            children = me.children(recursive=True)
            total = 0
            for child in children:
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    continue
            self.peak_bytes = max(self.peak_bytes, total)
            if total > self.memory_bytes:
                self.on_limit(f"its processes used {total >> 20} MiB of memory (the limit is "
                              f"{self.memory_bytes >> 20} MiB)")
                return
            if len(children) > self.max_processes:
                self.on_limit(f"it started {len(children)} processes at once (the limit is {self.max_processes})")
                return

    def stop(self) -> None:
        self.stopped.set()

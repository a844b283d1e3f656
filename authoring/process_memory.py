"""The memory of a process and everything it started, counted as a container's memory limit counts it.

Kernels started by one server share pages (the same torch libraries, mapped once). Summing each process's
resident set (RSS) counts those pages once per process; a cgroup, which is what enforces a Binder or JupyterHub
memory limit, counts them once. The proportional set size (PSS) splits each shared page between the processes
that map it, so the PSS of all processes adds up to what they use together. Linux only (psutil reads smaps).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import psutil

MIB = 1 << 20


@dataclass(frozen=True)
class ProcessMemory:
    """One process: its PSS and RSS in bytes, and its command line."""

    pid: int
    pss: int
    rss: int
    command: str


def tree_memory(root_pid: int) -> Dict[int, ProcessMemory]:
    """Every live process in ``root_pid``'s tree (the root, its children, theirs, ...), by pid."""
    try:
        root = psutil.Process(root_pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return {}
    found = {}
    for process in processes:
        try:
            info = process.memory_full_info()
            command = " ".join(process.cmdline())
        except psutil.Error:
            continue  # it ended while we looked
        found[process.pid] = ProcessMemory(process.pid, info.pss, info.rss, command)
    return found


def total_pss(tree: Dict[int, ProcessMemory]) -> int:
    """The PSS of the whole tree, in bytes."""
    return sum(process.pss for process in tree.values())


def kernel_count(tree: Dict[int, ProcessMemory]) -> int:
    """How many notebook kernels (``ipykernel_launcher`` processes) the tree holds."""
    return sum(1 for process in tree.values() if "ipykernel_launcher" in process.command)


@dataclass
class MemorySampler:
    """Samples a process tree's total PSS every ``interval_s`` seconds in a thread, keeping the peak, and the most
    kernels alive at any sample (``most_kernels``)."""

    root_pid: int
    interval_s: float = 0.2
    peak: int = 0
    peak_processes: int = 0
    most_kernels: int = 0
    samples: List[Tuple[float, int, int]] = field(default_factory=list)  # (seconds from start, PSS bytes, processes)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
        self._started = time.monotonic()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> int:
        """Take one sample now; its total PSS in bytes."""
        tree = tree_memory(self.root_pid)
        total = total_pss(tree)
        self.samples.append((time.monotonic() - self._started, total, len(tree)))
        self.most_kernels = max(self.most_kernels, kernel_count(tree))
        if total > self.peak:
            self.peak, self.peak_processes = total, len(tree)
        return total

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

"""The session's memory sampler counts the kernels alive at each sample, not only at the moments a test looks."""
from __future__ import annotations

from typing import Dict, List

import pytest

from authoring import process_memory
from authoring.process_memory import MemorySampler, ProcessMemory, kernel_count


def _tree(kernels: int) -> Dict[int, ProcessMemory]:
    server = {1: ProcessMemory(1, 100, 200, "python -m jupyter lab --no-browser")}
    ranks = {2: ProcessMemory(2, 10, 20, "python -c from multiprocessing.spawn import spawn_main")}
    found = {**server, **ranks}
    for number in range(kernels):
        found[10 + number] = ProcessMemory(10 + number, 50, 90, f"python -m ipykernel_launcher -f kernel-{number}.json")
    return found


def test_kernel_count_counts_only_kernel_processes() -> None:
    assert [kernel_count(_tree(n)) for n in (0, 1, 3)] == [0, 1, 3]


def test_the_sampler_keeps_the_most_kernels_seen_at_any_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    trees: List[Dict[int, ProcessMemory]] = [_tree(1), _tree(2), _tree(1), _tree(0)]
    monkeypatch.setattr(process_memory, "tree_memory", lambda root_pid: trees.pop(0))
    sampler = MemorySampler(root_pid=1)
    for _ in range(4):
        sampler.sample()
    assert sampler.most_kernels == 2
    assert sampler.peak == 100 + 10 + 2 * 50 and sampler.peak_processes == 4

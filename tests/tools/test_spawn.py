"""run_distributed: a real process group on this machine, results back in rank order, every process ended."""
from __future__ import annotations

import os
import pickle
import signal
import threading
import time

import psutil
import pytest
import torch
import torch.multiprocessing as mp

from helpers.tools.spawn import WorkerFailed, pick_backend, run_distributed, start_method, use_fork_server, use_spawn
from tests.tools import spawn_workers


def _no_children_left() -> bool:
    return not [child for child in mp.active_children() if child.is_alive()]


def test_two_ranks_form_one_group_and_return_in_rank_order():
    results = run_distributed(spawn_workers.all_reduce_rank, world_size=2, backend="gloo")
    assert [value.item() for value in results] == [3.0, 3.0]
    assert _no_children_left()


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_ranks_take_the_callers_environment_and_folder_however_they_start(method, monkeypatch, tmp_path):
    """Spawned (as in a learner's notebook) or forked from the fork server (as in this suite, see conftest.py): each
    rank sees the caller's environment (already as the worker's module loads, and TORCH_DISTRIBUTED_DEBUG, which
    torch reads as it loads) and working folder as they are at the call, not as they were earlier, and draws its own
    random seed."""
    before = start_method()
    if method == "spawn":
        use_spawn()
    elif not use_fork_server():
        pytest.skip("no fork server on this platform")
    try:
        run_distributed(spawn_workers.all_reduce_rank, world_size=2, backend="gloo")  # the server starts (if one)
        monkeypatch.setenv("COURSE_SPAWN_PROBE", "set after the server started")
        monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "INFO")
        monkeypatch.chdir(tmp_path)
        results = run_distributed(spawn_workers.surroundings, world_size=2, args=("COURSE_SPAWN_PROBE",),
                                  backend="gloo")
    finally:
        use_fork_server() if before == "forkserver" else use_spawn()
    probe = "set after the server started"
    assert [found[:4] for found in results] == [(probe, probe, str(tmp_path), method)] * 2
    assert results[0][4] != results[1][4], "the ranks drew the same random seed"
    assert [found[5] for found in results] == ["DebugLevel.INFO"] * 2
    assert _no_children_left()


def test_gloo_without_a_gpu_per_rank():
    if torch.cuda.device_count() < 2:
        assert pick_backend(2) == "gloo"


def test_a_ranks_exception_comes_back_with_its_traceback_and_every_process_ends():
    started = time.monotonic()
    with pytest.raises(WorkerFailed, match=r"(?s)rank 1 raised:.*ValueError: rank one says no"):
        run_distributed(spawn_workers.fail_on_rank_one, world_size=2, backend="gloo", timeout_s=60)
    assert _no_children_left()
    assert time.monotonic() - started < 45, "rank 0 hung in its barrier until the timeout"


def test_a_hanging_run_times_out_and_every_process_ends():
    with pytest.raises(TimeoutError, match="did not finish within 3 s"):
        run_distributed(spawn_workers.sleep_for, world_size=2, args=(60.0,), backend="gloo", timeout_s=3)
    assert _no_children_left()


def test_an_interrupt_ends_every_process_and_is_raised_again():
    # Ctrl-C's handler, even where this process started with SIGINT ignored (a shell's background job).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(6.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_distributed(spawn_workers.sleep_for, world_size=2, args=(60.0,), backend="gloo", timeout_s=60)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert _no_children_left()


def _listening_ports() -> set:
    return {connection.laddr.port for connection in psutil.Process().net_connections(kind="tcp")
            if connection.status == psutil.CONN_LISTEN}


def test_the_callers_meeting_point_closes_after_every_kind_of_ending():
    """The ranks meet at a TCPStore this process holds for the call; after a result, a rank's exception, a
    timeout, and a worker that cannot be sent to a new process (nothing starts), nothing of it is left listening,
    even while each exception is kept (as Jupyter keeps the last one, with its frames)."""
    before = _listening_ports()
    run_distributed(spawn_workers.all_reduce_rank, world_size=2, backend="gloo")
    with pytest.raises(WorkerFailed) as failed:
        run_distributed(spawn_workers.fail_on_rank_one, world_size=2, backend="gloo", timeout_s=60)
    with pytest.raises(TimeoutError) as timed_out:
        run_distributed(spawn_workers.sleep_for, world_size=2, args=(60.0,), backend="gloo", timeout_s=3)
    with pytest.raises((AttributeError, TypeError, pickle.PicklingError)) as unsendable:
        run_distributed(lambda rank, world_size: rank, world_size=2, backend="gloo")
    kept = [failed.tb, timed_out.tb, unsendable.tb]
    assert _listening_ports() <= before, f"still listening while {len(kept)} exceptions are kept"
    assert _no_children_left()

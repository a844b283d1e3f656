"""Run a function on several processes that form one ``torch.distributed`` group, and bring their results back.

``run_distributed(worker, world_size=2)`` starts ``world_size`` fresh processes (the "spawn" start method, as
``torch.multiprocessing.spawn`` uses), joins them into a process group over TCP on this machine (they meet at a
``TCPStore`` the caller holds on a port the system picked), calls ``worker(rank, world_size, *args)`` in each, and
returns each rank's result, in rank order.

- The backend is NCCL when there is a CUDA GPU per process, else gloo on the CPU (Colab's one GPU, a Mac, CI).
- ``worker`` must be importable by name (defined at the top of a module, not in a notebook cell): a spawned process
  starts empty and imports it. Results travel back pickled; give CPU tensors.
- ``use_fork_server()`` (the test suite and notebook 08 call it) starts later groups' processes from a fork server
  that imported torch once, instead of a fresh interpreter each that imports torch again. Each process is a copy of
  that server, not of the caller: it takes the caller's current environment variables, working folder and
  ``sys.path`` at each call before the worker's module is imported, and draws fresh random seeds (torch's and
  ``random``'s), as a spawned one does; what torch read from the environment when it loaded is the server's (except
  ``TORCH_DISTRIBUTED_DEBUG``, which each rank reads again before it joins the group), and the ranks print to the
  server's stdout and stderr. Linux only: elsewhere processes are spawned as before (Windows has no fork server;
  on macOS, CPython's documentation warns that forking can crash the child, as system libraries may start threads).
  Off by default: the server stays alive, with torch loaded (a few hundred MB), for as long as the calling process
  does.
- Every process is ended before the call returns: after a worker's exception (re-raised here with the traceback of
  every rank that failed: when one rank raises, the others often fail too, in a collective that lost its partner,
  and that echo can arrive first), after ``timeout_s`` seconds, and after a KeyboardInterrupt (re-raised).
"""
from __future__ import annotations

import os
import pickle
import queue as queue_module
import random
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from helpers.language import tr

JOIN_GRACE_S = 10.0
FAILURE_GRACE_S = 3.0  # after one rank fails, how long to wait for the others' reports (the first may be an echo)
HOST = "127.0.0.1"
# torch._dynamo too: DistributedDataParallel's constructor imports it, which costs each rank about a second of CPU
# when its fork server did not import it first (torch 2.4 to 2.15).
FORK_SERVER_PRELOAD = ("torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo")
_start = {"method": "spawn"}


class WorkerFailed(RuntimeError):
    """A rank raised: its exception and traceback are in the message."""


@dataclass(frozen=True)
class _Outcome:
    rank: int
    ok: bool
    value: Any


@dataclass(frozen=True)
class _Surroundings:
    """What a spawned process takes from its parent when it starts: applied first in a fork server's process."""

    environment: Dict[str, str]
    working_folder: str
    path: List[str]

    @classmethod
    def of_this_process(cls) -> "_Surroundings":
        return cls(dict(os.environ), os.getcwd(), list(sys.path))

    def apply(self) -> None:
        os.environ.clear()
        os.environ.update(self.environment)
        os.chdir(self.working_folder)
        sys.path[:] = self.path


def use_fork_server(preload: Sequence[str] = FORK_SERVER_PRELOAD) -> bool:
    """Start later groups' processes from a fork server that imported ``preload`` once; False off Linux (see the
    module's docstring), and then processes are spawned as before."""
    available = sys.platform.startswith("linux") and "forkserver" in mp.get_all_start_methods()
    context = mp.get_context("forkserver") if available else None
    if context is None:
        return False
    context.set_forkserver_preload(list(preload))
    _start["method"] = "forkserver"
    return True


def use_spawn() -> None:
    """Spawn a fresh interpreter for each process again (the default)."""
    _start["method"] = "spawn"


def start_method() -> str:
    """``"spawn"`` (the default) or ``"forkserver"`` (after ``use_fork_server()``)."""
    return _start["method"]


def pick_backend(world_size: int) -> str:
    """``"nccl"`` with a CUDA GPU for every rank, else ``"gloo"``."""
    if torch.cuda.is_available() and torch.cuda.device_count() >= world_size and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def _rendezvous_store(timeout_s: float) -> dist.TCPStore:
    """The group's meeting point, held by the caller: the system picks its port as it binds, so no other process
    can take that port between choosing and listening (a port probed free and bound later by rank 0 can be)."""
    return dist.TCPStore(HOST, 0, None, True, timedelta(seconds=timeout_s), wait_for_workers=False)


def _entry(rank: int, world_size: int, backend: str, store_port: int, timeout_s: float, threads: int,
           call: bytes, results: Any, surroundings: _Surroundings, forked: bool) -> None:
    """What each spawned process runs: take the parent's surroundings, join the group, call the worker, report,
    leave the group."""
    surroundings.apply()
    if forked:  # a copy of the fork server: its random state would be every rank's, its debug level the server's
        torch.seed()
        random.seed()
        dist.set_debug_level_from_env()
    torch.set_num_threads(threads)
    try:
        worker, args = pickle.loads(call)  # only now: the worker's module imports with the caller's environment
        if backend == "nccl":
            torch.cuda.set_device(rank)
        store = dist.TCPStore(HOST, store_port, None, False, timedelta(seconds=timeout_s))
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
        value = worker(rank, world_size, *args)
        # Plain pickle bytes: torch's own queue pickling shares tensors through memory that ends with this process.
        # Reported before leaving the group: on torch 2.4, leaving a gloo group sometimes never returns, and the
        # parent ends every process once all have reported.
        results.put(_Outcome(rank, True, pickle.dumps(value)))
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which raises it
        first_line = (str(error).strip().splitlines() or [""])[0]
        results.put(_Outcome(rank, False, (f"{type(error).__name__}: {first_line}", traceback.format_exc())))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _stop(processes: List[Any]) -> None:
    """End every process: ask, wait a little, then kill."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + JOIN_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def run_distributed(worker: Callable[..., Any], world_size: int = 2, args: Sequence[Any] = (),
                    backend: Optional[str] = None, timeout_s: float = 120.0) -> List[Any]:
    """Call ``worker(rank, world_size, *args)`` on ``world_size`` new processes in one process group.

    Returns:
        Each rank's return value, in rank order.

    Raises:
        WorkerFailed: a rank raised (the first one to report; its traceback is in the message).
        TimeoutError: not every rank reported within ``timeout_s`` seconds.
    """
    backend = backend or pick_backend(world_size)
    call = pickle.dumps((worker, tuple(args)))  # first: it raises for a worker that cannot be sent
    context = mp.get_context(start_method())
    results = context.Queue()
    threads = max(1, (os.cpu_count() or 1) // world_size)
    surroundings = _Surroundings.of_this_process()
    forked = context.get_start_method() != "spawn"
    collected: dict = {}
    failures: dict = {}
    started: List[Any] = []
    store = _rendezvous_store(timeout_s)
    try:
        processes = [context.Process(target=_entry, args=(rank, world_size, backend, store.port, timeout_s, threads,
                                                          call, results, surroundings, forked), daemon=True)
                     for rank in range(world_size)]
        for process in processes:
            process.start()
            started.append(process)
        deadline = time.monotonic() + timeout_s
        while len(collected) + len(failures) < world_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if failures:
                    break
                missing = sorted(set(range(world_size)) - set(collected))
                raise TimeoutError(tr("ranks {missing} did not finish within {seconds} s", missing=missing,
                                      seconds=f"{timeout_s:.0f}"))
            try:
                outcome = results.get(timeout=min(remaining, 0.5))
            except queue_module.Empty:
                dead = [rank for rank, process in enumerate(processes)
                        if not process.is_alive() and rank not in collected and process.exitcode not in (0, None)]
                if dead:
                    raise WorkerFailed(tr("rank {rank} died (exit code {code})", rank=dead[0],
                                          code=processes[dead[0]].exitcode)) from None
                continue
            if not outcome.ok:
                if not failures:
                    deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
                failures[outcome.rank] = outcome.value
                continue
            collected[outcome.rank] = pickle.loads(outcome.value)
        if failures:
            failed = sorted(failures.items())
            summary = "; ".join(tr("rank {rank}: {error}", rank=rank, error=line) for rank, (line, _) in failed)
            details = "\n".join(tr("rank {rank} raised:\n{traceback}", rank=rank, traceback=text)
                                for rank, (_, text) in failed)
            raise WorkerFailed(f"{summary}\n{details}")
        return [collected[rank] for rank in range(world_size)]
    finally:
        _stop(started)
        results.close()
        del store  # closes the meeting point once every rank has ended

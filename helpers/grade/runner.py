"""Runs one learner's notebook, then makes the calls the grader asks for with its answers: the untrusted side.

    python -I -m helpers.grade.runner JOB.json R W    (started by the grader, inside the notebook's sandbox)

Everything here runs with the learner's code and is trusted with nothing: it only produces data. It runs the notebook
(copied by the grader into the private folder, with the files beside it) in a fresh kernel, as "Run All" runs it,
stopping at the first error; the last cell sends each answer, by value, to a file in the private folder; the kernel
ends. Then, for each ``request`` frame from the grader (an exercise and a situation), a calls process of its own
(``--calls``: it loads the answers) makes the learner's calls of that situation on its own twin and sends the
records back as data (``helpers.grade.wire``): the state before and after each call, never code. This process
passes them on when they are well-formed data. The grader judges them elsewhere.

Frames come and go over two pipes of their own (descriptors R and W, inherited by this process only; it is not
dumpable, so no other process opens them through /proc); the kernel and every process it starts write their stdout
and stderr to the log.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional

from helpers.language import tr

PRIVATE_FOLDERS = ("home", "tmp", "runtime", "ipython", "matplotlib", "cache", "config", "data")
KERNEL_START = Path(__file__).resolve().with_name("kernel_start.py")


def kernel_environment(root: Path, threads: int) -> Dict[str, str]:
    """The kernel's environment: this process's, less Jupyter's and the course's own settings, with private
    folders."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("JPY_", "JUPYTER_", "COURSE_"))}
    env.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
               IPYTHONDIR=str(root / "ipython"), MPLCONFIGDIR=str(root / "matplotlib"),
               XDG_CACHE_HOME=str(root / "cache"), XDG_CONFIG_HOME=str(root / "config"),
               XDG_DATA_HOME=str(root / "data"), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               TMP=str(root / "tmp"), TEMP=str(root / "tmp"), TORCHINDUCTOR_CACHE_DIR=str(root / "cache" / "inductor"),
               TRITON_CACHE_DIR=str(root / "cache" / "triton"), CUDA_VISIBLE_DEVICES="",
               PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="module://matplotlib_inline.backend_inline")
    return env


def limited_kernel_manager(memory_bytes: int, write_log: Path, allowed_root: Path) -> Any:
    """A kernel manager that always starts Python 3 through kernel_start.py, whatever kernel the notebook names."""
    from jupyter_client.manager import AsyncKernelManager

    class LimitedKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments: Optional[List[str]] = None) -> List[str]:
            command = super().format_kernel_cmd(extra_arguments)
            return [sys.executable, str(KERNEL_START), str(memory_bytes), str(write_log), str(allowed_root),
                    *command[command.index("-f"):]]

    return LimitedKernelManager(kernel_name="python3")


def _first_line(cell: Any) -> str:
    line = next((text.strip() for text in cell.source.splitlines() if text.strip()), "")
    return line if len(line) <= 60 else line[:57] + "..."


def _run_cells(client: Any, code_cells: int, stopped: Dict[str, Any], progress: Dict[str, int],
               channel: BinaryIO) -> None:
    """Execute the cells as Run All does, up to the first error, then the extraction cell."""
    from nbclient.exceptions import CellExecutionError

    from helpers.grade.frames import write_json

    for index, cell in enumerate(client.nb.cells):
        last = index == len(client.nb.cells) - 1
        if stopped and not last:
            continue  # Run All stops at an error; the answers defined before it are still taken
        if not last:
            progress["cell"] = index + 1
            write_json(channel, "progress", {"cell": index + 1, "of": code_cells})
        try:
            client.execute_cell(cell, index)
        except CellExecutionError as error:
            if last:
                raise
            evalue = str(error.evalue).splitlines()[0][:200] if str(error.evalue).strip() else ""
            number, line = index + 1, _first_line(cell)
            stopped.setdefault("reason", tr("code cell {number} ({line}) raised {error}: {value}", number=number,
                                            line=line, error=error.ename, value=evalue) if evalue else
                               tr("code cell {number} ({line}) raised {error}", number=number, line=line,
                                  error=error.ename))
            stopped.setdefault("cell", index + 1)
            continue
        if not last:
            progress["ran"] = index + 1


def run_notebook(job: Dict[str, Any], channel: BinaryIO) -> Dict[str, Any]:
    """Run the notebook of ``job``: where it stopped and why, and what the grader needs to know of it."""
    # jsonschema, which nbformat imports, compiles an IRI grammar on import when rfc3987_syntax is installed (about
    # a second, per runner); notebooks' schema checks no IRI, and jsonschema goes without it where it is missing.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from helpers.grade.cells import exercise_marker, extraction_cell, without_checks
    from helpers.grade.processes import kill_tree

    started = time.monotonic()
    root = Path(job["root"])
    for name in PRIVATE_FOLDERS:
        (root / name).mkdir(parents=True, exist_ok=True)
    work = root / "work"
    if not work.exists():  # in the sandbox: what it was given is read-only; it works on a copy
        shutil.copytree(Path(job["given"]) / "work", work)
    node = nbformat.convert(nbformat.reader.reads((work / job["notebook"]).read_text(encoding="utf-8")), 4)
    node.metadata.pop("kernelspec", None)
    exercise_cells: Dict[str, int] = {}
    code_cells = [cell for cell in node.cells if cell.cell_type == "code"]
    for number, cell in enumerate(code_cells, start=1):
        found = exercise_marker(cell.source)
        if found:
            exercise_cells.setdefault(found, number)
        cell.source, _ = without_checks(cell.source)
        cell.outputs = []
    node.cells = list(code_cells)
    answers_path = root / "answers.json"
    node.cells.append(nbformat.v4.new_code_cell(extraction_cell(job["answer_names"], str(answers_path))))
    write_log = root / "writes.jsonl"
    write_log.touch()
    stopped: Dict[str, Any] = {}
    progress = {"cell": 0, "ran": 0}
    kernel_pid: Optional[int] = None
    for attempt in (1, 2):
        client = NotebookClient(copy.deepcopy(node), km=limited_kernel_manager(job["memory_bytes"] * 2 // 3,
                                                                                write_log, root),
                                timeout=job["cell_timeout_s"], allow_errors=False, kernel_name="python3",
                                startup_timeout=120, resources={"metadata": {"path": str(work)}})
        kernel_ready = False
        try:
            with client.setup_kernel(env=kernel_environment(root, job.get("threads", 1)), cwd=str(work)):
                kernel_ready = True
                process = getattr(getattr(client.km, "provisioner", None), "process", None)
                kernel_pid = getattr(process, "pid", None)
                _run_cells(client, len(code_cells), stopped, progress, channel)
        except CellTimeoutError:
            stopped = {"reason": tr("code cell {number} ran past the time limit for one cell ({seconds} s)",
                                    number=progress["cell"], seconds=job["cell_timeout_s"]), "cell": None}
        except DeadKernelError:
            stopped = {"reason": tr("its kernel died (memory exhausted, or the notebook ended its own process)"),
                       "cell": None}
        except Exception as error:  # the kernel could not start, the client lost it: the result is unknown
            if not kernel_ready and attempt == 1 and not stopped:
                kill_tree()  # a kernel that died while starting (kernels started at once can race for a port)
                continue
            first_line = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
            stopped = {"reason": tr("the grader could not run it ({error})",
                                    error=f"{type(error).__name__}: {first_line}"), "cell": None}
        break
    leftovers = kill_tree(keep_pid=kernel_pid)
    writes = [json.loads(line) for line in write_log.read_text(encoding="utf-8").splitlines()[:20]
              if line.startswith("{")]
    return {"stopped": stopped or None, "ran_cells": progress["ran"], "code_cells": len(code_cells),
            "exercise_cells": exercise_cells, "writes": writes, "leftovers": leftovers,
            "seconds": round(time.monotonic() - started, 1)}


def load_answers(path: Path, names: List[str]) -> Dict[str, Any]:
    """The answers the extraction cell sent, by name: the object, or a ``_Unloadable`` saying why not."""
    import cloudpickle

    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        found = {}
    answers: Dict[str, Any] = {}
    for name in names:
        entry = found.get(name, {"missing": True}) if isinstance(found, dict) else {"missing": True}
        if not isinstance(entry, dict) or entry.get("missing"):
            answers[name] = None  # never defined: the stub's "not attempted"
            continue
        try:
            answers[name] = cloudpickle.loads(base64.b64decode(entry["pickle"]))
        except Exception as error:  # it could not be sent or loaded: each of its calls says so
            answers[name] = _Unloadable(f"{type(error).__name__}: {error}"[:300] if "pickle" in entry
                                        else str(entry.get("error", tr("it could not be sent")))[:300])
    return answers


class _Unloadable:
    """An answer that could not be loaded: calling it raises, which the records report as what it raised."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(tr("the answer could not be loaded outside the notebook's kernel ({why}); something it "
                              "uses exists only there (a module that is not installed, an open file)", why=self.why))


def records_for_request(request: Dict[str, Any], answers: Dict[str, Any]) -> bytes:
    """The records of one requested situation, encoded."""
    from helpers.course import seeds
    from helpers.course.exercises.engine.judge import learner_calls
    from helpers.course.exercises.engine.situations import Situation
    from helpers.course.exercises.registry import exercises
    from helpers.grade.records import encode_records

    exercise = exercises()[request["exercise"]]
    if "situations" in request:  # notebook 08's: every situation at once, on two ranks of the sandbox's own
        return _ddp_records(request, exercise, answers.get(exercise.answer_name))
    situation = Situation(tuple((str(name), value) for name, value in request["situation"]["values"]),
                          int(request["situation"]["seed"]))
    seeds.set_salt(int(request["salt"]))
    return encode_records(learner_calls(exercise.contract, answers.get(exercise.answer_name), situation))


def _ddp_records(request: Dict[str, Any], exercise: Any, answer: Any) -> bytes:
    """The learner's records of every situation on each of two ranks, as wire bytes: ``[rank 0's, rank 1's]``."""
    import cloudpickle

    from helpers.grade import wire
    from helpers.grade.ddp import TIMEOUT_S, WORLD_SIZE, learner_records_on_rank
    from helpers.tools.spawn import run_distributed

    payload = b"" if answer is None else cloudpickle.dumps(answer)
    per_rank = run_distributed(learner_records_on_rank, world_size=WORLD_SIZE, timeout_s=TIMEOUT_S,
                               args=(exercise.id, payload, request["situations"], int(request["salt"])))
    return wire.encode([wire.decode(data) for data in per_rank])


def make_calls(job: Dict[str, Any], channel: BinaryIO, requests: BinaryIO) -> None:
    """In the calls process: load the answers and answer each request frame with a records frame."""
    import torch

    from helpers.grade.frames import json_payload

    torch.set_num_threads(1)
    answers = load_answers(Path(job["root"]) / "answers.json", job["answer_names"])

    def records(payload: bytes) -> bytes:
        try:
            return records_for_request(json_payload(payload), answers)
        except Exception as error:  # the calls could not be made here: the grader marks the exercise failed
            return _failed(f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}")

    _answer_each(requests, channel, records)


def _answer_each(requests: BinaryIO, channel: BinaryIO, answer: Any) -> None:
    """Each request frame answered with the records frame ``answer(payload)`` makes, until the pipe closes."""
    from helpers.grade.frames import read_frame, write_frame

    while True:
        try:
            kind, payload = read_frame(requests)
        except EOFError:
            return
        if kind != "request":
            return
        write_frame(channel, "records", answer(payload))


def _failed(text: str) -> bytes:
    from helpers.grade import wire

    return wire.encode({"failed": text})


class Calls:
    """The process the learner's answers are called in: a child of this one that has no way to the grader's pipe
    (this process is not dumpable, so no other process opens its descriptors). What it sends back is passed on only
    when it is well-formed data; a broken or ended calls process is started again for the next request."""

    def __init__(self, job_path: str) -> None:
        self.job_path = job_path
        self.process: Optional[Any] = None

    def ask(self, payload: bytes) -> bytes:
        import subprocess

        from helpers.grade import wire
        from helpers.grade.frames import FrameError, read_frame, write_frame

        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen([sys.executable, "-I", "-m", "helpers.grade.runner", "--calls",
                                             self.job_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            write_frame(self.process.stdin, "request", payload)
            kind, data = read_frame(self.process.stdout)
            wire.check(data)  # as the grader will decode it, without torch: this process never imports it
        except (OSError, EOFError, FrameError, wire.WireError) as error:
            self.process.kill()
            self.process = None
            return _failed(tr("the process making the calls broke off ({error})",
                              error=f"{type(error).__name__}: {str(error)[:200]}"))
        if kind != "records":
            return _failed(tr("the process making the calls sent a {kind} frame", kind=kind))
        return data


def serve(job_path: str, channel: BinaryIO, requests: BinaryIO) -> None:
    """Pass each request frame from the grader to the calls process, and its records back, until the pipe closes."""
    _answer_each(requests, channel, Calls(job_path).ask)


def _private_channel() -> BinaryIO:
    """This process's stdout as a private descriptor for frames; fd 1 and 2 go to the log for everything else."""
    descriptor = os.dup(1)  # not inherited by children (PEP 446)
    os.dup2(2, 1)
    return os.fdopen(descriptor, "wb")


def _not_dumpable() -> None:
    """Linux: no process of the same user may open this one's descriptors through /proc (the kernel, the answers).
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0


def main() -> int:
    """``runner JOB REQUESTS_FD FRAMES_FD`` (the grader's pipes), or ``runner --calls JOB`` (stdin and stdout)."""
    calls_only = sys.argv[1] == "--calls"
    job_path = sys.argv[2] if calls_only else sys.argv[1]
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    if calls_only:
        channel = _private_channel()
        requests = os.fdopen(os.dup(0), "rb")
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        make_calls(job, channel, requests)
        return 0
    _not_dumpable()  # before anything else: no process here opens these descriptors through /proc
    requests = os.fdopen(int(sys.argv[2]), "rb")
    channel = os.fdopen(int(sys.argv[3]), "wb")
    for descriptor in (requests.fileno(), channel.fileno()):
        os.set_inheritable(descriptor, False)
    from helpers.grade.frames import write_json
    from helpers.grade.processes import become_subreaper

    become_subreaper()
    result = run_notebook(job, channel)
    write_json(channel, "result", result)
    serve(job_path, channel, requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())

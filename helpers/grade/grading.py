"""Grading one notebook: run it in its sandbox (runner.py, untrusted), then judge its answers here (trusted), from
data alone, and turn both into one row per exercise.

The grader copies the notebook and the files beside it into a private folder, starts the runner in a sandbox that
sees only that folder (``sandbox.py``), and watches it from outside: its time, and the memory of all its processes,
counted once per page. The runner sends progress, then what the run did, then, for each situation the checking
engine asks for, the records of the learner's calls: data. The engine makes the reference's calls here and compares
(``engine.judge.judge_records``); no learner code ever runs in this process, and nothing here is imported from the
graded folder.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from helpers.course import seeds
from helpers.course.exercises import solutions as solutions_module
from helpers.course.exercises.engine.judge import RecordsDiffer, judge_records, situations_tried
from helpers.course.exercises.engine.situations import Situation
from helpers.course.exercises.guard import NotAttempted
from helpers.course.exercises.registry import exercises
from helpers.course.exercises.solutions import FILE_NAME as SOLUTIONS_FILE
from helpers.course.exercises.solutions import recorded_solutions
from helpers.grade import wire
from helpers.grade.ddp import TIMEOUT_S, WORLD_SIZE, reference_verdicts_on_rank, situations_data
from helpers.grade.frames import FrameError, json_payload, read_frame, write_json
from helpers.grade.processes import TreeWatch, kill_tree
from helpers.grade.records import RecordsError, records_from_data
from helpers.grade.report import EXPOSED, clean_text, with_notes
from helpers.grade.rows import Row
from helpers.grade.sandbox import files_bytes
from helpers.grade.submissions import Submission
from helpers.grade.wire import WireError
from helpers.grade.workdirs import remove_tree
from helpers.language import tr, translated
from helpers.tools.spawn import WorkerFailed, run_distributed

MAX_PROCESSES = 24
MAX_BESIDE_BYTES = 64 * 2**20  # the files copied beside a notebook, all together
JUDGING = threading.Lock()  # the engine's seeds and reference records are this process's: one comparison at a time


@dataclass(frozen=True)
class Limits:
    """Per notebook: the whole run's time, one cell's time, the memory of all its processes, the checks' time."""

    timeout_s: int = 300
    cell_timeout_s: int = 120
    memory_bytes: int = 3 * 2**30
    check_timeout_s: int = 120


LOG_BYTES = 64 * 2**10  # of what a runner writes to stderr, the end is kept (for --keep)


@dataclass
class Sandboxed:
    """A runner started for one notebook, its pipes, and why it was stopped (if it was)."""

    process: subprocess.Popen
    to_runner: Any  # a binary file: the request frames
    from_runner: Any  # a binary file: the runner's frames
    stopped: Dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    log: bytearray = field(default_factory=bytearray)

    def drain(self) -> None:
        """Read the runner's stderr to its end, keeping its last LOG_BYTES (a flood fills no disk)."""
        assert self.process.stderr is not None
        while True:
            chunk = self.process.stderr.read(65536)
            if not chunk:
                return
            self.log += chunk
            del self.log[:-LOG_BYTES]

    def stop(self, reason: str) -> None:
        with self.lock:
            if not self.stopped:
                self.stopped.update(reason=reason, cell=None)
        kill_tree(root_pid=self.process.pid)


class Stopped(Exception):
    """The runner is gone (stopped from outside, ended, or broke the protocol)."""


def copy_in(submission: Submission, work: Path) -> None:
    """The notebook and the regular files beside it (not other notebooks, folders or links) into ``work``. In a
    flat folder of several learners' files (``alice 04_whose_gradient.ipynb``), only this learner's."""
    work.mkdir(parents=True)
    total = 0
    own_folder = submission.path.parent.name == submission.learner or not submission.learner
    for path in sorted(submission.path.parent.iterdir()):
        if not own_folder and path != submission.path and not path.name.startswith(submission.learner):
            continue
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not os.path.isfile(path) or os.path.islink(path) or path.name.startswith("grades."):
            continue
        if path != submission.path and path.suffix == ".ipynb":
            continue
        total += info.st_size
        if path != submission.path and total > MAX_BESIDE_BYTES:
            continue
        shutil.copyfile(path, work / path.name, follow_symlinks=False)


def without_solutions(given: Path) -> Dict[str, str]:
    """A copy of solutions.json with every solution cell left out, to be seen in the sandbox in the real one's
    place: the course's order stays, the reference does not (nothing in the sandbox needs it)."""
    real = Path(solutions_module.__file__).with_name(SOLUTIONS_FILE)
    kept = {exercise_id: {**entry, "source": ""} for exercise_id, entry in recorded_solutions().items()}
    (given / SOLUTIONS_FILE).write_text(json.dumps(kept), encoding="utf-8")
    return {str(real.resolve()): str(given / SOLUTIONS_FILE)}


def start(submission: Submission, limits: Limits, root: Path, command_for: Callable[..., List[str]],
          answer_names: List[str]) -> Sandboxed:
    """Copy the notebook in (``root/in``: what the sandbox is given, read-only) and start its runner (through
    ``command_for``: the sandbox, where ``root`` is a fresh tmpfs of the memory limit's size, or none)."""
    given = root / "in"
    copy_in(submission, given / "work")
    job = {"root": str(root), "given": str(given), "notebook": submission.path.name, "threads": 1,
           "answer_names": answer_names, "memory_bytes": limits.memory_bytes,
           "cell_timeout_s": min(limits.cell_timeout_s, limits.timeout_s)}
    (given / "JOB.json").write_text(json.dumps(job), encoding="utf-8")
    # The frames go through two pipes of their own, passed as descriptors 3 and up: bubblewrap's first process in the
    # sandbox (dumpable, so others there may open its descriptors) holds only /dev/null and the log's pipe.
    requests_read, requests_write = os.pipe()
    frames_read, frames_write = os.pipe()
    command = command_for([sys.executable, "-I", "-m", "helpers.grade.runner", str(given / "JOB.json"),
                           str(requests_read), str(frames_write)], root, without_solutions(given), limits.memory_bytes)
    try:
        process = subprocess.Popen(command, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True,
                                   pass_fds=(requests_read, frames_write))
    finally:
        os.close(requests_read)
        os.close(frames_write)
    sandboxed = Sandboxed(process, os.fdopen(requests_write, "wb"), os.fdopen(frames_read, "rb"))
    threading.Thread(target=sandboxed.drain, daemon=True).start()
    return sandboxed


def read_run(sandboxed: Sandboxed, on_cell: Callable[[int, int], None]) -> Dict[str, Any]:
    """Progress frames until the result frame: what the run did (as the runner says: data to read, not trust)."""
    while True:
        try:
            kind, payload = read_frame(sandboxed.from_runner)
            value = json_payload(payload)
        except (OSError, EOFError, FrameError) as error:
            raise Stopped(str(error)) from None
        if kind == "progress":
            try:
                on_cell(int(value["cell"]), int(value["of"]))
            except Exception:  # numbers from a sandbox: a progress line is never worth a row
                pass
        elif kind == "result":
            return value
        else:
            raise Stopped(f"a {kind} frame before the run's result")


class CallsFailed(Exception):
    """The sandbox could not make the learner's calls (its ranks hung, its answer broke the set-up): the text says
    why, as the sandbox reported it."""


def _exchange(sandboxed: Sandboxed, request: Dict[str, Any]) -> Any:
    """Send one request; the decoded data of the records frame that answers it."""
    try:
        write_json(sandboxed.to_runner, "request", request)
        kind, payload = read_frame(sandboxed.from_runner)
    except (OSError, EOFError, FrameError) as error:
        raise Stopped(str(error)) from None
    if kind != "records":
        raise Stopped(f"a {kind} frame where records were asked for")
    try:
        return wire.decode(payload)
    except WireError as error:
        raise Stopped(f"what it sent back is not data ({error})") from None


def _calls_made(value: Any) -> Any:
    """``value``, unless it is the sandbox's word that the calls could not be made (CallsFailed)."""
    if isinstance(value, dict) and set(value) == {"failed"} and isinstance(value["failed"], str):
        raise CallsFailed(value["failed"])
    return value


def ask(sandboxed: Sandboxed, exercise_id: str, situation: Situation, salt: int) -> List[Any]:
    """The learner's records of one situation, from the sandbox."""
    value = _calls_made(_exchange(sandboxed, {"exercise": exercise_id, "salt": salt, "situation": {
        "values": [list(pair) for pair in situation.values], "seed": situation.seed}}))
    try:
        return records_from_data(value)
    except RecordsError as error:
        raise Stopped(f"what it sent back is not records ({error})") from None


def _ddp_verdict(sandboxed: Sandboxed, exercise_id: str, salt: int) -> Optional[str]:
    """Notebook 08's exercise: every situation at once, the learner's on the sandbox's two ranks, the reference's
    on two ranks of the grader's own. None, or the diagnosis."""
    contract = exercises()[exercise_id].contract
    with JUDGING:
        seeds.set_salt(salt)
        try:
            situations = situations_data(contract)
        finally:
            seeds.set_salt(0)
    per_rank = _calls_made(_exchange(sandboxed, {"exercise": exercise_id, "salt": salt, "situations": situations}))
    if not (isinstance(per_rank, list) and len(per_rank) == WORLD_SIZE and all(
            isinstance(rank, list) and len(rank) == len(situations) for rank in per_rank)):
        raise Stopped("what it sent back is not one list of records per rank and situation")
    verdicts = run_distributed(reference_verdicts_on_rank, world_size=WORLD_SIZE, timeout_s=TIMEOUT_S,
                               args=(exercise_id, [wire.encode(rank) for rank in per_rank], situations, salt))
    if any(found == ["not attempted"] for found in verdicts):
        raise NotAttempted()
    for index in range(len(situations)):
        for rank, found in enumerate(verdicts):
            if index < len(found) and found[index] is not None:
                return tr("On rank {rank}: {diagnosis}", rank=rank, diagnosis=found[index])
    return None


def judge_exercise(sandboxed: Sandboxed, exercise_id: str, salt: int) -> Dict[str, Any]:
    """``{"status", "message", "own_check_passed"}`` for one exercise, judged here from the sandbox's records.

    The engine's seeds and its recording references are this process's: each comparison runs under ``JUDGING``,
    which is let go while the sandbox makes its calls (a slow or stuck answer holds up no other notebook)."""
    contract = exercises()[exercise_id].contract

    def verdict(with_salt: int) -> Optional[str]:
        if contract.sync is not None:
            return _ddp_verdict(sandboxed, exercise_id, with_salt)

        def records(situation: Situation) -> List[Any]:
            JUDGING.release()
            try:
                return ask(sandboxed, exercise_id, situation, with_salt)
            finally:
                JUDGING.acquire()
                seeds.set_salt(with_salt)

        with JUDGING:
            seeds.set_salt(with_salt)
            try:
                return judge_records(contract, records, elsewhere=True)
            finally:
                seeds.set_salt(0)

    try:
        diagnosis = verdict(salt)
        if diagnosis is None:
            return {"status": "passed", "message": tr("Matched the reference in all {count} situations the check "
                                                      "generates, on models and batches made from a salt the "
                                                      "notebook's cells never saw.",
                                                      count=situations_tried(contract))}
        own = verdict(0) is None
    except NotAttempted:
        return {"status": "not attempted", "message": tr("Still the stub: no answer written yet.")}
    except CallsFailed as error:
        return {"status": "failed", "message": tr("Its calls could not be made: {why}.", why=clean_text(str(error)))}
    except (TimeoutError, WorkerFailed) as error:
        return {"status": "error", "message": tr("Not graded: the grader's own processes for the reference failed "
                                                 "({error}).",
                                                 error=f"{type(error).__name__}: {clean_text(str(error))[:200]}")}
    except RecordsDiffer as error:
        return {"status": "failed", "message": tr("Not accepted: the records sent back are not of the grader's "
                                                  "inputs ({error}): something in the notebook changed how they "
                                                  "were made.", error=str(error))}
    return {"status": "failed", "message": clean_text(diagnosis), "own_check_passed": own}


def _exercise_rows(submission: Submission, run: Dict[str, Any], checked: Dict[str, Dict[str, Any]],
                   problem: Optional[str]) -> List[Row]:
    rows = []
    stopped = run.get("stopped") or {}
    writes = run.get("writes") or []
    for exercise_id in submission.exercise_ids:
        cell = (run.get("exercise_cells") or {}).get(exercise_id)
        record = checked.get(exercise_id)
        if writes:
            path = clean_text(str((writes[0] or {}).get("path", "?")))[:200]
            status, message = "error", tr("Stopped: it tried to write outside its own folder ({path}); the grader "
                                          "refused the write and does not grade a notebook that does this.", path=path)
        elif stopped and stopped.get("cell") is None:
            status, message = "error", tr("Stopped: {reason}.", reason=clean_text(str(stopped.get('reason'))))
        elif record is not None and record["status"] == "not attempted" and cell is None:
            status, message = "not attempted", tr("The notebook has no cell for this exercise (no '# EXERCISE:' "
                                                  "line), and does not define its answer.")
        elif record is not None:
            message = record["message"]
            if record.get("own_check_passed"):
                message = translated(EXPOSED) + message
            rows.append(Row(submission.name, exercise_id, record["status"], message, submission.learner,
                            record.get("own_check_passed")))
            continue
        elif exercise_id not in submission.found_ids and cell is None:
            status, message = "not attempted", tr("The notebook has no cell for this exercise (no '# EXERCISE:' "
                                                  "line).")
        elif stopped and cell is not None and cell >= stopped["cell"]:
            status, message = "error", tr("Its cell (code cell {cell}) never ran: {reason}, and Run All stops there "
                                          "too.", cell=cell, reason=clean_text(str(stopped['reason'])))
        else:
            status, message = "error", tr("Not graded: {why}.", why=problem or tr("its check did not finish"))
        rows.append(Row(submission.name, exercise_id, status, message, submission.learner))
    return rows


def validated(run: Any) -> Dict[str, Any]:
    """The runner's account of the run, kept only in the shapes the grader reads (it comes from the sandbox)."""
    if not isinstance(run, dict):
        return {}
    found: Dict[str, Any] = {}
    stopped = run.get("stopped")
    if isinstance(stopped, dict) and isinstance(stopped.get("reason"), str) and (
            stopped.get("cell") is None or type(stopped.get("cell")) is int):
        found["stopped"] = {"reason": stopped["reason"][:300], "cell": stopped.get("cell")}
    cells = run.get("exercise_cells")
    if isinstance(cells, dict):
        found["exercise_cells"] = {str(k): v for k, v in cells.items() if type(v) is int}
    for name, kind in (("writes", dict), ("leftovers", str)):
        value = run.get(name)
        found[name] = [item for item in value[:20] if isinstance(item, kind)] if isinstance(value, list) else []
    return found


def _checkable(submission: Submission, run: Dict[str, Any]) -> List[str]:
    """The exercises whose answer the run got to: its cell ran before any stop (or it has no cell but may be
    defined elsewhere, in a run that did not stop)."""
    stopped = run.get("stopped") or {}
    found = []
    for exercise_id in submission.exercise_ids:
        cell = (run.get("exercise_cells") or {}).get(exercise_id)
        if stopped and stopped.get("cell") is None or run.get("writes"):
            continue
        if cell is None and stopped:
            continue
        if cell is not None and stopped and cell >= stopped["cell"]:
            continue
        found.append(exercise_id)
    return found


def grade(submission: Submission, limits: Limits, salt: int, work: Path, on_cell: Callable[[int, int], None],
          command_for: Callable[..., List[str]], keep: bool = False) -> List[Row]:
    """The rows of one notebook: run it in its sandbox, judge what it defined, say what happened. Never raises."""
    if submission.problem:
        sentence = tr("{problem}.", problem=submission.problem[0].upper() + submission.problem[1:])
        return [Row(submission.name, "", "error", sentence, submission.learner)]
    root = Path(tempfile.mkdtemp(prefix="notebook-", dir=work))
    known = exercises()
    run: Dict[str, Any] = {}
    checked: Dict[str, Dict[str, Any]] = {}
    problem: Optional[str] = None
    sandboxed: Optional[Sandboxed] = None
    watch: Optional[TreeWatch] = None
    deadline: Optional[threading.Timer] = None
    try:
        sandboxed = start(submission, limits, root, command_for,
                          [known[exercise_id].answer_name for exercise_id in submission.exercise_ids])
        outer = sandboxed.process.pid
        watch = TreeWatch(limits.memory_bytes, MAX_PROCESSES, sandboxed.stop, root_pid=outer,
                          files_bytes=lambda: files_bytes(outer, (str(root), "/tmp", "/dev/shm")))
        watch.start()
        deadline = threading.Timer(limits.timeout_s, sandboxed.stop,
                                   args=(tr("it ran past the time limit ({seconds} s)", seconds=limits.timeout_s),))
        deadline.daemon = True
        deadline.start()
        run = validated(read_run(sandboxed, on_cell))
        deadline.cancel()
        if not sandboxed.stopped:
            checks = _checkable(submission, run)
            deadline = threading.Timer(limits.check_timeout_s * max(1, len(checks)), sandboxed.stop,
                                       args=(tr("its checks ran past the time limit ({seconds} s per exercise)",
                                                seconds=limits.check_timeout_s),))
            deadline.daemon = True
            deadline.start()
            for exercise_id in checks:
                checked[exercise_id] = judge_exercise(sandboxed, exercise_id, salt)
    except Stopped as error:
        problem = (sandboxed.stopped.get("reason") if sandboxed and sandboxed.stopped else None) or \
            tr("its runner stopped answering ({error})", error=clean_text(str(error))[:200])
    except Exception as error:  # the grader's own failure on this notebook: one error row, the others go on
        problem = tr("the grader failed on it ({error})",
                     error=f"{type(error).__name__}: {clean_text(str(error))[:200]}")
    finally:
        if deadline is not None:
            deadline.cancel()
        if watch is not None:
            watch.stop()
        if sandboxed is not None:
            for pipe in (sandboxed.to_runner, sandboxed.from_runner):
                try:
                    pipe.close()
                except OSError:
                    pass
            kill_tree(root_pid=sandboxed.process.pid)
            try:
                sandboxed.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if keep and sandboxed is not None:
            (root / "runner.log").write_bytes(bytes(sandboxed.log))
        if not keep:
            remove_tree(root)
    if sandboxed is not None and sandboxed.stopped and not run.get("stopped"):
        run["stopped"] = dict(sandboxed.stopped)
    rows = _exercise_rows(submission, run, checked, problem)
    notes = list(submission.notes)
    stopped = run.get("stopped") or {}
    if isinstance(stopped, dict) and stopped.get("cell"):
        notes.append(tr("the notebook stopped at code cell {cell}", cell=stopped['cell']))
    leftovers = run.get("leftovers") or []
    if leftovers:
        notes.append(tr("it left {count} process(es) running, ended by the grader: {command}", count=len(leftovers),
                        command=clean_text(str(leftovers[0]))[:80]))
    if notes:
        rows = [Row(row.notebook, row.exercise, row.status, with_notes(row.message, notes), row.learner,
                    row.own_check_passed) for row in rows]
    return rows

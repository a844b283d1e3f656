"""The checking process: checks each notebook's answers with the course's checkers, away from the notebook.

    python -m helpers.grade.checker      (started by the grader; one JSON job per line on stdin)

It imports torch, the helpers and every checker, lets torch finish its lazy set-up, takes the ``Snapshot`` and
installs the ``Guard``, all before any learner's bytes are read. Then, for each job, it forks a child (copy-on-write:
ready in milliseconds) that loads one notebook's answers and checks each of them with a salt the notebook never saw,
on fresh models and batches (the grade); an answer that fails is checked again on the seeds the notebook's own check
used (what the learner's summary showed), to tell whether fresh inputs exposed it. The child reports over a pipe of
its own; the learner's code never sees this process's stdout.
"""
from __future__ import annotations

import base64
import json
import os
import resource
import select
import signal
import sys
import time
from typing import Any, Dict, List, Optional

ANSWERS_RUN_ELSEWHERE = {"ddp_two_loss_step"}  # its checker sends the answer to processes of its own


def _check_one(exercise_id: str, entry: Dict[str, Any], salt: int, snapshot: Any, guard: Any) -> Dict[str, Any]:
    import cloudpickle

    from helpers.course import seeds
    from helpers.course.exercises.api import evaluate
    from helpers.grade.guard import Tampered, guarded

    if entry.get("missing"):
        return {"status": "not attempted", "message": "The notebook never defined this exercise's answer."}
    if "pickle" not in entry:
        return {"status": "error", "message": f"The answer could not be sent to the checker ({entry.get('error')})."}
    try:
        with guard:
            try:
                answer = cloudpickle.loads(base64.b64decode(entry["pickle"]))
            except Exception as error:
                return {"status": "error", "message": (
                    f"The answer could not be loaded in the checking process ({type(error).__name__}: {error}). "
                    "Something it uses exists only in the learner's kernel (a functools.lru_cache helper, an object "
                    "of a module that is not installed); its own check in the notebook still says what it does.")}
        snapshot.verify("While your answer was loaded")
        if guard.used:
            raise Tampered(f"loading your answer used {guard.used[0]}")
        if exercise_id not in ANSWERS_RUN_ELSEWHERE:
            answer = guarded(answer, snapshot, guard)
        seeds.set_salt(salt)
        snapshot.salt = salt
        fresh = evaluate(exercise_id, answer)
        snapshot.verify("After the check")
        record = {"status": _status(fresh.status.value), "message": fresh.message}
        if record["status"] == "not attempted":
            record["message"] = "Still the stub: no answer written yet."
        if not fresh.passed and record["status"] == "failed":
            seeds.set_salt(0)
            snapshot.salt = 0
            own = evaluate(exercise_id, answer)
            snapshot.verify("After the check")
            record["own_check_passed"] = own.passed
        return record
    except Tampered as error:
        return {"status": "failed", "message": f"Not accepted: {error}. The grader checks the answer as written, "
                                               "with torch and the checkers as they are.", "tampered": True}
    except BaseException as error:  # noqa: BLE001 - whatever happens is a result, never a crash of the grader
        return {"status": "error", "message": f"The check itself failed ({type(error).__name__}: {error})."[:400]}


def _status(value: str) -> str:
    return "not attempted" if value.startswith("not attempted") else value


def _child(job: Dict[str, Any], write_end: int, snapshot: Any, guard: Any) -> None:
    """In the forked child: check every answer of one notebook, one JSON record per exercise, then ``done``."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):
        os.dup2(null, descriptor)
    os.closerange(3, write_end)
    os.closerange(write_end + 1, 1024)
    channel = os.fdopen(write_end, "w", buffering=1)
    limit = int(job["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    with open(job["answers"], encoding="utf-8") as file:
        answers = json.load(file)
    pipe = os.fstat(write_end)
    records = [{"exercise": exercise_id,
                **_check_one(exercise_id, answers.get(answer_name, {"missing": True}), job["salt"], snapshot, guard)}
               for exercise_id, answer_name in job["exercises"].items()]
    now = os.fstat(write_end)
    if (now.st_dev, now.st_ino) != (pipe.st_dev, pipe.st_ino):
        os._exit(3)  # the answer put something else in place of the results pipe: report nothing
    for record in records:
        channel.write(json.dumps(record) + "\n")
    channel.write(json.dumps({"done": True}) + "\n")
    channel.flush()


def _read_all(read_end: int, pid: int, timeout_s: float) -> Optional[bytes]:
    """Everything the child writes, or None when it runs past ``timeout_s``."""
    chunks: List[bytes] = []
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([read_end], [], [], left)
        if ready:
            chunk = os.read(read_end, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _verdict(job: Dict[str, Any], output: Optional[bytes], exit_code: int) -> Dict[str, Any]:
    """The child's records, kept only when the protocol was followed exactly."""
    if output is None:
        return {"problem": f"its check ran past the time limit ({job['timeout_s']} s)"}
    try:
        records = [json.loads(line) for line in output.decode().splitlines() if line.strip()]
    except ValueError:
        return {"problem": "its check wrote something that is not a result"}
    results = {record["exercise"]: record for record in records[:-1]
               if isinstance(record, dict) and "exercise" in record}
    if exit_code != 0 or not records or records[-1] != {"done": True} or len(results) != len(records) - 1 or \
            set(results) != set(job["exercises"]):
        return {"problem": "its check did not finish normally (the process was ended from inside, or its results "
                           f"were tampered with; exit code {exit_code})"}
    return {"results": results}


def run_references() -> None:
    """Check each exercise's own solution once, so that what a check imports or sets up lazily happens before the
    snapshot, not during a learner's call (best effort: a reference that fails here is simply skipped)."""
    import torch
    import torch.nn.functional as functional
    from torch import nn

    from helpers.course.exercises.api import evaluate
    from helpers.course.exercises.registry import exercises
    from helpers.course.exercises.solutions import solution_source

    for exercise_id, exercise in exercises().items():
        source = solution_source(exercise_id)
        if exercise_id in ANSWERS_RUN_ELSEWHERE or not source:
            continue
        namespace: Dict[str, Any] = {"torch": torch, "nn": nn, "F": functional}
        try:
            exec(compile(source, f"<solution of {exercise_id}>", "exec"), namespace)
            evaluate(exercise_id, namespace[exercise.answer_name])
        except Exception:
            continue


def serve() -> None:
    """Read jobs from stdin, one per line; answer each with one JSON line on stdout."""
    import torch

    torch.set_num_threads(1)
    sys.dont_write_bytecode = True
    from helpers.course.exercises.registry import exercises
    from helpers.grade.guard import Guard, Snapshot, warm_up
    from helpers.grade.processes import become_subreaper, kill_tree

    exercises()  # every checker imported now, before any learner's bytes
    warm_up()
    run_references()
    become_subreaper()
    out = sys.stdout
    guard = Guard()  # before the snapshot: it replaces os._exit
    snapshot = Snapshot()
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        job = json.loads(line)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(read_end)
                _child(job, write_end, snapshot, guard)
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        output = _read_all(read_end, pid, float(job["timeout_s"]))
        os.close(read_end)
        if output is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        _, status = os.waitpid(pid, 0)
        kill_tree()  # whatever the check started (notebook 08's workers) ends with it
        verdict = _verdict(job, output, os.waitstatus_to_exitcode(status))
        out.write(json.dumps({"job": job["job"], **verdict}) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()

"""Grading one notebook: run it (runner.py, a process of its own), then check its answers (checker.py), and turn
both into one row per exercise."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from helpers.course.exercises.registry import exercises
from helpers.grade.submissions import Submission

STATUSES = ("passed", "failed", "not attempted", "error")
EXPOSED = ("Fresh inputs exposed it: the notebook's own check passed this answer, but the grader's inputs, which the "
           "notebook never saw, show that it is wrong. ")


@dataclass(frozen=True)
class Limits:
    """Per notebook: the whole run's time, one cell's time, the memory of all its processes, a check's time."""

    timeout_s: int = 300
    cell_timeout_s: int = 120
    memory_bytes: int = 3 * 2**30
    check_timeout_s: int = 120


@dataclass(frozen=True)
class Row:
    """One line of grades.csv."""

    notebook: str
    exercise: str
    status: str
    message: str
    learner: str = ""
    own_check_passed: Optional[bool] = None


class Checker:
    """The checking process (checker.py), started once and shared: one check at a time."""

    def __init__(self, work: Path) -> None:
        self._lock = threading.Lock()
        self._work = work
        self._process: Optional[subprocess.Popen] = None
        self._jobs = 0

    def _start(self) -> subprocess.Popen:
        with open(self._work / "checker.log", "ab") as log:
            process = subprocess.Popen([sys.executable, "-m", "helpers.grade.checker"], cwd=self._work,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        line = process.stdout.readline() if process.stdout else ""
        if not line.startswith('{"ready"'):
            process.kill()
            log_lines = (self._work / "checker.log").read_text(errors="replace").strip().splitlines()
            raise RuntimeError(log_lines[-1] if log_lines else "it ended without a word")
        return process

    def check(self, answers: Path, exercise_answers: Dict[str, str], salt: int, limits: Limits) -> Dict[str, Any]:
        """``{"results": {exercise: record}}``, or ``{"problem": reason}``."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                try:
                    self._process = self._start()
                except (OSError, RuntimeError) as error:  # every notebook still gets its row, with the reason
                    self._process = None
                    return {"problem": f"the grader's checking process could not start ({error})"}
            self._jobs += 1
            job = {"job": self._jobs, "answers": str(answers), "exercises": exercise_answers, "salt": salt,
                   "timeout_s": limits.check_timeout_s, "memory_bytes": limits.memory_bytes * 2 // 3}
            assert self._process.stdin is not None and self._process.stdout is not None
            self._process.stdin.write(json.dumps(job) + "\n")
            self._process.stdin.flush()
            line = self._process.stdout.readline()
            if not line:
                self._process = None
                return {"problem": "the checking process ended during its check"}
            return json.loads(line)

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()


def run_notebook(submission: Submission, limits: Limits, work: Path,
                 on_cell: Callable[[int, int], None]) -> Dict[str, Any]:
    """Run the notebook in runner.py (a process and a private folder of its own); its RESULT.json as a dict."""
    root = Path(tempfile.mkdtemp(prefix="notebook-", dir=work))
    known = exercises()
    job = {"root": str(root), "notebook": str(submission.path), "threads": 1,
           "answer_names": [known[exercise_id].answer_name for exercise_id in submission.exercise_ids],
           "memory_bytes": limits.memory_bytes, "timeout_s": limits.timeout_s,
           "cell_timeout_s": min(limits.cell_timeout_s, limits.timeout_s)}
    (root / "JOB.json").write_text(json.dumps(job), encoding="utf-8")
    with open(root / "runner.log", "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "helpers.grade.runner", str(root / "JOB.json")],
                                   cwd=root, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        assert process.stdout is not None
        for line in process.stdout:
            try:
                progress = json.loads(line)
                on_cell(int(progress["cell"]), int(progress["of"]))
            except (ValueError, KeyError, TypeError):
                continue
        try:
            process.wait(timeout=limits.timeout_s + 180)
        except subprocess.TimeoutExpired:
            process.kill()
    result_path = root / "RESULT.json"
    if not result_path.exists():
        return {"root": str(root), "stopped": {"reason": "the grader's runner failed; see "
                                                         f"{root / 'runner.log'}", "cell": None}}
    return {"root": str(root), **json.loads(result_path.read_text(encoding="utf-8"))}


def _exercise_rows(submission: Submission, run: Dict[str, Any], checked: Dict[str, Any]) -> List[Row]:
    rows = []
    stopped = run.get("stopped") or {}
    writes = run.get("writes") or []
    for exercise_id in submission.exercise_ids:
        cell = (run.get("exercise_cells") or {}).get(exercise_id)
        if writes:
            status, message = "error", (f"Stopped: it tried to write outside its own folder ({writes[0]['path']}); "
                                        "the grader refused the write and does not grade a notebook that does this.")
        elif stopped and stopped.get("cell") is None:
            status, message = "error", f"Stopped: {stopped['reason']}."
        elif exercise_id not in submission.found_ids or cell is None:
            status, message = "not attempted", "The notebook has no cell for this exercise (no '# EXERCISE:' line)."
        elif stopped and cell >= stopped["cell"]:
            status, message = "error", (f"Its cell (code cell {cell}) never ran: {stopped['reason']}, and Run All "
                                        "stops there too.")
        elif "problem" in checked:
            status, message = "error", f"Not graded: {checked['problem']}."
        else:
            record = checked.get("results", {}).get(exercise_id, {"status": "error", "message": "no result"})
            status, message = record["status"], record["message"]
            if record.get("own_check_passed"):
                message = EXPOSED + message
            rows.append(Row(submission.name, exercise_id, status, message, submission.learner,
                            record.get("own_check_passed")))
            continue
        rows.append(Row(submission.name, exercise_id, status, message, submission.learner))
    return rows


def grade(submission: Submission, checker: Checker, limits: Limits, salt: int, work: Path,
          on_cell: Callable[[int, int], None]) -> List[Row]:
    """The rows of one notebook: run it, check what it defined, say what happened."""
    if submission.problem:
        return [Row(submission.name, "", "error", submission.problem[0].upper() + submission.problem[1:] + ".",
                    submission.learner)]
    run = run_notebook(submission, limits, work, on_cell)
    stopped = run.get("stopped") or {}
    checkable = {}
    known = exercises()
    for exercise_id in submission.exercise_ids:
        cell = (run.get("exercise_cells") or {}).get(exercise_id)
        ran = not stopped or (stopped.get("cell") is not None and cell is not None and cell < stopped["cell"])
        if cell is not None and not run.get("writes") and ran:
            checkable[exercise_id] = known[exercise_id].answer_name
    checked: Dict[str, Any] = {}
    if checkable:
        answers = Path(run["root"]) / "answers-to-check.json"
        answers.write_text(json.dumps(run.get("answers") or {}), encoding="utf-8")
        checked = checker.check(answers, checkable, salt, limits)
    rows = _exercise_rows(submission, run, checked)
    notes = list(submission.notes)
    if stopped.get("cell"):
        notes.append(f"the notebook stopped at code cell {stopped['cell']}")
    if run.get("leftovers"):
        notes.append(f"it left {len(run['leftovers'])} process(es) running, ended by the grader: "
                     f"{run['leftovers'][0][:80]}")
    if notes:
        rows = [Row(row.notebook, row.exercise, row.status, f"{row.message} (Note: {'; '.join(notes)}.)",
                    row.learner, row.own_check_passed) for row in rows]
    return rows

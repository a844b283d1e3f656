"""The grader's two sides without a notebook: the runner's records of a learner's calls, as bytes, judged by the
grader's engine. Each exercise's solution passes, a wrong answer fails, the stub is not attempted; records that
are not of the grader's inputs, or not records at all, are never a pass."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict

import cloudpickle
import pytest

from helpers.course.exercises.engine.contract import solution_function
from helpers.course.exercises.registry import exercises
from helpers.grade import grading, runner, wire
from helpers.grade.records import decode_records, encode_records
from tests.course import ddp_answers
from tests.course.test_exercises import WRONG_ANSWERS

SALT = 2718
SINGLE = [exercise_id for exercise_id, exercise in exercises().items() if exercise.contract.sync is None]


class Sandbox:
    """Stands in for a sandboxed runner: each request answered by the runner's own function, through bytes."""

    def __init__(self, answers: Dict[str, Any], tamper: Any = None) -> None:
        self.answers, self.tamper, self.requests = answers, tamper, 0

    def exchange(self, _sandboxed: Any, request: Dict[str, Any]) -> Any:
        self.requests += 1
        data = runner.records_for_request(request, self.answers)
        return wire.decode(self.tamper(data) if self.tamper else data)


def _judge(monkeypatch: pytest.MonkeyPatch, exercise_id: str, answer: Any, tamper: Any = None) -> Dict[str, Any]:
    exercise = exercises()[exercise_id]
    fake = Sandbox({exercise.answer_name: answer}, tamper)
    monkeypatch.setattr(grading, "_exchange", fake.exchange)
    return grading.judge_exercise(None, exercise_id, SALT)


@pytest.mark.parametrize("exercise_id", SINGLE)
def test_the_solution_passes_a_wrong_answer_fails_and_the_stub_is_not_attempted(
        monkeypatch: pytest.MonkeyPatch, exercise_id: str) -> None:
    exercise = exercises()[exercise_id]
    assert _judge(monkeypatch, exercise_id, solution_function(exercise_id, exercise.answer_name))["status"] == "passed"
    wrong, _ = WRONG_ANSWERS[exercise_id][0]
    verdict = _judge(monkeypatch, exercise_id, wrong)
    assert verdict["status"] == "failed" and verdict["message"], verdict
    assert _judge(monkeypatch, exercise_id, None)["status"] == "not attempted"


def test_records_that_are_not_of_the_graders_inputs_are_not_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox that replays records made for other inputs (another salt) is caught on the first state."""
    solution = solution_function("head_weight_grad", "head_weight_grad")

    def other_inputs(data: bytes) -> bytes:
        from helpers.course.exercises.engine.situations import notebook_situation

        situation = notebook_situation(exercises()["head_weight_grad"].contract.axes, 1)
        request = {"exercise": "head_weight_grad", "salt": SALT + 1,
                   "situation": {"values": [list(pair) for pair in situation.values], "seed": situation.seed}}
        return runner.records_for_request(request, {"head_weight_grad": solution})

    verdict = _judge(monkeypatch, "head_weight_grad", solution, tamper=other_inputs)
    assert verdict["status"] == "failed" and "not of the grader's inputs" in verdict["message"], verdict


def test_a_sandbox_that_says_its_calls_failed_fails_the_exercise(monkeypatch: pytest.MonkeyPatch) -> None:
    verdict = _judge(monkeypatch, "head_weight_grad", None, tamper=lambda data: wire.encode({"failed": "x\x1b[2J"}))
    assert verdict == {"status": "failed", "message": "Its calls could not be made: x."}


@pytest.mark.parametrize("garbage", [b"", b"passed", wire.encode({"status": "passed"}), wire.encode([1, 2])])
def test_data_that_is_not_records_stops_the_notebook_never_passes_it(monkeypatch: pytest.MonkeyPatch,
                                                                     garbage: bytes) -> None:
    with pytest.raises((grading.Stopped, wire.WireError)):
        _judge(monkeypatch, "head_weight_grad", None, tamper=lambda data: garbage)


def test_records_round_trip_through_bytes_unchanged() -> None:
    from helpers.course.exercises.engine.judge import learner_calls
    from helpers.course.exercises.engine.situations import generate

    contract = exercises()["parameters_reached"].contract
    situation = next(generate(contract.axes, contract.seed))
    records = learner_calls(contract, solution_function("parameters_reached", "parameters_reached"), situation)
    again = decode_records(encode_records(records))
    assert len(again) == len(records) and again[0].before.keys() == records[0].before.keys()


@pytest.mark.parametrize("answer, status", [(ddp_answers.right_inputs, "passed"), (ddp_answers.sum_backward, "failed"),
                                            (None, "not attempted")], ids=["right", "sum backward", "stub"])
def test_notebook_08s_exercise_is_judged_on_two_ranks_on_each_side(monkeypatch: pytest.MonkeyPatch, answer: Any,
                                                                   status: str) -> None:
    cloudpickle.register_pickle_by_value(ddp_answers)  # as a notebook cell's function travels: by value
    try:
        verdict = _judge(monkeypatch, "ddp_two_loss_step", answer)
    finally:
        cloudpickle.unregister_pickle_by_value(ddp_answers)
    assert verdict["status"] == status, verdict
    if status == "failed":
        assert verdict["message"].startswith("On rank "), verdict


def test_files_a_sandbox_holds_in_memory_count_with_its_processes() -> None:
    """A notebook's folder is a tmpfs: its files are memory no process shows, so the watch adds them."""
    import subprocess
    import threading

    from helpers.grade.processes import TreeWatch

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        reasons = []
        stopped = threading.Event()
        watch = TreeWatch(2**30, 100, lambda reason: (reasons.append(reason), stopped.set()), 0.05,
                          root_pid=sleeper.pid, files_bytes=lambda: 2**31)
        watch.start()
        assert stopped.wait(10), "the watch never counted the files"
        assert "2048 MiB of it in files" in reasons[0] and "(the limit is 1024 MiB)" in reasons[0], reasons
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_files_of_a_sandbox_are_read_from_outside(tmp_path: Path) -> None:
    """``files_bytes`` reads the used blocks of the sandbox's own tmpfs through one of its processes."""
    import subprocess
    import time

    from helpers.grade.sandbox import files_bytes, isolation, sandboxed

    if not isolation().available:
        pytest.skip(f"no sandbox here: {isolation().reason}")
    private = tmp_path / "private"
    (private / "in").mkdir(parents=True)
    code = ("import os, time\nf = open(os.environ['HOME'] + '-held', 'wb')\nf.write(bytes(8 * 2**20)); f.flush()\n"
            "os.unlink(os.environ['HOME'] + '-held')\nprint('ready', flush=True)\ntime.sleep(30)")
    argv = sandboxed([sys.executable, "-I", "-c", code], private, writable_bytes=64 * 2**20)
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while files_bytes(process.pid, (str(private),)) < 8 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert files_bytes(process.pid, (str(private),)) >= 8 * 2**20  # deleted, still open: still counted
        assert not os.path.exists(f"{private}/home-held")  # written inside, never on the disk outside
    finally:
        process.kill()
        process.wait()


def test_without_bubblewrap_the_grader_refuses_unless_the_weaker_mode_is_asked_for(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from helpers.grade import cli, sandbox

    monkeypatch.setattr(sandbox, "isolation", lambda: sandbox.Isolation(False, "no bwrap on PATH"))
    assert cli.command_maker(cli.parse_arguments(["room"])) is None
    assert "cannot run here: no bwrap on PATH" in capsys.readouterr().err
    weaker = cli.command_maker(cli.parse_arguments(["room", "--without-sandbox"]))
    assert weaker is not None and weaker(["python", "x"], Path("/tmp")) == ["python", "x"]
    assert "can see and change what you can" in capsys.readouterr().out


def test_the_grader_starts_again_isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before anything else: ``python -I`` (no working folder, PYTHONPATH or user site on sys.path)."""
    from helpers.grade import cli

    started = []
    monkeypatch.setattr(cli.os, "execv", lambda path, argv: started.append(argv))
    cli.isolated_again(["room", "--jobs", "1"])
    assert started == [[sys.executable, "-I", "-m", "helpers.grade", "room", "--jobs", "1"]]


@pytest.mark.kernel  # the grader runs notebooks
def test_a_killed_grader_leaves_a_partial_report_and_the_next_run_cleans_up(tmp_path: Path) -> None:
    """The grader killed after its first notebook: grades.csv holds that notebook's row; the next run (of any room)
    removes the work folder the killed one left."""
    import shutil
    import signal
    import subprocess
    import time

    from helpers.grade.sandbox import isolation
    from tests.paths import ROOT

    if not isolation().available:
        pytest.skip(f"no sandbox here: {isolation().reason}")
    room, temporary = tmp_path / "room", tmp_path / "tmp"
    temporary.mkdir()
    for name, source in (("a_first", "solutions"), ("b_second", "solutions")):
        (room / name).mkdir(parents=True)
        shutil.copy(ROOT / source / "00_start_here.ipynb", room / name / "00_start_here.ipynb")
    import nbformat

    loop = room / "b_second" / "00_start_here.ipynb"
    node = nbformat.read(str(loop), as_version=4)
    node.cells.insert(0, nbformat.v4.new_code_cell("import time\ntime.sleep(120)"))
    nbformat.write(node, str(loop))
    environment = {**os.environ, "TMPDIR": str(temporary)}
    command = [sys.executable, "-m", "helpers.grade", str(room), "--jobs", "1", "--salt", "3"]
    grader = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (room / "grades.csv").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (room / "grades.csv").exists(), "no partial report after the first notebook"
        grader.send_signal(signal.SIGKILL)
        grader.wait()
    finally:
        if grader.poll() is None:
            grader.kill()
    partial = (room / "grades.csv").read_text(encoding="utf-8")
    assert "a_first/00_start_here.ipynb,head_weight_grad,passed" in partial
    assert "Partial report" in (room / "grades.html").read_text(encoding="utf-8")
    left = list((temporary / "course-grade").glob("run-*"))
    assert left, "the killed grader's work folder should still be there"
    time.sleep(1)
    # The next run, on a room whose one notebook is not the course's (nothing to run): it cleans up first.
    later = tmp_path / "later" / "notes"
    later.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("notes")]), str(later / "a.ipynb"))
    command[command.index(str(room))] = str(later.parent)
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(not path.exists() for path in left), done.stdout
    assert "Removed what an earlier grading run left behind" in done.stdout

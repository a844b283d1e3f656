"""The grader on a generated room (tests/grade/room.py): every verdict, nothing lost, nothing left behind."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import psutil
import pytest

from tests.grade.room import build_room

SALT = 4321


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Dict[str, List[Tuple[str, str, str]]], str]:
    """The room, graded once by the real command: (folder, expected rows, what the command printed)."""
    folder = tmp_path_factory.mktemp("room")
    expected = build_room(folder)
    command = [sys.executable, "-m", "helpers.grade", str(folder), "--timeout", "120", "--cell-timeout", "20",
               "--memory", "1.5", "--salt", str(SALT), "--jobs", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder, expected, done.stdout


def _rows(folder: Path) -> List[Dict[str, str]]:
    with open(folder / "grades.csv", newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def test_every_verdict_is_the_expected_one(graded) -> None:
    folder, expected, _ = graded
    rows = _rows(folder)
    found = {(row["notebook"], row["exercise"]): row for row in rows}
    for notebook, verdicts in expected.items():
        for exercise, status, words in verdicts:
            row = found.get((notebook, exercise))
            assert row is not None, f"no row for {notebook} {exercise}"
            assert row["status"] == status, f"{notebook} {exercise}: {row}"
            assert words.lower() in row["message"].lower(), f"{notebook} {exercise}: {row['message']}"


def test_nothing_is_lost_and_nothing_extra(graded) -> None:
    folder, expected, _ = graded
    rows = _rows(folder)
    assert list(rows[0]) == ["notebook", "exercise", "status", "message"]
    assert {row["notebook"] for row in rows} == set(expected)
    assert {row["status"] for row in rows} <= {"passed", "failed", "not attempted", "error"}


def test_the_fake_is_caught_by_fresh_inputs_and_its_own_check_passed_it(graded) -> None:
    folder, _, printed = graded
    fake = next(row for row in _rows(folder) if row["notebook"] == "fakes/00_start_here.ipynb")
    assert fake["status"] == "failed" and "own check passed" in fake["message"]
    assert "1 exposed by fresh inputs" in printed


def test_no_write_outside_and_no_process_left(graded) -> None:
    folder, _, printed = graded
    assert (folder / "victim.txt").read_text(encoding="utf-8") == "the teacher's file"
    assert "Warning" not in printed
    sleepers = [process for process in psutil.process_iter(["cmdline"]) if process.info["cmdline"] == ["sleep", "600"]]
    assert not sleepers
    written = {path.name for path in folder.iterdir() if path.is_file()}
    assert written == {"victim.txt", "grades.csv", "grades.html"}


def test_progress_and_summary_lines(graded) -> None:
    folder, expected, printed = graded
    lines = printed.strip().splitlines()
    assert lines[0].startswith(f"Grading {len(expected)} notebooks") and f"seed salt {SALT}" in lines[0]
    for notebook in expected:
        assert any(line.rstrip().split("  ")[-1].startswith(notebook) for line in lines), notebook
    rows = _rows(folder)
    counts = {status: sum(row["status"] == status for row in rows) for status in ("passed", "failed", "error")}
    summary = next(line for line in lines if line.startswith("Graded "))
    assert f"{counts['passed']} passed, {counts['failed']} failed" in summary and f"{counts['error']} error" in summary


def test_the_html_report(graded) -> None:
    folder, _, _ = graded
    page = (folder / "grades.html").read_text(encoding="utf-8")
    for learner in ("solved", "untouched", "partly", "fakes", "loops"):
        assert f"<th>{learner}</th>" in page
    for mark, status in (("✓", "passed"), ("✗", "failed"), ("…", "not attempted"), ("!", "error")):
        assert f"<b>{mark}</b> {status}" in page
    assert "What the room got wrong, per exercise" in page and "Files not graded" in page
    assert "<b>1 of 7</b> answers checked" in page  # head_weight_grad: 5 passed, the wrong one and the fake failed
    assert "Notebooks stopped or not graded" in page and "loops/00_start_here.ipynb: Stopped" in page
    assert "<th>broken</th>" not in page  # a file with no course exercise is listed below, not in the table

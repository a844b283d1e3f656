"""The grader's parts on their own: recognising files, leaving checks out, memory, work folders, the report."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from helpers.grade import workdirs
from helpers.grade.cells import without_checks
from helpers.grade.processes import TreeWatch, kill_tree, process_memory, tree_memory
from helpers.grade.report import clean_text, diagnoses, diagnosis_of, summary_line, write_csv, write_html
from helpers.grade.rows import Row
from helpers.grade.submissions import MAX_NOTEBOOK_BYTES, exercise_marker, read_folder
from tests.paths import ROOT


def test_check_statements_are_left_out_line_for_line() -> None:
    source = ('from helpers import exercises\n\nexercises.check("a",\n    answer)\n'
              'feedback = exercises.evaluate("a", f)\nhelpers.exercises.hint("a")\nprint(1)')
    kept, removed = without_checks(source)
    assert removed == 2 and len(kept.splitlines()) == len(source.splitlines())
    assert "exercises.check" not in kept and "helpers.exercises.hint" not in kept
    assert "feedback = exercises.evaluate" in kept and "print(1)" in kept  # an assignment's name may be used later
    assert without_checks("%%time\nexercises.check('a', b)") == ("%%time\nexercises.check('a', b)", 0)


def test_files_are_recognised_whatever_their_name_or_format(tmp_path: Path) -> None:
    solved = nbformat.read(str(ROOT / "solutions" / "04_whose_gradient.ipynb"), as_version=4)
    student = nbformat.read(str(ROOT / "notebooks" / "04_whose_gradient.ipynb"), as_version=4)
    for name, node in (("a/04_whose_gradient.ipynb", solved), ("b/homework.ipynb", solved),
                       ("c/04_whose_gradient.ipynb", student), ("d/04_whose_gradient.ipynb", student)):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(node, str(tmp_path / name))
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "00_start_here.ipynb").write_text(json.dumps(nbformat.convert(solved, 3)))
    (tmp_path / "f.ipynb").write_text("not json")
    nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "alice_06_bug_clinic.ipynb"))
    found = {submission.name: submission for submission in read_folder(tmp_path)}
    assert found["a/04_whose_gradient.ipynb"].notebook == "04_whose_gradient"
    assert found["a/04_whose_gradient.ipynb"].learner == "a"
    assert any("the same code as b/homework.ipynb" in note for note in found["a/04_whose_gradient.ipynb"].notes)
    assert any("renamed" in note for note in found["b/homework.ipynb"].notes)
    assert found["c/04_whose_gradient.ipynb"].notes == []  # untouched copies are alike by nature: not duplicates
    assert any("nbformat 3" in note for note in found["e/00_start_here.ipynb"].notes)
    assert found["e/00_start_here.ipynb"].notebook == "04_whose_gradient"  # its cells say so, not its name
    assert found["f.ipynb"].problem.startswith("unreadable")
    by_name = found["alice_06_bug_clinic.ipynb"]  # no exercise cell left: known by its name, all not attempted
    assert by_name.notebook == "06_bug_clinic" and by_name.found_ids == [] and by_name.learner == "alice"


def test_diagnoses_are_counted_most_common_first() -> None:
    rows = [Row("a.ipynb", "x", "failed", "M1 received the gradient of L1 + L2. More."),
            Row("b.ipynb", "x", "failed", "M1 received the gradient of L1 + L2. Other words."),
            Row("c.ipynb", "x", "failed", "Differs by up to 0.5. Check."),
            Row("d.ipynb", "x", "failed", "Differs by up to 0.25. Check. (Note: renamed.)"),
            Row("e.ipynb", "x", "failed", "Your step raised a NameError."),
            Row("f.ipynb", "x", "passed", "Right."), Row("g.ipynb", "x", "not attempted", "Still the stub.")]
    found = diagnoses(rows)["x"]
    assert [count for count, _, _ in found] == [2, 2, 1] and all(graded == 6 for _, graded, _ in found)
    assert found[0][2] == "Differs by up to 0.5." and found[1][2] == "M1 received the gradient of L1 + L2."
    assert diagnosis_of("Fresh inputs exposed it: x, show that it is wrong. The real one. More.") == "The real one."
    assert summary_line(rows, 7, 12.3) == "Graded 7 notebooks in 12 s: 1 passed, 5 failed, 1 not attempted, 0 error."


HOSTILE = ('=HYPERLINK("x")', "+1", "-2", "@SUM(A1)", "\x1b[2Jwiped", "bell\x07", "\rback", "\tlead",
           " =spaced", "\x1b]0;title\x07osc", "\u202eright-to-left", "two\nlines", "not utf-8 \udcff")


def test_reports_write_no_formula_and_no_control_character(tmp_path: Path) -> None:
    rows = [Row(name, name, "failed", f"{name} message", learner=name) for name in HOSTILE]
    write_csv(rows, tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as file:
        cells = [cell for line in list(csv.reader(file))[1:] for cell in line]
    assert len(cells) == 4 * len(HOSTILE)
    for cell in cells:
        assert not cell.lstrip().startswith(("=", "+", "-", "@", "\t", "\r")), cell
        assert not any(ord(char) < 32 or 0x7f <= ord(char) <= 0x9f for char in cell), repr(cell)
    assert cells[0] == cells[1] == "\'=HYPERLINK(\"x\")" and cells[4] == "'+1" and cells[8] == "'-2"
    assert "'@SUM(A1)" in cells and "wiped" in cells and "' lead" in cells and "' =spaced" in cells
    assert "two lines message" in cells and "not utf-8 \ufffd message" in cells
    write_html(rows, tmp_path / "grades.html", "Graded \x1b[31m1\x07", ["\x1b[2Jwarning"])
    page = (tmp_path / "grades.html").read_text(encoding="utf-8")
    assert not any(char in page for char in "\x1b\x07\r\u202e") and "wiped" in page
    assert "<th>=HYPERLINK(&quot;x&quot;)</th>" in page  # escaped, and no quote mark: HTML has no formulas
    assert clean_text("\x1b[1;31mred\x1b[0m \x9b2J\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x00end") == "red link end"
    assert clean_text("a\r\nb\tc") == "a b c"


def _notebook(cells: object) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})


def test_a_folder_of_broken_files_is_read_to_the_end(tmp_path: Path) -> None:
    folder, outside = tmp_path / "room", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    good = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("#Exercise :  Head_Weight_Grad\nx = 1")])
    nbformat.write(good, str(outside / "00_start_here.ipynb"))
    nbformat.write(good, str(folder / "good_00_start_here.ipynb"))
    code = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    broken = {"no_source": [code], "cells_dict": {"a": 1}, "source_int": [dict(code, source=5)],
              "cell_string": ["print(1)"], "source_list_of_ints": [dict(code, source=[1, 2])],
              "no_cell_type": [{"source": "x", "metadata": {}}], "lone_surrogate": [dict(code, source="\ud800")]}
    for name, cells in broken.items():
        (folder / f"{name}.ipynb").write_text(_notebook(cells), encoding="utf-8")
    (folder / "metadata_list.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": [],
                                                            "cells": []}))
    (folder / "deep.ipynb").write_text("[" * 100000 + "]" * 100000)
    with open(folder / "huge.ipynb", "wb") as file:
        file.truncate(50 * 2**20)
    (folder / "folder.ipynb").mkdir()
    (folder / "link_out.ipynb").symlink_to(outside / "00_start_here.ipynb")
    (folder / "link_dir").symlink_to(outside)
    (folder / "link_in.ipynb").symlink_to(folder / "good_00_start_here.ipynb")
    (folder / "dangling.ipynb").symlink_to(folder / "nothing")
    os.mkfifo(folder / "pipe.ipynb")
    found = {submission.name: submission for submission in read_folder(folder)}
    assert found["good_00_start_here.ipynb"].problem is None
    assert found["good_00_start_here.ipynb"].found_ids == ["head_weight_grad"]
    assert found["link_in.ipynb"].problem is None  # a link inside the folder is read
    assert "outside the folder: not followed" in found["link_out.ipynb"].problem
    assert "outside the folder: not followed" in found["link_dir"].problem
    assert "which does not exist" in found["dangling.ipynb"].problem
    assert found["folder.ipynb"].problem == "not a notebook file: a folder"
    assert found["pipe.ipynb"].problem == "not a notebook file: a named pipe"
    assert found["huge.ipynb"].problem.startswith("too big") and MAX_NOTEBOOK_BYTES < 50 * 2**20
    assert "code cell 1 has no source" in found["no_source.ipynb"].problem
    assert "source that is not text" in found["source_int.ipynb"].problem
    assert "cell 1 has no cell type" in found["no_cell_type.ipynb"].problem
    for name in ("cells_dict.ipynb", "cell_string.ipynb", "metadata_list.ipynb", "source_list_of_ints.ipynb",
                 "deep.ipynb"):
        assert found[name].problem and found[name].node is None, name
    assert found["lone_surrogate.ipynb"].problem.startswith("not a course notebook")  # read; recognised as nothing
    assert not any(submission.name.startswith("link_dir/") for submission in found.values())


def test_the_exercise_marker_is_known_in_any_case_and_spacing() -> None:
    for line in ("# EXERCISE: head_weight_grad", "# Exercise: head_weight_grad", "#EXERCISE:head_weight_grad",
                 "  #  exercise :\thead_weight_grad  ", "\n\n# EXERCISE: HEAD_WEIGHT_GRAD\nrest"):
        assert exercise_marker(line + "\ndef f(): pass") == "head_weight_grad", line
    for source in ("x = 1\n# EXERCISE: head_weight_grad", "# exercises: a", "# EXERCISE head_weight_grad", ""):
        assert exercise_marker(source) is None, source


BIG_PARENT = """
import os, sys, time
data = b"x" * (200 * 2**20)  # every page written: resident in the parent, shared with the children
for _ in range(10):
    if os.fork() == 0:
        time.sleep(120)
        os._exit(0)
print("ready", flush=True)
time.sleep(120)
"""


def test_the_memory_of_forked_children_counts_once_and_the_tree_is_watched_from_outside() -> None:
    parent = subprocess.Popen([sys.executable, "-c", BIG_PARENT], stdout=subprocess.PIPE, text=True)
    sibling = subprocess.Popen(["sleep", "30"])  # another child of this process: never reaped by kill_tree(root)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        root = psutil.Process(parent.pid)
        children = root.children(recursive=True)
        assert len(children) == 10
        own = root.memory_info().rss
        rss_total = own + sum(child.memory_info().rss for child in children)
        total, count = tree_memory(parent.pid)
        assert count == 10 and own > 200 * 2**20 and rss_total > 10 * own
        assert total < 2 * own, (total >> 20, own >> 20)
        assert process_memory(root) <= own
        reasons: list = []
        watch = TreeWatch(2 * own, 20, reasons.append, interval_s=0.05, root_pid=parent.pid)
        watch.start()
        time.sleep(0.5)
        watch.stop()
        watch.join(5)
        # The 200 MiB the parent wrote count once; its libraries' pages, shared with processes outside the tree, count
        # only in part (so the tree can weigh less than the parent's RSS).
        assert reasons == [] and 200 * 2**20 < watch.peak_bytes < 2 * own
        watch = TreeWatch(2 * own, 5, reasons.append, interval_s=0.05, root_pid=parent.pid)
        watch.start()
        watch.join(5)
        assert reasons == ["it started 10 processes at once (the limit is 5)"]
        watch = TreeWatch(own // 2, 20, reasons.append, interval_s=0.05, root_pid=parent.pid)
        watch.start()
        watch.join(5)
        assert reasons[1].startswith("it used 2") and reasons[1].endswith(f"(the limit is {own >> 21} MiB)")
        leftovers = kill_tree(root_pid=parent.pid)
        assert len(leftovers) == 10 and all("-c" in line for line in leftovers)
        assert all(child.status() == psutil.STATUS_ZOMBIE for child in children if child.is_running())
        assert parent.poll() is None and sibling.poll() is None  # the root and the sibling go on
        assert tree_memory(parent.pid)[1] == 0
    finally:
        for process in (parent, sibling):
            process.kill()
            process.wait(10)
    assert sibling.returncode == -9  # still this test's to reap: kill_tree never took it
    assert kill_tree(root_pid=parent.pid) == []  # a root that has ended: nothing to do


def _stale_owner(folder: Path, pid: int, start_time: float) -> None:
    folder.mkdir()
    identity = workdirs._identity()
    (folder / "owner.json").write_text(json.dumps(dict(identity, pid=pid, start_time=start_time)))


def test_work_folders_of_ended_graders_are_removed_and_no_other(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parent = tmp_path / "course-grade"
    assert workdirs.default_parent() == parent and workdirs.clean_stale() == []
    mine = workdirs.new_run_folder()
    owner = json.loads((mine / "owner.json").read_text())
    assert mine.parent == parent and owner["pid"] == os.getpid()
    assert mine.name == f"run-{os.getpid()}-{int(psutil.Process().create_time())}"
    assert owner["start_time"] == psutil.Process().create_time() and (parent.stat().st_mode & 0o777) == 0o700
    second = workdirs.new_run_folder()
    assert second != mine and second.name.startswith(mine.name + "-")
    ended = subprocess.Popen(["true"])
    ended.wait()
    living = subprocess.Popen(["sleep", "30"])
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    try:
        _stale_owner(parent / f"run-{ended.pid}-1", ended.pid, 1.0)
        (parent / f"run-{ended.pid}-1" / "link").symlink_to(outside)  # removed with its folder, not followed
        _stale_owner(parent / f"run-{os.getpid()}-12345", os.getpid(), 12345.0)  # this pid, another start: reused
        (parent / f"run-{ended.pid}-7").mkdir()  # no owner.json: judged by its name
        _stale_owner(parent / f"run-{living.pid}-9", living.pid, psutil.Process(living.pid).create_time())
        _stale_owner(parent / "run-1-2", ended.pid, 1.0)  # the name is not the owner: owner.json is
        (parent / "run-1-2" / "owner.json").write_text(json.dumps({"pid": ended.pid, "start_time": 1.0,
                                                                   "host": "another-machine"}))
        (parent / f"run-{ended.pid}-3").symlink_to(outside)  # a link named like a run: left alone
        (parent / "other").mkdir()
        removed = workdirs.clean_stale()
        assert sorted(path.name for path in removed) == sorted([f"run-{ended.pid}-1", f"run-{os.getpid()}-12345",
                                                                f"run-{ended.pid}-7"])
        assert all(not path.exists() for path in removed)
        left = sorted(path.name for path in parent.iterdir())
        assert left == sorted([mine.name, second.name, f"run-{living.pid}-9", "run-1-2", f"run-{ended.pid}-3",
                               "other"])
        assert (outside / "keep.txt").read_text() == "keep"
        assert workdirs.clean_stale() == []
    finally:
        living.kill()
        living.wait()
    assert [path.name for path in workdirs.clean_stale()] == [f"run-{living.pid}-9"]


def test_a_parent_folder_that_is_a_link_or_not_ours_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "run-1-1").mkdir()
    (tmp_path / "link").symlink_to(target)
    for call in (workdirs.new_run_folder, workdirs.clean_stale):
        with pytest.raises(workdirs.WorkdirError, match="symbolic link"):
            call(tmp_path / "link")
    assert [path.name for path in target.iterdir()] == ["run-1-1"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(workdirs.WorkdirError, match="not a folder"):
        workdirs.clean_stale(tmp_path / "file")
    assert workdirs.clean_stale(tmp_path / "absent") == [] and not (tmp_path / "absent").exists()

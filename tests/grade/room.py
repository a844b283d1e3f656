"""A generated room of collected notebooks, each made to end one way, with the verdict the grader must give it.

``build_room(folder, home, outside)`` writes the notebooks (edited copies of the course's own: honest ones, and
attacks on the grader) and returns a ``Room``: per file, the expected ``(exercise, status, words the message must
hold)``, the files that must keep their bytes, and the paths that must not exist after the run. ``home`` is the
grader's HOME (it holds a file of the teacher's); ``outside`` an existing folder beside the room that attacks write
into.

The attacks are numbered as in the task that asked for them: (1)-(8) wrong answers (``torch.zeros(1, 64)``) that
try to pass; (9)-(11) one notebook deciding for others; (12)-(14) the run itself; (15)-(17) writes outside;
(18)-(21) smaller ones (21 is checked by the test, on the run).
"""
from __future__ import annotations

import copy
import json
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple

import nbformat

from tests.paths import ROOT

Expected = List[Tuple[str, str, str]]
# The learners whose notebook never ends: only a time limit stops them (a cell that loops; a run stopped by SIGSTOP).
NEVER_ENDING = ("loops", "attack12_stopper")
# A solved notebook graded in their room, beside the stopped run and after the looping one: no stop may touch it.
NEIGHBOUR = "zz_after_stops"

WRONG_ANSWER = '''# EXERCISE: head_weight_grad
def head_weight_grad(model, x, target):
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    return model[-1].weight.grad
'''

# Right, in a style a learner may write: an object with __call__, a progress bar, a partial (no false alarm).
STYLED_ANSWER = '''# EXERCISE: head_weight_grad
import functools
from tqdm.auto import tqdm

class HeadGrad:
    def __init__(self, power):
        self.power, self.calls = power, 0

    def __call__(self, model, x, target):
        self.calls += 1
        for _ in tqdm(range(1), leave=False):
            loss = ((model(x) - target) ** self.power).mean()
        return torch.autograd.grad(loss, model[-1].weight)[0]

head_weight_grad = functools.partial(HeadGrad(power=2))
'''

# Right only on the inputs the notebook's own check uses: it looks them up in a table it computed from the course's
# seeds, for the checker's own scenarios and for every situation the checking engine generates at salt 0. It also
# replaces exercises.check and torch.allclose, and its stored output claims a pass.
FAKE_ANSWER = '''# EXERCISE: head_weight_grad
import torch
from helpers import exercises
from helpers.course.exercises.engine.situations import generate
from helpers.course.lesson00_start_here.contract import CONTRACT
from helpers.course.models import make_model, make_regression_batch

def _key(model, x):
    return (round(float(model[-1].weight.sum()), 4), round(float(x.sum()), 4), len(list(model.parameters())))

def _grad(model, x, target):
    return torch.autograd.grad(((model(x) - target) ** 2).mean(), model[-1].weight)[0]

_table = {}
for _model in (make_model(seed=7), make_model(seed=8)):
    for _seed, _rows in ((7, 32), (8, 32), (9, 24)):
        _x, _target = make_regression_batch(seed=_seed, batch=_rows)
        _table[_key(_model, _x)] = _grad(_model, _x, _target)
for _situation in generate(CONTRACT.axes, CONTRACT.seed, CONTRACT.combinations):
    _world = CONTRACT.build(_situation)
    for _call in range(1, _situation["calls"] + 1):
        if _call > 1:
            _world.refill(_call)
        _model, _x, _target = _world.args
        _table[_key(_model, _x)] = _grad(_model, _x, _target)

def head_weight_grad(model, x, target):
    return _table.get(_key(model, x), torch.zeros(1, 64)).clone()

exercises.check = lambda *args, **kwargs: print("Correct - exercise head_weight_grad")
torch.allclose = lambda *args, **kwargs: True
'''


# ---------------------------------------------------------------------------------------------------------------
# Attacks. Each is a notebook made from solutions/00_start_here.ipynb with its exercise cell replaced or one cell
# inserted; the sources below are templates (``{name}`` filled in by build_room with paths the test knows).
# ---------------------------------------------------------------------------------------------------------------

# Wrong answers that try to pass: each returns torch.zeros(1, 64), then plays a trick.

# (1) torch.Tensor gains a method and loses its comparisons, in the kernel and, at each call, wherever the call runs.
TENSOR_PATCH = '''# EXERCISE: head_weight_grad
import torch

def _rig_torch():
    torch.Tensor.looks_right = lambda self, *args, **kwargs: True   # a new method
    torch.Tensor.allclose = lambda self, *args, **kwargs: True      # comparisons that always agree
    torch.Tensor.equal = lambda self, *args, **kwargs: True
    torch.allclose = lambda *args, **kwargs: True
    torch.equal = lambda *args, **kwargs: True

_rig_torch()

def head_weight_grad(model, x, target):
    _rig_torch()
    return torch.zeros(1, 64)
'''

# (2) The answer's __defaults__ widened after definition (every parameter gets one), and keyword defaults added.
WIDENED_DEFAULTS = '''# EXERCISE: head_weight_grad
import torch

def head_weight_grad(model, x, target):
    return torch.zeros(1, 64)

head_weight_grad.__defaults__ = (None, None, None)
head_weight_grad.__kwdefaults__ = {"passed": True}
'''

# (3) The returned tensor is zeros, but its instance attributes shadow detach/clone/cpu/...: whatever reads it
# through those methods sees the true gradient instead.
SHADOWED_DETACH = '''# EXERCISE: head_weight_grad
import torch

def head_weight_grad(model, x, target):
    right = torch.autograd.grad(((model(x) - target) ** 2).mean(), model[-1].weight)[0]
    grad = torch.zeros(1, 64)
    for name in ("detach", "clone", "cpu", "contiguous", "to", "numpy", "tolist", "float", "double"):
        setattr(grad, name, (lambda name: lambda *args, **kwargs: getattr(right, name)(*args, **kwargs))(name))
    return grad
'''

# (3b) The same, shaped like the head's weight: on every situation the records would then carry the true gradient.
SHADOWED_DETACH_SHAPED = SHADOWED_DETACH.replace("torch.zeros(1, 64)", "torch.zeros_like(model[-1].weight)")

# (4) The course's status enum rewritten: FAILED reads "passed" (in the kernel, and at each call).
ENUM_VALUE = '''# EXERCISE: head_weight_grad
import torch
from helpers.course.exercises.result import Status

def _rewrite_status():
    Status.FAILED._value_ = "passed"
    Status._value2member_map_["passed"] = Status.FAILED
    Status.NOT_ATTEMPTED._value_ = "passed"

_rewrite_status()

def head_weight_grad(model, x, target):
    _rewrite_status()
    return torch.zeros(1, 64)
'''

# (5) The answer is an object whose __reduce__ names a function that, when the answer is unpickled outside the
# kernel, patches the course's checkers there to find nothing wrong, then hands back the zeros answer.
REDUCE_PATCH = '''# EXERCISE: head_weight_grad
import torch

def _patch_checkers_then_answer():
    import helpers.course.exercises.engine.judge as judge
    from helpers import exercises
    judge.compare_calls = lambda *args, **kwargs: None
    judge.judge_records = lambda *args, **kwargs: None
    exercises.check = lambda *args, **kwargs: print("Correct - exercise head_weight_grad")
    return lambda model, x, target: torch.zeros(1, 64)

class HeadGrad:
    def __call__(self, model, x, target):
        return torch.zeros(1, 64)

    def __reduce__(self):
        return (_patch_checkers_then_answer, ())

head_weight_grad = HeadGrad()
'''

# (6) The notebook patches sys.modules["__main__"] and the grader's own modules, in the kernel and at each call.
GRADER_PATCH = '''# EXERCISE: head_weight_grad
import sys
import torch

def _patch_grader():
    import helpers.grade.cells, helpers.grade.grading, helpers.grade.report, helpers.grade.runner
    verdict = {"status": "passed", "message": "forged", "own_check_passed": True}
    helpers.grade.grading.judge_exercise = lambda *args, **kwargs: dict(verdict)
    helpers.grade.grading.STATUSES = ("passed",) * 4
    helpers.grade.report.csv_cell = lambda text: "passed"
    helpers.grade.cells.extraction_cell = lambda *args, **kwargs: "pass"
    main = sys.modules["__main__"]
    for name in ("judge_exercise", "_exercise_rows", "grade", "exercises"):
        setattr(main, name, lambda *args, **kwargs: dict(verdict))

_patch_grader()

def head_weight_grad(model, x, target):
    _patch_grader()
    return torch.zeros(1, 64)
'''

# (7) At its first call the answer writes well-formed fake frames and result lines to stdout, stderr, fd 1 and 2,
# and every writable descriptor in /proc/self/fd, then ends its process at once.
FAKE_FRAMES = '''# EXERCISE: head_weight_grad
import json, os, sys
import torch

def _forge_everywhere():
    claim = json.dumps({"exercise": "head_weight_grad", "status": "passed", "message": "forged"})
    forged = (f"records 10\\n0123456789result {len(claim)}\\n{claim}\\n"
              f"head_weight_grad,passed,forged\\n{claim}\\n").encode()
    print(forged.decode(), flush=True)
    print(forged.decode(), file=sys.stderr, flush=True)
    for name in os.listdir("/proc/self/fd"):
        try:
            os.write(int(name), forged)
        except (OSError, ValueError):
            pass

def head_weight_grad(model, x, target):
    _forge_everywhere()
    os._exit(0)
    return torch.zeros(1, 64)
'''

# (8) The returned tensor holds an object whose __del__, run whenever the tensor is let go, forges frames later.
LATE_FORGER = '''# EXERCISE: head_weight_grad
import json, os
import torch

class _Ghost:
    def __del__(self):
        claim = json.dumps({"exercise": "head_weight_grad", "status": "passed"})
        forged = f"records 10\\n0123456789result {len(claim)}\\n{claim}\\n".encode()
        for name in os.listdir("/proc/self/fd"):
            try:
                os.write(int(name), forged)
            except (OSError, ValueError):
                pass

def head_weight_grad(model, x, target):
    grad = torch.zeros(1, 64)
    grad.ghost = _Ghost()
    return grad
'''

# One notebook deciding for others.

# (9) Plants a helpers/ package in its working folder and (guessing the path) in the graded folder, then kills its
# parent processes and pid 1. Inserted before the (right) exercise cell.
POISONER = '''# Attack: plant a fake helpers package where the grader might import it, then kill the processes above
import os, pathlib, signal
FAKE = "raise SystemExit('the grader imported a planted helpers package')\\n"
for base in (pathlib.Path.cwd(), pathlib.Path({graded!r}), pathlib.Path({own!r})):
    for module in ("helpers/__init__.py", "helpers/grade/__init__.py", "helpers/grade/grading.py",
                   "helpers/course/__init__.py", "helpers/course/exercises/__init__.py"):
        try:
            (base / module).parent.mkdir(parents=True, exist_ok=True)
            (base / module).write_text(FAKE)
        except OSError:
            pass
parent = os.getppid()
with open(f"/proc/{{parent}}/stat") as stat:
    grandparent = int(stat.read().rsplit(")", 1)[1].split()[1])
for pid in (parent, grandparent, 1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
'''

# (10) Looks for other notebooks' private folders, job files and answers (and a classmate's notebook in the graded
# folder): if it finds any, it raises in its exercise cell (an error row), and it takes a classmate's answer where it
# can load one (a pass). Nothing found: its own zeros answer, failed.
SNOOPER = '''# EXERCISE: head_weight_grad
import glob, json, os, pathlib
import torch

def head_weight_grad(model, x, target):
    return torch.zeros(1, 64)

own = pathlib.Path.cwd().parent
found = [path for pattern in ("/tmp/**/JOB.json", "/tmp/**/answers.json", str(own.parent / "*" / "*.json"),
                              str(own.parent / "*" / "work" / "*.ipynb"), str(own.parent.parent / "*" / "*" / "*.json"))
         for path in glob.glob(pattern, recursive=True) if not path.startswith(str(own) + os.sep)]
for classmate in ({classmate!r},):
    if os.path.exists(classmate):
        found.append(classmate)
        cell = next(c for c in json.load(open(classmate))["cells"] if "".join(c["source"]).startswith("# EXERCISE"))
        exec("".join(cell["source"]))
assert not found, f"found other notebooks' files: {{found[:5]}}"
'''

# (11) Tries to write a classmate's notebook, the teacher's victim.txt and a file in the HOME of the test, by path,
# through a hard link and through a symbolic link. Inserted after its (zeros) exercise cell.
LINK_WRITER = '''# Attack: write other people's files through links and paths
import os
for number, target in enumerate(({classmate!r}, {victim!r}, {home_file!r})):
    for how in ("path", "hard link", "symbolic link"):
        try:
            if how == "hard link":
                os.link(target, f"hard{{number}}")
                target = f"hard{{number}}"
            elif how == "symbolic link":
                os.symlink(target, f"soft{{number}}")
                target = f"soft{{number}}"
            with open(target, "a") as file:
                file.write("overwritten by a classmate")
        except OSError:
            pass
'''

# The run itself.

# (12) Stops its parent and every process it can see (itself last). Inserted before the exercise cell.
STOPPER = '''# Attack: SIGSTOP the grader's processes
import os, signal
me = os.getpid()
for pid in [os.getppid()] + sorted(int(name) for name in os.listdir("/proc") if name.isdigit()):
    if pid != me:
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            pass
os.kill(me, signal.SIGSTOP)
'''

# (13) Kills every process it can see (itself last). Inserted before the exercise cell.
KILLER = '''# Attack: SIGKILL every process in sight
import os, signal
for pid in sorted(int(name) for name in os.listdir("/proc") if name.isdigit()):
    if pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
os.kill(os.getpid(), signal.SIGKILL)
'''

# Writes outside. Each inserted after the (right) exercise cell.

# (15) torch.save to a path outside: a Python-level write, refused and reported.
TORCH_SAVE = '''# Attack: torch.save outside the folder
import torch
torch.save(torch.ones(3), {path!r})
'''

# (16) A shell's write outside: not Python, so not seen by the write guard; it fails in the sandbox, and the cell
# raises on it (the exercise cell before it still counts).
SHELL_WRITE = '''# Attack: a shell writes outside the folder
import os
status = os.system("echo x > {path}")
assert status == 0, f"the shell could not write: {{status}}"
'''

# (17) 64 MiB into /dev/shm: private to the sandbox, gone with it.
SHM_WRITE = '''# Attack: fill /dev/shm
with open({path!r}, "wb") as file:
    for _ in range(64):
        file.write(b"x" * 2**20)
'''

# Smaller.

# (18) The exercise marker in another case, with the right answer.
OTHER_CASE = '''# Exercise: head_weight_grad
def head_weight_grad(model, x, target):
    loss = ((model(x) - target) ** 2).mean()
    (grad,) = torch.autograd.grad(loss, model[-1].weight)
    return grad
'''

# A cell that never ends. The grader's limit is on a cell's time, not its CPU; the loop waits rather than spins, so
# that it takes no core from the rest of the test suite while the limit (40 s) runs out.
LOOP = "import time\nwhile True:  # a loop whose condition never changes\n    time.sleep(0.2)\n"

# (19) 20 forked children, each sleeping 5 s, of a kernel holding 300 MiB of touched memory: the pages they share
# count once. Inserted after the (right) exercise cell; it waits for its children.
FORKS = '''# 20 children sharing 300 MiB
import os, time
held = bytearray(b"\\x01") * (300 * 2**20)   # every page written
children = []
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
'''


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def _exercise_index(node: nbformat.NotebookNode, exercise_id: str) -> int:
    return next(index for index, cell in enumerate(node.cells)
                if cell.cell_type == "code" and cell.source.startswith(f"# EXERCISE: {exercise_id}"))


def _with_cell(node: nbformat.NotebookNode, index: int, source: str) -> nbformat.NotebookNode:
    edited = copy.deepcopy(node)
    edited.cells.insert(index, nbformat.v4.new_code_cell(source))
    return edited


def _write(node: nbformat.NotebookNode, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(node, str(path))


@dataclass
class Room:
    """What build_room wrote, and what the run must leave as it is."""

    expected: Dict[str, Expected]
    kept: List[Path] = field(default_factory=list)  # files whose bytes must not change
    absent: List[Path] = field(default_factory=list)  # paths that must not exist after the run


def _with_answer(node: nbformat.NotebookNode, index: int, source: str) -> nbformat.NotebookNode:
    edited = copy.deepcopy(node)
    edited.cells[index].source = source
    return edited


def _honest(folder: Path, solved: nbformat.NotebookNode, at: int, victim: Path) -> Dict[str, Expected]:
    """The honest notebooks (and the usual accidents), whose verdicts no attack may change."""
    student = _read(ROOT / "notebooks" / "00_start_here.ipynb")
    expected: Dict[str, Expected] = {}

    _write(solved, folder / "solved" / "00_start_here.ipynb")
    expected["solved/00_start_here.ipynb"] = [("head_weight_grad", "passed", "Matched the reference")]

    _write(student, folder / "untouched" / "00_start_here.ipynb")
    expected["untouched/00_start_here.ipynb"] = [("head_weight_grad", "not attempted", "stub")]

    wrong = copy.deepcopy(solved)
    wrong.cells[at].source = WRONG_ANSWER
    _write(wrong, folder / "wrong" / "00_start_here.ipynb")
    expected["wrong/00_start_here.ipynb"] = [("head_weight_grad", "failed", ".grad")]

    styled = copy.deepcopy(solved)
    styled.cells[at].source = STYLED_ANSWER
    _write(styled, folder / "styled" / "00_start_here.ipynb")
    expected["styled/00_start_here.ipynb"] = [("head_weight_grad", "passed", "Matched the reference")]

    clinic = _read(ROOT / "notebooks" / "06_bug_clinic.ipynb")
    clinic.cells[_exercise_index(clinic, "gan_step")].source = \
        _read(ROOT / "solutions" / "06_bug_clinic.ipynb").cells[_exercise_index(clinic, "gan_step")].source
    _write(clinic, folder / "partly" / "06_bug_clinic.ipynb")
    expected["partly/06_bug_clinic.ipynb"] = [("gan_step", "passed", ""), ("actor_critic_step", "not attempted", ""),
                                              ("mutual_step", "not attempted", "")]

    _write(_with_cell(solved, at, "result = undefined_name + 1"), folder / "raises" / "00_start_here.ipynb")
    expected["raises/00_start_here.ipynb"] = [("head_weight_grad", "error", "NameError")]

    _write(_with_cell(solved, at + 1, LOOP), folder / "loops" / "00_start_here.ipynb")
    expected["loops/00_start_here.ipynb"] = [("head_weight_grad", "error", "time limit for one cell")]

    fake = copy.deepcopy(solved)
    fake.cells[at].source = FAKE_ANSWER
    for cell in fake.cells:  # outputs edited to show a pass
        if cell.cell_type == "code" and 'exercises.check("head_weight_grad"' in cell.source:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Correct - exercise head_weight_grad")]
    _write(fake, folder / "fakes" / "00_start_here.ipynb")
    expected["fakes/00_start_here.ipynb"] = [("head_weight_grad", "failed", "Fresh inputs exposed it")]

    hog = "import torch\nhoard = [torch.ones(2 ** 27) for _ in range(200)]  # 100 GiB asked for, 512 MiB at a time"
    _write(_with_cell(solved, at, hog), folder / "memory" / "00_start_here.ipynb")
    expected["memory/00_start_here.ipynb"] = [("head_weight_grad", "error", "memory")]

    writes = f"with open({str(victim)!r}, 'w') as file:\n    file.write('overwritten')"
    _write(_with_cell(solved, at + 1, writes), folder / "writes" / "00_start_here.ipynb")
    expected["writes/00_start_here.ipynb"] = [("head_weight_grad", "error", "outside its own folder")]

    leftover = ("import subprocess\nsleeper = subprocess.Popen(['sleep', '600'], start_new_session=True)")
    _write(_with_cell(solved, at + 1, leftover), folder / "leftover" / "00_start_here.ipynb")
    expected["leftover/00_start_here.ipynb"] = [("head_weight_grad", "passed", "left 1 process")]

    _write(solved, folder / "renamed" / "my homework.ipynb")
    expected["renamed/my homework.ipynb"] = [("head_weight_grad", "passed", "renamed")]

    old = nbformat.convert(copy.deepcopy(solved), 3)
    (folder / "old").mkdir(parents=True)
    (folder / "old" / "00_start_here.ipynb").write_text(json.dumps(old), encoding="utf-8")
    expected["old/00_start_here.ipynb"] = [("head_weight_grad", "passed", "nbformat 3")]

    (folder / "broken").mkdir()
    (folder / "broken" / "04_whose_gradient.ipynb").write_text('{"cells": [', encoding="utf-8")
    expected["broken/04_whose_gradient.ipynb"] = [("", "error", "Unreadable")]

    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('another course')")])
    _write(other, folder / "other" / "analysis.ipynb")
    expected["other/analysis.ipynb"] = [("", "error", "not a course notebook")]

    return expected


# The wrong answer the attacks build on.
ZEROS_ANSWER = '''# EXERCISE: head_weight_grad
import torch

def head_weight_grad(model, x, target):
    return torch.zeros(1, 64)
'''


def _attacks(folder: Path, home: Path, outside: Path, solved: nbformat.NotebookNode, at: int, victim: Path,
             room: Room) -> None:
    """The attacks, each a notebook of its own (see the sources above)."""
    expected = room.expected
    for name, source in (("attack01_tensor_patch", TENSOR_PATCH), ("attack02_widened_defaults", WIDENED_DEFAULTS),
                         ("attack03_shadowed_detach", SHADOWED_DETACH),
                         ("attack03b_shadowed_detach_shaped", SHADOWED_DETACH_SHAPED),
                         ("attack04_enum_value", ENUM_VALUE),
                         ("attack05_reduce_patch", REDUCE_PATCH), ("attack06_grader_patch", GRADER_PATCH),
                         ("attack07_fake_frames", FAKE_FRAMES), ("attack08_late_forger", LATE_FORGER)):
        _write(_with_answer(solved, at, source), folder / name / "00_start_here.ipynb")
        expected[f"{name}/00_start_here.ipynb"] = [("head_weight_grad", "failed", "")]

    # (9): its own run ends with its runner; the untouched stub graded after it (and every later one) is unaffected.
    poisoner = POISONER.format(graded=str(folder), own=str(folder / "attack09_poisoner"))
    _write(_with_cell(solved, at, poisoner), folder / "attack09_poisoner" / "00_start_here.ipynb")
    expected["attack09_poisoner/00_start_here.ipynb"] = [("head_weight_grad", "error", "")]
    _write(_read(ROOT / "notebooks" / "00_start_here.ipynb"), folder / "zz_untouched" / "00_start_here.ipynb")
    expected["zz_untouched/00_start_here.ipynb"] = [("head_weight_grad", "not attempted", "stub")]
    room.absent += [folder / "helpers", folder / "attack09_poisoner" / "helpers"]

    # (10): finds nothing of anyone else's; graded on its own zeros answer.
    classmate = folder / "solved" / "00_start_here.ipynb"
    _write(_with_answer(solved, at, SNOOPER.format(classmate=str(classmate))),
           folder / "attack10_snooper" / "00_start_here.ipynb")
    expected["attack10_snooper/00_start_here.ipynb"] = [("head_weight_grad", "failed", "")]

    # (11): a Python-level write outside: refused, reported; the classmate's notebook and victim.txt unchanged.
    home_file = home / "notes.txt"
    links = LINK_WRITER.format(classmate=str(classmate), victim=str(victim), home_file=str(home_file))
    _write(_with_cell(_with_answer(solved, at, ZEROS_ANSWER),
                      at + 1, links), folder / "attack11_link_writer" / "00_start_here.ipynb")
    expected["attack11_link_writer/00_start_here.ipynb"] = [("head_weight_grad", "error", "outside its own folder")]
    room.kept += [classmate, victim, home_file]
    room.absent += [outside / "hard0"]

    # (12): stopped from outside at the time limit; (13): its runner is gone, nothing of it is left.
    _write(_with_cell(solved, at, STOPPER), folder / "attack12_stopper" / "00_start_here.ipynb")
    expected["attack12_stopper/00_start_here.ipynb"] = [("head_weight_grad", "error", "past the time limit (")]
    _write(_with_cell(solved, at, KILLER), folder / "attack13_killer" / "00_start_here.ipynb")
    expected["attack13_killer/00_start_here.ipynb"] = [("head_weight_grad", "error", "")]

    # (14): a code cell without "source", written by hand; the folder's other notebook is still graded.
    (folder / "attack14_no_source").mkdir(parents=True)
    sourceless = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                  "cells": [{"cell_type": "code", "id": "a1", "metadata": {}, "outputs": [], "execution_count": None,
                             "source": "# EXERCISE: no_mutation_step\n"},
                            {"cell_type": "code", "id": "a2", "metadata": {}, "outputs": [], "execution_count": None}]}
    (folder / "attack14_no_source" / "04_whose_gradient.ipynb").write_text(json.dumps(sourceless), encoding="utf-8")
    expected["attack14_no_source/04_whose_gradient.ipynb"] = [("", "error", "has no source")]
    _write(solved, folder / "attack14_no_source" / "00_start_here.ipynb")
    expected["attack14_no_source/00_start_here.ipynb"] = [("head_weight_grad", "passed", "Matched the reference")]

    # (15) torch.save and (16) a shell, writing outside: neither is a Python-level open (torch.save opens its file
    # in C++), so the write guard does not see them; both fail in the sandbox, so their cell raises after the
    # exercise cell (code cell 11), which still counts; (17) /dev/shm: the sandbox's own, gone with it.
    saved, echoed = outside / "saved.pt", outside / "echoed.txt"
    shm = Path("/dev/shm") / f"course-room-{uuid.uuid4().hex[:12]}"
    _write(_with_cell(solved, at + 1, TORCH_SAVE.format(path=str(saved))),
           folder / "attack15_torch_save" / "00_start_here.ipynb")
    expected["attack15_torch_save/00_start_here.ipynb"] = [("head_weight_grad", "passed", "stopped at code cell 12")]
    _write(_with_cell(solved, at + 1, SHELL_WRITE.format(path=str(echoed))),
           folder / "attack16_shell_write" / "00_start_here.ipynb")
    expected["attack16_shell_write/00_start_here.ipynb"] = [("head_weight_grad", "passed", "stopped at code cell 12")]
    _write(_with_cell(solved, at + 1, SHM_WRITE.format(path=str(shm))),
           folder / "attack17_shm_write" / "00_start_here.ipynb")
    expected["attack17_shm_write/00_start_here.ipynb"] = [("head_weight_grad", "passed", "Matched the reference")]
    room.absent += [saved, echoed, shm]

    # (18) the marker in another case; (19) forked children sharing their parent's memory: both right answers.
    _write(_with_answer(solved, at, OTHER_CASE), folder / "attack18_other_case" / "00_start_here.ipynb")
    expected["attack18_other_case/00_start_here.ipynb"] = [("head_weight_grad", "passed", "Matched the reference")]
    _write(_with_cell(solved, at + 1, FORKS), folder / "attack19_forks" / "00_start_here.ipynb")
    expected["attack19_forks/00_start_here.ipynb"] = [("head_weight_grad", "passed", "Matched the reference")]

    # (20) learner folders a spreadsheet would read as formulas.
    # ('=HYPERLINK("http://x")' cannot be one folder's name: its "//" makes two folders; the link is left out.)
    for learner in ('=HYPERLINK("x")', "+1"):
        _write(solved, folder / learner / "00_start_here.ipynb")
        expected[f"{learner}/00_start_here.ipynb"] = [("head_weight_grad", "passed", "Matched the reference")]


def build_room(folder: Path, home: Path, outside: Path) -> Room:
    """Write the room under ``folder`` (and the teacher's file in ``home``); what the run must give and keep."""
    solved = _read(ROOT / "solutions" / "00_start_here.ipynb")
    at = _exercise_index(solved, "head_weight_grad")
    victim = folder / "victim.txt"
    room = Room(_honest(folder, solved, at, victim))
    _attacks(folder, home, outside, solved, at, victim, room)
    victim.write_text("the teacher's file", encoding="utf-8")
    home.mkdir(parents=True, exist_ok=True)
    (home / "notes.txt").write_text("the teacher's notes", encoding="utf-8")
    return room


def split_off(room: Room, folder: Path, learners: Tuple[str, ...], into: Path) -> Room:
    """Move ``learners``' folders from the room at ``folder`` into a room of their own at ``into``: their
    notebooks and expected verdicts go with them (none of them keeps or must leave out a file)."""
    into.mkdir(parents=True, exist_ok=True)
    moved = {}
    for notebook in [name for name in room.expected if name.split("/")[0] in learners]:
        moved[notebook] = room.expected.pop(notebook)
    for learner in learners:
        shutil.move(str(folder / learner), str(into / learner))
    return Room(moved)


def add_neighbour(room: Room, folder: Path, learner: str = NEIGHBOUR) -> None:
    """Add ``learner``'s solved notebook 00 to the room at ``folder``, expected to pass."""
    _write(_read(ROOT / "solutions" / "00_start_here.ipynb"), folder / learner / "00_start_here.ipynb")
    room.expected[f"{learner}/00_start_here.ipynb"] = [("head_weight_grad", "passed", "Matched the reference")]

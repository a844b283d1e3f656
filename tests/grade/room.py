"""A generated room of collected notebooks, each made to end one way, with the verdict the grader must give it.

``build_room(folder)`` writes the notebooks (edited copies of the course's own) and returns, per file, the expected
``(exercise, status, words the message must hold)``.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Dict, List, Tuple

import nbformat

from tests.paths import ROOT

Expected = List[Tuple[str, str, str]]

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


def build_room(folder: Path) -> Dict[str, Expected]:
    """Write the room under ``folder``; each file's expected rows."""
    solved = _read(ROOT / "solutions" / "00_start_here.ipynb")
    student = _read(ROOT / "notebooks" / "00_start_here.ipynb")
    at = _exercise_index(solved, "head_weight_grad")
    victim = folder / "victim.txt"
    expected: Dict[str, Expected] = {}

    _write(solved, folder / "solved" / "00_start_here.ipynb")
    expected["solved/00_start_here.ipynb"] = [("head_weight_grad", "passed", "matches torch.autograd.grad")]

    _write(student, folder / "untouched" / "00_start_here.ipynb")
    expected["untouched/00_start_here.ipynb"] = [("head_weight_grad", "not attempted", "stub")]

    wrong = copy.deepcopy(solved)
    wrong.cells[at].source = WRONG_ANSWER
    _write(wrong, folder / "wrong" / "00_start_here.ipynb")
    expected["wrong/00_start_here.ipynb"] = [("head_weight_grad", "failed", ".grad")]

    styled = copy.deepcopy(solved)
    styled.cells[at].source = STYLED_ANSWER
    _write(styled, folder / "styled" / "00_start_here.ipynb")
    expected["styled/00_start_here.ipynb"] = [("head_weight_grad", "passed", "matches torch.autograd.grad")]

    clinic = _read(ROOT / "notebooks" / "06_bug_clinic.ipynb")
    clinic.cells[_exercise_index(clinic, "gan_step")].source = \
        _read(ROOT / "solutions" / "06_bug_clinic.ipynb").cells[_exercise_index(clinic, "gan_step")].source
    _write(clinic, folder / "partly" / "06_bug_clinic.ipynb")
    expected["partly/06_bug_clinic.ipynb"] = [("gan_step", "passed", ""), ("actor_critic_step", "not attempted", ""),
                                              ("mutual_step", "not attempted", "")]

    _write(_with_cell(solved, at, "result = undefined_name + 1"), folder / "raises" / "00_start_here.ipynb")
    expected["raises/00_start_here.ipynb"] = [("head_weight_grad", "error", "NameError")]

    _write(_with_cell(solved, at + 1, "while True:\n    pass"), folder / "loops" / "00_start_here.ipynb")
    expected["loops/00_start_here.ipynb"] = [("head_weight_grad", "error", "time limit")]

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

    victim.write_text("the teacher's file", encoding="utf-8")
    return expected

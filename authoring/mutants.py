"""Mutants of each exercise's solution, made by code from its source: the mistakes learners make, applied
mechanically, to measure whether a checker catches every one that changes what a caller can observe.

Each operator rewrites the solution cell's syntax tree (``ast``) and returns the new source, or None where it does
not apply (no ``.mean()`` to turn into a fixed batch size, no loop to cut short). ``mutant_function`` compiles the
result as the solution itself is compiled (``engine.contract.solution_function``).

    python -m authoring.mutants            # one benchmark line per exercise: mutants caught / mutants that matter
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch

FIXED_ROWS = 32  # what a mutant divides by: the course's notebook batch (helpers.course.models.BATCH)
_REDUCING_LOSSES = {"mse_loss", "cross_entropy", "binary_cross_entropy_with_logits", "binary_cross_entropy",
                    "nll_loss", "l1_loss", "smooth_l1_loss"}


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name)


def _statements(code: str) -> List[ast.stmt]:
    return ast.parse(code).body


def _arguments(function: ast.FunctionDef) -> str:
    return "[" + ", ".join(arg.arg for arg in function.args.args) + "]"


def _modules_of(arguments: str) -> str:
    """Source of an expression: every nn.Module among the arguments, and in lists among them."""
    return (f"[m for a in {arguments} for m in (a if isinstance(a, (list, tuple)) else [a]) "
            "if isinstance(m, torch.nn.Module)]")


def _parameters_of(arguments: str) -> str:
    """Source of an expression: every parameter among the arguments: of their modules, and in lists, tuples and
    dicts (``named_params``) among them."""
    return (f"[p for a in {arguments} for m in (list(a.values()) if isinstance(a, dict) else a "
            "if isinstance(a, (list, tuple)) else [a]) "
            "for p in (m.parameters() if isinstance(m, torch.nn.Module) else [m] "
            "if isinstance(m, torch.nn.Parameter) else [])]")


def _optimizers_of(arguments: str) -> str:
    return (f"[o for a in {arguments} for o in (a if isinstance(a, (list, tuple)) else [a]) "
            "if isinstance(o, torch.optim.Optimizer)]")


class _FixedBatch(ast.NodeTransformer):
    """``t.mean()`` -> ``t.sum() / 32``; a reducing loss without ``reduction=`` -> ``reduction="sum"`` then ``/ 32``;
    ``reduction="batchmean"`` -> ``"sum"`` then ``/ 32``."""

    def __init__(self) -> None:
        self.changed = False

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name == "mean" and isinstance(func, ast.Attribute) and not node.args and not node.keywords:
            self.changed = True
            summed = ast.Call(ast.Attribute(func.value, "sum", ast.Load()), [], [])
            return ast.BinOp(summed, ast.Div(), ast.Constant(FIXED_ROWS))
        reduction = next((k for k in node.keywords if k.arg == "reduction"), None)
        if name in _REDUCING_LOSSES and reduction is None or (
                reduction is not None and isinstance(reduction.value, ast.Constant)
                and reduction.value.value in ("mean", "batchmean")):
            self.changed = True
            keywords = [k for k in node.keywords if k.arg != "reduction"]
            keywords.append(ast.keyword("reduction", ast.Constant("sum")))
            return ast.BinOp(ast.Call(node.func, node.args, keywords), ast.Div(), ast.Constant(FIXED_ROWS))
        return node


def fixed_batch_size(tree: ast.Module, name: str) -> bool:
    transformer = _FixedBatch()
    transformer.visit(_function(tree, name))
    return transformer.changed


def _prepend(code: str) -> Callable[[ast.Module, str], bool]:
    def operator(tree: ast.Module, name: str) -> bool:
        function = _function(tree, name)
        function.body[_docstring_end(function):0] = _statements(code.format(**_sources(function)))
        return True
    return operator


def _sources(function: ast.FunctionDef) -> Dict[str, str]:
    arguments = _arguments(function)
    return {"modules": _modules_of(arguments), "optimizers": _optimizers_of(arguments),
            "parameters": _parameters_of(arguments)}


def _docstring_end(function: ast.FunctionDef) -> int:
    first = function.body[0]
    return 1 if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) else 0


class _BeforeReturns(ast.NodeTransformer):
    def __init__(self, code: str) -> None:
        self.code = code

    def visit_Return(self, node: ast.Return) -> List[ast.stmt]:
        value = node.value if node.value is not None else ast.Constant(None)
        keep = ast.Assign([ast.Name("_mutant_result", ast.Store())], value)
        return [keep, *_statements(self.code), ast.Return(ast.Name("_mutant_result", ast.Load()))]


def _append(code: str) -> Callable[[ast.Module, str], bool]:
    """Run ``code`` before every return, and at the end of the body."""
    def operator(tree: ast.Module, name: str) -> bool:
        function = _function(tree, name)
        text = code.format(**_sources(function))
        _BeforeReturns(text).visit(function)
        if not isinstance(function.body[-1], ast.Return):
            function.body.extend(_statements(text))
        return True
    return operator


class _DropZeroGrad(ast.NodeTransformer):
    def __init__(self) -> None:
        self.dropped = False

    def visit_Expr(self, node: ast.Expr) -> Optional[ast.AST]:
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "zero_grad":
            self.dropped = True
            return ast.Pass()
        return node


def zero_grad_at_the_end(tree: ast.Module, name: str) -> bool:
    dropper = _DropZeroGrad()
    dropper.visit(_function(tree, name))
    if not dropper.dropped:
        return False
    _append("for _o in {optimizers}:\n    _o.zero_grad()")(tree, name)
    return True


class _BoundedLoops(ast.NodeTransformer):
    def __init__(self) -> None:
        self.changed = False

    def visit_While(self, node: ast.While) -> List[ast.stmt]:
        self.generic_visit(node)
        self.changed = True
        node.body[0:0] = _statements("_mutant_steps += 1\nif _mutant_steps > 10:\n    break")
        return [*_statements("_mutant_steps = 0"), node]


def loop_cut_short(tree: ast.Module, name: str) -> bool:
    """Every ``while`` loop stops after 10 rounds (a walk with a depth limit)."""
    bounded = _BoundedLoops()
    bounded.visit(_function(tree, name))
    return bounded.changed


def cached_on_first_argument(tree: ast.Module, name: str) -> bool:
    """The function remembers its result by ``id()`` of its first argument."""
    function = _function(tree, name)
    function.name = "_mutant_inner"
    tree.body.extend(_statements(
        f"_mutant_cache = {{}}\n"
        f"def {name}(*args, **kwargs):\n"
        f"    key = id(args[0])\n"
        f"    if key not in _mutant_cache:\n"
        f"        _mutant_cache[key] = _mutant_inner(*args, **kwargs)\n"
        f"    return _mutant_cache[key]\n"))
    return True


class _Retype(ast.NodeTransformer):
    def __init__(self) -> None:
        self.changed = False

    def visit_Return(self, node: ast.Return) -> ast.Return:
        if node.value is None:
            return node
        self.changed = True
        return ast.Return(ast.Call(ast.Name("_mutant_retype", ast.Load()), [node.value], []))


def return_type_changed(tree: ast.Module, name: str) -> bool:
    """A set comes back as a list, a tuple as a list, a list as a tuple, a tensor as a one-element tuple."""
    retype = _Retype()
    retype.visit(_function(tree, name))
    if not retype.changed:
        return False
    tree.body[0:0] = _statements(
        "def _mutant_retype(value):\n"
        "    if isinstance(value, (set, frozenset)):\n        return sorted(value)\n"
        "    if isinstance(value, tuple):\n        return list(value)\n"
        "    if isinstance(value, list):\n        return tuple(value)\n"
        "    if isinstance(value, torch.Tensor):\n        return (value,)\n"
        "    return value\n")
    return True


OPERATORS: Dict[str, Callable[[ast.Module, str], bool]] = {
    "a fixed batch size": fixed_batch_size,
    ".train() added": _prepend("for _m in {modules}:\n    _m.train()"),
    ".eval() added": _prepend("for _m in {modules}:\n    _m.eval()"),
    ".grad restored as zeros": _append(
        "for _p in {parameters}:\n    if _p.grad is None:\n        _p.grad = torch.zeros_like(_p)"),
    "requires_grad_(True) forced": _prepend("for _p in {parameters}:\n    _p.requires_grad_(True)"),
    "gradients zeroed at the end": zero_grad_at_the_end,
    "a cache keyed on an argument": cached_on_first_argument,
    "a walk with a depth limit": loop_cut_short,
    "the return type changed": return_type_changed,
}


@dataclass(frozen=True)
class Mutant:
    exercise_id: str
    operator: str
    source: str


def mutants(exercise_id: str, name: str, source: str) -> List[Mutant]:
    """Every operator that applies to this solution, as a mutant."""
    made = []
    for operator, apply in OPERATORS.items():
        tree = ast.parse(source)
        if apply(tree, name):
            made.append(Mutant(exercise_id, operator, ast.unparse(ast.fix_missing_locations(tree))))
    return made


def mutant_function(mutant: Mutant, name: str) -> Callable[..., object]:
    namespace: dict = {"torch": torch, "__name__": f"mutant_{mutant.exercise_id}"}
    exec(compile(mutant.source, f"<mutant {mutant.operator} of {mutant.exercise_id}>", "exec"), namespace)
    return namespace[name]


@dataclass(frozen=True)
class Verdict:
    mutant: Mutant
    matters: bool  # a wider sweep than the check's finds a situation where it differs from the solution
    caught: bool  # the exercise's check fails it
    message: str


def judge_mutant(mutant: Mutant) -> Verdict:
    """Whether the mutant changes what a caller can observe (a wider sweep, on other seeds, than the check's), and
    whether the exercise's check catches it."""
    from helpers.course.exercises.api import evaluate
    from helpers.course.exercises.engine.judge import judge
    from helpers.course.exercises.registry import get_exercise

    exercise = get_exercise(mutant.exercise_id)
    function = mutant_function(mutant, exercise.answer_name)
    result = evaluate(mutant.exercise_id, function)
    contract = exercise.contract
    matters = not result.passed
    if not matters and contract is not None:
        wider = contract.wider_judge or judge
        matters = wider(contract, function, seed=contract.seed + 7919, combinations=4 * contract.combinations + 8) \
            is not None
    return Verdict(mutant, matters, not result.passed, result.message)


def score(exercise_id: str) -> List[Verdict]:
    """Every mutant of ``exercise_id``'s solution, judged."""
    from helpers.course.exercises.registry import get_exercise
    from helpers.course.exercises.solutions import solution_source

    exercise = get_exercise(exercise_id)
    return [judge_mutant(m) for m in mutants(exercise_id, exercise.answer_name, solution_source(exercise_id) or "")]


def main() -> int:
    """One benchmark line per exercise: the mutation score."""
    from helpers.course.exercises.api import ids

    for exercise_id in ids():
        verdicts = score(exercise_id)
        mattering = [v for v in verdicts if v.matters]
        caught = [v for v in mattering if v.caught]
        percent = 100.0 * len(caught) / len(mattering) if mattering else 100.0
        missed = ", ".join(v.mutant.operator for v in mattering if not v.caught) or "none"
        same = ", ".join(v.mutant.operator for v in verdicts if not v.matters) or "none"
        print(f"benchmark: mutation score {exercise_id}: {percent:.0f}% ({len(caught)}/{len(mattering)} caught; "
              f"missed: {missed}; no observable change: {same})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

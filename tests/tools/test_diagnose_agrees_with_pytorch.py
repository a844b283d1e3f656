"""Property test: on random graphs, ``diagnose`` predicts exactly what the real backward call does.

1500 graphs (tests/tools/random_graphs.py) with skip connections, in-place changes, earlier freeing passes, random
``inputs=`` (leaves and non-leaves) and both ``backward`` and ``torch.autograd.grad``. For each, the prediction is
compared with what PyTorch then does: it runs exactly when ``diagnose`` says it will, and when it raises, the error
is one ``diagnose`` named. A wrong traversal rule (the earlier "reverse breadth-first order") fails this test.
"""
from __future__ import annotations

from collections import Counter
from typing import List, Optional, Tuple

import pytest

from helpers.tools import classify, diagnose, traversal
from tests.tools.random_graphs import Case, make_case

CASES = 1500


def outcome(case: Case) -> Optional[str]:
    """The error kind the real call raises, None when it runs, or ``other: ...`` for an error of no known kind."""
    try:
        case.run()
    except Exception as error:  # the outcome under test, whatever it is
        kind = classify(error)
        return kind.name if kind else f"other: {type(error).__name__}: {error}"
    return None


def check_cases(numbers: range) -> Tuple[List[str], Counter, Counter]:
    """(disagreements, outcomes counted, and, where errors 1 and 2 both lie on the way, whether the first-named was
    the one raised)."""
    disagreements: List[str] = []
    outcomes: Counter = Counter()
    first_guess: Counter = Counter()
    for number in numbers:
        case = make_case(number)
        report = diagnose(case.outputs, case.params, case.inputs, autograd_grad=case.autograd_grad)
        actual = outcome(case)
        outcomes[actual] += 1
        outcomes["several kinds possible"] += len(report.possible_errors) > 1
        outcomes["non-leaf inputs"] += any(t.grad_fn is not None for t in case.inputs or [])
        outcomes["autograd.grad"] += case.autograd_grad
        agrees = report.possible_errors == () if actual is None else actual in report.possible_errors
        if not agrees:
            disagreements.append(f"case {number}: PyTorch -> {actual}, diagnose -> {report.possible_errors}; "
                                 f"{case.story}")
        elif set(report.possible_errors) == {"backward-twice", "inplace-version"}:
            first_guess[actual == report.prediction] += 1
    return disagreements, outcomes, first_guess


@pytest.fixture(scope="module")
def results() -> Tuple[List[str], Counter, Counter]:
    return check_cases(range(CASES))


def test_diagnose_agrees_with_the_real_call_on_every_random_graph(results) -> None:
    disagreements, outcomes, _ = results
    assert disagreements == [], f"{len(disagreements)} of {CASES} disagree:\n" + "\n".join(disagreements[:20])


def test_the_random_graphs_cover_every_outcome(results) -> None:
    """Guards the generator: if it stopped producing a kind of case, the test above would prove less."""
    _, outcomes, _ = results
    at_least = {None: 300, "backward-twice": 80, "inplace-version": 80, "several kinds possible": 10,
                "unused-input": 50, "non-scalar-output": 20, "no-grad-fn": 20, "input-needs-no-grad": 10,
                "empty-inputs": 5, "non-leaf inputs": 150, "autograd.grad": 300}
    short = {key: outcomes[key] for key, least in at_least.items() if outcomes[key] < least}
    assert not short, f"too few cases of {short}; all outcomes: {dict(outcomes)}"
    assert not [key for key in outcomes if isinstance(key, str) and key.startswith("other")], dict(outcomes)


def test_with_both_errors_on_the_way_the_first_named_is_the_one_this_builds_cpu_engine_raises(results) -> None:
    """``prediction`` simulates the CPU engine's order (latest-created ready node first).

    PyTorch does not promise that order: if a release changes it, this test fails, and the docstring of
    ``Diagnosis.prediction`` must say so; ``possible_errors`` (tested above) stays right either way.
    """
    _, _, first_guess = results
    assert first_guess[True] >= 10 and first_guess[False] == 0, dict(first_guess)


def test_the_old_traversal_rule_would_fail_this_test(monkeypatch) -> None:
    """The reverse breadth-first walk the course used before disagrees with PyTorch on these graphs."""

    def reverse_breadth_first(outputs, inputs=None, autograd_grad=False):
        nodes = traversal.graph_nodes(outputs)
        if inputs is None:
            return nodes
        wanted, needed = {id(t) for t in inputs}, {}
        for node in reversed(nodes):
            variable = getattr(node, "variable", None)
            needed[id(node)] = (variable is not None and id(variable) in wanted) or any(
                needed.get(id(child), False) for child in traversal.children(node))
        return [node for node in nodes if needed[id(node)]]

    monkeypatch.setattr(traversal, "nodes_backward_runs", reverse_breadth_first)
    disagreements, _, _ = check_cases(range(500))
    assert disagreements, "the property test cannot tell the old rule from the right one"

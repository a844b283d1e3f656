"""Notebook 08's exercise: the checker starts its own 2 processes, and names the mistake of each kind of answer."""
from __future__ import annotations

import cloudpickle
import pytest

from helpers.course.lesson08_past_one_machine.exercise import check_answers, check_ddp_two_loss_step
from tests.course import ddp_answers

cloudpickle.register_pickle_by_value(ddp_answers)  # sent by value, as a notebook's function is

EXPECTED = {  # answer -> (status, fragments the diagnosis must contain)
    "right_inputs": ("passed", ["averaged over the ranks"]),
    "right_detach": ("passed", []),
    "right_manual_allreduce": ("passed", []),
    "two_forwards_detached": ("passed", []),
    "step_between": ("passed", []),  # L2's backward never passes through M1: stepping M1 first is harmless
    "seed_fix": ("failed", ["1 x L1 averaged + 1 x L2 of this rank's shard", "second backward"]),
    "full_second_backward": ("failed", ["1 x L1 averaged + 1 x L2 of this rank's shard",
                                        "after M1's DDP wrapper had written its averages"]),
    "sum_backward": ("failed", ["1 x L1 averaged + 1 x L2 averaged", "L2 reached M1"]),
    "agrad": ("failed", ["1 x L1 of this rank's shard", "never averaged"]),
    "module_bypass": ("failed", ["never averaged", ".module"]),
    "swapped": ("failed", ["1 x L2 averaged", "The losses are swapped"]),
    "halved": ("failed", ["0.5 x L1 averaged", "no division by the world size"]),
    "doubled_by_world_size": ("failed", ["2 x L1 averaged", "DDP itself already averages"]),
    "no_zero": ("failed", ["Step 2", "previous step's"]),
    "steps_twice": ("failed", ["opt1 was stepped 2 times"]),
    "only_head": ("failed", ["0.weight, 0.bias got no gradient", "Expected to have finished reduction"]),
    "allreduce_sum_no_divide": ("failed", ["2 x L1 averaged", "the sum over the 2 ranks", "divide by the world size"]),
    "step_before_backward": ("failed", ["opt1 stepped before M1's gradient arrived"]),
    "both_outputs_detached": ("failed", ["1 x L1 averaged - 1 x L2 averaged", "shared term's gradient is missing"]),
    "stub": ("not attempted yet", []),
    "code_then_stub": ("not attempted yet", []),
}


@pytest.fixture(scope="module")
def verdicts():
    answers = [getattr(ddp_answers, name) for name in EXPECTED]
    return dict(zip(EXPECTED, check_answers(answers)))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_answer_gets_its_verdict_and_diagnosis(verdicts, name):
    status, fragments = EXPECTED[name]
    result = verdicts[name]
    assert result.status.value == status, result.message
    for fragment in fragments:
        assert fragment in result.message, result.message


def test_answers_that_are_not_functions_never_reach_the_workers():
    results = check_answers([None, 3, ...])
    assert [r.status.value for r in results] == ["not attempted yet", "failed", "not attempted yet"]
    assert "should be a function" in results[1].message


def test_the_untouched_stub_is_found_without_starting_processes():
    from helpers.course.lesson08_past_one_machine.exercise import is_stub
    assert is_stub(ddp_answers.stub_as_generated) and is_stub(ddp_answers.stub)
    assert not is_stub(ddp_answers.code_then_stub) and not is_stub(ddp_answers.right_inputs)


def test_a_function_that_cannot_be_sent_gets_a_diagnosis():
    import threading
    lock = threading.Lock()

    def holds_a_lock(m1, m2, opt1, opt2, x1, x2):
        with lock:
            pass

    result = check_ddp_two_loss_step(holds_a_lock)
    assert result.status.value == "failed" and "could not be sent" in result.message

"""Notebook 08's exercise ``ddp_two_loss_step``: a few answers through the course's own check path (each check
starts 2 processes); tests/course/test_ddp_exercise.py tries many more in one pair of processes."""
from __future__ import annotations

from tests.course import ddp_answers

OTHER_CORRECT = {"ddp_two_loss_step": [ddp_answers.right_detach]}

WRONG_ANSWERS = {
    "ddp_two_loss_step": [
        (ddp_answers.seed_fix, "A second backward added to it after"),
        (ddp_answers.agrad, "DDP never averaged it"),
        (ddp_answers.swapped, "The losses are swapped"),
    ],
}

"""Shared set-up of the tools' tests."""
from __future__ import annotations

import gc
from typing import Iterator

import pytest

from helpers.tools import regions


@pytest.fixture(autouse=True)
def no_checkpoint_left_from_an_earlier_test() -> Iterator[None]:
    """Where torch cannot show a saved tensor's unpack hook, the tools read nothing while a non-reentrant checkpoint
    is alive in the process (``regions.hidden_checkpoints``): a checkpointed graph an earlier test left in a
    reference cycle would change this test's answer. Collected first, on such a torch only."""
    if not regions.hooks_shown():
        gc.collect()
    yield

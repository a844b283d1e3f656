"""Notebook 08's exercise in the grader: the learner's step runs on 2 ranks in the sandbox, the reference's on 2
ranks of the grader's own, and the records cross as data.

The engine's usual shrinking needs a round trip per situation; on two process groups that would mean keeping both
alive between requests, so here every generated situation is made at once: the sandbox's ranks make the learner's
calls of each and send the records; the grader's ranks make the reference's calls of each, in the same order on
both ranks (the DDP wrappers' collectives must pair up), and compare. The diagnosis comes from the first situation,
in the engine's order, where any rank differs.
"""
from __future__ import annotations

import pickle
from typing import Any, List, Optional, Sequence

from helpers.course import seeds
from helpers.course.exercises.engine.situations import Situation, generate

WORLD_SIZE = 2
TIMEOUT_S = 240.0


def situations_data(contract: Any) -> List[dict]:
    """Every situation the contract generates (under the current salt), as data."""
    return [{"values": [list(pair) for pair in situation.values], "seed": situation.seed}
            for situation in generate(contract.axes, contract.seed, contract.combinations)]


def situation_of(data: dict) -> Situation:
    return Situation(tuple((str(name), value) for name, value in data["values"]), int(data["seed"]))


def learner_records_on_rank(rank: int, world_size: int, exercise_id: str, payload: bytes,
                            situations: Sequence[dict], salt: int) -> bytes:
    """In the sandbox, on one rank: the learner's records of every situation, as wire bytes."""
    from helpers.course.exercises.engine.judge import learner_calls
    from helpers.course.exercises.registry import exercises
    from helpers.grade import wire
    from helpers.grade.records import records_data

    seeds.set_salt(salt)
    contract = exercises()[exercise_id].contract
    answer = pickle.loads(payload) if payload else None  # made by cloudpickle in the sandbox; plain pickle reads it
    return wire.encode([records_data(learner_calls(contract, answer, situation_of(data))) for data in situations])


def reference_verdicts_on_rank(rank: int, world_size: int, exercise_id: str, per_rank: Sequence[bytes],
                               situations: Sequence[dict], salt: int) -> List[Optional[str]]:
    """In the grader's own processes, on one rank: for each situation, the engine's diagnosis (None: no
    difference). Every call of every situation is made on both ranks, whatever is found."""
    from helpers.course.exercises.engine.judge import compare_calls, diagnosis
    from helpers.course.exercises.guard import NotAttempted
    from helpers.course.exercises.registry import exercises
    from helpers.grade import wire
    from helpers.grade.records import records_from_data

    seeds.set_salt(salt)
    contract = exercises()[exercise_id].contract
    mine = wire.decode(per_rank[rank])
    found: List[Optional[str]] = []
    for data, records in zip(situations, mine):
        situation = situation_of(data)
        try:
            finding = compare_calls(contract, situation, records_from_data(records), elsewhere=True,
                                    every_call=True)
        except NotAttempted:
            return ["not attempted"]
        found.append(None if finding is None else diagnosis(finding, situation, contract))
    return found

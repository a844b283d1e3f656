"""The contract of notebook 06's mutual-learning exercise: ``mutual_step(peers, optimizers, x, y)`` steps each of
the K peers once with the gradient of its own loss (cross-entropy + the mean over the other peers of KL(p_j || p_i),
every p_j a fixed target), all from one forward pass; it may change the peers' weights and ``.grad`` and the
optimizers' states, nothing else (the two lists included), and returns None."""
from __future__ import annotations

from typing import Dict, List, Sequence

import torch
from torch import nn

from helpers.course.exercises.engine.build import mlp, refill_with, seeded
from helpers.course.exercises.engine.contract import Contract, returns_nothing, training_step
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import FROZEN, GRADS, MODE, Axis, Situation, batch, calls, shapes
from helpers.course.lesson06_bug_clinic.mutual_learning import BATCH, CLASSES, HIDDEN, IN_FEATURES
from helpers.course.lesson06_bug_clinic.step_contract import (
    COMPARED_AFTER,
    OPTIMIZERS_TRIED,
    make_optimizer,
    optimizer_words,
)
from helpers.course.seeds import fresh
from helpers.language import marked, tr

EXERCISE_ID = "mutual_step"

MODELS = {  # name -> (classes, each peer's hidden widths, cycled over the peers)
    marked("the notebook's peers"): (CLASSES, ((HIDDEN,),)),
    marked("peers of other widths and depths, 5 classes"): (5, ((HIDDEN,), (32, 16), (8,))),
}

OPTIMIZERS = (  # cycled over the peers; fused where this torch has it (make_optimizer)
    ("SGD",), ("fused Adam", "AdamW"), ("AdamW", "SGD with momentum", "Adam"), ("SGD with weight decay", "Adam"))

AXES: tuple = (
    batch(BATCH, 1, 5, 32),
    Axis("peers", (3, 2, 4), lambda k: tr("{count} peers", count=k), "2, 3 and 4 peers"),
    GRADS,
    MODE,
    FROZEN,
    calls(1, 3),
    Axis("optimizer", OPTIMIZERS, lambda kinds: tr("the peers stepped by {kinds} in turn",
                                                   kinds=", ".join(optimizer_words(kind) for kind in kinds)),
         OPTIMIZERS_TRIED),
    shapes(*MODELS, tried="peers of other widths and depths, 5 classes"),
)


def _lists(peers: Sequence[nn.Module], optimizers: Sequence[torch.optim.Optimizer], given: List[list]):
    """What the two lists hold, in words: "as handed over", or what changed."""
    def read() -> str:
        changed = [tr("{name} holds {count} items, not the {given} handed over in their order", name=name,
                      count=len(now), given=len(was))
                   for name, now, was in (("peers", peers, given[0]), ("optimizers", optimizers, given[1]))
                   if len(now) != len(was) or any(a is not b for a, b in zip(now, was))]
        return "; ".join(changed) or tr("as handed over")
    return read


def build(situation: Situation) -> World:
    """K peers, their optimizers and one batch for ``situation``; a new batch for each further call, into the same
    tensors."""
    k = situation["peers"]
    classes, hidden = MODELS[situation["shape"]]
    peers = [seeded(situation.seed + index, lambda widths=hidden[index % len(hidden)]: mlp(
        (IN_FEATURES, *widths, classes))) for index in range(k)]
    kinds = situation["optimizer"]
    optimizers = [make_optimizer(kinds[index % len(kinds)], peer.parameters()) for index, peer in enumerate(peers)]
    rows = situation["batch"]

    def batch_for(call: int) -> Dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(fresh(situation.seed * 10 + call))
        return {"x": torch.randn(rows, IN_FEATURES, generator=generator),
                "y": torch.randint(0, classes, (rows,), generator=generator)}

    data = batch_for(1)
    peer_list, optimizer_list = list(peers), list(optimizers)
    return World(args=(peer_list, optimizer_list, data["x"], data["y"]),
                 modules={f"peers[{index}]": peer for index, peer in enumerate(peers)},
                 optimizers={f"optimizers[{index}]": opt for index, opt in enumerate(optimizers)},
                 inputs=data, refill=refill_with(data, batch_for),
                 extra={marked("what the lists peers and optimizers hold"): _lists(
                     peer_list, optimizer_list, [list(peers), list(optimizers)])})



CONTRACT = Contract(
    exercise_id=EXERCISE_ID,
    answer_name="mutual_step",
    build=build,
    axes=AXES,
    may_change=training_step(("peers[[]*[]]",), ("optimizers[[]*[]]",)),
    returns=returns_nothing,
    tried_extra=(COMPARED_AFTER,),
)

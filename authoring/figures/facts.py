"""What each figure states, as data: the drawings are made from it, and the tests check it against PyTorch.

- the step timeline: notebook 03's step, M2 first (forward, ``L2.backward``, ``opt2.step()``, ``L1.backward()``),
  with Adam; the version of M2's head weight, and the state of its saved copy, after each stage, without and with
  ``retain_graph=True``;
- what a backward visits: a chain ``M1 -> M2`` (one ``nn.Linear`` each) and two losses of M2's output, as in
  notebook 05; the nodes of its graph and which of them ``L1.backward(inputs=M1's parameters)`` runs;
- who trains whom: for each recipe of notebook 04, the loss whose gradient each model receives.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Tuple

# ---------------------------------------------------------------- the step timeline

STAGES: Tuple[str, ...] = ("forward", "L2.backward()", "opt2.step()", "L1.backward()")
STAGE_NOTES: Tuple[str, ...] = ("saves W", "runs through M2", "changes W\nin place", "runs through M2,\nneeds saved W")
W_VERSIONS: Tuple[int, ...] = (1, 1, 2, 2)  # M2's head weight after each stage: v1 after its in-place init
# The saved copy of W after each stage, as helpers.tools.SavedTensor.state_label writes it; the last: the error kind.
LANES: Dict[str, Tuple[str, ...]] = {
    "L2.backward()": ("alive v1", "freed", "freed", "backward-twice"),
    "L2.backward(retain_graph=True)": ("alive v1", "alive v1", "stale v1->v2", "inplace-version"),
}
ERROR_LINES: Dict[str, Tuple[str, str]] = {  # error kind -> (name in the figure, words of the message)
    "backward-twice": ("error 1", "backward through the\ngraph a second time"),
    "inplace-version": ("error 2", "is at version 2;\nexpected version 1"),
}

# ---------------------------------------------------------------- what a backward visits


@dataclass(frozen=True)
class GraphNode:
    """A node of the chain's graph: its PyTorch class name and the label the figure gives it."""

    name: str
    label: str


GRAPH: Dict[str, GraphNode] = {
    "L1": GraphNode("MeanBackward0", "L1 = mean"),
    "L2": GraphNode("MeanBackward0", "L2 = mean"),
    "mask": GraphNode("MulBackward0", "× mask"),
    "mse": GraphNode("MseLossBackward0", "MseLoss"),
    "M2.addmm": GraphNode("AddmmBackward0", "Addmm"),
    "M2.t": GraphNode("TBackward0", "T"),
    "M2.weight": GraphNode("AccumulateGrad", "weight"),
    "M2.bias": GraphNode("AccumulateGrad", "bias"),
    "M1.addmm": GraphNode("AddmmBackward0", "Addmm"),
    "M1.t": GraphNode("TBackward0", "T"),
    "M1.weight": GraphNode("AccumulateGrad", "weight"),
    "M1.bias": GraphNode("AccumulateGrad", "bias"),
}
# parent -> child: the direction gradients flow, from the losses down to the parameters.
EDGES: Tuple[Tuple[str, str], ...] = (
    ("L1", "mse"), ("L2", "mask"), ("mask", "mse"), ("mse", "M2.addmm"),
    ("M2.addmm", "M1.addmm"), ("M2.addmm", "M2.t"), ("M2.t", "M2.weight"), ("M2.addmm", "M2.bias"),
    ("M1.addmm", "M1.t"), ("M1.t", "M1.weight"), ("M1.addmm", "M1.bias"),
)
VISITED: FrozenSet[str] = frozenset({"L1", "mse", "M2.addmm", "M1.addmm", "M1.t", "M1.weight", "M1.bias"})
REQUESTED: Tuple[str, ...] = ("M1.weight", "M1.bias")  # what inputs= names

# ---------------------------------------------------------------- who trains whom


@dataclass(frozen=True)
class Recipe:
    """A row of the table: a recipe of notebook 04 and the loss whose gradient each model receives.

    Attributes:
        key: its name in ``helpers.course.lesson04_whose_gradient.recipes.RECIPES``.
        title: its name in the figure.
        code: the lines that fill the gradients (``p1``, ``p2``: the parameters of M1, M2).
        m1, m2: "L1", "L2" or "L1+L2".
    """

    key: str
    title: str
    code: Tuple[str, ...]
    m1: str
    m2: str


RECIPES: Tuple[Recipe, ...] = (
    Recipe("copied fix", "the widely copied fix: each model gets both losses",
           ("l1.backward(retain_graph=True)", "l2.backward()"), "L1+L2", "L1+L2"),
    Recipe("(a) backward(inputs=)", "(a) backward(inputs=)",
           ("l1.backward(inputs=p1, retain_graph=True)", "l2.backward(inputs=p2)"), "L1", "L2"),
    Recipe("(b) autograd.grad", "(b) torch.autograd.grad",
           ("autograd.grad(l1, p1, retain_graph=True)", "autograd.grad(l2, p2)"), "L1", "L2"),
    Recipe("(c) detach the other", "(c) detach the other output",
           ("l1 from (o1, o2.detach()), l2 from (o1.detach(), o2)", "(l1 + l2).backward()"), "L1", "L2"),
    Recipe("(d) sum = one-pass limit", "(d) the sum: right only for a joint goal",
           ("(l1 + l2).backward()",), "L1+L2", "L1+L2"),
)

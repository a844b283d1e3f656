"""Random autograd graphs for the property test of ``diagnose``: skip connections, in-place changes, earlier passes.

Each case builds a small graph of vector operations over a few parameters, where every operation may read any
earlier tensor (so skip connections, shared subgraphs and reused tensors are common), then, in random order:

- changes tensors in place: a parameter under ``no_grad`` (as an optimizer does), a tensor autograd records the
  change of (``mul_``, ``relu_``), or one changed under ``no_grad``;
- runs earlier backward passes over random outputs and ``inputs=``, with or without ``retain_graph``;

and finally picks the call to predict: outputs (sometimes non-scalar, or computed without grad), ``inputs=`` (None,
leaves, non-leaf tensors, a tensor outside the graph, one that needs no grad, an empty list), and ``backward`` or
``torch.autograd.grad``. A plain seeded generator keeps every case reproducible from its number.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

SIZE = 3


@dataclass
class Case:
    """One random graph, and the call whose outcome ``diagnose`` must predict."""

    number: int
    params: Dict[str, torch.Tensor]
    outputs: List[torch.Tensor]
    inputs: Optional[List[torch.Tensor]]
    autograd_grad: bool
    story: List[str] = field(default_factory=list)

    def run(self) -> None:
        """Make the real call (``retain_graph=True``, so that it changes nothing it could not change anyway)."""
        if self.autograd_grad:
            torch.autograd.grad(self.outputs, self.inputs, retain_graph=True)
        else:
            torch.autograd.backward(self.outputs, inputs=self.inputs, retain_graph=True)


UNARY: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "exp": lambda t: (t * 0.3).exp(),  # saves its result
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "sin": torch.sin,  # saves its input
    "square": lambda t: t.pow(2),
    "neg": torch.neg,  # saves nothing
    "scale": lambda t: t * 1.5,
}
BINARY: Dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add,  # saves nothing
    "mul": torch.mul,  # saves both
    "sub": torch.sub,
    "div": lambda a, b: a / (b.abs() + 1.0),
}


def make_case(number: int) -> Case:
    """Case ``number``, the same every time."""
    rng = random.Random(number)
    generator = torch.Generator().manual_seed(number)
    params = {f"v{i}": torch.randn(SIZE, generator=generator).requires_grad_() for i in range(rng.randint(1, 3))}
    params.update({f"W{i}": torch.randn(SIZE, SIZE, generator=generator).requires_grad_()
                   for i in range(rng.randint(1, 2))})
    constant = torch.randn(SIZE, generator=generator)
    pool: List[torch.Tensor] = [*params.values(), constant]
    story: List[str] = []
    for step in range(rng.randint(3, 12)):
        pool.append(_random_op(rng, pool, params, story))
        if rng.random() < 0.3:
            _random_event(rng, pool, params, story)
    for _ in range(rng.randint(0, 4)):
        _random_event(rng, pool, params, story)
    outputs = _random_outputs(rng, pool, params, story)
    autograd_grad = rng.random() < 0.3
    inputs = _random_inputs(rng, pool, _reached_leaves(outputs, params), constant, required=autograd_grad)
    story.append(f"call: {'autograd.grad' if autograd_grad else 'backward'}, "
                 f"inputs={'None' if inputs is None else len(inputs)}")
    return Case(number, params, outputs, inputs, autograd_grad, story)


def _random_op(rng: random.Random, pool: List[torch.Tensor], params: Dict[str, torch.Tensor],
               story: List[str]) -> torch.Tensor:
    vectors = [t for t in pool if t.dim() == 1]
    matrices = [t for t in params.values() if t.dim() == 2]
    choice = rng.random()
    if choice < 0.35:
        name = rng.choice(list(UNARY))
        story.append(name)
        return UNARY[name](rng.choice(vectors))
    if choice < 0.75:
        name = rng.choice(list(BINARY))
        story.append(name)
        return BINARY[name](rng.choice(vectors), rng.choice(vectors))
    story.append("linear")
    return F.linear(rng.choice(vectors), rng.choice(matrices))  # saves the input and the weight


def _random_event(rng: random.Random, pool: List[torch.Tensor], params: Dict[str, torch.Tensor],
                  story: List[str]) -> None:
    choice = rng.random()
    if choice < 0.3:
        name = rng.choice(list(params))
        with torch.no_grad():
            params[name].add_(0.1)  # as optimizer.step() does: a version bump
        story.append(f"step {name}")
    elif choice < 0.45:
        position = rng.randrange(len(pool))
        tensor = pool[position]
        if tensor.requires_grad and tensor.grad_fn is not None:
            pool[position] = tensor.mul_(1.5) if rng.random() < 0.5 else tensor.relu_()  # recorded in place
            story.append("in-place recorded")
    elif choice < 0.55:
        tensor = rng.choice(pool)
        if tensor.grad_fn is not None:
            with torch.no_grad():
                tensor.add_(1.0)
            story.append("in-place under no_grad")
    else:
        roots = [t.sum() for t in rng.sample(pool, k=min(len(pool), rng.randint(1, 2))) if t.requires_grad]
        if not roots:
            return
        leaves = list(params.values())
        inputs = rng.sample(leaves, k=rng.randint(1, len(leaves))) if rng.random() < 0.5 else None
        retain = rng.random() < 0.4
        try:
            torch.autograd.backward(roots, inputs=inputs, retain_graph=retain)
            story.append(f"earlier pass (retain={retain}, inputs={'None' if inputs is None else len(inputs)})")
        except RuntimeError:
            story.append("earlier pass failed")


def _random_outputs(rng: random.Random, pool: List[torch.Tensor], params: Dict[str, torch.Tensor],
                    story: List[str]) -> List[torch.Tensor]:
    recorded = [t for t in pool if t.requires_grad] or pool
    chosen = rng.sample(recorded, k=min(len(recorded), rng.randint(1, 2)))
    outputs = []
    for tensor in chosen:
        roll = rng.random()
        if roll < 0.04:
            outputs.append(tensor * 1.0)  # not reduced: non-scalar
            story.append("non-scalar output")
        elif roll < 0.07:
            with torch.no_grad():
                outputs.append(tensor.sum())  # computed without grad
            story.append("grad-less output")
        else:
            outputs.append((tensor * rng.choice([1.0, -0.5])).sum())
    return outputs


def _reached_leaves(outputs: List[torch.Tensor], params: Dict[str, torch.Tensor]) -> List[torch.Tensor]:
    """The parameters the outputs reach (most of the time the inputs are among them, as in real code)."""
    reached, stack, seen = set(), [t.grad_fn for t in outputs if t.grad_fn is not None], {}  # keeps nodes alive
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        if getattr(node, "variable", None) is not None:
            reached.add(id(node.variable))
        stack.extend(child for child, _ in node.next_functions if child is not None)
    found = [t for t in params.values() if id(t) in reached]
    return found if found and random.Random(len(found)).random() < 0.8 else list(params.values())


def _random_inputs(rng: random.Random, pool: List[torch.Tensor], leaves: List[torch.Tensor],
                   constant: torch.Tensor, required: bool) -> Optional[List[torch.Tensor]]:
    roll = rng.random()
    if roll < 0.35 and not required:
        return None
    if roll < 0.65:
        inputs = rng.sample(leaves, k=rng.randint(1, len(leaves)))
    else:
        non_leaves = [t for t in pool if t.grad_fn is not None]
        inputs = rng.sample(non_leaves, k=min(len(non_leaves), rng.randint(1, 2))) + rng.sample(leaves, k=1)
    extra = rng.random()
    if extra < 0.04:
        inputs.append(constant)  # needs no grad
    elif extra < 0.08:
        inputs.append(torch.randn(SIZE, requires_grad=True))  # outside the graph
    elif extra < 0.1:
        inputs = []
    return inputs

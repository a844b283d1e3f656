"""Which nodes of an autograd graph a backward pass runs: the rule, in code.

A backward pass starts at its outputs and runs exactly the nodes that lie on a path from the outputs down to what
it differentiates for:

- ``loss.backward()``: every node the outputs reach;
- ``loss.backward(inputs=ts)``: the nodes with a path down to one of ``ts``; for a non-leaf ``t`` in ``ts``, the
  node that produced ``t`` runs too (backward needs its gradient to accumulate into ``t.grad``);
- ``torch.autograd.grad(loss, ts)``: the nodes with a path down to one of ``ts``, but not the node that produced
  a non-leaf ``t`` (the gradient is taken where it enters that node).

Nodes off those paths neither run nor free their saved tensors. Each node that runs unpacks every tensor it saved,
and that is where the two errors come from: a tensor freed by an earlier backward (error 1), or one changed in place
since it was saved (error 2).
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set

import torch

Node = Any  # torch.autograd.graph.Node; older torch exposes no common Python class for every node


def children(node: Node) -> List[Node]:
    """The nodes ``node`` passes gradients to (its inputs in the forward pass)."""
    return [child for child, _ in getattr(node, "next_functions", ()) if child is not None]


def graph_nodes(outputs: Sequence[torch.Tensor]) -> List[Node]:
    """Every node behind ``outputs`` (tensors), each once, in breadth-first order from the outputs."""
    order: List[Node] = []
    seen: Set[int] = set()
    queue = deque(t.grad_fn for t in outputs if isinstance(t, torch.Tensor) and t.grad_fn is not None)
    while queue:
        node = queue.popleft()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        queue.extend(children(node))
    return order


def input_nodes(nodes: Sequence[Node], inputs: Iterable[torch.Tensor]) -> List[Node]:
    """The node each of ``inputs`` enters the graph at: its grad_fn, or for a leaf its AccumulateGrad node.

    Tensors the graph does not reach are left out.
    """
    present = {id(node) for node in nodes}
    by_variable = {id(node.variable): node for node in nodes if getattr(node, "variable", None) is not None}
    found = []
    for tensor in inputs:
        node = tensor.grad_fn if tensor.grad_fn is not None else by_variable.get(id(tensor))
        if node is not None and id(node) in present:
            found.append(node)
    return found


def nodes_backward_runs(
    outputs: Sequence[torch.Tensor], inputs: Optional[Sequence[torch.Tensor]] = None, autograd_grad: bool = False
) -> List[Node]:
    """The nodes a backward pass from ``outputs`` runs, in breadth-first order from the outputs.

    Args:
        outputs: the tensors backward starts from.
        inputs: what it differentiates for (``backward(inputs=...)`` or ``autograd.grad``'s inputs); None for all.
        autograd_grad: True for ``torch.autograd.grad``, which does not run the node that produced a non-leaf input.
    """
    nodes = graph_nodes(outputs)
    if inputs is None:
        return nodes
    targets = {id(node) for node in input_nodes(nodes, inputs)}
    runs: Dict[int, bool] = {}
    for node in post_order(nodes):  # children before parents
        reaches_a_target = any(runs[id(child)] or id(child) in targets for child in children(node))
        runs[id(node)] = reaches_a_target or (id(node) in targets and not autograd_grad)
    return [node for node in nodes if runs[id(node)]]


def post_order(nodes: Sequence[Node]) -> List[Node]:
    """``nodes`` (a whole graph) with every node after all of its children: a reverse topological order.

    Iterative, so a graph thousands of nodes deep does not hit Python's recursion limit.
    """
    order: List[Node] = []
    done: Set[int] = set()
    for start in nodes:
        if id(start) in done:
            continue
        stack = [(start, iter(children(start)))]
        done.add(id(start))
        while stack:
            node, pending = stack[-1]
            child = next((c for c in pending if id(c) not in done), None)
            if child is None:
                stack.pop()
                order.append(node)
            else:
                done.add(id(child))
                stack.append((child, iter(children(child))))
    return order


def engine_order(outputs: Sequence[torch.Tensor], running: Sequence[Node]) -> List[Node]:
    """``running`` in the order PyTorch's CPU engine runs them today: ready nodes, latest-created first.

    A node is ready once every running node that passes it a gradient has run; among ready nodes the engine picks
    the highest sequence number. PyTorch does not promise this order (a GPU, threads or another release may differ):
    use it to guess which of two problems backward meets first, never to rule one out.
    """
    members = {id(node): node for node in running}
    waiting: Dict[int, int] = {key: 0 for key in members}
    for node in running:
        for child in children(node):
            if id(child) in members:
                waiting[id(child)] += 1
    roots = {id(t.grad_fn) for t in outputs if isinstance(t, torch.Tensor) and t.grad_fn is not None}
    ready = [(-_sequence_number(members[key]), index, key) for index, key in enumerate(members)
             if waiting[key] == 0 and key in roots]
    heapq.heapify(ready)
    order: List[Node] = []
    counter = len(ready)
    while ready:
        _, _, key = heapq.heappop(ready)
        node = members[key]
        order.append(node)
        for child in children(node):
            if id(child) in waiting:
                waiting[id(child)] -= 1
                if waiting[id(child)] == 0:
                    counter += 1
                    heapq.heappush(ready, (-_sequence_number(child), counter, id(child)))
    return order


def _sequence_number(node: Node) -> int:
    try:
        return int(node._sequence_nr())
    except (AttributeError, RuntimeError):
        return 0


def nearest_parameters(node: Node, parameter_names: Dict[int, str], limit: int = 200) -> List[str]:
    """The names of the parameters closest below ``node`` (fewest nodes between), to say where a node sits."""
    # seen keeps each node's Python object alive: a freed one's id could be reused by another node's
    frontier, seen, visited = [node], {id(node): node}, 0
    while frontier and visited < limit:
        found = sorted({parameter_names[id(n.variable)] for n in frontier
                        if getattr(n, "variable", None) is not None and id(n.variable) in parameter_names})
        if found:
            return found
        following = []
        for current in frontier:
            visited += 1
            for child in children(current):
                if id(child) not in seen:
                    seen[id(child)] = child
                    following.append(child)
        frontier = following
    return []

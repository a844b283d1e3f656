"""Predict, before calling backward, whether it will fail, and why.

``diagnose`` checks what PyTorch checks, in PyTorch's order: the call itself (empty ``inputs=``, a non-scalar or
grad-less output, an input that needs no grad), then every saved tensor of every node the backward would run
(``helpers.tools.traversal`` holds the rule): freed by an earlier backward (error 1) or changed in place (error 2).
With a record taken after the forward pass (``record_parameters``), it also finds parameters that changed without a
version bump, which backward cannot notice at all.
"""
from __future__ import annotations

import html
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from helpers.tools import traversal
from helpers.tools.arguments import read_inputs, read_outputs, read_parameters
from helpers.tools.display import card_html
from helpers.tools.errors import KINDS
from helpers.tools.fingerprint import ParameterRecord
from helpers.tools.saved import SavedTensor, State, _saved_tensors_of

_KIND_OF_STATE = {State.FREED: "backward-twice", State.STALE: "inplace-version"}
MAX_LINES = 8  # per group of a report; the rest is counted, not printed


@dataclass(frozen=True)
class SilentChange:
    """A parameter a saved tensor holds, changed since the record without a version bump.

    Attributes:
        parameter: its name.
        saved_by: where it is saved, e.g. ``["AddmmBackward0.mat2"]``.
    """

    parameter: str
    saved_by: Tuple[str, ...]


@dataclass(frozen=True)
class Diagnosis:
    """What a backward pass from these outputs would meet.

    Attributes:
        problems: the saved tensors it would fail on (freed or stale), nearest the outputs first.
        prediction: the error kind it raises (a name in ``helpers.tools.errors.KINDS``), or None when it runs.
            When tensors of both kinds lie on its way, the one this build's CPU engine meets first.
        possible_errors: every error kind it may raise; more than one when problems of both kinds lie on its way
            (which comes first depends on the order the engine runs nodes in, which PyTorch does not promise).
        silent_changes: saved parameters changed since ``recorded`` without a version bump (backward runs, wrong).
        recorded: whether a forward-time record was given, so silent changes could be looked for.
        notes: what else is worth saying (arguments left out, inputs the graph does not reach).
        places: for saved tensors that are no parameter, where in the models they sit (by node id).
        call: the call diagnosed, for messages.
    """

    problems: List[SavedTensor]
    prediction: Optional[str]
    possible_errors: Tuple[str, ...] = ()
    silent_changes: Tuple[SilentChange, ...] = ()
    recorded: bool = False
    notes: Tuple[str, ...] = ()
    places: Mapping[int, "Place"] = field(default_factory=dict)
    call: str = "backward()"

    @property
    def will_fail(self) -> bool:
        """True when the call raises."""
        return bool(self.possible_errors)

    @property
    def wrong_values(self) -> bool:
        """True when it runs but with parameters that changed silently since the record."""
        return bool(self.silent_changes)

    def _lines(self) -> List[str]:
        lines = _verdict(self)
        stale = [p for p in self.problems if p.state is State.STALE]
        freed = [p for p in self.problems if p.state is State.FREED]
        if stale:
            lines.append("Changed in place since the forward pass saved them (on its way):")
            lines += _grouped(_stale_line(s, self.places) for s in stale)
        if freed:
            models = [getattr(self.places.get(id(s.node)), "model", None) for s in freed]
            where = f" ({_counted(f'in {m}' if m else 'elsewhere' for m in models)})" if any(models) else ""
            lines.append(f"{len(freed)} saved tensor(s) on its way were freed by an earlier backward{where}, "
                         f"e.g. {freed[0].where}.")
        if self.silent_changes:
            lines.append("Changed since the record without a version bump (a fused optimizer, a write through "
                         ".data): backward cannot notice, and would use the new values:")
            lines += _grouped(f"{change.parameter} (saved by {', '.join(change.saved_by)})"
                              for change in self.silent_changes)
        lines += list(self.notes)
        return lines

    def __str__(self) -> str:
        return "\n".join(self._lines())

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        body = "<br>".join(html.escape(line).replace("  ", "&nbsp;&nbsp;") for line in self._lines())
        accent = "#c0392b" if self.will_fail else ("#e67e22" if self.wrong_values else "#27ae60")
        return card_html(f"Diagnosis before {self.call}", f"<div>{body}</div>", accent=accent)


def _verdict(report: Diagnosis) -> List[str]:
    if report.will_fail:
        if len(report.possible_errors) > 1:
            titles = " and ".join(f"{KINDS[kind].title.split(':')[0].lower()}" for kind in report.possible_errors)
            return [f"{report.call} will fail: on its way lie causes of {titles}. Which one it raises first "
                    f"depends on the order the engine runs nodes in (here: {KINDS[report.prediction].title})."]
        kind = KINDS[report.prediction]
        if kind.title.startswith("Error"):
            return [f"{report.call} will fail with {kind.title}."]
        return [f"{report.call} will fail. {kind.title}.", *kind.explanation.splitlines()]
    if report.wrong_values:
        return [f"{report.call} will run, but with values that changed behind autograd's back."]
    lines = [f"{report.call} will run: every saved tensor on its way is alive, and no version counter moved since "
             "it was saved."]
    if report.recorded:
        lines.append("No recorded parameter changed without a version bump either.")
    else:
        lines.append("Not seen from here: a change that bumps no version (a fused optimizer, a write through .data). "
                     "To see it, pass recorded=record_parameters(...) taken after the forward pass.")
    return lines


def _stale_line(saved: SavedTensor, places: Mapping[int, "Place"]) -> str:
    shape = f" {list(saved.shape)}" if saved.shape is not None else ""
    place = places.get(id(saved.node))
    what = saved.parameter or f"{saved.where}{shape}" + (f" {place}" if place else "")
    if saved.version_saved is None:
        return f"{what}: could not be read ({saved.where})"
    by = f" ({saved.where})" if saved.parameter else ""
    return f"{what}: saved at version {saved.version_saved}, now at version {saved.version_now}{by}"


def _grouped(lines: Any) -> List[str]:
    """Identical lines once with a count; at most MAX_LINES of them, then how many more."""
    counts: "OrderedDict[str, int]" = OrderedDict()
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    shown = [f"  {line}" + (f" (x{count})" if count > 1 else "") for line, count in list(counts.items())[:MAX_LINES]]
    if len(counts) > MAX_LINES:
        shown.append(f"  and {len(counts) - MAX_LINES} more like it.")
    return shown


def _counted(places: Any) -> str:
    counts: "OrderedDict[str, int]" = OrderedDict()
    for place in places:
        counts[place] = counts.get(place, 0) + 1
    return ", ".join(f"{count} {place}" for place, count in counts.items())


def _call_text(inputs: Optional[Sequence[Any]], autograd_grad: bool) -> str:
    if autograd_grad:
        return "torch.autograd.grad(...)"
    return "backward()" if inputs is None else "backward(inputs=...)"


def _output_problems(outputs: List[torch.Tensor], output_notes: List[str]) -> List[str]:
    """What is wrong with the outputs themselves, in the order PyTorch checks it."""
    if output_notes:
        return ["not-a-tensor"]
    if any(t.requires_grad and t.numel() != 1 for t in outputs):
        return ["non-scalar-output"]
    if any(not t.requires_grad for t in outputs):
        return ["no-grad-fn"]
    return []


def _call_problems(outputs: List[torch.Tensor], output_notes: List[str], inputs: Optional[List[Any]],
                   autograd_grad: bool) -> List[str]:
    """The errors PyTorch raises before running any node, in the order it checks them.

    ``autograd.grad`` with empty inputs: newer torch says so first, older torch (2.4) checks the outputs first, so
    both are named.
    """
    output_problems = _output_problems(outputs, output_notes)
    if inputs is not None and len(inputs) == 0:
        return ["empty-inputs", *output_problems[:1]] if autograd_grad else ["empty-inputs"]
    if output_problems:
        return output_problems[:1]
    if inputs is not None and any(not isinstance(t, torch.Tensor) for t in inputs):
        return ["input-not-a-tensor"]
    if inputs is not None and any(not t.requires_grad for t in inputs):
        return ["input-needs-no-grad"]
    return []


def diagnose(
    outputs: Any,
    params: Any = None,
    inputs: Any = None,
    *,
    recorded: Optional[ParameterRecord] = None,
    autograd_grad: bool = False,
) -> Diagnosis:
    """Say whether ``backward`` from ``outputs`` will fail, and why, without running it.

    Args:
        outputs: the loss (or losses: a list, or a dict by name) you are about to call backward on.
        params: to name parameters: a module, modules by name (``{"G": g, "D": d}``), ``model.named_parameters()``
            or a dict of tensors.
        inputs: what you will pass as ``backward(inputs=...)`` (or to ``torch.autograd.grad``).
        recorded: ``record_parameters(...)`` taken after the forward pass, to find changes no version counter shows.
        autograd_grad: diagnose ``torch.autograd.grad(outputs, inputs)`` instead of ``backward``.

    Never raises: what it cannot read becomes a note in the report.
    """
    try:
        return _diagnose(outputs, params, inputs, recorded, autograd_grad)
    except Exception as error:  # a graph this tool cannot read: say so rather than stop the learner's cell
        return Diagnosis([], None, notes=(f"diagnose could not read this graph ({type(error).__name__}: {error}).",))


def _diagnose(outputs: Any, params: Any, inputs: Any, recorded: Optional[ParameterRecord],
              autograd_grad: bool) -> Diagnosis:
    read_out = read_outputs(outputs)
    named = read_parameters(params)
    input_list, input_notes = read_inputs(inputs)
    tensors = read_out.values()
    notes = [*read_out.notes, *named.notes, *input_notes]
    if autograd_grad and input_list is None:
        notes.append("torch.autograd.grad needs inputs: diagnosed as backward() over every leaf.")
    call = _call_text(input_list, autograd_grad)
    call_errors = _call_problems(tensors, read_out.notes, input_list, autograd_grad)
    if call_errors:
        return Diagnosis([], call_errors[0], tuple(call_errors), notes=tuple(notes), call=call)

    wanted = None if input_list is None else [t for t in input_list if isinstance(t, torch.Tensor)]
    running = traversal.nodes_backward_runs(tensors, wanted, autograd_grad and wanted is not None)
    names = named.names_by_id()
    saved_by_node = {id(node): _saved_tensors_of(node, named.tensors, names) for node in running}
    problems = [s for node in running for s in saved_by_node[id(node)] if s.state is not State.ALIVE]
    places = _places(problems, names)
    possible = _error_order(tensors, running, problems)
    if wanted is not None:
        notes += _unreached(tensors, wanted, autograd_grad, possible)
        if autograd_grad and not possible and _unused(tensors, wanted):
            possible = ["unused-input"]
    silent = _silent_changes(running, saved_by_node, recorded) if recorded is not None else []
    if recorded is not None:
        notes += recorded.notes
    return Diagnosis(problems, possible[0] if possible else None, tuple(possible), tuple(silent),
                     recorded is not None, tuple(notes), places, call)


def _error_order(outputs: List[torch.Tensor], running: List[Any], problems: List[SavedTensor]) -> List[str]:
    """The error kinds among ``problems``, the one this build's CPU engine meets first leading."""
    kinds_by_node: Dict[int, str] = {}
    for saved in problems:
        kinds_by_node.setdefault(id(saved.node), _KIND_OF_STATE[saved.state])
    order: List[str] = []
    for node in traversal.engine_order(outputs, running):
        kind = kinds_by_node.get(id(node))
        if kind is not None and kind not in order:
            order.append(kind)
    order += [kind for kind in kinds_by_node.values() if kind not in order]
    return order


@dataclass(frozen=True)
class Place:
    """Where a saved tensor that is no parameter sits: its model, and the modules whose parameters are nearest."""

    model: Optional[str]
    near: str

    def __str__(self) -> str:
        return f"in {self.model} (next to {self.near})" if self.model else f"(next to {self.near})"


def _places(problems: List[SavedTensor], names: Dict[int, str]) -> Dict[int, Place]:
    """For each problem node that is no parameter, where it sits, from the parameters nearest below it.

    The model is the first part of those parameters' names (``G`` of ``G.main.0.weight``), said when the
    parameters come from more than one model.
    """
    models = {name.split(".", 1)[0] for name in names.values() if "." in name}
    places: Dict[int, Place] = {}
    for saved in problems:
        if saved.parameter is not None or id(saved.node) in places:
            continue
        nearest = traversal.nearest_parameters(saved.node, names)
        if not nearest:
            continue
        modules = sorted({name.rsplit(".", 1)[0] if "." in name else name for name in nearest})
        owners = sorted({name.split(".", 1)[0] for name in nearest})
        near = ", ".join(modules[:3]) + (" ..." if len(modules) > 3 else "")
        places[id(saved.node)] = Place(" & ".join(owners) if len(models) > 1 else None, near)
    return places


def _unreached(outputs: List[torch.Tensor], inputs: List[torch.Tensor], autograd_grad: bool,
               possible: List[str]) -> List[str]:
    if autograd_grad or possible:
        return []
    reached = traversal.input_nodes(traversal.graph_nodes(outputs), inputs)
    missing = len(inputs) - len(reached)
    if not missing:
        return []
    return [f"{missing} of the inputs are not reached from these outputs: their .grad stays as it is."]


def _unused(outputs: List[torch.Tensor], inputs: List[torch.Tensor]) -> bool:
    """True when an input of ``torch.autograd.grad`` is not reached from the outputs (and is no output itself)."""
    nodes = traversal.graph_nodes(outputs)
    reached = {id(node) for node in traversal.input_nodes(nodes, inputs)}
    output_ids = {id(t) for t in outputs}
    for tensor in inputs:
        node = tensor.grad_fn if tensor.grad_fn is not None else next(
            (n for n in nodes if getattr(n, "variable", None) is tensor), None)
        if id(tensor) not in output_ids and (node is None or id(node) not in reached):
            return True
    return False


def _silent_changes(running: List[Any], saved_by_node: Mapping[int, List[SavedTensor]],
                    recorded: ParameterRecord) -> List[SilentChange]:
    changed = set(recorded.changed_without_a_bump())
    saved_by: Dict[str, List[str]] = {}
    for node in running:
        for saved in saved_by_node[id(node)]:
            if saved.state is State.ALIVE and saved.parameter in changed:
                saved_by.setdefault(saved.parameter, []).append(saved.where)
    return [SilentChange(name, tuple(wheres)) for name, wheres in saved_by.items()]


def first_failing_node(outputs: Any, params: Any = None, inputs: Any = None, autograd_grad: bool = False) -> Any:
    """The node a backward from ``outputs`` fails on first (this build's CPU engine order), or None."""
    tensors = read_outputs(outputs).values()
    input_list, _ = read_inputs(inputs)
    wanted = None if input_list is None else [t for t in input_list if isinstance(t, torch.Tensor)]
    running = traversal.nodes_backward_runs(tensors, wanted, autograd_grad and wanted is not None)
    named = read_parameters(params)
    names = named.names_by_id()
    for node in traversal.engine_order(tensors, running):
        if any(s.state is not State.ALIVE for s in _saved_tensors_of(node, named.tensors, names)):
            return node
    return None

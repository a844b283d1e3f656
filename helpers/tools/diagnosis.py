"""Predict, before calling backward, whether it will fail, and why.

``diagnose`` checks what PyTorch checks, in PyTorch's order: the call itself (a keyword it does not take, empty
``inputs=``, each gradient's type, shape and complex-or-real against its output's, a non-scalar or grad-less output,
an input that needs no grad), then every saved tensor of every node the backward would run
(``helpers.tools.traversal`` holds the rule): freed by an earlier backward (error 1) or changed in place (error 2).
With a record taken after the forward pass (``record_parameters``), it also finds parameters that changed without a
version bump, which backward cannot notice at all.

Regions it cannot see into (``helpers.tools.regions``) are said, never guessed: a checkpointed block is recomputed at
backward time with the weights as they are then, so a weight of it changed since the forward pass (an optimizer
step) gives a silently different gradient: reported with a record, "cannot tell" without one. A reentrant checkpoint
under ``torch.autograd.grad`` or ``backward(inputs=...)`` is refused by PyTorch. A ``torch.compile`` region's own
saved tensors are read like any node's; whether its compiled backward refuses ``retain_graph=True`` is not seen.
It never unpacks a tensor a hook packed (a non-reentrant checkpoint's: that would recompute the block).

A node whose backward formula PyTorch does not have (``helpers.tools.formulas``: most often the backward of a
backward, which ``create_graph=True`` records, as in a gradient penalty through ``torch.cdist`` on torch 2.13)
raises when the backward runs it and needs the gradient of an input it has no formula for: predicted as "no-derivative".

Out of reach of any record taken after the forward pass: a write through ``.data`` inside the forward itself (a
custom spectral norm assigning ``weight.data`` after an op saved the weight), and a ``.data`` write on a saved
activation after the forward. Both change what backward reads without a version bump, and no tool here sees them.
"""
from __future__ import annotations

import html
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from helpers.language import marked, tr, translated
from helpers.tools import formulas, traversal
from helpers.tools import opaque as opaque_regions
from helpers.tools.arguments import CallArguments, read_call, read_inputs, read_outputs, read_parameters
from helpers.tools.display import card_html
from helpers.tools.errors import KINDS
from helpers.tools.fingerprint import ParameterRecord
from helpers.tools.opaque import RECOMPUTED
from helpers.tools.saved import SavedTensor, State, _saved_tensors_of

_KIND_OF_STATE = {State.FREED: "backward-twice", State.STALE: "inplace-version"}
MAX_LINES = 8  # per group of a report; the rest is counted, not printed
# How the verdict names an error kind that shares the way with another; the other kinds by their whole title.
_SHORT_NAMES = {"backward-twice": marked("error 1"), "inplace-version": marked("error 2")}


@dataclass(frozen=True)
class SilentChange:
    """A parameter backward will read with values other than the forward's, and raise nothing: one a saved tensor
    holds, changed since the record without a version bump; or a weight of a checkpointed block, changed since the
    record at all (the block is recomputed with it at backward time).

    Attributes:
        parameter: its name.
        saved_by: where it is saved, e.g. ``["AddmmBackward0.mat2"]``, or the checkpoint that recomputes with it.
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
        unseen: what the tool cannot see on the way (a region it cannot look into, which, where, and what that
            hides); when nothing else decides the outcome, ``will_fail`` is None: cannot tell.
        refusals: PyTorch errors with no kind in ``KINDS`` that the call will meet (a reentrant checkpoint under
            ``torch.autograd.grad``), as sentences.
        missing_formulas: the nodes on the way that raise for want of a formula (``helpers.tools.formulas``: a
            double backward through ``torch.cdist`` on torch 2.13, say), with PyTorch's message, as sentences.
    """

    problems: List[SavedTensor]
    prediction: Optional[str]
    possible_errors: Tuple[str, ...] = ()
    silent_changes: Tuple[SilentChange, ...] = ()
    recorded: bool = False
    notes: Tuple[str, ...] = ()
    places: Mapping[int, "Place"] = field(default_factory=dict)
    call: str = "backward()"
    unseen: Tuple[str, ...] = ()
    refusals: Tuple[str, ...] = ()
    missing_formulas: Tuple[str, ...] = ()

    @property
    def will_fail(self) -> Optional[bool]:
        """True when the call raises, False when it runs, None when the tool cannot tell (see ``unseen``)."""
        if self.possible_errors or self.refusals:
            return True
        return None if self.unseen else False

    @property
    def cannot_tell(self) -> bool:
        """True when the outcome hangs on what the tool cannot see (``unseen``)."""
        return self.will_fail is None

    @property
    def wrong_values(self) -> bool:
        """True when it runs but with parameters that changed silently since the record."""
        return bool(self.silent_changes)

    def _lines(self) -> List[str]:
        lines = _verdict(self)
        stale = [p for p in self.problems if p.state is State.STALE]
        freed = [p for p in self.problems if p.state is State.FREED]
        if stale:
            lines.append(tr("Changed in place since the forward pass saved them (on its way):"))
            lines += _grouped(_stale_line(s, self.places) for s in stale)
        if freed:
            models = [getattr(self.places.get(id(s.node)), "model", None) for s in freed]
            if any(models):
                lines.append(tr("{count} saved tensor(s) on its way were freed by an earlier backward ({places}), "
                                "e.g. {example}.", count=len(freed), places=_counted(models), example=freed[0].where))
            else:
                lines.append(tr("{count} saved tensor(s) on its way were freed by an earlier backward, e.g. {example}.",
                                count=len(freed), example=freed[0].where))
        recomputed = [change for change in self.silent_changes if change.saved_by[:1] == (RECOMPUTED,)]
        silent = [change for change in self.silent_changes if change not in recomputed]
        if silent:
            lines.append(tr("Changed since the record without a version bump (a fused optimizer, a write through "
                            ".data): backward cannot notice, and would use the new values:"))
            lines += _grouped(tr("{parameter} (saved by {nodes})", parameter=change.parameter,
                                 nodes=", ".join(change.saved_by)) for change in silent)
        if recomputed:
            lines.append(tr("Changed since the record, and read by a checkpointed block that backward recomputes with "
                            "the weights as they are then: its gradient will silently differ from the forward's:"))
            by_region: "OrderedDict[str, List[str]]" = OrderedDict()
            for change in recomputed:
                by_region.setdefault(", ".join(change.saved_by[1:]), []).append(change.parameter)
            lines += _grouped(tr("{parameters} (in the {region})", parameters=", ".join(names), region=where)
                              for where, names in by_region.items())
        if self.missing_formulas:
            lines.append(tr("No formula in this build of PyTorch for (raised when backward reaches it):"))
            lines += _grouped(self.missing_formulas)
        if self.refusals:
            lines.append(tr("PyTorch refuses this call:"))
            lines += [f"  {refusal}" for refusal in self.refusals]
        if self.unseen:
            lines.append(tr("Not seen by this tool (so not part of the verdict):"))
            lines += [f"  {what}" for what in self.unseen]
        lines += list(self.notes)
        return lines

    def __str__(self) -> str:
        return "\n".join(self._lines())

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        body = "<br>".join(html.escape(line).replace("  ", "&nbsp;&nbsp;") for line in self._lines())
        accent = "#c0392b" if self.will_fail else ("#e67e22" if self.wrong_values or self.cannot_tell else "#27ae60")
        return card_html(tr("Diagnosis before {call}", call=self.call), f"<div>{body}</div>", accent=accent)


def _kind_name(kind: str) -> str:
    """An error kind as the verdict names it among others: "error 1", or its whole title (in English, lowercased)."""
    if kind in _SHORT_NAMES:
        return translated(_SHORT_NAMES[kind])
    title = KINDS[kind].title
    shown = translated(title)
    return title.lower() if shown == title else shown


def _verdict(report: Diagnosis) -> List[str]:
    call = report.call
    if report.will_fail and not report.possible_errors:
        return [tr("{call} will fail: PyTorch refuses it (below).", call=call)]
    if report.will_fail:
        if len(report.possible_errors) > 1:
            names = [_kind_name(kind) for kind in report.possible_errors]
            causes = names[0]
            for name in names[1:]:
                causes = tr("{first} and {second}", first=causes, second=name)
            return [tr("{call} will fail: on its way lie causes of {causes}. Which one it raises first depends on the "
                       "order the engine runs nodes in (here: {first}).", call=call, causes=causes,
                       first=translated(KINDS[report.prediction].title))]
        kind = KINDS[report.prediction]
        if kind.title.startswith("Error"):
            return [tr("{call} will fail with {title}.", call=call, title=translated(kind.title))]
        return [tr("{call} will fail. {title}.", call=call, title=translated(kind.title)),
                *translated(kind.explanation).splitlines()]
    if report.wrong_values and report.cannot_tell:
        return [tr("Cannot tell whether {call} runs (it cannot see everything on its way, below); if it does, it "
                   "reads values that changed since the forward pass: a silently different gradient.", call=call)]
    if report.wrong_values:
        return [tr("{call} will run, but with values that changed behind autograd's back.", call=call)]
    if report.cannot_tell:
        return [tr("Cannot tell whether {call} runs as the forward pass would have it: this tool cannot see inside "
                   "{count} thing(s) on its way (below). What it can see is fine: no saved tensor it read is freed or "
                   "changed in place.", call=call, count=len(report.unseen))]
    lines = [tr("{call} will run: every saved tensor on its way is alive, and no version counter moved since it was "
                "saved.", call=call)]
    if report.recorded:
        lines.append(tr("No recorded parameter changed without a version bump either."))
    else:
        lines.append(tr("Not seen from here: a change that bumps no version (a fused optimizer, a write through "
                        ".data). To see it, pass recorded=record_parameters(...) taken after the forward pass."))
    return lines


def _stale_line(saved: SavedTensor, places: Mapping[int, "Place"]) -> str:
    shape = f" {list(saved.shape)}" if saved.shape is not None else ""
    place = places.get(id(saved.node))
    what = saved.parameter or f"{saved.where}{shape}" + (f" {place}" if place else "")
    if saved.version_saved is None:
        return tr("{tensor}: could not be read ({node})", tensor=what, node=saved.where)
    if saved.parameter:
        return tr("{tensor}: saved at version {saved}, now at version {now} ({node})", tensor=what,
                  saved=saved.version_saved, now=saved.version_now, node=saved.where)
    return tr("{tensor}: saved at version {saved}, now at version {now}", tensor=what, saved=saved.version_saved,
              now=saved.version_now)


def _grouped(lines: Any) -> List[str]:
    """Identical lines once with a count; at most MAX_LINES of them, then how many more."""
    counts: "OrderedDict[str, int]" = OrderedDict()
    for line in lines:
        counts[line] = counts.get(line, 0) + 1
    shown = [f"  {line}" + (f" (x{count})" if count > 1 else "") for line, count in list(counts.items())[:MAX_LINES]]
    if len(counts) > MAX_LINES:
        shown.append("  " + tr("and {count} more like it.", count=len(counts) - MAX_LINES))
    return shown


def _counted(models: Sequence[Optional[str]]) -> str:
    """How many are in each model (None: elsewhere), in order of first appearance: ``2 in G, 1 elsewhere``."""
    counts: "OrderedDict[Optional[str], int]" = OrderedDict()
    for model in models:
        counts[model] = counts.get(model, 0) + 1
    return ", ".join(tr("{count} in {model}", count=count, model=model) if model else
                     tr("{count} elsewhere", count=count) for model, count in counts.items())


def _call_text(inputs: Optional[Sequence[Any]], autograd_grad: bool, arguments: Optional[CallArguments] = None) -> str:
    """The call as the report names it: ``backward(gradient=..., inputs=...)``, ``torch.autograd.grad(...)``."""
    arguments = arguments or CallArguments(autograd_grad)
    given = [f"{arguments.gradient_name}=..."] if arguments.gradients is not None else []
    if arguments.create_graph:
        given.append("create_graph=True")
    if arguments.retain_graph and not arguments.create_graph:
        given.append("retain_graph=True")
    if autograd_grad:
        given += [flag for flag, on in (("allow_unused=True", arguments.allow_unused),
                                        ("is_grads_batched=True", arguments.is_grads_batched)) if on]
        return f"torch.autograd.grad(..., {', '.join(given)})" if given else "torch.autograd.grad(...)"
    if inputs is not None:
        given.append("inputs=...")
    return f"backward({', '.join(given)})"


# What PyTorch 2.13 says instead of the kind's own words, where its message for the case is another one.
_GARBLED = marked("PyTorch's message for a mismatch past the first output may come out garbled ('Boolean value of "
                  "Tensor with more than one value is ambiguous', 'The size of tensor a ... must match'): it builds "
                  "the message by comparing tensors with ==. The cause is this shape.")
_ALLOWED_UNUSED = marked("Some inputs are not reached from these outputs: allowed (allow_unused=True, or "
                         "materialize_grads=True), they get None, or zeros of their shape with materialize_grads=True.")


def _output_problems(outputs: List[torch.Tensor], output_notes: List[str],
                     arguments: Optional[CallArguments] = None) -> Tuple[List[str], List[str]]:
    """What is wrong with the outputs and their gradients, in the order PyTorch checks it, and notes.

    The order of ``torch.autograd._make_grads`` (each output with its gradient in turn: the gradient's type,
    shape, complex-or-real; or, given none, a scalar real output), then vmap's (``is_grads_batched``), then the
    engine's (one gradient per output, every output in a graph).
    """
    if output_notes:
        return ["not-a-tensor"], []
    arguments = arguments or CallArguments()
    items = list(arguments.outputs) or outputs
    if arguments.gradients_unreadable:
        return ["grad-output-type"], [tr("{name}= is a {type}: PyTorch raises TypeError ('{type}' object is not "
                                         "iterable).", name=arguments.gradient_name,
                                         type=arguments.gradients_unreadable)]
    grads = arguments.gradients if arguments.gradients is not None else (None,) * len(items)
    batched = arguments.is_grads_batched
    for index, (out, grad) in enumerate(zip(items, grads, strict=False)):  # as PyTorch: pairs, the rest left
        if isinstance(grad, torch.Tensor):
            if batched and grad.dim() == 0:
                return ["batched-grad-outputs"], [tr("PyTorch raises IndexError (invalid index of a 0-dim tensor): "
                                                     "a batched gradient needs a batch dimension.")]
            if (grad.shape[1:] if batched else grad.shape) != out.shape:
                return ["grad-output-shape"], [] if index == 0 else [translated(_GARBLED)]
            if out.dtype.is_complex != grad.dtype.is_complex:
                return ["grad-output-complex"], []
        elif grad is not None:
            return ["grad-output-type"], []
        elif out.requires_grad:
            if out.numel() != 1:
                return ["non-scalar-output"], []
            if not out.dtype.is_floating_point:
                return ["complex-output"], []
    if batched:
        problem = _batch_problem(items, grads)
        if problem:
            return ["batched-grad-outputs"], problem
    if len(grads) < len(items):
        return ["grad-output-count"], []
    extra = [tr("{count} more {name}= entries than outputs: PyTorch ignores the extra ones.",
                count=len(grads) - len(items), name=arguments.gradient_name)] if len(grads) > len(items) else []
    return (["no-grad-fn"] if any(not t.requires_grad for t in items) else []), extra


def _batch_problem(items: List[torch.Tensor], grads: Sequence[Any]) -> List[str]:
    """Why vmap refuses the gradients of ``is_grads_batched=True`` (a note), or [] when it takes them."""
    if any(grad is None and out.requires_grad for out, grad in zip(items, grads, strict=False)):
        return [tr("An output with no batched gradient gets PyTorch's ones_like(output), which has no batch "
                   "dimension: vmap refuses it (or, for a one-element output of one or more dimensions, the engine "
                   "raises 'invalid gradient at index ...').")]
    sizes = sorted({grad.shape[0] for grad in grads if isinstance(grad, torch.Tensor)})
    if len(sizes) > 1:
        return [tr("The batched gradients have {count} different batch sizes ({sizes}): vmap needs one.",
                   count=len(sizes), sizes=sizes)]
    return []


def _call_problems(outputs: List[torch.Tensor], output_notes: List[str], inputs: Optional[List[Any]],
                   autograd_grad: bool, arguments: Optional[CallArguments] = None) -> Tuple[List[str], List[str]]:
    """The errors PyTorch raises before running any node, in the order it checks them, and notes about them.

    A keyword the call does not take first (Python refuses the call), then autograd.grad's
    ``materialize_grads``/``allow_unused`` clash. ``autograd.grad`` with empty inputs: newer torch says so first,
    older torch (2.4) checks the outputs first, so both are named.
    """
    arguments = arguments or CallArguments(autograd_grad)
    if arguments.unexpected:
        name = arguments.unexpected[0]
        if autograd_grad:
            return ["unexpected-keyword"], [tr("{name}= is backward()'s; torch.autograd.grad calls it grad_outputs=.",
                                               name=name)]
        return ["unexpected-keyword"], [tr("{name}= is torch.autograd.grad's (diagnose(..., autograd_grad=True)); "
                                           "backward() has gradient= for grad_outputs.", name=name)]
    if arguments.allow_unused_conflict:
        return ["materialize-needs-allow-unused"], []
    output_problems, notes = _output_problems(outputs, output_notes, arguments)
    if inputs is not None and len(inputs) == 0:
        return (["empty-inputs", *output_problems[:1]] if autograd_grad else ["empty-inputs"]), []
    if output_problems:
        return output_problems[:1], notes
    if inputs is not None and any(not isinstance(t, torch.Tensor) for t in inputs):
        return ["input-not-a-tensor"], notes
    if inputs is not None and any(not t.requires_grad for t in inputs):
        return ["input-needs-no-grad"], notes
    if arguments.is_grads_batched:
        notes.append(tr("is_grads_batched=True: the backward runs once per row of grad_outputs, under vmap."))
    return [], notes


def _gradient_edges(outputs: Any, inputs: Any) -> str:
    """Which arguments hold a GradientEdge ("outputs", "inputs", "outputs and inputs"), or "" when none does."""
    edge_type = getattr(torch.autograd.graph, "GradientEdge", None)   # (a NamedTuple since torch 2.2 or so)
    if edge_type is None:
        return ""

    def holds(value: Any) -> bool:
        if isinstance(value, edge_type):
            return True
        values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
        return any(isinstance(item, edge_type) for item in values)
    names = [name for name, value in (("outputs", outputs), ("inputs", inputs)) if holds(value)]
    return tr("{first} and {second}", first=names[0], second=names[1]) if len(names) == 2 else "".join(names)


def _formulas_it_cannot_judge(running: Sequence[Any], arguments: CallArguments) -> List[str]:
    """Backward formulas on the way whose running the tool cannot judge without running them: a custom
    ``torch.autograd.Function`` under ``is_grads_batched=True`` (its backward must work under vmap)."""
    found = []
    if arguments.is_grads_batched:
        custom = sorted({type(node).__name__ for node in running
                         if isinstance(node, torch.autograd.function.BackwardCFunction)})
        if custom:
            found.append(tr("{nodes}: a custom autograd.Function's backward, run under vmap (is_grads_batched=True); "
                            "whether it supports vmap is not visible without running it.", nodes=", ".join(custom[:3])))
    return found


def diagnose(
    outputs: Any,
    params: Any = None,
    inputs: Any = None,
    *,
    recorded: Optional[ParameterRecord] = None,
    autograd_grad: bool = False,
    gradient: Any = None,
    grad_tensors: Any = None,
    grad_outputs: Any = None,
    retain_graph: Optional[bool] = None,
    create_graph: bool = False,
    allow_unused: Optional[bool] = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
    only_inputs: bool = True,
) -> Diagnosis:
    """Say whether ``backward`` (or ``torch.autograd.grad``) from ``outputs`` will fail, and why, without running it.

    Pass the call's own arguments under the call's own names, with PyTorch's meaning and defaults:
    ``loss.backward(g)`` is ``diagnose(loss, gradient=g)``, ``torch.autograd.grad(out, x, grad_outputs=g,
    create_graph=True)`` is ``diagnose(out, inputs=x, autograd_grad=True, grad_outputs=g, create_graph=True)``.

    Args:
        outputs: the loss (or losses: a list, or a dict by name) you are about to call backward on.
        params: to name parameters: a module, modules by name (``{"G": g, "D": d}``), ``model.named_parameters()``
            or a dict of tensors.
        inputs: what you will pass as ``backward(inputs=...)`` (or to ``torch.autograd.grad``).
        recorded: ``record_parameters(...)`` taken after the forward pass, to find changes no version counter shows.
        autograd_grad: diagnose ``torch.autograd.grad(outputs, inputs)`` instead of ``backward``.
        gradient: Tensor.backward's gradient (``grad_tensors`` is torch.autograd.backward's name for it): a tensor
            of each output's shape, one per output; without it every output must be a real scalar.
        grad_outputs: the same for torch.autograd.grad. Given to the other call, either name is the TypeError
            PyTorch raises.
        retain_graph: keep the saved tensors alive after the call (None: as ``create_graph``). Said in the notes;
            it changes the next call, not this one.
        create_graph: record the gradients too (for a gradient penalty); implies ``retain_graph``.
        allow_unused: autograd.grad only: an input the outputs do not reach gets None instead of an error.
        is_grads_batched: autograd.grad only: each grad_outputs tensor has a batch dimension first.
        materialize_grads: autograd.grad only: unused inputs get zeros; implies ``allow_unused`` and refuses
            ``allow_unused=False``.
        only_inputs: autograd.grad only; deprecated and ignored by PyTorch.

    The autograd.grad-only keywords given to a backward count only when not at their defaults: a default passed
    on purpose cannot be told from one left out. Never raises: what it cannot read becomes a note in the report.
    """
    try:
        arguments = read_call(autograd_grad, {
            "outputs": outputs, "gradient": gradient, "grad_tensors": grad_tensors, "grad_outputs": grad_outputs,
            "retain_graph": retain_graph, "create_graph": create_graph, "allow_unused": allow_unused,
            "is_grads_batched": is_grads_batched, "materialize_grads": materialize_grads, "only_inputs": only_inputs})
        return _diagnose(outputs, params, inputs, recorded, autograd_grad, arguments)
    except Exception as error:  # a graph this tool cannot read: say so rather than stop the learner's cell
        # Cannot tell, never "will run": the graph was not read.
        return Diagnosis([], None, unseen=(tr("the graph: diagnose could not read it ({error_type}: {error}).",
                                              error_type=type(error).__name__, error=error),))


def _diagnose(outputs: Any, params: Any, inputs: Any, recorded: Optional[ParameterRecord],
              autograd_grad: bool, arguments: Optional[CallArguments] = None) -> Diagnosis:
    arguments = arguments or CallArguments(autograd_grad)
    edges = _gradient_edges(outputs, inputs)
    if edges:
        return Diagnosis([], None, notes=(), call=_call_text(None, autograd_grad, arguments),
                         unseen=(tr("{arguments}: a GradientEdge (torch.autograd.graph.get_gradient_edge) is a node "
                                    "and an input number, not a tensor; this tool reads tensors only.",
                                    arguments=edges),))
    read_out = read_outputs(outputs)
    named = read_parameters(params)
    input_list, input_notes = read_inputs(inputs)
    tensors = read_out.values()
    notes = [*read_out.notes, *named.notes, *input_notes, *arguments.notes]
    if autograd_grad and input_list is None:
        notes.append(tr("torch.autograd.grad needs inputs: diagnosed as backward() over every leaf."))
    call = _call_text(input_list, autograd_grad, arguments)
    call_errors, call_notes = _call_problems(tensors, read_out.notes, input_list, autograd_grad, arguments)
    notes += call_notes
    if call_errors:
        return Diagnosis([], call_errors[0], tuple(call_errors), notes=tuple(notes), call=call)

    wanted = None if input_list is None else [t for t in input_list if isinstance(t, torch.Tensor)]
    running = traversal.nodes_backward_runs(tensors, wanted, autograd_grad and wanted is not None)
    names = named.names_by_id()
    saved_by_node = {id(node): _saved_tensors_of(node, named.tensors, names) for node in running}
    problems = [s for node in running for s in saved_by_node[id(node)] if s.state in _KIND_OF_STATE]
    opaque = opaque_regions.find(running, saved_by_node, named.tensors, names, recorded, wanted is not None,
                                 bool(arguments.retain_graph or arguments.create_graph), SilentChange)
    problems += opaque.problems
    targets = traversal.input_nodes(traversal.graph_nodes(tensors), wanted) if wanted is not None else []
    missing, unjudged, formula_notes = formulas.on_the_way(running, targets, wanted is not None)
    notes += formula_notes
    unseen = [*opaque.unseen, *_formulas_it_cannot_judge(running, arguments), *unjudged]
    places = _places(problems, names)
    possible = _error_order(tensors, running, problems, missing)
    if wanted is not None:
        notes += _unreached(tensors, wanted, autograd_grad, possible)
        if autograd_grad and not possible and not opaque.refusals and _unused(tensors, wanted):
            if arguments.allow_unused:
                notes.append(translated(_ALLOWED_UNUSED))
            else:
                possible = ["unused-input"]
    silent = _silent_changes(running, saved_by_node, recorded) if recorded is not None else []
    silent += opaque.silent
    if recorded is not None:
        notes += recorded.notes
    return Diagnosis(problems, possible[0] if possible else None, tuple(possible), tuple(silent),
                     recorded is not None, tuple(notes), places, call, tuple(unseen), tuple(opaque.refusals),
                     tuple(_missing_line(m, names) for m in missing))


def _missing_line(missing: formulas.Missing, names: Dict[int, str]) -> str:
    near = traversal.nearest_parameters(missing.node, names)
    modules = sorted({name.rsplit(".", 1)[0] if "." in name else name for name in near})
    message = f"'{missing.message}'" if missing.exact else translated(missing.message)
    if not modules:
        return f"{type(missing.node).__name__}: {message}"
    return tr("{node} (next to {modules}): {message}", node=type(missing.node).__name__,
              modules=", ".join(modules[:3]) + (" ..." if len(modules) > 3 else ""), message=message)


def _error_order(outputs: List[torch.Tensor], running: List[Any], problems: List[SavedTensor],
                 missing: Sequence[formulas.Missing] = ()) -> List[str]:
    """The error kinds among ``problems`` and the nodes with no formula, the one this build's CPU engine meets
    first leading."""
    kinds_by_node: Dict[int, str] = {}
    for saved in problems:
        kinds_by_node.setdefault(id(saved.node), _KIND_OF_STATE[saved.state])
    for node in missing:
        kinds_by_node.setdefault(id(node.node), "no-derivative")  # it unpacks its saved tensors first
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
        if self.model:
            return tr("in {model} (next to {modules})", model=self.model, modules=self.near)
        return tr("(next to {modules})", modules=self.near)


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
    return [tr("{count} of the inputs are not reached from these outputs: their .grad stays as it is.",
               count=missing)]


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
        if any(s.state in _KIND_OF_STATE for s in _saved_tensors_of(node, named.tensors, names)):
            return node
    return None

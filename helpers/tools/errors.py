"""The course's error kinds: how to recognise each PyTorch wording and what to say about it."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from helpers.language import marked, translated


@dataclass(frozen=True)
class ErrorKind:
    """One kind of error the course reproduces on purpose.

    Attributes:
        name: short id used in notebooks, e.g. ``"backward-twice"``.
        title: a human title for cards.
        exception_type: the class PyTorch raises.
        pattern: a regex that matches every wording PyTorch 2.4 to 2.14 uses.
        explanation: two short lines for the learner.
        notebook: the notebook that covers it, or None for an error of the call that no notebook is about.
    """

    name: str
    title: str
    exception_type: type
    pattern: re.Pattern
    explanation: str
    notebook: Optional[str] = None

    def matches(self, exc: BaseException) -> bool:
        """True when ``exc`` is an instance of this kind."""
        return isinstance(exc, self.exception_type) and bool(self.pattern.search(str(exc)))


# "[torch.FloatTensor [64, 1]], which is output 0 of AsStridedBackward0, is at version 2; expected version 1 instead."
# Since PyTorch 2.13 the node is named without the "Backward0" suffix ("output 0 of AsStrided"),
# and a leaf tensor's message has no "which is output ..." part at all.
_VERSION_PATTERN = re.compile(
    r"one of the variables needed for gradient computation has been modified by an inplace operation: "
    r"\[(?P<tensor_type>[^\s\]]+) \[(?P<shape>[\d, ]*)\]\]"
    r"(?:, which is output (?P<output_nr>\d+) of (?P<grad_fn>[\w:.<>]+),)?"
    r" is at version (?P<version_now>\d+); expected version (?P<version_expected>\d+) instead"
)

KINDS: dict[str, ErrorKind] = {
    kind.name: kind
    for kind in (
        ErrorKind(
            name="backward-twice",
            title=marked("Error 1: backward through the graph a second time"),
            exception_type=RuntimeError,
            # Every wording since PyTorch 0.x starts like this: "..., but the buffers have already been freed",
            # "..., but the saved intermediate results have already been freed", and today's
            # "... (or directly access saved tensors after they have already been freed)".
            pattern=re.compile(r"Trying to backward through the graph a second time"),
            explanation=marked(
                "A backward pass frees the tensors the graph saved, unless you pass retain_graph=True.\n"
                "A second backward through the same part of the graph then finds them gone."
            ),
            notebook="02_backward_twice",
        ),
        ErrorKind(
            name="inplace-version",
            title=marked("Error 2: a saved tensor was modified by an in-place operation"),
            exception_type=RuntimeError,
            pattern=_VERSION_PATTERN,
            explanation=marked(
                "Autograd saved this tensor at one version; an in-place change (often optimizer.step()) bumped it.\n"
                "Run every backward that needs the old values before you change them."
            ),
            notebook="03_inplace_version",
        ),
        ErrorKind(
            name="leaf-inplace",
            title=marked("An in-place operation on a leaf that requires grad"),
            exception_type=RuntimeError,
            pattern=re.compile(r"a (?:view of a )?leaf Variable that requires grad (?:is being|has been) used in an "
                               r"in-place operation"),
            explanation=marked(
                "Parameters are leaves: autograd forbids changing them in place while it records.\n"
                "Change them under torch.no_grad(), as optimizers do."
            ),
            notebook="03_inplace_version",
        ),
        ErrorKind(
            name="no-grad-fn",
            title=marked("Backward from a tensor that is not part of any graph"),
            exception_type=RuntimeError,
            pattern=re.compile(r"element \d+ of tensors does not require grad and does not have a grad_fn"),
            explanation=marked(
                "The tensor you called backward on was computed without recording (no_grad, detach).\n"
                "Nothing connects it to the parameters, so there is nothing to differentiate."
            ),
            notebook="01_graph_and_saved_tensors",
        ),
        ErrorKind(
            name="unused-input",
            title=marked("autograd.grad asked for a tensor the output does not depend on"),
            exception_type=RuntimeError,
            # "One of the differentiated Tensors appears ..." until 2.12;
            # "The differentiated Tensor at index 1 appears ..." since.
            pattern=re.compile(
                r"(?:One of the differentiated Tensors|The differentiated Tensor at index \d+) "
                r"appears to not have been used in the graph"
            ),
            explanation=marked(
                "The output you differentiated does not depend on one of the inputs you listed.\n"
                "Check which model each loss really reaches, or pass allow_unused=True."
            ),
            notebook="04_whose_gradient",
        ),
        ErrorKind(
            name="ddp-unfinished-reduction",
            title=marked("DDP: a model's gradients were never all reduced"),
            exception_type=RuntimeError,
            pattern=re.compile(r"Expected to have finished reduction in the prior iteration before starting a new one"),
            explanation=marked(
                "DDP averages a wrapper's gradients once every parameter it waits for got one in this iteration.\n"
                "An unused head, or inputs= leaving part out, keeps it waiting; the next forward with grad raises."
            ),
            notebook="08_past_one_machine",
        ),
        ErrorKind(
            name="ddp-ready-twice",
            title=marked("DDP: a parameter got a second gradient in one iteration"),
            exception_type=RuntimeError,
            pattern=re.compile(r"Expected to mark a variable ready only once"),
            explanation=marked(
                "DDP takes one gradient per parameter per forward and averages once all of the wrapper's are in.\n"
                "A second one before that raises this; one after it is silently not averaged."
            ),
            notebook="08_past_one_machine",
        ),
        ErrorKind(
            name="ddp-graph-changed",
            title=marked("DDP with static_graph=True: the set of parameters with a gradient changed"),
            exception_type=RuntimeError,
            pattern=re.compile(r"Your training graph has changed in this iteration, e\.g\., one parameter is unused "
                               r"in first iteration, but then got used"),
            explanation=marked(
                "static_graph=True promises that every iteration gives gradients to the same parameters.\n"
                "Training one model in one step and the other in the next breaks that promise."
            ),
            notebook="08_past_one_machine",
        ),
        # Errors of the call itself, raised before any node runs (diagnose predicts them too).
        ErrorKind(
            name="empty-inputs",
            title=marked("An empty inputs= list"),
            exception_type=Exception,  # a ValueError from autograd.grad before torch 2.5 or so, a RuntimeError since
            pattern=re.compile(r"`inputs` argument to `(?:backward|grad)\(\)` cannot be empty|"
                               r"grad requires non-empty inputs"),
            explanation=marked(
                "backward(inputs=[]) or autograd.grad(loss, []) has nothing to differentiate for.\n"
                "List the tensors you want gradients for, or leave inputs= out."
            ),
        ),
        ErrorKind(
            name="non-scalar-output",
            title=marked("backward() from a tensor of more than one element"),
            exception_type=RuntimeError,
            pattern=re.compile(r"grad can be implicitly created only for scalar outputs"),
            explanation=marked(
                "backward() without a gradient argument starts from a single number.\n"
                "Reduce the output first (.sum(), .mean()), or pass gradient=."
            ),
        ),
        ErrorKind(
            name="input-needs-no-grad",
            title=marked("An input that does not require grad"),
            exception_type=RuntimeError,
            pattern=re.compile(r"can't retain_grad on Tensor that has requires_grad=False|"
                               r"One of the differentiated Tensors does not require grad"),
            explanation=marked(
                "Every tensor in inputs= must require grad: a parameter, or something computed from one.\n"
                "A tensor made under torch.no_grad(), or a .detach()ed one, has no gradient to give."
            ),
        ),
        ErrorKind(
            name="input-not-a-tensor",
            title=marked("An input that is not a tensor"),
            exception_type=Exception,
            pattern=re.compile(r"all inputs have to be Tensors"),
            explanation=marked("inputs= takes tensors (or a list of them), such as list(model.parameters())."),
        ),
        ErrorKind(
            name="not-a-tensor",
            title=marked("backward() on something that is not a tensor"),
            exception_type=Exception,
            pattern=re.compile(r"has no attribute 'backward'"),
            explanation=marked("Only a tensor computed with grad on has a backward(): check what your loss function "
                               "returns."),
        ),
        # Errors of the call's other arguments: gradient= / grad_outputs= and the keywords of the other call.
        ErrorKind(
            name="unexpected-keyword",
            title=marked("A keyword argument this call does not take"),
            exception_type=TypeError,
            pattern=re.compile(r"got an unexpected keyword argument '\w+'"),
            explanation=marked(
                "backward() takes gradient=, retain_graph=, create_graph=, inputs=; torch.autograd.grad takes\n"
                "grad_outputs=, allow_unused=, is_grads_batched=, materialize_grads= (and retain/create_graph) too."
            ),
        ),
        ErrorKind(
            name="materialize-needs-allow-unused",
            title=marked("materialize_grads=True with allow_unused=False"),
            exception_type=ValueError,
            pattern=re.compile(r"Expected allow_unused to be True or not passed when materialize_grads=True"),
            explanation=marked(
                "materialize_grads=True returns zeros for unused inputs, which means allowing them.\n"
                "Leave allow_unused= out (or pass True)."
            ),
        ),
        ErrorKind(
            name="grad-output-type",
            title=marked("A gradient that is neither a tensor nor None"),
            exception_type=TypeError,
            pattern=re.compile(r"gradients can be either Tensors or None, but got \w+"),
            explanation=marked(
                "gradient= / grad_outputs= takes a tensor, or a sequence with one tensor (or None) per output.\n"
                "A number is not accepted: write torch.ones_like(output) or torch.tensor(1.0)."
            ),
        ),
        ErrorKind(
            name="grad-output-shape",
            title=marked("A gradient whose shape is not its output's"),
            exception_type=RuntimeError,
            # The same words since PyTorch 1.x; the second alternative is the is_grads_batched=True wording.
            pattern=re.compile(r"Mismatch in shape: grad_output\[\d+\] has a shape of torch\.Size\(\[[\d, ]*\]\) "
                               r"and output\[\d+\] has a shape of torch\.Size\(\[[\d, ]*\]\)|"
                               r"If `is_grads_batched=True`, we interpret the first dimension of each grad_output "
                               r"as the batch dimension"),
            explanation=marked(
                "Each gradient given for an output must have exactly that output's shape (no broadcasting):\n"
                "torch.ones_like(output); with is_grads_batched=True, a batch dimension first, then that shape."
            ),
        ),
        ErrorKind(
            name="grad-output-complex",
            title=marked("A complex gradient for a real output, or a real one for a complex output"),
            exception_type=RuntimeError,
            pattern=re.compile(r"For complex Tensors, both grad_output and output are required to have the same dtype"),
            explanation=marked(
                "A gradient and its output must both be complex or both be real\n"
                "(float64 for a float32 output is fine: PyTorch casts it)."
            ),
        ),
        ErrorKind(
            name="grad-output-count",
            title=marked("Fewer gradients than outputs"),
            exception_type=RuntimeError,
            pattern=re.compile(r"got \d+ tensors and \d+ gradients"),
            explanation=marked(
                "gradient= / grad_outputs= needs one entry per output (None for a scalar one).\n"
                "A single tensor counts as one entry, whatever its shape."
            ),
        ),
        ErrorKind(
            name="complex-output",
            title=marked("backward() from a complex output without a gradient"),
            exception_type=RuntimeError,
            pattern=re.compile(r"grad can be implicitly created only for real scalar outputs"),
            explanation=marked(
                "Without a gradient argument PyTorch starts from 1.0, which only makes sense for a real output.\n"
                "Take .real, .abs() or a real-valued loss first, or pass a complex gradient=."
            ),
        ),
        ErrorKind(
            name="batched-grad-outputs",
            title=marked("is_grads_batched=True without one batch of gradients for every output"),
            exception_type=ValueError,
            pattern=re.compile(r"vmap\(vjp, in_dims=0, \.\.\.\)\(<inputs>\): Got in_dim=0 for some input, but that "
                               r"input is a Tensor of dimensionality 0|"
                               r"vmap: Expected all tensors to have the same size in the mapped dimension"),
            explanation=marked(
                "is_grads_batched=True runs the backward once per row of grad_outputs' first dimension:\n"
                "every output needs a grad_outputs tensor with the same number of rows."
            ),
        ),
        # An error of a node: raised when the backward runs a formula PyTorch does not have.
        ErrorKind(
            name="no-derivative",
            title=marked("A backward the graph has no formula for (often the backward of a backward)"),
            exception_type=Exception,  # NotImplementedError for a formula PyTorch lists, RuntimeError for the rest
            # "the derivative for '_cdist_backward' is not implemented." (a listed formula),
            # "derivative for <op> is not implemented" (an op with none), and a custom Function's backward
            # marked @once_differentiable, differentiated again.
            pattern=re.compile(r"derivative for .+ is not implemented|"
                               r"trying to differentiate twice a function that was marked with @once_differentiable|"
                               r"Autograd not implemented for |"
                               r"You must implement either the backward or vjp method for your custom "
                               r"autograd\.Function"),
            explanation=marked(
                "A node on the way has no gradient formula: often a backward's own (create_graph=True records it).\n"
                "Keep that op out of what is differentiated, or use another; your Function: no @once_differentiable."
            ),
        ),
    )
}


def get_kind(name: str) -> ErrorKind:
    """Return the error kind called ``name``; the KeyError lists the known names."""
    try:
        return KINDS[name]
    except KeyError:
        known = ", ".join(sorted(KINDS))
        raise KeyError(f"unknown error kind {name!r}; known kinds: {known}") from None


def classify(exc: BaseException) -> Optional[ErrorKind]:
    """Return the course error kind that ``exc`` is, or None."""
    for kind in KINDS.values():
        if kind.matches(exc):
            return kind
    return None


@dataclass(frozen=True)
class VersionErrorDetails:
    """The parts of an in-place version error message.

    Attributes:
        tensor_type: e.g. ``torch.FloatTensor`` or ``torch.cuda.FloatTensor``.
        shape: the saved tensor's shape, e.g. ``(64, 1)``.
        output_nr: which output of ``grad_fn`` the tensor is; None for a leaf.
        grad_fn: the node name as printed (``AsStridedBackward0`` or ``AsStrided``); None for a leaf.
        version_now: the tensor's version when backward needed it (N).
        version_expected: its version when the forward pass saved it (M).
    """

    tensor_type: str
    shape: tuple
    output_nr: Optional[int]
    grad_fn: Optional[str]
    version_now: int
    version_expected: int

    @property
    def op(self) -> Optional[str]:
        """The op's name without PyTorch's ``Backward0`` suffix, the same on every version."""
        if self.grad_fn is None:
            return None
        return re.sub(r"Backward\d*$", "", self.grad_fn)

    @property
    def is_leaf(self) -> bool:
        """True when the message names no grad_fn: the tensor is a leaf such as a parameter."""
        return self.grad_fn is None

    @property
    def bumps(self) -> int:
        """How many in-place changes happened between saving and using the tensor."""
        return self.version_now - self.version_expected


def parse_version_error(message: str) -> Optional[VersionErrorDetails]:
    """Pull the tensor type, shape, op and both versions out of an in-place version error message."""
    match = _VERSION_PATTERN.search(message)
    if match is None:
        return None
    shape_text = match["shape"].strip()
    shape = tuple(int(part) for part in shape_text.split(",") if part.strip()) if shape_text else ()
    output_nr = match["output_nr"]
    return VersionErrorDetails(
        tensor_type=match["tensor_type"],
        shape=shape,
        output_nr=int(output_nr) if output_nr is not None else None,
        grad_fn=match["grad_fn"],
        version_now=int(match["version_now"]),
        version_expected=int(match["version_expected"]),
    )


def short_description(exc: BaseException) -> str:
    """One line naming the course error kind (when it is one) and the message's first sentence."""
    kind = classify(exc)
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(first_line) > 240:
        first_line = first_line[:237] + "..."
    label = f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__
    if kind is None:
        return label
    return f"{translated(kind.title)} ({label})"

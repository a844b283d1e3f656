"""What ``diagnose`` can and cannot say about the opaque regions a backward pass runs through.

- A reentrant checkpoint (``CheckpointFunctionBackward``): its saved inputs are read like any node's; its block is not
  in the graph and is recomputed at backward time with the weights as they are then. PyTorch refuses it under
  ``torch.autograd.grad`` and ``backward(inputs=...)`` when it lies on the way.
- A non-reentrant checkpoint: its nodes' saved tensors are never unpacked (that recomputes the block). Its inputs are
  read from the checkpoint's frame (a version check, no recompute) where torch shows the unpack hook and has
  ``SavedTensor.unpack``, and said unseen elsewhere (torch 2.4); its weights are the leaves its nodes reach, and a
  record says whether they changed since the forward pass.
- A ``torch.compile`` region: its saved tensors are read like any node's; whether its compiled backward refuses
  ``retain_graph=True`` (donated buffers) is not seen.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import torch

from helpers.language import marked, tr, translated
from helpers.tools import regions, traversal
from helpers.tools.errors import KINDS
from helpers.tools.fingerprint import ParameterRecord
from helpers.tools.saved import HOOK_UNSEEN, SavedTensor, State, _stale

RECOMPUTED = "recomputed at backward time"  # a marker in SilentChange.saved_by, compared: never translated
# The regions' kinds as a diagnosis names them (the kinds themselves are compared, and label drawings).
_KIND_NAMES = {regions.REENTRANT_CHECKPOINT: marked("checkpoint (use_reentrant=True)"),
               regions.NON_REENTRANT_CHECKPOINT: marked("checkpoint (use_reentrant=False)"),
               regions.COMPILED: marked("torch.compile region")}
REENTRANT_REFUSAL = ("When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an "
                     "`inputs` parameter to .backward()")


@dataclass
class OpaqueFindings:
    """What the regions on the way add to a diagnosis."""

    problems: List[SavedTensor] = field(default_factory=list)
    silent: List[Any] = field(default_factory=list)  # SilentChange, built by the caller's class
    unseen: List[str] = field(default_factory=list)
    refusals: List[str] = field(default_factory=list)


def _where(region: regions.Region, names: Mapping[int, str]) -> str:
    node = region.nodes[0]
    inside = sorted({names[id(p)] for p in region.parameters or () if id(p) in names})
    near = inside or traversal.nearest_parameters(node, dict(names))
    modules = sorted({name.rsplit(".", 1)[0] if "." in name else name for name in near})
    kind = translated(_KIND_NAMES[region.kind]) if region.kind in _KIND_NAMES else region.kind
    listed = ", ".join(modules[:3]) + (" ..." if len(modules) > 3 else "")
    if not modules:
        return tr("{region} at {node}", region=kind, node=type(node).__name__)
    if inside:
        return tr("{region} at {node} (with {modules})", region=kind, node=type(node).__name__, modules=listed)
    return tr("{region} at {node} (next to {modules})", region=kind, node=type(node).__name__, modules=listed)


def _changed(region: regions.Region, recorded: ParameterRecord) -> List[str]:
    ids = {id(p) for p in region.parameters or ()}
    changed = set(recorded.changed_since())
    return [name for name, (tensor, _, _) in recorded.entries.items() if id(tensor) in ids and name in changed]


def _unrecorded(region: regions.Region, recorded: Optional[ParameterRecord], inputs: Sequence[Any]) -> int:
    """How many leaves the region reads that are neither recorded nor one of its own saved inputs."""
    known = {id(tensor) for tensor, _, _ in (recorded.entries.values() if recorded is not None else ())}
    known |= {id(getattr(entry, "data", None)) for entry in inputs}
    return sum(1 for p in region.parameters or () if id(p) not in known)


def _read_inputs(region: regions.Region, params: Mapping[str, torch.Tensor], names: Mapping[int, str]
                 ) -> Optional[List[SavedTensor]]:
    """A non-reentrant checkpoint's inputs: freed or stale ones as problems; None when they cannot be read."""
    entries = regions.checkpoint_inputs(region)
    if entries is None or any(getattr(entry, "unpack_hook", None) is not None or not hasattr(entry, "unpack")
                              for entry in entries):  # SavedTensor.unpack: newer torch only
        return None
    node, found = region.nodes[0], []
    for index, entry in enumerate(entries):
        try:
            entry.unpack()
        except RuntimeError as error:
            label = f"checkpoint input[{index}]"
            if KINDS["backward-twice"].matches(error):
                found.append(SavedTensor(type(node).__name__, label, State.FREED, None, None, None, None, node))
            else:
                found.append(_stale(node, label, entry, error, params, names))
    return found


def _non_reentrant(region: regions.Region, recorded: Optional[ParameterRecord], params: Mapping[str, torch.Tensor],
                   names: Mapping[int, str], findings: OpaqueFindings, silent_change: Any) -> None:
    where = _where(region, names)
    problems = _read_inputs(region, params, names)
    if problems is None:
        findings.unseen.append(tr("{region}: its inputs are kept where this tool cannot read them; one changed in "
                                  "place since the forward pass raises error 2 when backward recomputes the block.",
                                  region=where))
    else:
        findings.problems += problems
    if recorded is None:
        findings.unseen.append(tr("{region}: recomputed at backward time with the weights as they are then; a weight "
                                  "changed since the forward pass (an optimizer step) gives a silently different "
                                  "gradient. To see it, pass recorded=record_parameters(...) taken after the forward "
                                  "pass.", region=where))
        return
    findings.silent += [silent_change(name, (RECOMPUTED, where)) for name in _changed(region, recorded)]
    unrecorded = _unrecorded(region, recorded, regions.checkpoint_inputs(region) or [])
    if unrecorded:
        findings.unseen.append(tr("{region}: {count} tensor(s) it reads are not in the record; if one changed since "
                                  "the forward pass, the recomputed gradient silently differs.", region=where,
                                  count=unrecorded))


def _reentrant(region: regions.Region, recorded: Optional[ParameterRecord], names: Mapping[int, str],
               refuse: bool, findings: OpaqueFindings, silent_change: Any) -> None:
    where = _where(region, names)
    if refuse:
        findings.refusals.append(tr("{region} runs in this call: '{refusal}'. Use use_reentrant=False, or "
                                    "backward() without inputs=.", region=where, refusal=REENTRANT_REFUSAL))
        return
    if region.parameters is None:
        findings.unseen.append(tr("{region}: its block is no module, so the tool cannot tell which weights it "
                                  "reads; recomputed at backward time with them as they are then, so one changed "
                                  "since the forward pass (an optimizer step) gives a silently different gradient.",
                                  region=where))
    elif recorded is None:
        findings.unseen.append(tr("{region}: recomputed at backward time with its weights as they are then; one "
                                  "changed since the forward pass (an optimizer step) gives a silently different "
                                  "gradient. To see it, pass recorded=record_parameters(...) taken after the forward "
                                  "pass.", region=where))
    else:
        findings.silent += [silent_change(name, (RECOMPUTED, where)) for name in _changed(region, recorded)]
        if _unrecorded(region, recorded, ()):
            findings.unseen.append(tr("{region}: some of its block's weights are not in the record; one changed "
                                      "since the forward pass gives a silently different gradient.", region=where))


def find(running: Sequence[Any], saved_by_node: Mapping[int, List[SavedTensor]], params: Mapping[str, torch.Tensor],
         names: Dict[int, str], recorded: Optional[ParameterRecord], with_inputs: bool, keep_graph: bool,
         silent_change: Any) -> OpaqueFindings:
    """What the opaque regions among ``running`` add to a diagnosis; reads no tensor a hook packed.

    Args:
        with_inputs: the call passes inputs (``backward(inputs=...)`` or ``torch.autograd.grad``).
        keep_graph: the call asks for ``retain_graph=True`` or ``create_graph=True``.
        silent_change: the class to report a changed weight with (``SilentChange``).
    """
    findings = OpaqueFindings()
    for region in regions.regions_on_the_way(running):
        if region.kind == regions.REENTRANT_CHECKPOINT:
            _reentrant(region, recorded, names, with_inputs, findings, silent_change)
        elif region.kind == regions.NON_REENTRANT_CHECKPOINT:
            _non_reentrant(region, recorded, params, names, findings, silent_change)
        elif keep_graph:
            findings.unseen.append(tr("{region}: a compiled backward that donated its buffers refuses "
                                      "retain_graph=True and create_graph=True ('This backward function was compiled "
                                      "with non-empty donated buffers'); this tool cannot tell whether this one did.",
                                      region=_where(region, names)))
    hooked = [s for node in running for s in saved_by_node.get(id(node), [])
              if s.state is State.UNSEEN and s.reason == HOOK_UNSEEN]
    if hooked:
        findings.unseen.append(tr("{count} saved tensor(s) packed by a saved_tensors_hooks hook, e.g. {example}: not "
                                  "unpacked (that would run the hook), so not checked.", count=len(hooked),
                                  example=hooked[0].where))
    return findings

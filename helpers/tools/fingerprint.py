"""What the parameters held at forward time, to catch changes that bump no version counter.

Autograd notices an in-place change only through a tensor's version counter. Some writes do not bump it: fused
optimizers on some builds (``AdamW(fused=True)`` on the CPU in torch 2.13), and any write through ``.data`` (an EMA
update, a manual weight copy). A backward that needs the old values then runs with the new ones, and raises nothing.

Record the parameters right after the forward pass, then let ``diagnose`` compare::

    loss = model(x).pow(2).mean()
    record = record_parameters(model)          # a fingerprint of each parameter: cheap, no copy kept
    ema_update(model)                            # writes through .data
    diagnose(loss, model, recorded=record)       # "changed without a version bump: ..."

A checkpointed block (``torch.utils.checkpoint``) is recomputed at backward time with the weights as they are then:
with a record, ``diagnose`` reports a weight of that block changed since the forward pass (even with a bump).

Out of reach of any record taken after the forward pass: a write through ``.data`` *inside* the forward (a custom
spectral norm that assigns ``weight.data``), and a ``.data`` write on a saved activation (not a parameter) after it.
Both change what backward reads without a version bump, and no record of the parameters shows them.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import torch

from helpers.language import tr
from helpers.tools.arguments import read_parameters


def fingerprint(tensor: torch.Tensor) -> str:
    """A digest of ``tensor``'s bytes: equal fingerprints mean equal values (a copy to the CPU, none kept)."""
    flat = tensor.detach().reshape(-1)
    data = flat.contiguous().view(torch.uint8) if flat.element_size() > 1 else flat.contiguous()
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str((tuple(tensor.shape), str(tensor.dtype))).encode())
    digest.update(data.cpu().numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


@dataclass
class ParameterRecord:
    """Each parameter's version and fingerprint at one moment (right after a forward pass).

    Attributes:
        entries: parameter name -> (the tensor, its version, its fingerprint).
        notes: what could not be read from the parameters given.
    """

    entries: Dict[str, Tuple[torch.Tensor, int, str]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    def changed_without_a_bump(self) -> List[str]:
        """Names of the parameters whose values changed since the record while their version did not."""
        changed = []
        for name, (tensor, version, digest) in self.entries.items():
            if tensor._version == version and fingerprint(tensor) != digest:
                changed.append(name)
        return changed

    def changed_since(self) -> List[str]:
        """Names of the parameters whose values changed since the record, with a version bump or without."""
        return [name for name, (tensor, version, digest) in self.entries.items()
                if tensor._version != version or fingerprint(tensor) != digest]

    def __len__(self) -> int:
        return len(self.entries)


def record_parameters(params: Any) -> ParameterRecord:
    """Record every parameter's version and fingerprint now; ``params`` in any form the tools take.

    Take it right after the forward pass. It sees parameters only: not a ``.data`` write made inside the forward (a
    custom spectral norm assigning ``weight.data`` before the record), nor one on a saved activation after it.
    """
    named = read_parameters(params)
    record = ParameterRecord(notes=list(named.notes))
    for name, tensor in named.tensors.items():
        try:
            record.entries[name] = (tensor, tensor._version, fingerprint(tensor))
        except Exception as error:  # an exotic tensor (meta, sparse): say so, never stop the learner
            record.notes.append(tr("could not fingerprint {name} ({error_type}: {error})", name=name,
                                   error_type=type(error).__name__, error=error))
    return record

"""Regions of an autograd graph whose inside the tools cannot see, recognised by their nodes, without running them.

- ``torch.utils.checkpoint(..., use_reentrant=True)``: one ``CheckpointFunctionBackward`` node; its forward recorded
  nothing inside, and its backward runs the block again, with the weights as they are then.
- ``torch.utils.checkpoint(..., use_reentrant=False)``: ordinary nodes whose saved tensors are packed by the
  checkpoint's hooks; *reading* one recomputes the block (a side effect: BatchNorm statistics, RNG state), so the
  tools never unpack them.
- ``torch.compile``: one ``CompiledFunctionBackward`` node; what it saved is inside the compiled graph.
"""
from __future__ import annotations

from typing import Any, Optional

REENTRANT_CHECKPOINT = "checkpoint (use_reentrant=True)"
NON_REENTRANT_CHECKPOINT = "checkpoint (use_reentrant=False)"
COMPILED = "torch.compile region"

_OPAQUE_NODES = {"CheckpointFunctionBackward": REENTRANT_CHECKPOINT, "CompiledFunctionBackward": COMPILED}


def opaque_region(node: Any) -> Optional[str]:
    """The kind of region ``node`` stands for when the tools cannot see inside it, else None."""
    if node is None:
        return None
    label = _OPAQUE_NODES.get(type(node).__name__)
    if label is not None:
        return label
    return NON_REENTRANT_CHECKPOINT if checkpoint_packed(node) else None


def checkpoint_packed(node: Any) -> bool:
    """True when one of ``node``'s saved tensors is packed by ``torch.utils.checkpoint``'s hooks (reading it would
    recompute the block). Looks at the unpack hooks only; never unpacks."""
    for attribute in dir(node):
        if not attribute.startswith("_raw_saved_"):
            continue
        try:
            raw = getattr(node, attribute)
        except Exception:
            continue
        for entry in raw if isinstance(raw, (list, tuple)) else [raw]:
            hook = getattr(entry, "unpack_hook", None)
            if hook is not None and getattr(hook, "__module__", "") == "torch.utils.checkpoint":
                return True
    return False

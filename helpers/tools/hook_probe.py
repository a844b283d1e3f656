"""Reading a node's saved tensors on a torch that does not show their unpack hooks, without letting a hook run.

Newer torch releases show the hook a saved tensor was packed with (``SavedTensor.unpack_hook``), so the tools can
leave it unread. Older ones do not (2.4 to 2.11, measured): the only way to know is to read it. ``read_saved``
reads with a trace function set that raises at the first Python call. Unpacking a tensor no hook packed runs no
Python code, so it reads as usual; a hook is a Python function, so it is stopped before its first line, and the
module it comes from (``torch.utils.checkpoint`` for a checkpoint, which would recompute its block) is reported
instead. Nothing is changed: the hook never starts, and the trace function and the garbage collector are restored
at once.
"""
from __future__ import annotations

import gc
import sys
from dataclasses import dataclass
from typing import Any, List, Optional

import torch

SAVED_PREFIX = "_saved_"


def hooks_shown() -> bool:
    """Whether this torch shows a saved tensor's unpack hook (``SavedTensor.unpack_hook``)."""
    return hasattr(torch._C._autograd.SavedTensor, "unpack_hook")


@dataclass(frozen=True)
class Probe:
    """What reading one saved attribute gave: its value, the module of the hook that would have run, or the
    ``RuntimeError`` the read raised (a freed or changed tensor)."""

    value: Any = None
    hook_module: Optional[str] = None
    error: Optional[RuntimeError] = None


class _HookWouldRun(Exception):
    def __init__(self, module: str) -> None:
        super().__init__(module)
        self.module = module


def _stop_first_call(frame: Any, event: str, arg: Any) -> None:
    if event == "call":
        raise _HookWouldRun(str(frame.f_globals.get("__name__", "?")))


def saved_names(node: Any) -> List[str]:
    """The names to read ``node``'s tensor-valued saved attributes by (``_saved_mat1``; ``saved_tensors``)."""
    names = []
    for attribute in dir(node):
        if attribute.startswith(f"_raw{SAVED_PREFIX}"):
            name = f"{SAVED_PREFIX}{attribute[len(f'_raw{SAVED_PREFIX}'):]}"
            names.append(name if hasattr(type(node), name) or name != "_saved_tensors" else "saved_tensors")
    return names


def read_saved(node: Any, name: str) -> Probe:
    """Read ``getattr(node, name)`` unless a saved-tensor hook would run; never lets one run."""
    previous, collecting = sys.gettrace(), gc.isenabled()
    value: Any = None
    hook_module: Optional[str] = None
    error: Optional[RuntimeError] = None
    gc.disable()  # no finalizer may start (and be stopped) while the trace function is set
    sys.settrace(_stop_first_call)  # from here to the restore, no Python function may be called
    try:
        value = getattr(node, name)
    except _HookWouldRun as stopped:
        hook_module = stopped.module
    except RuntimeError as raised:
        error = raised
    finally:
        sys.settrace(previous)
        if collecting:
            gc.enable()
    return Probe(value, hook_module, error)

"""Reading a node's saved tensors on a torch that does not show their unpack hooks, without letting a hook run.

Newer torch releases show the hook a saved tensor was packed with (``SavedTensor.unpack_hook``), so the tools can
leave it unread. Older ones do not (2.4 to 2.11, measured): the only way to know is to read it. ``read_saved``
reads with a trace function set that raises at the first Python call. Torch calls the unpack hook before anything
else, so a hook written in Python (a function, a method, a ``functools.partial``, an object with ``__call__``) is
stopped before its first line, and the module it comes from (``torch.utils.checkpoint`` for a checkpoint, which
would recompute its block) is reported instead. When the first Python call is a tensor subclass's
``__torch_dispatch__`` or ``__torch_function__`` (wrapping the value read, on torch 2.4), no hook was involved and
the read goes on; other Python code torch runs while reading is reported as a hook (not read). The trace function
and the garbage collector are restored at once.

What it cannot stop: an unpack hook that is a C function (a builtin such as ``dict.pop``) runs, since no Python
frame starts. When such a read raises something other than PyTorch's ``RuntimeError``, it is reported as a hook.
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


WRAPPING = ("__torch_dispatch__", "__torch_function__")  # a tensor subclass wrapping the value: no hook ran first


class _FirstCallStopper:
    """A trace function: raises at the first Python call, unless that call is a subclass wrapping the value."""

    def __init__(self) -> None:
        self.wrapping = False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call" and not self.wrapping:
            if frame.f_code.co_name in WRAPPING:
                self.wrapping = True
                return None
            raise _HookWouldRun(str(frame.f_globals.get("__name__", "?")))
        return None


def read_name(node: Any, attribute: str) -> str:
    """The name to read saved ``attribute`` by: ``_saved_mat1``, or ``saved_tensors`` for a custom Function's."""
    name = f"{SAVED_PREFIX}{attribute}"
    return name if hasattr(type(node), name) or attribute != "tensors" else "saved_tensors"


def saved_names(node: Any) -> List[str]:
    """The names to read ``node``'s tensor-valued saved attributes by (``_saved_mat1``; ``saved_tensors``)."""
    prefix = f"_raw{SAVED_PREFIX}"
    return [read_name(node, attribute[len(prefix):]) for attribute in dir(node) if attribute.startswith(prefix)]


def read_saved(node: Any, name: str) -> Probe:
    """Read ``getattr(node, name)`` unless a saved-tensor hook would run; never lets a Python hook run."""
    previous, collecting = sys.gettrace(), gc.isenabled()
    value: Any = None
    hook_module: Optional[str] = None
    error: Optional[RuntimeError] = None
    gc.disable()  # no finalizer may start (and be stopped) while the trace function is set
    stopper = _FirstCallStopper()
    sys.settrace(stopper)  # from here to the restore, no Python function may be called
    try:
        value = getattr(node, name)
    except _HookWouldRun as stopped:
        hook_module = stopped.module
    except RuntimeError as raised:
        error = raised
    except Exception as raised:  # not PyTorch's: a hook written in C ran and failed
        hook_module = f"a hook that is not a Python function ({type(raised).__name__})"
    finally:
        sys.settrace(previous)
        if collecting:
            gc.enable()
    return Probe(value, hook_module, error)

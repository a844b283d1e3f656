"""What keeps a learner's answer from faking its own check, while the checker calls it in the checking process.

- ``Snapshot``: every function, class member and module reachable from torch, helpers and the standard modules the
  checkers use, by identity. Verified after loading the answer and after every call of it: an answer that patches
  ``torch.allclose``, a checker, or a comparison fails, even if it puts things back later.
- ``Guard``: an audit hook, active only while learner code runs, that refuses what no answer needs (starting
  processes, signals, ctypes, sockets, writing files, tracing, reaching other threads' frames), and an ``os._exit``
  that refuses to end the checking process from inside an answer.
- ``guarded(answer)``: each call runs on its own thread (so walking ``f_back`` never reaches the checker's frames),
  then the snapshot and the salt are verified, no thread may be left running, and no tensor subclass may come back.

This is not a sandbox: Python code in the same process can always reach further, by means written against this
module. It beats the usual fakes; docs/workshop.md says so.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import types
import warnings
from typing import Any, Dict, List, Tuple

import torch
from torch import nn

from helpers.course import seeds

TRUSTED_PACKAGES = ("torch", "helpers", "numpy", "cloudpickle", "pickle", "copyreg", "builtins", "functools",
                    "operator", "math", "copy", "contextlib", "traceback", "threading", "multiprocessing", "typing",
                    "dataclasses", "weakref", "gc", "json", "sys", "os", "posix", "io", "_thread", "inspect", "ast")
BLOCKED_EVENTS = frozenset({
    "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "ctypes.dlopen",
    "ctypes.dlsym", "ctypes.cdata", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
    "os.fork", "os.forkpty", "os.kill", "os.killpg", "socket.connect", "socket.bind", "sys.settrace",
    "sys.setprofile", "sys.addaudithook", "os.remove", "os.rename", "os.rmdir",
})  # not object.__setattr__: unpickling an answer's own class or a functools.partial sets attributes legitimately,
# and the Snapshot already sees a function's __code__ or a trusted class's member replaced


WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Tampered(BaseException):
    """The answer changed the checker's world; a BaseException, so that no checker's ``except Exception`` hides it."""


def warm_up() -> None:
    """Let torch do its own lazy patching and imports before the snapshot: importing torch._dynamo wraps
    torch.manual_seed again, an optimizer class wraps its ``step`` on its first instance, and loading a pickled tensor
    imports torch's serialization settings. And keep tqdm from starting its monitor thread."""
    import io
    import pickle

    import torch._dynamo  # noqa: F401

    pickle.loads(pickle.dumps(torch.zeros(1)))
    try:
        from tqdm import tqdm
    except ImportError:
        pass
    else:
        tqdm.monitor_interval = 0  # tqdm's monitor is a thread an answer with a progress bar would leave running
    buffer = io.BytesIO()
    torch.save({"weight": torch.zeros(1)}, buffer)
    torch.load(io.BytesIO(buffer.getvalue()))

    def subclasses(cls: type) -> List[type]:
        found = []
        for sub in cls.__subclasses__():
            found += [sub, *subclasses(sub)]
        return found

    for optimizer_class in subclasses(torch.optim.Optimizer):
        for arguments in ({"lr": 0.1}, {}):
            try:
                optimizer_class([nn.Parameter(torch.zeros(1))], **arguments)
                break
            except Exception:
                continue


def _trusted(module_name: str) -> bool:
    return module_name.split(".")[0] in TRUSTED_PACKAGES


Entry = Tuple[Any, str, Any]  # (live namespace or function, key, the object it held)


class Snapshot:
    """Identity of every code object reachable from the trusted modules, taken once, verified cheaply."""

    def __init__(self) -> None:
        self.entries: List[Entry] = []
        with warnings.catch_warnings():  # looking at deprecated names (torch.distributed.reduce_op) warns
            warnings.simplefilter("ignore")
            self._record()
        self.salt = seeds.salt()

    def _record(self) -> None:
        for name, module in list(sys.modules.items()):
            if module is None or not _trusted(name):
                continue
            try:
                namespace = vars(module)
            except TypeError:
                continue
            for key, value in list(namespace.items()):
                if not (callable(value) or isinstance(value, types.ModuleType)):
                    continue  # data (counters, caches, flags) changes legitimately; code and modules must not
                self.entries.append((namespace, key, value))
                if isinstance(value, types.FunctionType):
                    self.entries.append((value, "__code__", value.__code__))
                # a real class only: on Python 3.10 an alias such as list[int] passes isinstance(..., type)
                if type(value) is not types.GenericAlias and isinstance(value, type) and \
                        type.__getattribute__(value, "__dict__").get("__module__") == name:
                    members = type.__getattribute__(value, "__dict__")  # a live view of the class's members
                    for member, member_value in list(members.items()):
                        if callable(member_value) or isinstance(member_value, (property, staticmethod, classmethod)):
                            self.entries.append((members, member, member_value))

    def changes(self) -> List[str]:
        """The names whose object is no longer the one recorded (empty when nothing changed)."""
        changed = []
        for holder, key, value in self.entries:
            now = getattr(holder, key, None) if key == "__code__" else holder.get(key)
            if now is not value:
                changed.append(key)
        return changed

    def verify(self, when: str) -> None:
        """Raises Tampered when something changed, or the seeds' salt did."""
        changed = self.changes()
        if changed:
            raise Tampered(f"{when}, {', '.join(sorted(set(changed))[:4])} in torch or the course's helpers had been "
                           "replaced")
        if seeds.salt() != self.salt:
            raise Tampered(f"{when}, the seeds the checker draws its inputs from had been changed")


class Guard:
    """The audit hook and the guarded ``os._exit``; both act only while ``active`` is above 0."""

    def __init__(self) -> None:
        import posix

        state = {"active": 0}
        used: List[str] = []
        real_exit = posix._exit

        def hook(event: str, arguments: tuple) -> None:
            if not state["active"]:
                return
            blocked = event in BLOCKED_EVENTS
            if event == "open" and len(arguments) > 2:
                mode, flags = arguments[1], arguments[2]
                blocked = (any(letter in mode for letter in "wax+") if isinstance(mode, str)
                           else isinstance(flags, int) and bool(flags & WRITE_FLAGS))
            if blocked:
                used.append(event)
                raise Tampered(f"your code used {event}, which no answer needs")

        def guarded_exit(code: int = 0) -> None:
            if state["active"]:
                used.append("os._exit")
                raise Tampered("your code called os._exit")
            real_exit(code)

        sys.addaudithook(hook)
        os._exit = posix._exit = guarded_exit
        self._state, self.used = state, used

    def __enter__(self) -> "Guard":
        self._state["active"] += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._state["active"] -= 1


def _plain_tensors_only(value: Any, depth: int = 0) -> None:
    if depth > 4:
        return
    if isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, nn.Parameter):
        raise Tampered(f"your code returned or left a tensor of its own class ({type(value).__name__})")
    if isinstance(value, (list, tuple)):
        for item in value:
            _plain_tensors_only(item, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            _plain_tensors_only(item, depth + 1)
    elif isinstance(value, nn.Module):
        for parameter in value.parameters():
            _plain_tensors_only(parameter, depth + 1)
            _plain_tensors_only(parameter.grad, depth + 1)
    elif isinstance(value, torch.optim.Optimizer):
        for group in value.param_groups:
            _plain_tensors_only(group["params"], depth + 1)


def thread_state() -> Dict[str, Any]:
    """What torch keeps per thread and an answer may leave changed: grad mode, and what is left switched on."""
    state: Dict[str, Any] = {"grad mode": torch.is_grad_enabled(), "inference mode": torch.is_inference_mode_enabled()}
    top_hooks = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)  # not on torch 2.4
    state["saved-tensor hooks"] = top_hooks is not None and top_hooks(False) is not None
    state["a torch function mode"] = torch._C._len_torch_function_stack() > 0
    state["a torch dispatch mode"] = torch._C._len_torch_dispatch_stack() > 0
    try:
        state["autocast"] = torch.is_autocast_enabled("cpu")
    except TypeError:  # torch before 2.4 took no device
        state["autocast"] = torch.is_autocast_cpu_enabled()
    return state


def left_switched_on(state: Dict[str, Any]) -> List[str]:
    """The per-thread switches an answer left on: a caller on the same thread would run its next step with them."""
    return [name for name, value in state.items() if name != "grad mode" and value]


def guarded(answer: Any, snapshot: Snapshot, guard: Guard) -> Any:
    """``answer`` wrapped so that each call runs guarded on its own thread and is verified afterwards."""
    if not callable(answer):
        return answer

    @functools.wraps(answer)
    def call(*args: Any, **kwargs: Any) -> Any:
        box: dict = {}
        grad_mode = torch.is_grad_enabled()
        threads_before = threading.active_count()

        def target() -> None:
            torch.set_grad_enabled(grad_mode)
            try:
                box["value"] = answer(*args, **kwargs)
            except BaseException as error:  # re-raised in the checker's thread, as if called directly
                box["error"] = error
            finally:
                box["state"] = thread_state()

        with guard:
            runner = threading.Thread(target=target, daemon=True)
            runner.start()
            runner.join()
        snapshot.verify("After a call of your function")
        if guard.used:
            raise Tampered(f"your code used {guard.used[0]}, which no answer needs")
        if threading.active_count() > threads_before:
            raise Tampered("your code left a thread running after it returned")
        if isinstance(box.get("error"), Tampered):
            raise box["error"]
        for value in (box.get("value"), *args, *kwargs.values()):
            _plain_tensors_only(value)
        if "error" in box:
            raise box["error"]
        # The call ran on its own thread: what it left in torch's per-thread state is brought back here, so the
        # checker sees what a caller on the same thread would see.
        torch.set_grad_enabled(box["state"]["grad mode"])
        left = left_switched_on(box["state"])
        if left:
            raise RuntimeError(f"it returned with {' and '.join(left)} still switched on (entered and never exited), "
                               "which would change every later computation of its caller")
        return box["value"]

    return call


"""Starts a grading kernel: ``python kernel_start.py LIMIT_BYTES LOG_PATH ALLOWED_ROOTS -f CONNECTION_FILE``.

Run by path, never with ``-m``, so that nothing in the notebook's folder can stand in for it. Before ipykernel starts
it sets the data-segment limit (RLIMIT_DATA counts what a process really allocates; RLIMIT_AS would also count
torch's reserved address space) and installs an audit hook that refuses writes outside ALLOWED_ROOTS (os.pathsep
separated) and appends each refused one to LOG_PATH. Only standard-library modules are imported here.
"""
import json
import os
import resource
import runpy
import sys

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {"os.rename": (0, 1), "os.replace": (0, 1), "os.remove": (0,), "os.unlink": (0,), "os.rmdir": (0,),
                "os.mkdir": (0,), "os.truncate": (0,), "os.symlink": (1,), "os.link": (1,), "shutil.rmtree": (0,),
                "shutil.move": (1,), "shutil.copyfile": (1,), "os.chmod": (0,), "os.utime": (0,)}
_DEVICES = ("/dev/null", "/dev/shm/", "/dev/pts/", "/dev/tty", "/proc/self/")


def _install_write_guard(log_path: str, allowed_roots: list) -> None:
    log = open(log_path, "a", buffering=1, encoding="utf-8")  # opened before the hook exists
    realpath, fspath, getcwd, dumps = os.path.realpath, os.fspath, os.getcwd, json.dumps

    def outside(path: object) -> bool:
        if isinstance(path, int):
            return False  # an open file descriptor: its opening was checked
        try:
            full = realpath(fspath(path))
        except Exception:
            return False
        if full.startswith(_DEVICES) or any(full == root or full.startswith(root + os.sep) for root in allowed_roots):
            return False
        return True

    def hook(event: str, args: tuple) -> None:
        paths = ()
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, 0))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
            paths = (path,) if writing else ()
        elif event in _PATH_EVENTS:
            paths = tuple(args[index] for index in _PATH_EVENTS[event] if index < len(args))
        for path in paths:
            if outside(path):
                log.write(dumps({"event": event, "path": str(path), "cwd": getcwd()}) + "\n")
                raise PermissionError(f"grading: this notebook may only write inside its own folder, not to {path}")

    sys.addaudithook(hook)


def main() -> None:
    limit, log_path, allowed = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    if os.environ.get("TMPDIR"):
        import tempfile

        tempfile.tempdir = os.environ["TMPDIR"]  # the private one, never a fallback to /tmp
    _install_write_guard(log_path, [os.path.realpath(root) for root in allowed.split(os.pathsep) if root])
    sys.argv = ["ipykernel_launcher", *sys.argv[4:]]
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

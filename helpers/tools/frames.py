"""Telling the learner's code from library code in a traceback."""
from __future__ import annotations

import os
import sys
import sysconfig

_HELPERS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the whole helpers package
_LIBRARY_DIRS = tuple(
    os.path.abspath(path)
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (path := sysconfig.get_paths().get(key))
)


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives on Windows
        return False


def is_library_frame(filename: str) -> bool:
    """True for frames in torch, other installed packages, the standard library, or helpers itself."""
    if filename.startswith("<"):
        return filename.startswith("<frozen")
    path = os.path.abspath(filename)
    folders = [_HELPERS_DIR, *_LIBRARY_DIRS]
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if torch_file:
        folders.append(os.path.dirname(os.path.abspath(torch_file)))
    return any(_inside(path, folder) for folder in folders) or "site-packages" in path or "dist-packages" in path

"""The execution cache's folder for this build: one per version of the helpers and of torch.

Jupyter Book's cache matches a notebook by its code cells only. A page's outputs also depend on the helpers'
code (its cards, checkers, drawings), on torch (its error texts) and on how ``book/build`` runs the kernels (its
environment variables), so the cache lives in a folder named by a fingerprint of all three: a change to any runs
every notebook again. Other fingerprints' folders are removed.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import shutil
from pathlib import Path

PREFIX = "helpers-"


def fingerprint(root: Path) -> str:
    """A short hash of every file of ``root/helpers``, of ``book/build`` and of the Python and torch versions."""
    digest = hashlib.sha256(f"{platform.python_version()} torch {importlib.metadata.version('torch')}".encode())
    build_script = root / "book" / "build"
    if build_script.is_file():
        digest.update(build_script.read_bytes())
    for path in sorted((root / "helpers").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def execution_cache(root: Path, base: Path) -> Path:
    """``base/helpers-<fingerprint>``; any other fingerprint's folder under ``base`` is removed."""
    folder = base / f"{PREFIX}{fingerprint(root)}"
    if base.is_dir():
        for other in base.glob(f"{PREFIX}*"):
            if other != folder:
                shutil.rmtree(other, ignore_errors=True)
    return folder

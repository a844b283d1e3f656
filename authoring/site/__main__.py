"""``python -m authoring.site --source DIR``: stage the website's source folders, the English book's in DIR and each
translation's beside it (``bash book/build`` runs it)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from authoring.generate import default_root
from authoring.site.stage import stage


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Stage the book; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=None, help="repository root (default: found automatically)")
    parser.add_argument("--source", type=Path, required=True, help="the book's source folder to write")
    parser.add_argument("--execution-cache", type=Path, required=True, help="the execution caches' folder")
    args = parser.parse_args(argv)
    root = (args.root or default_root()).resolve()
    for folder, written in stage(root, args.source.resolve(), args.execution_cache.resolve()).items():
        print(f"staged a book in {folder}: {len(written)} files changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

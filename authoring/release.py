"""The release step: fill in release.json, then regenerate every badge and Colab set-up cell from it.

Usage, from the repository root::

    python -m authoring.release --repository https://github.com/OWNER/NAME --ref v1.0.0
    git commit -am "Release v1.0.0" && git tag v1.0.0 && git push origin main v1.0.0

The ref must be a tag or a full commit hash: a branch moves, and a notebook opened next year would then fetch
helpers that no longer match it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from authoring import generate
from authoring.release_json import Release, ReleaseError, save


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Fill in release.json, then regenerate the badges and set-up cells; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repository", required=True, help="https://github.com/OWNER/NAME")
    parser.add_argument("--ref", required=True, help="a version tag (v1.0.0) or a full commit hash")
    parser.add_argument("--root", type=Path, default=None, help="repository root (default: found automatically)")
    args = parser.parse_args(argv)
    root = (args.root or generate.default_root()).resolve()
    try:
        path = save(root, Release(repository=args.repository.rstrip("/"), ref=args.ref))
    except ReleaseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {path.relative_to(root)}")
    return generate.main(["--root", str(root)])


if __name__ == "__main__":
    sys.exit(main())

"""``python -m authoring.figures`` draws the course's figures; ``--check`` fails when the shipped ones are stale."""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from authoring.figures.build import notes, problems, write
from helpers.course.figures import IMAGES


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Draw the figures into helpers/course/figures/images/, or with ``--check`` compare them; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m authoring.figures", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when a shipped image differs from the code's")
    arguments = parser.parse_args(argv)
    if not arguments.check:
        for path in write():
            print(f"wrote {path}")
        return 0
    for line in notes():
        print(f"note: {line}")
    found = problems()
    for line in found:
        print(f"stale: {line}", file=sys.stderr)
    if found:
        print("run: python -m authoring.figures", file=sys.stderr)
        return 1
    print(f"the figures in {IMAGES} are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())

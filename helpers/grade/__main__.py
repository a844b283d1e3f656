"""``python -m helpers.grade DIR``."""
import sys

from helpers.grade.cli import main

if __name__ == "__main__":
    sys.exit(main())

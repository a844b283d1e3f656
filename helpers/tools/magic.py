"""The ``%%expect_error KIND`` cell magic, available after ``%load_ext helpers``."""
from __future__ import annotations

import itertools
import linecache
from typing import Any

from helpers.language import tr
from helpers.tools.expect import expect_error

_cell_numbers = itertools.count(1)


def _run_cell_body(shell: Any, cell: str) -> None:
    """Execute ``cell`` in the user's namespace, with its lines findable for tracebacks."""
    source = shell.transform_cell(cell)
    filename = f"<expect_error cell {next(_cell_numbers)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), shell.user_ns)  # noqa: S102 - this is the learner's own cell


def expect_error_cell_magic(line: str, cell: str) -> None:
    """``%%expect_error inplace-version``: run the cell, which must raise that error kind."""
    from IPython import get_ipython

    kind = line.split("#", 1)[0].strip()
    if not kind:
        raise ValueError(tr("usage: %%expect_error KIND, e.g. %%expect_error backward-twice"))
    with expect_error(kind):
        _run_cell_body(get_ipython(), cell)


def load_ipython_extension(ipython: Any) -> None:
    """Register the cell magic; called by ``%load_ext helpers``."""
    ipython.register_magic_function(expect_error_cell_magic, magic_kind="cell", magic_name="expect_error")

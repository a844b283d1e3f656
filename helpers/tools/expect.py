"""``expect_error``: the one way a notebook shows a deliberate error, asserted.

The cell succeeds when the expected error happens (so "Run All" goes on in every front end) and
fails with an AssertionError when no error, or a different one, happens.
"""
from __future__ import annotations

import html
import re
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Optional, Union

from helpers.language import tr, translated
from helpers.tools.display import card_html, pre_html, show, table_html
from helpers.tools.errors import ErrorKind, VersionErrorDetails, classify, get_kind, parse_version_error
from helpers.tools.frames import is_library_frame


def _cell_label(filename: str) -> str:
    """``In [5]`` for a notebook cell IPython knows, "this cell" for one it does not, else the file name."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        count = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename)
    except ImportError:
        count = None
    if count is not None:
        return tr("cell In [{count}]", count=count)
    if "ipykernel_" in filename or filename.startswith(("<ipython-input", "<expect_error")):
        return tr("this cell")
    return filename


@dataclass(frozen=True)
class RaisingLine:
    """The line of the learner's code that raised."""

    filename: str
    lineno: int
    code: str

    def __str__(self) -> str:
        where = tr("line {number} of {cell}", number=self.lineno, cell=_cell_label(self.filename))
        return f"{where}: {self.code}" if self.code else where


def find_raising_line(exc: BaseException) -> Optional[RaisingLine]:
    """The innermost traceback frame that belongs to the learner's code, not to torch or helpers."""
    frames = traceback.extract_tb(exc.__traceback__)
    learner_frames = [frame for frame in frames if not is_library_frame(frame.filename)]
    chosen = learner_frames[-1] if learner_frames else (frames[-1] if frames else None)
    if chosen is None:
        return None
    code = re.sub(r"\s{2,}", "  ", (chosen.line or "").strip())
    return RaisingLine(chosen.filename, chosen.lineno or 0, code)


@dataclass(frozen=True)
class ErrorReport:
    """What a learner sees when an expected error happened."""

    error: BaseException
    kind: Optional[ErrorKind]
    raising_line: Optional[RaisingLine]
    details: Optional[VersionErrorDetails]

    @property
    def message(self) -> str:
        return str(self.error)

    def full_traceback(self) -> str:
        return "".join(traceback.format_exception(type(self.error), self.error, self.error.__traceback__))

    def _title(self) -> str:
        name = translated(self.kind.title) if self.kind else type(self.error).__name__
        return tr("Expected error reproduced - {name}", name=name)

    def _detail_rows(self) -> list:
        d = self.details
        if d is None:
            return []
        return [
            (tr("tensor type"), d.tensor_type),
            (tr("shape"), f"[{', '.join(str(n) for n in d.shape)}]"),
            (tr("output of op"), d.op if d.op is not None else tr("none: a leaf tensor (e.g. a parameter)")),
            (tr("version now (N)"), str(d.version_now)),
            (tr("version when saved (M)"), str(d.version_expected)),
        ]

    def __repr__(self) -> str:  # the text/plain form front ends show beside the HTML card
        return str(self)

    def __str__(self) -> str:
        lines = [self._title(), "", f"{type(self.error).__name__}: {self.message}"]
        if self.raising_line:
            lines += ["", tr("Raised by {line}", line=self.raising_line)]
        lines += ["  " + tr("{label}: {value}", label=label, value=value) for label, value in self._detail_rows()]
        if self.kind:
            lines += ["", translated(self.kind.explanation)]
            lines += [tr("Covered in notebook {notebook}.", notebook=self.kind.notebook)] if self.kind.notebook else []
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        parts = [pre_html(f"{type(self.error).__name__}: {self.message}")]
        if self.raising_line:
            parts.append(
                "<div>" + tr("Raised by {line}", line=html.escape(str(self.raising_line).split(': ', 1)[0]))
                + f": <code>{html.escape(self.raising_line.code)}</code></div>"
            )
        rows = self._detail_rows()
        if rows:
            parts.append(table_html([(html.escape(k), f"<code>{html.escape(v)}</code>") for k, v in rows]))
        if self.kind:
            explanation = "<br>".join(html.escape(line) for line in translated(self.kind.explanation).splitlines())
            notebook = f"<b>{html.escape(self.kind.notebook or '')}</b>"
            covered = "<br>" + tr("Covered in notebook {notebook}.", notebook=notebook) if self.kind.notebook else ""
            parts.append(f"<div style='margin-top:4px'>{explanation}{covered}</div>")
        parts.append(f"<details><summary>{html.escape(tr('Full traceback'))}</summary>"
                     f"{pre_html(self.full_traceback())}</details>")
        return card_html(self._title(), "".join(parts), accent="#c0392b")


Expected = Union[str, type]


class expect_error:  # noqa: N801 - used like a statement: ``with expect_error("backward-twice"):``
    """Run a block that must raise a given error; show it, and let the cell succeed.

    Args:
        expected: a course error kind (``"backward-twice"``, ``"inplace-version"``, ...) or an exception class.
        match: with an exception class, a regex the message must contain (``re.search``).
        show: display the report when the error happens (default True).

    After the block, ``.report`` holds the ErrorReport and ``.error`` the exception.

    Raises:
        AssertionError: when the block raised nothing, or raised a different error.
    """

    def __init__(self, expected: Expected, match: Optional[str] = None, *, show: bool = True) -> None:
        if isinstance(expected, str):
            if match is not None:
                raise TypeError("match= goes with an exception class, not with an error kind name")
            self.kind: Optional[ErrorKind] = get_kind(expected)
            self.exception_type: type = self.kind.exception_type
            self.pattern: Optional[re.Pattern] = self.kind.pattern
        elif isinstance(expected, type) and issubclass(expected, Exception):
            self.kind = None
            self.exception_type = expected
            self.pattern = re.compile(match) if match is not None else None
        else:
            raise TypeError(f"expected an error kind name or an Exception subclass, got {expected!r}")
        self.show = show
        self.error: Optional[BaseException] = None
        self.report: Optional[ErrorReport] = None

    def describe(self) -> str:
        """What this block expects, in words."""
        if self.kind is not None:
            return f"{translated(self.kind.title)} [{self.kind.name}]"
        text = self.exception_type.__name__
        if not self.pattern:
            return text
        return tr("{error} matching {pattern}", error=text, pattern=repr(self.pattern.pattern))

    def _matches(self, exc: BaseException) -> bool:
        """True when ``exc``, or an error it was raised from, is the expected one."""
        while exc is not None:
            if isinstance(exc, self.exception_type) and (self.pattern is None or self.pattern.search(str(exc))):
                return True
            exc = exc.__cause__
        return False

    def __enter__(self) -> "expect_error":
        return self

    def __exit__(
        self, exc_type: Optional[type], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> bool:
        if exc is None:
            raise AssertionError(
                tr("Expected {expected}, but the code ran without raising anything. If you changed the code, that may "
                   "be your fix working; if not, this PyTorch release behaves differently from the one the lesson "
                   "was written for.", expected=self.describe())
            )
        if not isinstance(exc, Exception):
            return False  # KeyboardInterrupt and friends pass through untouched
        if not self._matches(exc):
            raise AssertionError(
                tr("Expected {expected}, but got a different error: {error}", expected=self.describe(),
                   error=f"{type(exc).__name__}: {exc}")
            ) from exc
        self.error = exc
        self.report = ErrorReport(
            error=exc,
            kind=self.kind or classify(exc),
            raising_line=find_raising_line(exc),
            details=parse_version_error(str(exc)),
        )
        if self.show:
            show(self.report)
        return True

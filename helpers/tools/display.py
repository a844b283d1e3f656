"""Show an object as rich output in Jupyter and as text everywhere else."""
from __future__ import annotations

import html
from typing import Any, Sequence, Tuple


def in_notebook() -> bool:
    """True inside a Jupyter kernel (JupyterLab, Notebook, Colab, VS Code), False in plain Python."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def show(obj: Any) -> None:
    """Display ``obj`` with its rich representation in a notebook, or print its text form."""
    if in_notebook():
        from IPython.display import display

        display(obj)
    else:
        print(obj)


def card_html(title: str, body_html: str, accent: str) -> str:
    """A bordered card that reads well on light and dark themes (text keeps the theme's color)."""
    return (
        f'<div style="border:1px solid {accent};border-left:6px solid {accent};'
        f'border-radius:4px;padding:8px 12px;margin:4px 0">'
        f'<div style="font-weight:bold;margin-bottom:4px">{html.escape(title)}</div>'
        f"{body_html}</div>"
    )


def table_html(rows: Sequence[Tuple[str, str]]) -> str:
    """A two-column, left-aligned table of (label, value-html) rows."""
    cells = "".join(
        f"<tr><td style='text-align:left;padding-right:12px'>{label}</td><td style='text-align:left'>{value}</td></tr>"
        for label, value in rows
    )
    return f"<table style='margin:4px 0'>{cells}</table>"


def pre_html(text: str) -> str:
    """Preformatted, wrapped, escaped text."""
    style = "white-space:pre-wrap;word-break:normal;overflow-wrap:break-word;margin:4px 0"
    return f'<pre style="{style}">{html.escape(text)}</pre>'


class SourceCode:
    """A function's source, highlighted in Jupyter (as Markdown) and plain in text."""

    def __init__(self, function: Any) -> None:
        import inspect

        self.text = inspect.getsource(function).rstrip()

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"```python\n{self.text}\n```"

"""Notebook 00's environment check: torch, device, graphviz, widgets."""
from __future__ import annotations

import html
import platform
import re
from dataclasses import dataclass
from typing import List, Tuple

from helpers.language import tr, translated
from helpers.tools.display import card_html, table_html

MIN_TORCH = (2, 4)


@dataclass(frozen=True)
class Item:
    """One line of the check: what, whether it is fine, the detail, and what to do if not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def version_tuple(version: str) -> Tuple[int, ...]:
    """``"2.13.0+cpu"`` -> ``(2, 13, 0)``."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def torch_item(version: str) -> Item:
    """Whether this torch is new enough for the course."""
    ok = version_tuple(version)[:2] >= MIN_TORCH
    fix = "" if ok else tr("The course needs torch >= {version}: pip install -U torch",
                           version=f"{MIN_TORCH[0]}.{MIN_TORCH[1]}")
    return Item("torch", ok, version, fix)


def _installed_version(package: str) -> str:
    """The installed version of ``package``, or "" when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def widgets_item(ipywidgets_version: str, jupyterlab_version: str) -> Item:
    """ipywidgets 7 and 8 both work, except 7 inside JupyterLab 4, whose front end only speaks 8."""
    if not ipywidgets_version:
        return Item("ipywidgets", False, tr("missing: hints fall back to text"), "pip install ipywidgets")
    old_pair = version_tuple(ipywidgets_version)[:1] < (8,) and version_tuple(jupyterlab_version or "0")[:1] >= (4,)
    detail = ipywidgets_version + (f" (JupyterLab {jupyterlab_version})" if jupyterlab_version else "")
    fix = tr("JupyterLab 4 shows ipywidgets 8 only: pip install -U ipywidgets") if old_pair else ""
    return Item("ipywidgets", not old_pair, detail, fix)


def check_environment() -> "EnvironmentReport":
    """Look at this machine and say what the course can use."""
    import torch

    from helpers.course.device import describe_device, pick_device
    from helpers.tools.graph import INSTALL_GRAPHVIZ, dot_available, import_torchviz

    items: List[Item] = [Item("python", True, platform.python_version()), torch_item(torch.__version__)]
    items.append(Item("device", True, describe_device(pick_device())))
    has_dot = dot_available()
    items.append(Item("graphviz dot", has_dot, tr("found") if has_dot else tr("missing: graphs are shown as text"),
                      "" if has_dot else translated(INSTALL_GRAPHVIZ)))
    has_torchviz = import_torchviz() is not None
    items.append(Item("torchviz", has_torchviz, tr("importable") if has_torchviz else tr("missing"),
                      "" if has_torchviz else "pip install torchviz"))
    items.append(widgets_item(_installed_version("ipywidgets"), _installed_version("jupyterlab")))
    return EnvironmentReport(items)


@dataclass(frozen=True)
class EnvironmentReport:
    """The environment check's findings, as a card in Jupyter or text elsewhere."""

    items: List[Item]

    @property
    def ready(self) -> bool:
        """True when torch is new enough; graphviz and widgets are nice to have."""
        return all(item.ok for item in self.items if item.name in ("python", "torch"))

    def __str__(self) -> str:
        lines = [f"{'ok ' if item.ok else 'NO '} {item.name}: {item.detail}" + (f"\n     {item.fix}" if item.fix else "")
                 for item in self.items]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = [
            (f"{'&#10004;' if item.ok else '&#10008;'} {html.escape(item.name)}",
             html.escape(item.detail) + (f"<br><i>{html.escape(item.fix)}</i>" if item.fix else ""))
            for item in self.items
        ]
        title = tr("Your environment is ready") if self.ready else tr("Your environment needs attention")
        return card_html(title, table_html(rows), accent="#27ae60" if self.ready else "#c0392b")

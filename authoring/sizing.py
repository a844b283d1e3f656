"""Size a room from the measured whole session (docs/whole_session.json): per learner, one hub machine, a cluster.

docs/hosting.md quotes the block ``sizing_markdown`` writes, between two marker lines; a test checks that the block
still matches the recorded figures, and ``python -m authoring.whole_session --write docs/whole_session.json``
rewrites both. Every number below comes from the measurement or from a rule stated in the text.
"""
from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any, Dict

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "whole_session.json"
HOSTING = ROOT / "docs" / "hosting.md"
BEGIN = "<!-- sizing: begin -->"
END = "<!-- sizing: end -->"
ROOMS = (30, 100)
TLJH_HUB_MIB = 128          # TLJH's "Estimate Memory / CPU / Disk needed": add 128 MB for the hub itself
NODE_GIB = 32               # a common cloud machine size for Z2JH user nodes
NODE_RESERVED_FRACTION = 0.1  # what Kubernetes and the node's own daemons keep for themselves, roughly
LIMIT_GIB = 2.0             # Binder's limit; the same per-user limit on a hub
WIDTH = 118


def load_figures(path: Path = FIGURES) -> Dict[str, Any]:
    """The recorded whole-session figures."""
    return json.loads(path.read_text(encoding="utf-8"))


def per_learner_gib(figures: Dict[str, Any]) -> float:
    """The measured peak of one learner's session, rounded up to a tenth of a GiB: the memory to guarantee."""
    return math.ceil(figures["peak_mib"] / 1024 * 10) / 10


def tljh_machine_gib(learners: int, figures: Dict[str, Any]) -> int:
    """One TLJH machine for ``learners`` at once: their measured peaks plus the hub, in whole GiB."""
    return math.ceil((learners * per_learner_gib(figures) * 1024 + TLJH_HUB_MIB) / 1024)


def z2jh_nodes(learners: int, figures: Dict[str, Any]) -> int:
    """How many NODE_GIB nodes hold ``learners`` users, each guaranteed their measured peak."""
    per_node = math.floor(NODE_GIB * (1 - NODE_RESERVED_FRACTION) / per_learner_gib(figures))
    return math.ceil(learners / per_node)


def sizing_markdown(figures: Dict[str, Any]) -> str:
    """The block docs/hosting.md quotes, markers included."""
    guarantee = per_learner_gib(figures)
    rows = "\n".join(
        f"| {learners} | {tljh_machine_gib(learners, figures)} GiB | {z2jh_nodes(learners, figures)} nodes of "
        f"{NODE_GIB} GiB ({learners * guarantee:.0f} GiB guaranteed) |" for learners in ROOMS
    )
    heaviest = max(figures["notebooks"], key=lambda row: row["kernel_pss_mib"])
    lightest = min(row["kernel_pss_mib"] for row in figures["notebooks"])
    where = "the Binder environment" if "binder-venv" in figures["python"] else f"Python at {figures['python']}"
    measured = (
        f"Measured by `tests/browser/test_solved_course.py`'s session ({figures['machine']}, torch {figures['torch']}, "
        f"{where}): every notebook run in order in one JupyterLab, tabs left open, the course's culling "
        f"scaled to the learner's pace. Server and kernels together peaked at **{figures['peak_mib']:.0f} MiB** "
        f"with up to {figures['most_kernels_alive']} kernels alive; the server alone takes "
        f"{figures['server_alone_mib']:.0f} MiB, one kernel {lightest:.0f} "
        f"to {heaviest['kernel_pss_mib']:.0f} MiB (`{heaviest['notebook'][:-6]}`). Without the culling, every kernel "
        f"left open would add up to {figures['without_culling_mib']:.0f} MiB: past Binder's limit.")
    per_learner = (
        f"- **Per learner:** guarantee {guarantee:.1f} GiB (the measured peak, rounded up), limit {LIMIT_GIB:.0f} GiB "
        f"(as Binder). Memory is counted as the container's limit counts it (PSS, shared pages once); on one shared "
        f"machine, learners also share the libraries' pages, so this errs on the safe side.")
    rule = (
        f"The TLJH column is TLJH's rule: learners × memory per learner + {TLJH_HUB_MIB} MB for the hub. The Z2JH "
        f"column fits each node's {NODE_GIB} GiB, less about {NODE_RESERVED_FRACTION:.0%} for Kubernetes, with "
        f"{guarantee:.1f} GiB guarantees. Add CPU as the hub's docs say; the course needs no GPU.")
    return "\n".join([
        BEGIN,
        textwrap.fill(measured, WIDTH),
        "",
        textwrap.fill(per_learner, WIDTH, subsequent_indent="  "),
        "",
        "| learners at once | The Littlest JupyterHub: one machine | Zero to JupyterHub: user nodes |",
        "|---|---|---|",
        rows,
        "",
        textwrap.fill(rule, WIDTH),
        END,
    ])


def update_hosting(figures: Dict[str, Any], path: Path = HOSTING) -> None:
    """Rewrite the sizing block in docs/hosting.md from ``figures``."""
    text = path.read_text(encoding="utf-8")
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    path.write_text(before + sizing_markdown(figures) + after, encoding="utf-8")


def quoted_block(path: Path = HOSTING) -> str:
    """The sizing block as docs/hosting.md has it now."""
    text = path.read_text(encoding="utf-8")
    return BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END

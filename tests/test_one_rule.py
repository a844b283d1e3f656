"""One rule, stated once, and no document stating the old one.

The rule: a backward runs exactly the nodes on a path from its outputs down to what it differentiates for (every leaf,
or ``inputs=``; for a non-leaf input, ``backward`` also runs the node that made it, ``torch.autograd.grad`` does not).
Notebook 01 §7 states and demonstrates it; ``helpers/tools/traversal.py`` implements it and the property test holds
``diagnose`` to it. An earlier version of the course said instead that ``inputs=`` limits where gradients are
accumulated but not which nodes run: wrong, and this test fails wherever that reappears.
"""
from __future__ import annotations

import json
import re
from typing import Iterator, List, Tuple

import nbformat

from tests.paths import ROOT

RULE_HEADING = "## 7. What a backward runs"
OLD_RULE = [
    re.compile(r"accumulat\w*\W{0,4},?\s+not\s+(?:which nodes|traversal|what runs)", re.IGNORECASE),
    re.compile(r"not which nodes (?:run|it runs)", re.IGNORECASE),
    re.compile(r"restricts? (?:the )?accumulation", re.IGNORECASE),
    re.compile(r"(?:limits|chooses|decides|restricts) where (?:the )?gradients are\W{0,3}accumulated", re.IGNORECASE),
]


def texts() -> Iterator[Tuple[str, str]]:
    """(where, text) for every document a learner or teacher reads: notebooks, docs, README, helpers' source."""
    for folder in ("solutions", "notebooks"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            for index, cell in enumerate(nbformat.read(str(path), as_version=4).cells, 1):
                yield f"{path.relative_to(ROOT)}, cell {index}", cell.source
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs").glob("*.html"))]:
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    for package in ("helpers", "authoring"):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    recorded = json.loads((ROOT / "helpers" / "course" / "exercises" / "solutions.json").read_text())
    for exercise_id, entry in recorded.items():
        yield f"solutions.json: {exercise_id}", entry["source"]


def old_rule_statements(text: str) -> List[str]:
    """The passages of ``text`` that state the old rule."""
    flat = re.sub(r"\s+", " ", text.replace("*", "").replace("`", ""))
    return [match.group(0) for pattern in OLD_RULE for match in pattern.finditer(flat)]


def test_no_document_states_the_old_rule() -> None:
    found = [f"{where}: ...{statement}..." for where, text in texts() for statement in old_rule_statements(text)]
    assert found == [], "these state the old, wrong rule:\n" + "\n".join(found)


def test_the_old_rule_detector_recognises_each_wording_the_course_once_used() -> None:
    once_used = [
        "`inputs=` limits where gradients are *accumulated*, not which nodes run.",
        "`inputs=` restricts accumulation, not traversal: in a chain",
        "It does. `inputs=` chooses where gradients are *accumulated*. It does not choose which nodes run.",
        "`inputs=` limits where gradients are **accumulated**, not which nodes run and free their tensors.",
    ]
    for wording in once_used:
        assert old_rule_statements(wording), wording
    the_rule = "A backward runs every node on a path from its loss to what it differentiates for."
    assert old_rule_statements(the_rule) == []


def test_notebook_01_states_the_rule_and_demonstrates_it() -> None:
    cells = nbformat.read(str(ROOT / "solutions" / "01_graph_and_saved_tensors.ipynb"), as_version=4).cells
    start = next(index for index, cell in enumerate(cells) if cell.source.startswith(RULE_HEADING))
    end = next(index for index in range(start + 1, len(cells)) if cells[index].source.startswith("## "))
    section = cells[start:end]
    statement = section[0].source
    for part in ("`loss.backward()`", "`loss.backward(inputs=ts)`", "`torch.autograd.grad(loss, ts)`", "non-leaf",
                 "does not run", "hooks do not fire", "saved tensors stay alive"):
        assert part in statement, f"the rule's statement lacks {part!r}"
    code = "\n".join(cell.source for cell in section if cell.cell_type == "code")
    for demonstration in ("register_prehook", "backward(inputs=", "torch.autograd.grad(", "expect_error("):
        assert demonstration in code, f"the section does not demonstrate with {demonstration!r}"


def test_the_rule_is_the_docstring_of_the_module_that_implements_it() -> None:
    docstring = (ROOT / "helpers" / "tools" / "traversal.py").read_text(encoding="utf-8").split('"""')[1]
    parts = ("loss.backward()", "loss.backward(inputs=ts)", "torch.autograd.grad(loss, ts)", "neither run nor free")
    for part in parts:
        assert part in docstring, part

"""Show, in the notebook, the code the processes run (it lives in this package, since a new process imports
it), and tables and summaries of what they sent back."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from IPython.display import Code

from helpers.language import tr


class HighlightedCode(Code):
    """IPython's ``Code`` without its LaTeX form: HTML in Jupyter, plain text elsewhere.

    The LaTeX form is never shown, but a web page built from the notebook would load MathJax for it.
    """

    def _repr_latex_(self) -> None:
        return None


def show_code(*functions: Callable) -> HighlightedCode:
    """The source of ``functions``, highlighted in Jupyter (plain text elsewhere)."""
    source = "\n\n".join(inspect.getsource(function).rstrip() for function in functions)
    return HighlightedCode(source, language="python")


def ranks_table(rows: Sequence[Tuple[str, bool, bool]], drifts: Optional[Dict[str, List[float]]] = None) -> str:
    """A text table: per recipe, whether both ranks hold the same gradient, whether it is the reference, and (when
    given) how far apart the replicas' weights are after each step."""
    width = max(len(name) for name, _, _ in rows)
    header = f"{tr('recipe'):<{width}}  {tr('rank 0 = rank 1'):>15}  {tr('= reference'):>11}"
    if drifts:
        header += "  " + tr("weights apart after each step")
    lines = [header]
    yes, no = tr("yes"), tr("NO")
    for name, equal, right in rows:
        line = f"{name:<{width}}  {yes if equal else no:>15}  {yes if right else no:>11}"
        if drifts:
            line += "  " + " ".join(f"{value:.1e}" if value else "0" for value in drifts[name])
        lines.append(line)
    return "\n".join(lines)



def run_summary(per_rank: Sequence[Mapping[str, Any]], seconds: float) -> str:
    """One line on a distributed run: how many processes, how long it took, and each one's peak memory (the
    ``"peak MiB"`` every worker of this package reports)."""
    peaks = [f"{rank['peak MiB']:.0f}" for rank in per_rank]
    listed = peaks[0] if peaks else ""
    for peak in peaks[1:]:
        listed = tr("{first} and {second}", first=listed, second=peak)
    return tr("This run: {processes} processes, {seconds} s; peak memory per process {peaks} MiB",
              processes=len(per_rank), seconds=f"{seconds:.1f}", peaks=listed)

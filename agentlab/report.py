"""A run, reported: the terminal report and the exported notebook.

``report_text`` is what ``agentlab report RUN_ID`` prints; ``export_notebook``
is what ``agentlab report RUN_ID --notebook out.ipynb`` writes: a markdown
cell per step (messages, calls, results) and code cells that load the run
and plot its cost curve. The text itself comes from
:mod:`agentlab.trace.display`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._safe_text import clean, md_code, no_math_markdown, terminal_text
from .redact import Redactor
from .trace import load_run
from .trace.display import (
    LONG,
    clip,
    fence,
    headline,
    md_escape,
    step_markdown,
    step_text,
    trace_text,
)


# ------------------------------------------------------------------ public
def report_text(run_id: str, runs: str | os.PathLike[str] | None = None) -> str:
    """A readable terminal report of one run: the headline, the step table, and every step in full."""
    trace = load_run(run_id, runs)
    parts = [trace_text(trace)]
    if len(trace):
        from .costs import money_lines

        parts.append("\n".join(money_lines(trace)))
    parts += [step_text(view) for view in trace]
    if trace.finished is None:
        parts.append(f"The trace ends without a run_finished event: {trace.summary['detail']}.")
    return terminal_text("\n\n".join(parts) + "\n")  # what a tool or model said cannot drive the terminal


PLOT_CODE = """\
import math

import matplotlib.pyplot as plt

from agentlab.plots import cost_curve

limits = trace.summary
fig, ax = plt.subplots(figsize=(8, 4.5))
cost_curve(
    trace.steps,
    max_cost=None if math.isnan(limits["max_cost"]) else limits["max_cost"],
    max_steps=None if math.isnan(limits["max_steps"]) else int(limits["max_steps"]),
    ax=ax,
)
plt.show()"""

PLAIN_PLOT_CODE = """\
import matplotlib.pyplot as plt

steps = trace.steps
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(steps["step"], steps["cumulative_cost"], marker="o", label="spent")
ax.bar(steps["step"], steps["cost"], alpha=0.3, label="cost of the step")
if trace.summary["max_cost"] == trace.summary["max_cost"]:  # NaN means no limit
    ax.axhline(trace.summary["max_cost"], color="crimson", linestyle="--", label="max_cost")
ax.set_xlabel("step")
ax.set_ylabel("USD")
ax.set_title(f"Cost of run {trace.run_id}")
ax.legend()
plt.show()"""
"""The same plot without agentlab.plots, for an install that lacks it."""


def _plot_code() -> str:
    import importlib.util

    return PLOT_CODE if importlib.util.find_spec("agentlab.plots") is not None else PLAIN_PLOT_CODE


def export_notebook(run_id: str, out_path: str | os.PathLike[str], runs: str | os.PathLike[str] | None = None) -> Path:
    """Write one run as a Jupyter notebook: a summary, a markdown cell per step,
    and code cells that load the run and plot its cost curve. Returns the path.

    The notebook is validated with ``nbformat.validate`` before it is written.
    """
    import nbformat
    from nbformat import v4

    if not isinstance(out_path, (str, os.PathLike)) or not str(out_path):
        raise TypeError(f"out_path must be a file path, got {out_path!r}")
    out = Path(out_path)
    if out.suffix != ".ipynb":
        raise ValueError(f"out_path must end in .ipynb, got {str(out)!r}")
    trace = load_run(run_id, runs)
    folder = (trace.file.parent if trace.file else Path(".")).resolve()
    s = trace.summary
    intro = "\n\n".join(
        [
            f"# Run {md_code(trace.run_id)}",
            "\n".join(f"- {md_escape(x)}" for x in headline(trace)[1:]),
            f"**Ending:** {md_escape(s['outcome'])}"
            + (f" — {md_escape(s['reason'])}" if s["outcome"] != "done" else "")
            + (f": {md_escape(s['detail'])}" if s["detail"] else ""),
        ]
    )
    system = trace.started.get("system")
    if system:
        intro += f"\n\n**System prompt:**\n\n{fence(clip(system, LONG))}"
    cells = [v4.new_markdown_cell(intro)]  # every foreign value above and below is escaped (agentlab._safe_text)
    cells.append(
        v4.new_code_cell(f"import agentlab\n\ntrace = agentlab.load_run({trace.run_id!r}, {str(folder)!r})\ntrace")
    )
    cells += [v4.new_markdown_cell(step_markdown(view)) for view in trace]
    final = trace.finished
    if final is not None:
        answer = final.get("text") or ""
        end = f"## How it ended\n\n**{md_escape(final.get('outcome'))}**: {md_escape(final.get('reason'))}"
        if final.get("detail"):
            end += f" — {md_escape(final.get('detail'))}"
        if answer:
            end += f"\n\n{fence(clip(answer, LONG))}"
        if final.get("error"):
            error = final["error"].get("traceback") or final["error"].get("message", "")
            end += f"\n\n**Error:**\n\n{fence(clip(error, LONG))}"
    else:
        end = f"## How it ended\n\nThe trace ends without a result: {md_escape(s['detail'])}."
    cells.append(v4.new_markdown_cell(end))
    cells.append(v4.new_markdown_cell("## Cost per step"))
    cells.append(v4.new_code_cell("trace.steps"))
    cells.append(v4.new_code_cell(_plot_code()))
    cells.append(v4.new_code_cell("trace.calls"))
    redactor = Redactor()  # a trace from elsewhere (or an older agentlab) may hold what this one's rules remove
    for cell in cells:  # a lone surrogate in a result must not make the notebook unwritable
        cell.source = redactor.redact_text(clean(cell.source))
        if cell.cell_type == "markdown":  # a dollar amount reads as money, never as math
            cell.source = no_math_markdown(cell.source)
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["agentlab"] = {"run_id": clean(trace.run_id), "runs": clean(folder)}
    nbformat.validate(nb)
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(out))
    return out

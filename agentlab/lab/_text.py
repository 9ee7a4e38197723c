"""The panel as plain text: what a terminal IPython or a plain export shows.

Widgets render only where a widget manager runs (JupyterLab, Notebook 7,
VS Code). Everywhere else the ``text/plain`` part of the display is all a
reader gets, so it says what the panel would: the phase, the three gauges
and the last step.
"""

from __future__ import annotations

from typing import Any

from .._safe_text import terminal_text
from .._shorten import shorten
from ._state import PanelState


def panel_text(state: PanelState, *, width: int = 100, pending: Any = None) -> str:
    """A few lines: run and model, phase, gauges, the last step's calls and text.

    ``pending``: a call waiting for approval (an ``ApprovalRequest``), shown first.
    """
    state.catch_up()
    lines = [f"agentlab run {state.run_id} · {state.model} · {state.status_line()}"]
    if pending is not None:
        waiting = f"  waiting for approval: {pending}"
        lines.append(shorten(waiting, width))
    lines.append("  " + " | ".join(f"{g.name} {g.text}" for g in state.gauges()))
    if state.thinking_tokens:
        lines.append(f"  output {state.output_line()}")
    if state.log.newest is not None:
        entry = state.log[state.log.newest]
        calls = ", ".join(f"{c.tool} [{c.outcome}]" for c in entry.calls)
        last = f"  last step {entry.step}: " + (calls or "no tool calls")
        if entry.text:
            last += f"; said: {entry.text.strip()}"
        lines.append(shorten(last, width))
    if state.answer:
        answer = f"  answer: {state.answer.strip()}"
        lines.append(shorten(answer, width))
    return terminal_text("\n".join(lines))  # shown in terminal IPython and plain exports

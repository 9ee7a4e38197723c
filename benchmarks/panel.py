"""Panel: what the notebook panel, subscribed headless, adds to each step."""

from __future__ import annotations

from .report import Row, missing

PANEL_GOAL = 1.05


async def panel_rows(steps: int, reps: int) -> list[Row]:
    import agentlab

    if not hasattr(agentlab, "Lab"):
        return [missing("panel.ratio", "Panel: time/step subscribed ÷ not", f"≤ {PANEL_GOAL}")]
    raise NotImplementedError("agentlab.Lab landed: wire its headless subscriber in here")

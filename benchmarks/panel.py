"""Panel: what the notebook panel, subscribed headless, adds to each step.

Two figures, both against a plain traced run in the same process:

* steady state: the time between the ``step_finished`` events of the middle
  steps (the panel redraws throttled, so an instant model must not pay for
  a redraw per event);
* the whole run, including the panel's final draw at the end.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import agentlab as al

from .report import Row, judged, missing
from .workload import SYNC_TOOL, median, run_options, script

PANEL_GOAL = 1.05


class StepClock:
    """A subscriber that notes when each step finished (``perf_counter``)."""

    def __init__(self) -> None:
        self.at: list[float] = []

    def __call__(self, event: al.Event) -> None:
        if event.kind == "step_finished":
            self.at.append(time.perf_counter())

    def steady(self, skip: int) -> float:
        """Seconds per step between step ``skip`` and the last one."""
        span = self.at[skip:]
        return (span[-1] - span[0]) / (len(span) - 1)


async def _plain(steps: int, folder: Path) -> tuple[float, float]:
    clock = StepClock()
    t0 = time.perf_counter()
    result = await al.arun(
        "look up the keys",
        [SYNC_TOOL],
        model=al.ScriptedModel(script(steps)),
        trace=folder,
        subscribers=[clock],
        **run_options(steps),
    )
    whole = time.perf_counter() - t0
    if not isinstance(result, al.Done):
        raise RuntimeError(f"the benchmark run did not finish as scripted: {result!r}")
    return clock.steady(steps // 5), whole / (steps + 1)


async def _with_panel(steps: int, folder: Path) -> tuple[float, float, int]:
    clock = StepClock()
    t0 = time.perf_counter()
    lab: Any = al.Lab(
        "look up the keys",
        [SYNC_TOOL],
        model=al.ScriptedModel(script(steps)),
        trace=folder,
        subscribers=[clock],
        **run_options(steps),
    )
    lab.run()
    result = await lab.wait()
    whole = time.perf_counter() - t0
    renders = lab.panel.renders
    lab.close()
    if not isinstance(result, al.Done):
        raise RuntimeError(f"the benchmark run did not finish as scripted: {result!r}")
    return clock.steady(steps // 5), whole / (steps + 1), renders


async def panel_rows(steps: int, reps: int) -> list[Row]:
    label = f"Panel: time/step subscribed ÷ not ({steps} steps)"
    goal = f"≤ {PANEL_GOAL}"
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return [missing("panel.ratio", label, goal, "n/a (ipywidgets not installed)")]
    if not hasattr(al, "Lab"):
        return [missing("panel.ratio", label, goal)]
    plain: list[tuple[float, float]] = []
    panel: list[tuple[float, float, int]] = []
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-") as d:
        await _with_panel(steps, Path(d))  # one-off imports (ipywidgets, matplotlib) are not per-step costs
        for _ in range(reps):
            plain.append(await _plain(steps, Path(d)))
            panel.append(await _with_panel(steps, Path(d)))
    steady = median([p[0] for p in panel]) / median([p[0] for p in plain])
    whole = median([p[1] for p in panel]) / median([p[1] for p in plain])
    return [
        Row(
            "panel.ratio",
            label,
            steady,
            "ratio",
            f"{steady:.2f} steady; {whole:.1f} over the whole run with its final draw "
            f"({median([p[2] for p in panel]):.0f} redraws)",
            goal,
            judged(steady <= PANEL_GOAL),
            note=""
            if whole <= PANEL_GOAL
            else "the whole-run figure is the panel's construction and final draw "
            "(the log's widgets, the chart), paid once per run",
            extra={
                "steady_ratio": steady,
                "whole_run_ratio": whole,
                "plain_ms": [p[0] * 1e3 for p in plain],
                "panel_ms": [p[0] * 1e3 for p in panel],
            },
        ),
    ]

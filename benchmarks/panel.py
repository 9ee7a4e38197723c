"""Panel: what the notebook panel, subscribed headless, adds to each step and to a whole run.

Three figures, against a plain traced run in the same process:

* per step (goal ≤ 1.05): the time between the ``step_finished`` events of the middle
  steps (the panel redraws throttled, so an instant model must not pay for
  a redraw per event);
* the whole run (goal ≤ 1.1): from Run to the finished panel, its final draw included, against the whole of
  a bare ``arun``;
* building the panel (its widgets, when the cell shows it, before anything runs), in milliseconds: no goal,
  shown so the whole-run figure is not read as including it.

The chart is drawn in the browser from numbers (:mod:`agentlab.lab._chart`): the kernel renders no picture.
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
WHOLE_GOAL = 1.1


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


async def _with_panel(steps: int, folder: Path) -> tuple[float, float, int, float]:
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
    t1 = time.perf_counter()
    lab.run()
    result = await lab.wait()
    whole = time.perf_counter() - t1
    renders = lab.panel.renders
    lab.close()
    if not isinstance(result, al.Done):
        raise RuntimeError(f"the benchmark run did not finish as scripted: {result!r}")
    return clock.steady(steps // 5), whole / (steps + 1), renders, t1 - t0


async def panel_rows(steps: int, reps: int) -> list[Row]:
    label = f"Panel: time/step subscribed ÷ not ({steps} steps)"
    whole_label = f"Panel: a whole {steps}-step run, Run to the finished panel, ÷ a bare run"
    goal, whole_goal = f"≤ {PANEL_GOAL}", f"≤ {WHOLE_GOAL}"
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        why = "n/a (ipywidgets not installed)"
        return [missing("panel.ratio", label, goal, why), missing("panel.whole", whole_label, whole_goal, why)]
    if not hasattr(al, "Lab"):
        return [missing("panel.ratio", label, goal), missing("panel.whole", whole_label, whole_goal)]
    plain: list[tuple[float, float]] = []
    panel: list[tuple[float, float, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-") as d:
        await _with_panel(steps, Path(d))  # one-off imports (ipywidgets, anywidget) are not per-step costs
        for _ in range(reps):
            plain.append(await _plain(steps, Path(d)))
            panel.append(await _with_panel(steps, Path(d)))
    steady = median([p[0] for p in panel]) / median([p[0] for p in plain])
    whole = median([p[1] for p in panel]) / median([p[1] for p in plain])
    build_ms = median([p[3] for p in panel]) * 1e3
    redraws = median([p[2] for p in panel])
    return [
        Row(
            "panel.ratio",
            label,
            steady,
            "ratio",
            f"{steady:.2f} per step ({redraws:.0f} redraws in the run; the chart drawn in the browser)",
            goal,
            judged(steady <= PANEL_GOAL),
            extra={
                "steady_ratio": steady,
                "plain_ms": [p[0] * 1e3 for p in plain],
                "panel_ms": [p[0] * 1e3 for p in panel],
            },
        ),
        Row(
            "panel.whole",
            whole_label,
            whole,
            "ratio",
            f"{whole:.2f} (building the panel, before Run: {build_ms:.0f} ms more)",
            whole_goal,
            judged(whole <= WHOLE_GOAL),
            extra={
                "whole_run_ratio": whole,
                "build_ms": build_ms,
                "plain_run_ms": [p[1] * (steps + 1) * 1e3 for p in plain],
                "panel_run_ms": [p[1] * (steps + 1) * 1e3 for p in panel],
            },
        ),
    ]

"""Panel: what the notebook panel, subscribed headless, adds to each step and to a whole run.

Three figures, against a plain traced run in the same process:

* per step (alarm ≤ 1.1): the time between the ``step_finished`` events of the middle
  steps (the panel redraws throttled, so an instant model must not pay for
  a redraw per event);
* the whole run (alarm ≤ 1.2): from Run to the finished panel, its final draw included, against the whole of
  a bare ``arun``;
* building the panel (its widgets, when the cell shows it, before anything runs), in milliseconds: no goal,
  shown so the whole-run figure is not read as including it.

The two ratios are regression alarms, not goals. Issue 47 filed them as goals of 1.05 and 1.1, when the panel
drew a PNG every step (3.6× over a whole run). What an instant model's 200 steps (~30 ms) measure now is the
panel's fixed final draw (~2 ms: the 50-step log's checks and markup) and holding the events until a redraw;
identical code reads 1.03-1.09 per step across fresh processes, so a line at 1.05 is inside the noise. The
alarms sit above that noise and far below the defect they guard: a redraw every step reads 2.5× on both
(measured by putting one back in the drive), and ``tests/test_lab_panel.py`` counts the redraws and widget
updates of a run exactly. See docs/benchmarks.md, "The panel's two ratios become alarms".

The chart is drawn in the browser from numbers (:mod:`agentlab.lab._chart`): the kernel renders no picture.

Each figure is the median over a few fresh processes (``processes``), each timing both runs alternately itself
(a same-run ratio). One process's ratio moves by ±5 % with what the process holds: the same code read 1.00-1.02
per step in a process that had imported this module alone and 1.06-1.09 in one that had imported the whole
suite first, paired runs on a quiet machine. A fresh process for the measure alone makes the figure the same
whatever ran before it in ``make bench``; the spread of the processes' ratios is shown beside it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import agentlab as al

from .report import Row, judged, missing
from .workload import SYNC_TOOL, median, run_options, script

PANEL_ALARM = 1.1
"""Per step, with the panel ÷ without (issue 47 filed 1.05 as a goal: see the module's docstring)."""
WHOLE_ALARM = 1.2
"""A whole 200-step run to the finished panel ÷ a bare run (filed: 1.1)."""


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


async def measure(steps: int, reps: int) -> dict[str, Any]:
    """One process's figures: ``reps`` plain and panel runs alternated, each side's medians and their ratios."""
    plain: list[tuple[float, float]] = []
    panel: list[tuple[float, float, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-") as d:
        await _with_panel(steps, Path(d))  # one-off imports (ipywidgets) are not per-step costs
        for _ in range(reps):
            plain.append(await _plain(steps, Path(d)))
            panel.append(await _with_panel(steps, Path(d)))
    return {
        "steady": median([p[0] for p in panel]) / median([p[0] for p in plain]),
        "whole": median([p[1] for p in panel]) / median([p[1] for p in plain]),
        "build_ms": median([p[3] for p in panel]) * 1e3,
        "redraws": median([p[2] for p in panel]),
        "plain_ms": median([p[0] for p in plain]) * 1e3,
        "plain_run_ms": median([p[1] for p in plain]) * (steps + 1) * 1e3,
        "panel_run_ms": median([p[1] for p in panel]) * (steps + 1) * 1e3,
    }


def _in_fresh_process(steps: int, reps: int) -> dict[str, Any]:
    """:func:`measure` in a new interpreter (``python -m benchmarks.panel``), its figures read back as JSON."""
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.panel", str(steps), str(reps)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the panel benchmark's process failed: {out.stderr.strip().splitlines()[-1:]}")
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"


async def panel_rows(steps: int, reps: int, processes: int = 1) -> list[Row]:
    label = f"Panel: time/step subscribed ÷ not ({steps} steps)"
    whole_label = f"Panel: a whole {steps}-step run, Run to the finished panel, ÷ a bare run"
    goal, whole_goal = f"alarm ≤ {PANEL_ALARM} (filed ≤ 1.05)", f"alarm ≤ {WHOLE_ALARM} (filed ≤ 1.1)"
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        why = "n/a (ipywidgets not installed)"
        return [missing("panel.ratio", label, goal, why), missing("panel.whole", whole_label, whole_goal, why)]
    if not hasattr(al, "Lab"):
        return [missing("panel.ratio", label, goal), missing("panel.whole", whole_label, whole_goal)]
    runs = [await asyncio.to_thread(_in_fresh_process, steps, reps) for _ in range(processes)]
    steadies, wholes = [r["steady"] for r in runs], [r["whole"] for r in runs]
    steady, whole = median(steadies), median(wholes)
    build_ms = median([r["build_ms"] for r in runs])
    redraws = median([r["redraws"] for r in runs])
    across = f"median of {processes} processes" if processes > 1 else "one process"
    return [
        Row(
            "panel.ratio",
            label,
            steady,
            "ratio",
            f"{steady:.2f} per step ({across}: {_spread(steadies)}; {redraws:.0f} redraws in the run)",
            goal,
            judged(steady <= PANEL_ALARM),
            extra={"steady_ratio": steady, "processes": runs},
        ),
        Row(
            "panel.whole",
            whole_label,
            whole,
            "ratio",
            f"{whole:.2f} ({_spread(wholes)}; building the panel, before Run: {build_ms:.0f} ms more)",
            whole_goal,
            judged(whole <= WHOLE_ALARM),
            extra={"whole_run_ratio": whole, "build_ms": build_ms},
        ),
    ]


if __name__ == "__main__":  # one process's figures, as JSON (what _in_fresh_process reads)
    print(json.dumps(asyncio.run(measure(int(sys.argv[1]), int(sys.argv[2])))))

"""Traces: how fast events are written, how big a step is, how fast runs load."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import agentlab as al
from agentlab.trace import TraceWriter

from .report import Row, fmt, judged, missing
from .workload import SYNC_TOOL, median, run_options, script

LOAD_GOAL_S_PER_MILLION = 2.0  # issue 13 (was 5 s)
LOAD_REPS = 3
"""Loads of the folder timed; the fastest counts (as the logs-alone row takes the best of five)."""


async def record_run(steps: int) -> list[al.Event]:
    """The events of one run of the W1 workload, kept in memory."""
    events: list[al.Event] = []

    def keep(e: al.Event) -> None:
        # run_started holds the live history list (it grows as the run goes on): copy it
        # as it is now, or replaying the events would write the whole history at step 0.
        if "messages" in e.data:
            e = replace(e, data={**e.data, "messages": list(e.data["messages"])})
        events.append(e)

    run = al.Run(
        "look up the keys", [SYNC_TOOL], model=al.ScriptedModel(script(steps)), subscribers=[keep], **run_options(steps)
    )
    result = await run.run()
    if not isinstance(result, al.Done):
        raise RuntimeError(f"the benchmark run did not finish as scripted: {result!r}")
    return events


def write_seconds(events: list[al.Event], folder: Path) -> float:
    """Seconds the trace writer takes for these events (open, write and flush each, close)."""
    writer = TraceWriter(folder)
    t0 = time.perf_counter()
    for e in events:
        writer(e)
    writer.close()
    return time.perf_counter() - t0


def _load_runs() -> Any:
    import agentlab.trace as trace

    return getattr(trace, "load_runs", None)


async def trace_rows(steps: int, reps: int, runs_to_load: int) -> list[Row]:
    events = await record_run(steps)
    run_id = events[0].run_id
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-") as d:
        root = Path(d)
        secs = [write_seconds(events, root / f"w{i}") for i in range(reps)]
        file = root / "w0" / f"{run_id}.jsonl"
        size = file.stat().st_size
        rate = len(events) / median(secs)
        rows = [
            Row(
                "trace.write_rate",
                "Trace: events written per second",
                rate,
                "events/s",
                f"{fmt(rate)} events/s ({fmt(1e6 / rate)} µs each, flushed)",
                extra={"events_per_run": len(events), "reps": reps},
            ),
            Row(
                "trace.bytes_per_step",
                "Trace: bytes per step",
                size / (steps + 1),
                "bytes",
                f"{fmt(size / (steps + 1))} B ({len(events) / (steps + 1):.1f} events/step)",
            ),
        ]
        rows.append(load_row(file, run_id, len(events), steps, runs_to_load, root / "many"))
    return rows


def load_row(file: Path, run_id: str, events_per_run: int, steps: int, runs: int, folder: Path) -> Row:
    """Load ``runs`` copies of one trace (each with its own run id) into the DataFrames.

    The first load of a process also imports pandas and pyarrow (~0.6 s here, once per process,
    whatever the folder's size): a rate per million events is the load's, so a one-run folder is
    loaded first and the imports are shown apart (the store benchmark's rows warm up the same way)."""
    label = f"Trace: load {runs:,} runs of {steps} steps"
    goal = f"1M events in ≤ {fmt(LOAD_GOAL_S_PER_MILLION)} s"
    load_runs = _load_runs()
    if load_runs is None:
        return missing("trace.load_rate", label, goal)
    warm = folder.with_name(folder.name + "-warm")
    warm.mkdir(parents=True)
    shutil.copy(file, warm / file.name)
    t0 = time.perf_counter()
    first = load_runs(warm)
    for frame in ("runs", "steps", "calls", "events"):
        getattr(first, frame)
    imports = time.perf_counter() - t0
    text = file.read_text(encoding="utf-8")
    folder.mkdir(parents=True)
    for i in range(runs):
        new_id = f"bench{i:07d}"
        (folder / f"{new_id}.jsonl").write_text(text.replace(run_id, new_id), encoding="utf-8")
    times = []
    for _ in range(LOAD_REPS):  # the best of a few: one load's time varies by half on this shared VM
        t0 = time.perf_counter()
        traces = load_runs(folder)
        for frame in ("runs", "steps", "calls", "events"):  # all four DataFrames, as a notebook would
            getattr(traces, frame)
        times.append(time.perf_counter() - t0)
    elapsed = min(times)
    total = events_per_run * runs
    loaded = len(traces.runs)
    if loaded != runs:
        raise RuntimeError(f"load_runs found {loaded} runs, expected {runs}")
    rate = total / elapsed
    per_million = 1e6 / rate
    return Row(
        "trace.load_rate",
        label,
        rate,
        "events/s",
        f"{fmt(rate)} events/s ({fmt(elapsed)} s, best of {LOAD_REPS}; 1M events ≈ {fmt(per_million)} s)",
        goal,
        judged(per_million <= LOAD_GOAL_S_PER_MILLION),
        note=f"the process's first load, one run, took {fmt(imports)} s, most of it importing pandas and pyarrow",
        extra={"events": total, "seconds": elapsed, "all_seconds": times, "first_load_s": imports},
    )

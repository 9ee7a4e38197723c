"""Every benchmark at one of two sizes: the issue's (``full``) and a tiny one for the smoke test."""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .report import Row


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big and how often each workload runs."""

    w1_steps: int = 50
    w1_reps: int = 31
    bare_inner: int = 20
    w2_seconds: float = 0.2
    w2_reps: int = 3
    w3_steps: int = 200
    w3_window: int = 20
    w3_reps: int = 7
    trace_steps: int = 50
    trace_reps: int = 21
    load_runs: int = 1000
    panel_steps: int = 200
    panel_reps: int = 21
    panel_processes: int = 5
    memory_steps: int = 200
    cache_steps: int = 20
    cold_reps: int = 9
    recorded_mb: float = 50.0
    redact_mb: float = 1.0
    redact_import_mb: float = 20.0
    stream_reps: int = 21
    guard_steps: int = 20
    chaos_runs: int = 1000
    chaos_folders: int = 20
    chaos_ray_rounds: int = 3
    exp_runs: int = 1000
    exp_reps: int = 3
    exp_ray_cells: int = 100
    store_steps: int = 50
    store_events: int = 1_000_000
    sql_events: int = 100_000_000
    store_reps: int = 5


FULL = Sizes()
QUICK = Sizes(
    w1_steps=5,
    w1_reps=2,
    bare_inner=2,
    w2_seconds=0.02,
    w2_reps=1,
    w3_steps=12,
    w3_window=4,
    w3_reps=1,
    trace_steps=5,
    trace_reps=2,
    load_runs=3,
    panel_steps=5,
    panel_reps=2,
    panel_processes=1,
    memory_steps=8,
    cache_steps=20,
    cold_reps=1,
    recorded_mb=0.5,
    redact_mb=0.02,
    redact_import_mb=0.3,
    stream_reps=2,
    guard_steps=8,
    chaos_runs=12,
    chaos_folders=1,
    chaos_ray_rounds=0,
    exp_runs=8,
    exp_reps=1,
    exp_ray_cells=0,
    store_steps=5,
    store_events=2000,
    sql_events=20_000,
    store_reps=1,
)

# (name, rows it produces if it fails, how to run it)
Bench = tuple[str, list[str], Callable[[Sizes], Awaitable[list[Row]]]]


def benches() -> list[Bench]:
    from . import (
        caching,
        chaos,
        chaos_folders,
        coldstart,
        experiments,
        guard,
        memory,
        panel,
        parallel,
        recorded,
        redaction,
        steps,
        store,
        streaming,
        traces,
    )

    async def mem(s: Sizes) -> list[Row]:
        return await asyncio.to_thread(memory.memory_rows, s.memory_steps)

    return [
        (
            "W1",
            ["w1.bare", "w1.off", "w1.on", "w1.on_async"],
            lambda s: steps.per_step_overhead(s.w1_steps, s.w1_reps, s.bare_inner),
        ),
        (
            "W2",
            ["w2.reads_wall", "w2.reads_concurrent", "w2.write_alone"],
            lambda s: parallel.parallel_reads(s.w2_seconds, s.w2_reps),
        ),
        ("W3", ["w3.growth"], lambda s: steps.history_growth(s.w3_steps, s.w3_window, s.w3_reps)),
        (
            "traces",
            ["trace.write_rate", "trace.bytes_per_step", "trace.load_rate"],
            lambda s: traces.trace_rows(s.trace_steps, s.trace_reps, s.load_runs),
        ),
        (
            "store",
            ["store.jsonl_ratio", "store.load", "store.memory", "store.memory_varied", "store.compaction", "store.sql"],
            lambda s: store.store_rows(s.store_steps, s.store_events, s.sql_events, s.store_reps),
        ),
        (
            "panel",
            ["panel.ratio", "panel.whole"],
            lambda s: panel.panel_rows(s.panel_steps, s.panel_reps, s.panel_processes),
        ),
        ("memory", ["memory.peak_rss", "memory.trace_linear"], mem),
        ("caching", ["cost.cache_ratio"], lambda s: caching.caching_rows(s.cache_steps)),
        ("cold", ["cold.import_run"], lambda s: asyncio.to_thread(coldstart.coldstart_rows, s.cold_reps)),
        (
            "recorded",
            ["recorded.import", "recorded.memory"],
            lambda s: asyncio.to_thread(recorded.recorded_rows, s.recorded_mb),
        ),
        (
            "redaction",
            ["redact.text", "redact.adversarial", "redact.import_share"],
            lambda s: asyncio.to_thread(
                redaction.redaction_rows, s.redact_mb, s.redact_import_mb, 1 if s is QUICK else 3
            ),
        ),
        (
            "guard",
            ["guard.counts_25", "guard.counts_50", "guard.counts_100", "guard.counts_1000"],
            lambda s: guard.guard_rows(s.guard_steps),
        ),
        (
            "experiments",
            ["exp.runs_per_s", "exp.overhead", "exp.peak_rss", "exp.ray_overhead"],
            lambda s: experiments.experiment_rows(s.exp_runs, s.exp_reps, s.exp_ray_cells),
        ),
        (
            "streaming",
            ["stream.overhead", "stream.paced", "stream.first_delta"],
            lambda s: streaming.streaming_rows(s.stream_reps),
        ),
        (
            "chaos",
            ["chaos.hangs", "chaos.escaped", "chaos.lost_steps", "chaos.overrun", "chaos.blocked_loop"],
            lambda s: chaos.chaos_rows(s.chaos_runs),
        ),
        (
            "chaos-folders",
            ["chaos.folder_owners", "chaos.folder_money", "chaos.folder_cells"],
            lambda s: chaos_folders.folder_rows(s.chaos_folders),
        ),
        ("chaos-ray", ["chaos.ray_workers"], lambda s: chaos_folders.ray_rows(s.chaos_ray_rounds)),
    ]


ROW_KEYS = [key for _, keys, _ in benches() for key in keys]


async def run_all(sizes: Sizes, only: set[str] | None = None, progress: Callable[[str], None] = print) -> list[Row]:
    """Run the benchmarks in order; one that crashes leaves a row saying so, never a hole."""
    rows: list[Row] = []
    for name, keys, bench in benches():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            rows.extend(await bench(sizes))
        except Exception as exc:
            detail = traceback.format_exception_only(exc)[-1].strip()
            rows.extend(Row(k, k, None, "", f"failed: {detail}", status="n/a") for k in keys)
        progress(f"  {name} done in {time.perf_counter() - t0:.1f} s")
    return rows

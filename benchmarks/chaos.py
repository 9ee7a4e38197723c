"""Chaos: many short runs with random tool faults, slow subscribers and trace write failures.

Each run goes through the public ``agentlab.run()`` (its own thread and event
loop, as in a notebook) with a short deadline and a random script of calls to
a fault zoo: tools that raise anything (``SystemExit``, ``KeyboardInterrupt``,
``StopIteration``...), retry, hang on their thread, ignore their
cancellation, or run past the deadline. Subscribers sleep a little on some
events; one, ahead of the others, raises anything (``SystemExit``,
``KeyboardInterrupt``, ``CancelledError``...) at one kind of event in some
runs (issue 24); a trace-writing subscriber fails on some events like a full
disk.

Counted, with the goals of issue 14:

* **hangs**: ``run()`` did not return within ``deadline + HANG_S``;
* **escaped**: ``run()`` raised instead of returning a result;
* **lost steps**: a ``step_finished`` the run emitted that is missing from its
  trace file although no write failure was reported for it (a silent loss);
* **deadline overrun**: wall time of ``run()`` minus ``deadline_s``, for runs
  stopped by the deadline while the event loop was free (p50/p99/max);
* runs whose async tool blocks the event loop are reported apart: the
  overrun there cannot be prevented, only explained (``overrun_cause``
  must be set whenever the result's own ``overrun_s`` passes 0.1 s).
"""

from __future__ import annotations

import asyncio
import copy
import os
import random
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentlab as al
from agentlab.trace import TraceWriter, read_events

from .overrun_phases import Probe, Timeline, breakdown, by_grace, grace_line, medians
from .report import Row, fmt, judged

HANG_S = 5.0
CONCURRENCY = 2
OVERRUN_GOAL_S = 0.1
RAISES: list[BaseException] = [
    SystemExit(1),
    KeyboardInterrupt(),
    StopIteration(),
    GeneratorExit(),
    asyncio.CancelledError(),
    ValueError("bug"),
    al.ToolError("not found", hint="ask again"),
    al.RetryableError("busy", retry_after=0.01),
    PermissionError("denied"),
]


def fresh(exc: BaseException) -> BaseException:
    """A new instance like ``exc``: raising one shared instance again and again grows its ``__traceback__``
    with every raise, and those frames would keep every run of the benchmark alive (a heap that grows to
    ~400,000 objects, and gc pauses of 50-120 ms inside the overrun figure)."""
    return copy.copy(exc)


FAULTS = ["ok", "ok", "ok", "raise", "slow", "hang_thread", "stubborn", "block_loop"]


def _tools(release: threading.Event) -> list[al.Tool]:
    @al.tool(mode="read")
    def ok(i: int) -> str:
        """Answer at once."""
        return f"ok {i}"

    @al.tool
    def raise_(i: int) -> str:
        """Raise one of the zoo's exceptions."""
        raise fresh(RAISES[i % len(RAISES)])

    @al.tool(mode="read")
    async def slow(i: int) -> str:
        """Take a while (may pass the deadline)."""
        await asyncio.sleep((i % 7) * 0.03)
        return "slow"

    @al.tool(mode="read")
    def hang_thread(i: int) -> str:
        """Hold its thread until the benchmark ends."""
        release.wait(HANG_S * 4)
        return "late"

    @al.tool(mode="read")
    async def stubborn(i: int) -> str:
        """Ignore cancellation for 0.3 s."""
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass
        return "finally"

    @al.tool(mode="read")
    async def block_loop(i: int) -> str:
        """Block the event loop (time.sleep in a coroutine)."""
        time.sleep(0.25)
        return "rude"

    return [ok, al.tool(raise_.fn, name="raise"), slow, hang_thread, stubborn, block_loop]


class FlakyTrace:
    """A trace writer that fails on some events, as a full disk would, and remembers which."""

    def __init__(self, folder: Path, rng: random.Random, rate: float) -> None:
        self.writer = TraceWriter(folder)
        self.rng = rng
        self.rate = rate
        self.failed: set[int] = set()

    def __call__(self, event: al.Event) -> None:
        if self.rng.random() < self.rate:
            self.failed.add(event.seq)
            raise OSError(28, "No space left on device")
        self.writer(event)


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    runs: int = 0
    hangs: int = 0
    escaped: list[str] = field(default_factory=list)
    lost_steps: int = 0
    overruns: list[float] = field(default_factory=list)
    engine_overruns: list[float] = field(default_factory=list)  # result.overrun_s: the engine's own account
    unexplained: list[dict[str, Any]] = field(default_factory=list)
    worst: list[tuple[float, int, str]] = field(default_factory=list)  # (overrun, seed, detail) of free-loop runs
    blocked: list[tuple[float, bool]] = field(default_factory=list)  # (overrun, explained by the watchdog)
    timelines: list[tuple[float, Timeline]] = field(default_factory=list)  # (overrun, phases) of free-loop runs
    reasons: dict[str, int] = field(default_factory=dict)


def _one(seed: int, folder: Path, release: threading.Event, tally: Tally, probe: Probe) -> None:
    rng = random.Random(seed)
    deadline = rng.choice([0.05, 0.1, 0.2, 0.3])
    replies = []
    blocks = False
    for _ in range(rng.randint(1, 4)):
        calls = []
        for _ in range(rng.randint(1, 3)):
            fault = rng.choice(FAULTS)
            blocks |= fault == "block_loop"
            calls.append(("raise" if fault == "raise" else fault, {"i": rng.randrange(1000)}))
        replies.append(al.reply(None, *calls))
    replies.append(al.reply("done"))
    steps_seen: list[int] = []
    trace = FlakyTrace(folder, rng, rate=rng.choice([0.0, 0.0, 0.05]))
    hostile = rng.choice([None, None, *RAISES])
    hostile_on = rng.choice(
        ["run_started", "model_called", "tool_started", "tool_finished", "step_finished", "run_finished"]
    )

    def hostile_subscriber(event: al.Event) -> None:
        if hostile is not None and event.kind == hostile_on:
            raise fresh(hostile)

    slow_every = rng.choice([0, 0, 3])

    def slow_subscriber(event: al.Event) -> None:
        if slow_every and event.seq % slow_every == 0:
            time.sleep(0.002)

    def steps(event: al.Event) -> None:
        if event.kind == "step_finished":
            steps_seen.append(event.seq)

    # Built before the clock starts: the figure is run()'s own time (building six tools' schemas took ~2.6 ms).
    tools, model, policy = _tools(release), al.ScriptedModel(replies), al.Policy(base_delay=0.005, max_delay=0.01)
    timeline = probe.begin(deadline, seed)
    try:
        result = al.run(  # warnings (from the failing trace subscriber) are silenced for the whole benchmark
            "chaos",
            tools,
            model=model,
            trace=False,
            deadline_s=deadline,
            max_cost=None,
            max_steps=10,
            subscribers=[probe.first, hostile_subscriber, steps, slow_subscriber, trace, probe.last],
            policy=policy,
        )
    except BaseException as exc:  # noqa: BLE001 - counting exactly this
        with tally.lock:
            tally.escaped.append(f"{type(exc).__name__}: {exc}")
        return
    finally:
        trace.writer.close()
        probe.end()
    wall = (timeline.end or timeline.start) - timeline.start
    file = trace.writer.file_of(result.run_id)
    written = {e["seq"] for e in read_events(file)} if file.exists() else set()
    with tally.lock:
        tally.reasons[str(result.reason)] = tally.reasons.get(str(result.reason), 0) + 1
        tally.lost_steps += len([s for s in steps_seen if s not in written and s not in trace.failed])
        if result.reason == "deadline":
            over = max(0.0, wall - deadline)
            if blocks:
                # what the result must explain is the engine's own overrun (wall time adds thread start and close)
                explained = bool(result.overrun_cause) or result.overrun_s <= OVERRUN_GOAL_S
                tally.blocked.append((over, explained))
                if not explained:
                    tally.unexplained.append(
                        {"seed": seed, "overrun_s": over, "engine_overrun_s": result.overrun_s, "detail": result.detail}
                    )
            else:
                tally.overruns.append(over)
                tally.engine_overruns.append(result.overrun_s)
                tally.timelines.append((over, timeline))
                tally.worst = sorted([*tally.worst, (over, seed, result.detail)], reverse=True)[:3]


def _quantile(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


async def chaos_rows(runs: int) -> list[Row]:
    """Run ``runs`` chaos runs, ``CONCURRENCY`` at a time, each bounded by a hang timer."""
    tally = Tally()
    release = threading.Event()
    gate = asyncio.Semaphore(CONCURRENCY)
    probe = Probe()
    with tempfile.TemporaryDirectory(prefix="agentlab-chaos-") as d, probe:

        async def bounded(seed: int) -> None:
            async with gate:
                job = asyncio.ensure_future(asyncio.to_thread(_one, seed, Path(d), release, tally, probe))
                done, _ = await asyncio.wait({job}, timeout=0.3 + HANG_S)
                tally.runs += 1
                if not done:
                    tally.hangs += 1  # its thread is left behind; the release below frees it

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await asyncio.gather(*(bounded(seed) for seed in range(runs)))
        finally:
            release.set()
    over = tally.overruns
    p50, p99, worst = _quantile(over, 0.5), _quantile(over, 0.99), max(over, default=0.0)
    blocked_explained = sum(ok for _, ok in tally.blocked)
    slowest = breakdown(tally.timelines, probe.gc_pauses)
    split = by_grace(tally.timelines, probe.gc_pauses)
    print(slowest, flush=True)  # where the tail's time goes (benchmarks/overrun_phases.py)
    print(grace_line(split), flush=True)
    size = f"{tally.runs} runs, {CONCURRENCY} at a time"
    extra: dict[str, Any] = {"size": size, "stop_reasons": tally.reasons}
    return [
        Row(
            "chaos.hangs",
            "chaos: runs that hung",
            tally.hangs,
            "runs",
            f"{tally.hangs} of {tally.runs}",
            "0",
            judged(tally.hangs == 0),
            extra=extra,
        ),
        Row(
            "chaos.escaped",
            "chaos: exceptions escaping run()",
            len(tally.escaped),
            "runs",
            f"{len(tally.escaped)} of {tally.runs}",
            "0",
            judged(not tally.escaped),
            note="; ".join(sorted(set(tally.escaped)))[:300],
            extra={"size": size},
        ),
        Row(
            "chaos.lost_steps",
            "chaos: finished steps silently missing from the trace",
            tally.lost_steps,
            "steps",
            str(tally.lost_steps),
            "0",
            judged(tally.lost_steps == 0),
            extra={"size": size},
        ),
        Row(
            "chaos.overrun",
            "chaos: deadline overrun, loop free (p99)",
            p99,
            "s",
            f"p50 {fmt(p50 * 1e3)} ms · p99 {fmt(p99 * 1e3)} ms · max {fmt(worst * 1e3)} ms ({len(over)} deadline "
            "stops)",
            f"p99 ≤ {OVERRUN_GOAL_S * 1e3:g} ms",
            judged(p99 <= OVERRUN_GOAL_S),
            note="wall time of run() past deadline_s: mostly the 20 ms grace of work that ignores its cancel, then the "
            "GIL shared with the other run and the 2 ms slow subscribers (phases: benchmarks/overrun_phases.py)",
            extra={
                "p50_s": p50,
                "p99_s": p99,
                "max_s": worst,
                "n": len(over),
                "size": size,
                "engine_p99_s": _quantile(tally.engine_overruns, 0.99),
                "worst_runs": [{"overrun_s": o, "seed": sd, "detail": dt} for o, sd, dt in tally.worst],
                "phases": medians(tally.timelines, probe.gc_pauses),
                "by_grace": split,
                "slowest_1pct": slowest.splitlines(),
                "load_1min": os.getloadavg()[0],
            },
        ),
        Row(
            "chaos.blocked_loop",
            "chaos: overruns with the loop blocked, explained",
            blocked_explained,
            "runs",
            f"{blocked_explained} of {len(tally.blocked)} explained; max "
            f"{fmt(max((o for o, _ in tally.blocked), default=0.0) * 1e3)} ms",
            "all explained",
            judged(blocked_explained == len(tally.blocked)),
            extra={"size": size, "unexplained": tally.unexplained[:5]},
        ),
    ]

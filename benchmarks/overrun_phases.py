"""Where a deadline stop spends the time after its deadline: the chaos benchmark's probe.

The chaos benchmark measures the wall time of ``run()`` past ``deadline_s``.
That figure is one number; to fix its tail one must know which part of the
way out was slow. :class:`Probe` wraps, for the length of the benchmark, the
few functions that run after a deadline passes and stamps each run's
timeline (``time.perf_counter``; the timeline is found through a context
variable, which reaches the run's loop thread and the caller's thread alike):

* ``detect``: from the deadline to the first sign the engine saw it (a timed
  out call handed to :func:`agentlab._runtime.isolate.let_go`, or the
  ``run_finished`` event when a check between calls stopped the run);
* ``grace``: cancelled work given :data:`~agentlab._runtime.isolate.GRACE_S`
  to finish (``let_go``, first entry to last exit);
* ``finish``: from there to ``run_finished`` (stopping the siblings of the
  turn, building the result);
* ``subscribers``: the subscribers hearing ``run_finished`` (the trace closes
  its file there);
* ``unwind``: from the last subscriber to the driver closing the loop (the
  step's ``finally``, the run's task ending);
* ``close_loop``: :func:`agentlab._runtime.driver.close_loop` (leftover tasks,
  async generators, the default executor);
* ``tail``: from the loop closed to ``run()`` returned in the benchmark (the
  benchmark's trace writer closed too);

plus ``gc``, the garbage collector's pauses anywhere in the process inside
the run's overrun window (they stop every thread). The phases add up to the
overrun (``detect`` starts at the deadline as the benchmark counts it).
"""

from __future__ import annotations

import contextvars
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentlab._runtime import driver, isolate

PHASES = ("detect", "grace", "finish", "subscribers", "unwind", "close_loop", "tail")


@dataclass
class Timeline:
    """One run's stamps (``perf_counter`` seconds)."""

    start: float
    deadline: float
    seed: int = -1  # the chaos run's seed (re-run it alone with benchmarks.chaos._one)
    let_go: list[tuple[float, float]] = field(default_factory=list)  # (entered, left)
    finished: float | None = None  # run_finished heard by the first subscriber ...
    heard: float | None = None  # ... and by the last
    close: tuple[float, float] | None = None  # close_loop (entered, left)
    left_tasks: int = 0  # tasks close_loop found not done and not abandoned (it waits for those)
    end: float | None = None

    def phases(self, gc_pauses: list[tuple[float, float]]) -> dict[str, float]:
        """The overrun cut into :data:`PHASES` (seconds, each ≥ 0), and ``gc`` beside them."""
        end = self.end or self.deadline
        marks = [self.deadline]
        late = [(a, b) for a, b in self.let_go if b >= self.deadline]
        first = min([a for a, _ in late] + [self.finished or end])
        marks.append(max(self.deadline, first))  # detect
        marks.append(max(marks[-1], max((b for _, b in late), default=marks[-1])))  # grace
        for t in (self.finished, self.heard, self.close and self.close[0], self.close and self.close[1], end):
            marks.append(max(marks[-1], t if t is not None else marks[-1]))
        out = {name: b - a for name, a, b in zip(PHASES, marks[:-1], marks[1:], strict=True)}
        out["gc"] = sum(max(0.0, min(b, end) - max(a, self.deadline)) for a, b in gc_pauses)
        return out


class Probe:
    """Wraps ``let_go`` and ``close_loop`` and the gc while active; one :class:`Timeline` per run (by context:
    ``run()`` runs its loop on a thread of its own, in a copy of its caller's context)."""

    def __init__(self) -> None:
        self._tls: contextvars.ContextVar[Timeline | None] = contextvars.ContextVar("agentlab_probe", default=None)
        self._gc_start: float | None = None
        self.gc_pauses: list[tuple[float, float]] = []
        self._undo: list[Callable[[], None]] = []

    # -- per run, on the run's thread
    def begin(self, deadline_s: float, seed: int = -1) -> Timeline:
        now = time.perf_counter()
        tl = Timeline(now, now + deadline_s, seed)
        self._tls.set(tl)
        return tl

    def first(self, event: Any) -> None:
        """A subscriber put ahead of the others."""
        if event.kind == "run_finished" and (tl := self._tl()) is not None:
            tl.finished = time.perf_counter()

    def last(self, event: Any) -> None:
        """A subscriber put after the others."""
        if event.kind == "run_finished" and (tl := self._tl()) is not None:
            tl.heard = time.perf_counter()

    def end(self) -> Timeline | None:
        tl = self._tl()
        if tl is not None:
            tl.end = time.perf_counter()
        self._tls.set(None)
        return tl

    def _tl(self) -> Timeline | None:
        return self._tls.get()

    # -- the wrapped functions
    def __enter__(self) -> Probe:
        let_go, close_loop = isolate.let_go, driver.close_loop
        probe = self

        async def timed_let_go(fut: Any, on_abandon: Callable[[], None]) -> None:
            t = time.perf_counter()
            try:
                await let_go(fut, on_abandon)
            finally:
                if (tl := probe._tl()) is not None:
                    tl.let_go.append((t, time.perf_counter()))

        def timed_close_loop(loop: Any) -> None:
            import asyncio

            t = time.perf_counter()
            left = [x for x in asyncio.all_tasks(loop) if not x.done() and not isolate.is_abandoned(x)]
            try:
                close_loop(loop)
            finally:
                if (tl := probe._tl()) is not None and tl.end is None:  # not a loop closed after run() returned
                    tl.close, tl.left_tasks = (t, time.perf_counter()), len(left)

        isolate.let_go, driver.close_loop = timed_let_go, timed_close_loop  # type: ignore[assignment]
        gc.callbacks.append(self._on_gc)
        self._undo = [
            lambda: setattr(isolate, "let_go", let_go),
            lambda: setattr(driver, "close_loop", close_loop),
            lambda: gc.callbacks.remove(self._on_gc),
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for undo in self._undo:
            undo()

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start is not None:
            self.gc_pauses.append((self._gc_start, time.perf_counter()))
            self._gc_start = None


def breakdown(
    timelines: list[tuple[float, Timeline]], gc_pauses: list[tuple[float, float]], share: float = 0.01
) -> str:
    """Lines describing the slowest ``share`` of the ``(overrun, timeline)`` pairs: each run's phases in ms."""
    worst = sorted(timelines, key=lambda x: x[0], reverse=True)[: max(1, round(len(timelines) * share))]
    lines = [f"slowest {len(worst)} of {len(timelines)} deadline stops (ms): " + " ".join(PHASES) + " | gc"]
    for over, tl in worst:
        p = tl.phases(gc_pauses)
        cells = " ".join(f"{p[k] * 1e3:.1f}" for k in PHASES)
        left = f"seed {tl.seed}, tasks left to close_loop: {tl.left_tasks}"
        lines.append(f"  {over * 1e3:6.1f} = {cells} | {p['gc'] * 1e3:.1f}  ({left})")
    return "\n".join(lines)


def medians(timelines: list[tuple[float, Timeline]], gc_pauses: list[tuple[float, float]]) -> dict[str, float]:
    """Each phase's p50 and p99 over all the deadline stops (seconds)."""
    cols: dict[str, list[float]] = {}
    for _, tl in timelines:
        for k, v in tl.phases(gc_pauses).items():
            cols.setdefault(k, []).append(v)
    out: dict[str, float] = {}
    for k, vs in cols.items():
        vs.sort()
        out[f"{k}_p50_s"] = vs[len(vs) // 2]
        out[f"{k}_p99_s"] = vs[min(len(vs) - 1, int(0.99 * len(vs)))]
    return out


def by_grace(timelines: list[tuple[float, Timeline]], gc_pauses: list[tuple[float, float]]) -> dict[str, float]:
    """The overrun's p50/p99 apart for the stops that waited out a whole grace (work that ignored its cancel:
    :data:`~agentlab._runtime.isolate.GRACE_S` by design) and for the others (seconds; ``n_`` counts)."""
    full = 0.9 * isolate.GRACE_S
    groups: dict[str, list[float]] = {"graced": [], "others": []}
    for over, tl in timelines:
        groups["graced" if tl.phases(gc_pauses)["grace"] >= full else "others"].append(over)
    out: dict[str, float] = {}
    for name, xs in groups.items():
        xs.sort()
        out[f"n_{name}"] = len(xs)
        out[f"{name}_p50_s"] = xs[len(xs) // 2] if xs else 0.0
        out[f"{name}_p99_s"] = xs[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else 0.0
    return out


def grace_line(split: dict[str, float]) -> str:
    """:func:`by_grace` in one printed line (ms)."""
    ms = {k: v * 1e3 for k, v in split.items() if k.endswith("_s")}
    return (
        f"  {split['n_graced']:.0f} stops waited out the {isolate.GRACE_S * 1e3:g} ms grace: "
        f"p50 {ms['graced_p50_s']:.1f} p99 {ms['graced_p99_s']:.1f} ms; the other {split['n_others']:.0f}: "
        f"p50 {ms['others_p50_s']:.1f} p99 {ms['others_p99_s']:.1f} ms"
    )

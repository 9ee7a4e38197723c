"""W2: one turn's reads run together; a write runs alone.

The tools record their own start and end (``time.perf_counter`` inside the
tool), so the figures do not rely on the engine's account of itself.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import agentlab as al

from .report import Row, fmt, judged
from .workload import median


class Probe:
    """Tools that sleep for real and log when each call ran."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.spans: list[tuple[str, float, float]] = []

    def _work(self, name: str) -> None:
        t0 = time.perf_counter()
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(self.seconds)
        with self.lock:
            self.running -= 1
        self.spans.append((name, t0, time.perf_counter()))

    def tools(self) -> list[al.Tool]:
        def read_record(record: str) -> str:
            """Read a record."""
            self._work("read")
            return f"{record}: v1"

        def write_record(record: str, value: str) -> str:
            """Write a record."""
            self._work("write")
            return f"{record} = {value}"

        return [al.tool(mode="read")(read_record), al.tool(mode="write")(write_record)]


def _turn(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [al.reply(None, *calls), al.reply("done")]


async def _first_step(probe: Probe, replies: list[dict[str, Any]]) -> float:
    run = al.Run("go", probe.tools(), model=al.ScriptedModel(replies), max_steps=2, max_cost=None, deadline_s=60)
    t0 = time.perf_counter()
    await run.step()
    return time.perf_counter() - t0


async def parallel_reads(seconds: float, reps: int) -> list[Row]:
    """Three reads of ``seconds`` each in one turn; then read, write, read on one record."""
    reads = [("read_record", {"record": f"r{i}"}) for i in range(3)]
    walls, most = [], 0
    for _ in range(reps):
        probe = Probe(seconds)
        walls.append(await _first_step(probe, _turn(*reads)))
        most = max(most, probe.most)
    wall = median(walls)
    goal = 1.25 * seconds

    mixed = [
        ("read_record", {"record": "r1"}),
        ("write_record", {"record": "r1", "value": "v2"}),
        ("read_record", {"record": "r1"}),
    ]
    alone, mixed_walls = True, []
    for _ in range(reps):
        probe = Probe(seconds)
        mixed_walls.append(await _first_step(probe, _turn(*mixed)))
        ((_, ws, we),) = [s for s in probe.spans if s[0] == "write"]
        alone &= all(e <= ws or s >= we for name, s, e in probe.spans if name == "read")
    return [
        Row(
            "w2.reads_wall",
            f"W2 3 reads of {fmt(seconds)} s in one turn",
            wall,
            "s",
            f"{fmt(wall)} s wall (ideal {fmt(seconds)})",
            f"≤ {fmt(goal)} s",
            judged(wall <= goal),
            extra={"samples_s": walls, "reps": reps},
        ),
        Row("w2.reads_concurrent", "W2 most calls running at once", most, "calls", str(most), "3", judged(most == 3)),
        Row(
            "w2.write_alone",
            "W2 read, write, read: the write ran alone",
            float(alone),
            "bool",
            f"{'yes' if alone else 'NO'} ({fmt(median(mixed_walls))} s wall)",
            "yes",
            judged(alone),
        ),
    ]

"""Time, injected. Deadline and backoff tests drive a :class:`FakeClock`.

The engine reads time only through ``clock.now()`` and waits only through
``await clock.sleep(s)``, so a test can make a model call "take" ten seconds
or check a backoff schedule without sleeping for real.

One limit: the engine bounds awaits with ``asyncio.timeout``, which counts
*real* time. A fake model call that advances a :class:`FakeClock` past the
deadline therefore still returns (and is charged); the run then stops with
"deadline" before that step's tools. On the real clock the same call would be
cut off at the deadline and not charged.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...


def wall_time(clock: Clock) -> float:
    """Seconds since the epoch, read through ``clock`` when it can tell (``clock.wall()``).

    Only the trace's ``started_at`` needs a calendar time; a clock without a
    ``wall`` method (a user's own) falls back to the system's.
    """
    wall = getattr(clock, "wall", None)
    return float(wall()) if callable(wall) else time.time()


class SystemClock:
    """The real clock: ``time.monotonic`` and ``asyncio.sleep``."""

    now = staticmethod(time.monotonic)
    """Seconds on a monotonic scale: ``time.monotonic`` itself (the engine reads it a dozen times a step,
    and a method around it was a Python call each time)."""

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to; ``sleep`` advances it instantly.

    ``sleeps`` records every wait asked for, so a test can assert a backoff
    schedule exactly.
    """

    EPOCH = 1_767_225_600.0  # 2026-01-01 00:00 UTC: runs on a fake clock start on a fixed date

    def __init__(self, start: float = 0.0) -> None:
        self.t = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        """The fake time, in seconds (only advance() and sleep() move it)."""
        return self.t

    def wall(self) -> float:
        """A wall-clock reading consistent with now(): a fixed epoch plus the fake time."""
        return self.EPOCH + self.t

    def advance(self, seconds: float) -> None:
        """Move the fake time forward by ``seconds``, as if that much time had passed."""
        self.t += seconds

    async def sleep(self, seconds: float) -> None:
        """Advance the fake time instead of waiting, so retries and deadlines are tested instantly."""
        self.sleeps.append(seconds)
        self.t += seconds
        await asyncio.sleep(0)

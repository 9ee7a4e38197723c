"""When a run gives its event loop a turn.

A step whose model and tools answer at once never waits, so nothing else on
the run's event loop would run until the run ends: not a Stop or Pause
clicked in a panel, not a redraw, not another task's ``run.cancel()``. The
engine could give the loop a turn (``await asyncio.sleep(0)``) in every
step's tools phase, polling the loop's sockets each time.

:class:`Turns` keeps what that buys and drops the polling nobody needs:

* a callback already waiting on the loop (another task woken, a future set,
  a ``call_soon_threadsafe`` from a widget's thread) or a timer that has come
  due gets its turn at once, in the same step as before, so the order of
  events between tasks is what it was (deterministic: no clock decides it);
* input that only a poll of the loop's sockets would find (a click arriving
  over a kernel's socket) gets a turn within :data:`POLL_S` (wall time),
  plus the step in flight;
* a loop that is not asyncio's own (uvloop, whose queues cannot be read)
  gets a turn every time, as before.
"""

from __future__ import annotations

import asyncio
import time

POLL_S = 0.002
"""At most this many seconds (``time.monotonic``) between two turns given only to poll the loop's sockets."""


class Turns:
    """One run's record of when its loop last had a turn."""

    __slots__ = ("_poll_at",)

    def __init__(self) -> None:
        self._poll_at = 0.0  # the first step's tools phase gives a turn

    def due(self, loop: asyncio.AbstractEventLoop | None) -> bool:
        """Should the run give ``loop`` a turn now? (The caller then yields to it: ``isolate.one_turn``.)"""
        ready = getattr(loop, "_ready", None)
        timers = getattr(loop, "_scheduled", None)
        now = time.monotonic()
        if (
            ready is None
            or timers is None
            or ready
            or now >= self._poll_at
            or (timers and timers[0].when() <= loop.time())  # type: ignore[union-attr]
        ):
            self._poll_at = now + POLL_S
            return True
        return False

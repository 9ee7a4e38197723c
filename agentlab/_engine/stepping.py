"""The run's concurrency machinery: one step at a time, the step's task and loop, and working time.

A run may be stepped from any task or thread, one step at a time; ``cancel()`` may come from any
thread (a widget, a signal handler, the watchdog) and is handed to the loop the step runs on. The
deadline counts *working* time: the seconds spent inside steps (and the run's set-up), so a run
paused between steps in a notebook does not age. The run's state (``loop.Run``) knows none of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from .._runtime import watchdog


class Stepping:
    """The step in flight (its task, its loop, the watchdog armed for it) and the working time so far."""

    def __init__(self, now: Callable[[], float], worked: float) -> None:
        self.now = now
        self.worked = worked
        """Working seconds of the steps that ended (the run's set-up included), less any credited back."""
        self.t0: float | None = None  # when the step in flight began
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.watch: watchdog.Watch | None = None
        self._lock = threading.Lock()  # one step at a time, whatever task or thread asks

    def elapsed(self) -> float:
        """Working seconds so far: the steps that ended, and the one in flight up to now."""
        return self.worked if self.t0 is None else self.worked + self.now() - self.t0

    def begin(self, run_id: str, time_left: float | None) -> None:
        """A step starts in the running task (raises if another step is in flight); the watchdog is armed for
        ``time_left`` seconds (``None``: no deadline)."""
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(
                f"run {run_id} is already in a step (started by another task or thread): "
                "await that step before starting the next"
            )
        self.t0 = self.now()
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task(self.loop)
        self.watch = None if time_left is None else watchdog.arm(time_left)

    def end(self) -> None:
        """The step ended: its working time counted, the watchdog disarmed, the next step allowed."""
        if self.t0 is not None:
            self.worked += self.now() - self.t0
        self.t0, self.task, self.loop = None, None, None
        if self.watch is not None:
            watchdog.disarm(self.watch)
        self._lock.release()

    def interrupt(self, wanted: Callable[[], bool]) -> None:
        """Cancel the step in flight from any thread, on its own loop, if ``wanted()`` still says so then.

        Called from inside the step itself (a subscriber), nothing is cancelled: the step stops at its next
        check."""
        task, loop = self.task, self.loop
        if task is None or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # no running loop here, or the step's loop has closed
            if asyncio.get_running_loop() is loop and asyncio.current_task() is task:
                return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._cancel_task, task, wanted)

    def _cancel_task(self, task: asyncio.Task[Any], wanted: Callable[[], bool]) -> None:
        if wanted() and task is self.task and not task.done():
            task.cancel()

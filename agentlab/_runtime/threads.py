"""Sync tools run on long-lived daemon threads that the run can abandon.

Python cannot kill a thread. ``asyncio.to_thread`` uses the loop's default
executor, and ``asyncio.run`` joins that executor on shutdown, so a hanging
sync tool would hold ``run()`` far past its deadline (DESIGN.md measured a 1 s
``wait_for`` over a 5 s sleep returning after 5.0 s). Here each call goes to a
small pool of *daemon* workers that nobody joins: at the deadline the engine
stops waiting, the worker stays stuck until the function returns (or the
process exits), and a fresh worker serves the next call.

The hand-off is cheap because most tools answer at once: :meth:`Job.wait`
lets the loop's thread block for a fraction of a millisecond (releasing the
GIL) for the answer, which then needs no event-loop turn, no future and no
self-pipe write. Only a call still running after that is followed with an
``asyncio`` future (:meth:`Job.future`), resolved from the worker thread.

The same workers run ``run()``'s event loop when a sync tool may run on the
loop's own thread (:mod:`agentlab._runtime.referee`): a worker lives as long
as the process, so it may keep its loop for the next run (see
:func:`is_worker`).

What a job ends with is kept as data (``ok`` and ``value``), never an
exception set on a future: ``Future.set_exception`` refuses ``StopIteration``
(the future would never resolve), and ``SystemExit`` or ``KeyboardInterrupt``
raised by a tool must reach the engine as data, not end the caller.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

_jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
_lock = threading.Lock()
_idle = 0
_local = threading.local()


class Job:
    """One function call handed to a worker; ``ok``/``value`` once :attr:`finished`."""

    __slots__ = ("_done", "_fut", "_loop", "fn", "finished", "ok", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.finished = False
        self.ok = False
        self.value: Any = None
        self._done = threading.Lock()
        self._done.acquire()  # released by the worker when the call ends
        self._fut: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def wait(self, seconds: float) -> bool:
        """Block this thread at most ``seconds`` for the call to end; did it?"""
        return self.finished or (seconds > 0 and self._done.acquire(timeout=seconds))

    def future(self) -> asyncio.Future[None]:
        """A future of the running loop, resolved (with ``None``) when the call ends."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with _lock:  # the worker reads _fut under the same lock: it resolves this one, or it had finished
            if self.finished:
                fut.set_result(None)
            else:
                self._fut, self._loop = fut, loop
        return fut

    def _end(self, ok: bool, value: Any) -> None:
        with _lock:
            self.ok, self.value, self.finished = ok, value, True
            fut, loop = self._fut, self._loop
        self._done.release()
        if fut is not None and loop is not None:
            try:
                loop.call_soon_threadsafe(_resolve, fut)
            except RuntimeError:  # the loop closed while we were stuck: nobody waits
                pass


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def is_worker() -> bool:
    """Is this thread one of the workers (they live as long as the process: a loop may be kept on one)?"""
    return getattr(_local, "worker", False)


def _worker() -> None:
    global _idle
    _local.worker = True
    while True:
        job = _jobs.get()
        try:
            ok, value = True, job.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the engine as data (SystemExit too)
            ok, value = False, exc
        with _lock:
            _idle += 1
        job._end(ok, value)


def submit(fn: Callable[[], Any]) -> Job:
    """Run ``fn()`` on an idle daemon worker (a new one if none is idle); the :class:`Job` follows it."""
    global _idle
    job = Job(fn)
    with _lock:  # reserve an idle worker, or start one for this job
        spawn = _idle == 0
        if not spawn:
            _idle -= 1
    if spawn:
        threading.Thread(target=_worker, name="agentlab-tool", daemon=True).start()
    _jobs.put(job)
    return job

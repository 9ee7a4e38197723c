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

**Where the worker wakes** (``submit(near=True)``, Linux). When the loop's
thread is about to block for the answer, the worker it wakes is first pinned
to the CPU that thread runs on, which the block leaves idle: left to itself
the kernel wakes a sleeping worker on the CPU it last ran on, and when that
CPU is idle (it is, between two calls) the wake-up has to reach it there. On
a VM an idle virtual CPU is woken by the host: issue 27 measured 40-50 µs
for a wake-up across the two CPUs against ~5-10 µs on the same one, twice a
call (there and back; the answer wakes the loop's thread where the worker
now runs). The worker takes back its own CPU set before it calls anything, so
nothing a tool starts (a thread, a subprocess) inherits the pin; the pin
costs two ``sched_setaffinity`` calls. Where the calls are refused (another
OS, a sandbox) it is not tried again. ``run()`` hands its loop to a worker
the same way (once a run, its caller then waits): woken where it last ran,
that worker spent a whole run slower in about a third of processes (its step
+30-45 µs of CPU, the same run's async steps unchanged); woken on the caller's
CPU, in 2 of 24 by half as much (issue 27, ninth session; docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

from . import affinity

_lock = threading.Lock()
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


class _Worker:
    """A worker's own slot: the lock it sleeps on while idle, its next job, and what a pin changed."""

    __slots__ = ("cpus", "job", "pinned", "tid", "wake")

    def __init__(self) -> None:
        self.wake = threading.Lock()  # released by submit() with a job in ``job``
        self.wake.acquire()
        self.job: Job | None = None
        self.pinned = False
        self.tid = threading.get_native_id()
        self.cpus = affinity.own_cpus()  # the CPU set to take back after a pin (None: pins are not made)


_idle: list[_Worker] = []
"""Idle workers, the last one to finish on top (its caches are the warmest). Guarded by ``_lock``."""


def _worker(job: Job) -> None:
    me = _Worker()
    _local.worker = True
    while True:
        if me.pinned and me.cpus is not None:  # before anything the job runs: what it starts inherits these CPUs
            me.pinned = False
            affinity.restore(me.cpus)
        try:
            ok, value = True, job.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the engine as data (SystemExit too)
            ok, value = False, exc
        with _lock:  # idle before the answer is out: the caller's next call finds this worker, not a new one
            _idle.append(me)
        job._end(ok, value)
        me.wake.acquire()
        job = me.job  # type: ignore[assignment]  # set by submit() before it released ``wake``


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's workers (threads do not fork): it starts an empty pool, with a
    fresh lock (the parent's may have been held by another thread at the fork). Without this a child's first
    sync call went to a worker that does not exist there and never ran (the run stopped at its deadline, or
    waited for ever with none)."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def submit(fn: Callable[[], Any], *, near: bool = False) -> Job:
    """Run ``fn()`` on an idle daemon worker (a new one if none is idle); the :class:`Job` follows it.

    ``near``: this thread is about to block for the answer; wake the worker on this thread's CPU (see the
    module's docstring)."""
    job = Job(fn)
    with _lock:
        worker = _idle.pop() if _idle else None
    if worker is None:
        threading.Thread(target=_worker, args=(job,), name="agentlab-tool", daemon=True).start()
        return job
    worker.job = job
    if near and worker.cpus is not None:
        worker.pinned = affinity.pin_here(worker.tid, worker.cpus)
    worker.wake.release()
    return job

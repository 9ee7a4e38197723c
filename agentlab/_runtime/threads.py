"""Sync tools run on long-lived daemon threads that the run can abandon.

Python cannot kill a thread. ``asyncio.to_thread`` uses the loop's default
executor, and ``asyncio.run`` joins that executor on shutdown, so a hanging
sync tool would hold ``run()`` far past its deadline (DESIGN.md measured a 1 s
``wait_for`` over a 5 s sleep returning after 5.0 s). Here each call goes to a
small pool of *daemon* workers that nobody joins: at the deadline the engine
stops waiting, the worker stays stuck until the function returns (or the
process exits), and a fresh worker serves the next call.

A call is followed with an ``asyncio`` future (:meth:`Job.future`),
resolved from the worker thread. A call that is the only one of its turn is
first waited for briefly on the worker itself (:meth:`Job.wait`,
``isolate.QUICK_S``): most tools answer at once, and their answer then needs
no wake-up of the event loop.

**Where the worker wakes** (``submit(near=True)``, Linux). When the loop's thread is about to block for the
answer (a sync call alone in its turn), the worker it wakes is first pinned to the CPU that thread runs on,
which the block leaves idle. Left to itself the kernel wakes a sleeping worker on the CPU it last ran on, and
on a VM an idle virtual CPU is woken by the host, several times slower than a wake-up on the same CPU, twice a
call (there, and back: the answer wakes the loop's thread where the worker now runs). The worker takes back its
own CPU set before it calls anything, so nothing a tool starts (a thread, a subprocess) inherits the pin. Where
the calls are refused (another OS, a sandbox) they are not tried again (:mod:`agentlab._runtime.affinity`).
What it buys, measured, is in the README's benchmark notes and docs/benchmarks.md.

A worker left idle waits at most :data:`IDLE_S` for its next call, then ends;
at most :data:`MAX_IDLE` wait at once (one that finishes a call with that many
already waiting ends at once). A burst of many concurrent sync tools so
leaves no crowd of idle threads behind.

What a job ends with is kept as data (``ok`` and ``value``), never an
exception set on a future: ``Future.set_exception`` refuses ``StopIteration``
(the future would never resolve), and ``SystemExit`` or ``KeyboardInterrupt``
raised by a tool must reach the engine as data, not end the caller.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

from . import affinity

IDLE_S = 30.0
"""How long an idle worker waits for its next call before it ends (seconds)."""

MAX_IDLE = 8
"""How many idle workers may wait for calls at once; one more ends when its call does."""

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
        self._done = threading.Lock()  # held until the call ends: waiting for the call is acquiring it
        self._done.acquire()
        self._fut: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def wait(self, seconds: float) -> bool:
        """Block this thread at most ``seconds`` for the call to end; did it?"""
        if self._done.acquire(timeout=seconds):
            self._done.release()  # ended for good: the next wait returns at once too
            return True
        return False

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
    """Is this thread one of the workers?"""
    return getattr(_local, "worker", False)


def alive() -> int:
    """How many workers exist now (busy or idle)."""
    return sum(1 for t in threading.enumerate() if t.name == _NAME)


_NAME = "agentlab-tool"


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
            stay = len(_idle) < MAX_IDLE
            if stay:
                _idle.append(me)
        job._end(ok, value)
        if not stay or not _next(me):
            return
        job = me.job  # type: ignore[assignment]  # set by submit() before it released ``wake``


def _next(me: _Worker) -> bool:
    """Wait for the next job, at most :data:`IDLE_S`; ``False``: none came, and the worker is no longer idle."""
    if me.wake.acquire(timeout=IDLE_S):
        return True
    with _lock:
        if me in _idle:  # nobody took it: it ends
            _idle.remove(me)
            return False
    me.wake.acquire()  # taken by submit() just as the wait ended: its job is on the way
    return True


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
        threading.Thread(target=_worker, args=(job,), name=_NAME, daemon=True).start()
        return job
    worker.job = job
    if near and worker.cpus is not None:
        worker.pinned = affinity.pin_here(worker.tid, worker.cpus)
    worker.wake.release()
    return job

"""Sync tools run on daemon threads that the run can abandon.

Python cannot kill a thread. ``asyncio.to_thread`` uses the loop's default
executor, and ``asyncio.run`` joins that executor on shutdown, so a hanging
sync tool would hold ``run()`` far past its deadline (DESIGN.md measured a 1 s
``wait_for`` over a 5 s sleep returning after 5.0 s). Here each call goes to a
small pool of *daemon* workers that nobody joins: at the deadline the engine
stops waiting, the worker stays stuck until the function returns (or the
process exits), and a fresh worker serves the next call.

The future's result is always an ``(ok, value)`` pair, never an exception
set on the future: ``Future.set_exception`` refuses ``StopIteration`` (the
future would never resolve), and ``SystemExit`` or ``KeyboardInterrupt``
raised by a tool must reach the engine as data, not end the caller.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

_jobs: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.AbstractEventLoop, asyncio.Future[Any]]] = queue.SimpleQueue()
_lock = threading.Lock()
_idle = 0


def _deliver(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not fut.done():
        fut.set_result((ok, value))


def _worker() -> None:
    global _idle
    while True:
        fn, loop, fut = _jobs.get()
        try:
            ok, value = True, fn()
        except BaseException as exc:  # handed to the awaiting coroutine as data (SystemExit too)
            ok, value = False, exc
        try:
            loop.call_soon_threadsafe(_deliver, fut, ok, value)
        except RuntimeError:  # the loop closed while we were stuck: nobody waits
            pass
        with _lock:
            _idle += 1


def run_on_daemon_thread(fn: Callable[[], Any]) -> asyncio.Future[Any]:
    """Run ``fn()`` on a daemon worker; return a future of ``(True, value)`` or ``(False, exception)``."""
    global _idle
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()
    with _lock:  # reserve an idle worker, or start one for this job
        spawn = _idle == 0
        if not spawn:
            _idle -= 1
    if spawn:
        threading.Thread(target=_worker, name="agentlab-tool", daemon=True).start()
    _jobs.put((fn, loop, fut))
    return fut

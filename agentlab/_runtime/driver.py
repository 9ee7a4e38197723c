"""Driving a coroutine to its end from a script or a notebook, under Ctrl-C, without hanging.

``asyncio.run`` is almost right for ``agentlab.run()`` but not quite:

* On shutdown it cancels every task left and waits for them *without a
  limit*. A tool that swallows its cancellation would hold ``run()`` forever
  after the run itself ended. Here tasks the run already abandoned get no
  second wait, and any other leftover (a connection pool closing) gets at
  most :data:`SHUTDOWN_S`.
* Its Ctrl-C handling cancels the main task, which ends our run as an
  exception. Here the first Ctrl-C calls the run's own ``cancel()``, so the
  run ends as ``Stopped("cancelled")`` with a complete trace, and the caller
  decides whether that is then re-raised as ``KeyboardInterrupt``. A second
  Ctrl-C raises at once, for a loop that is blocked and cannot listen.
* Inside a running event loop (a Jupyter kernel) it refuses to start; there
  the coroutine runs on a private thread with its own loop, and a Ctrl-C
  (the kernel's interrupt) while the caller waits cancels the run the same way.

On the main thread, a loop that a run left with nothing on it is kept for the
next ``run()`` (see :data:`_kept`): a new loop and its closing cost about as much
as a whole step (~0.1 ms).

Nothing here knows what a run is: the engine passes the coroutine, a
``cancel`` function and a way to read the result.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .isolate import is_abandoned

T = TypeVar("T")

SHUTDOWN_S = 1.0
"""At the end, how long tasks other than abandoned ones may take to finish once cancelled."""

JOIN_AFTER_CANCEL_S = 5.0
"""After a Ctrl-C in a notebook, how long to wait for the cancelled run's thread to record its end."""


def run_to_end(
    main: Coroutine[Any, Any, T],
    *,
    cancel: Callable[[], None],
    result: Callable[[], T | None],
    reraise_interrupt: bool = False,
) -> T:
    """Run ``main`` to its end and return its value; on Ctrl-C, ``cancel()`` and return ``result()``.

    With ``reraise_interrupt=True`` a Ctrl-C is re-raised as
    ``KeyboardInterrupt`` once the run has recorded its end.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _here(main, cancel, result, reraise_interrupt)
    return _on_thread(main, cancel, result, reraise_interrupt)


def _here(main: Coroutine[Any, Any, T], cancel: Callable[[], None], result: Callable[[], T | None], reraise: bool) -> T:
    loop = _kept.pop() if _kept and threading.current_thread() is threading.main_thread() else asyncio.new_event_loop()
    interrupts = []

    def on_sigint(signum: int, frame: Any) -> None:
        interrupts.append(signum)
        if len(interrupts) > 1:
            raise KeyboardInterrupt  # the second Ctrl-C: the user insists (the loop may be blocked)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(cancel)

    ours = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    previous = signal.signal(signal.SIGINT, on_sigint) if ours else None
    wakeup = _wake_loop_on_signals(loop) if ours else None
    clean = False
    try:
        value = loop.run_until_complete(main)
        clean = True
    except KeyboardInterrupt:
        value = None
        interrupts.append(signal.SIGINT)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if wakeup is not None:
            wakeup()
        if not (clean and not interrupts and _keep(loop)):
            close_loop(loop)
    if interrupts:
        ended = result()
        if reraise or ended is None:
            raise KeyboardInterrupt
        return ended
    return value  # type: ignore[return-value]


_kept: list[asyncio.AbstractEventLoop] = []
"""The main thread's last loop, left with nothing on it by a run that ended normally: the next ``run()`` uses it.

Issue 27: a new loop and its closing cost a ``run()`` ~0.1-0.3 ms (a selector, a self-pipe, a task and a few
turns to close); a loop with no task, no callback, no timer and no async generator left is as good as new.
"""


def _keep(loop: asyncio.AbstractEventLoop) -> bool:
    """Keep ``loop`` for the next ``run()`` if nothing is left on it (main thread only; else the caller closes it)."""
    if threading.current_thread() is not threading.main_thread() or _kept or asyncio.all_tasks(loop):
        return False
    ready, timers, gens = (getattr(loop, a, None) for a in ("_ready", "_scheduled", "_asyncgens"))
    if ready is None or timers is None or gens is None or ready or gens or getattr(loop, "_default_executor", 1):
        return False  # not asyncio's own loop (nothing to check), or something is left
    if any(not t.cancelled() for t in timers):
        return False
    _kept.append(loop)
    return True


@atexit.register
def _close_kept() -> None:
    while _kept:
        _kept.pop().close()


def _wake_loop_on_signals(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Make a signal wake the loop's ``select`` (else the handler waits for the next timer); returns the undo.

    The signal may land on any thread (a tool's, say); Python then runs the
    handler on the main thread only once that thread runs bytecode again.
    """
    rsock, wsock = socket.socketpair()
    for sock in (rsock, wsock):
        sock.setblocking(False)
    loop.add_reader(rsock.fileno(), lambda: _drain(rsock))
    previous_fd = signal.set_wakeup_fd(wsock.fileno(), warn_on_full_buffer=False)

    def undo() -> None:
        signal.set_wakeup_fd(previous_fd)
        loop.remove_reader(rsock.fileno())
        rsock.close()
        wsock.close()

    return undo


def _drain(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while sock.recv(4096):
            pass


def _on_thread(
    main: Coroutine[Any, Any, T], cancel: Callable[[], None], result: Callable[[], T | None], reraise: bool
) -> T:
    box: dict[str, Any] = {}
    ended = threading.Event()  # waited on, not join(): a join cut by Ctrl-C can misreport the thread as ended

    def target() -> None:
        try:
            box["value"] = _here(main, cancel, result, False)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc
        finally:
            ended.set()

    try:  # a Ctrl-C may come while start() waits for the thread: the run is already going
        threading.Thread(target=target, name="agentlab-run", daemon=True).start()
        ended.wait()
    except KeyboardInterrupt:
        cancel()
        ended.wait(JOIN_AFTER_CANCEL_S)
        stopped = result()
        if reraise or stopped is None:
            raise
        return stopped
    if "error" in box:
        raise box["error"]
    return box["value"]


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close ``loop``: leftover tasks are cancelled and given :data:`SHUTDOWN_S` (abandoned ones: nothing more)."""
    try:
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in left:
            t.cancel()
        left = [t for t in left if not is_abandoned(t)]  # those had their grace already
        if left:  # the rest (a connection pool closing, say) get up to SHUTDOWN_S
            loop.run_until_complete(asyncio.wait(left, timeout=SHUTDOWN_S))
        for finish in (loop.shutdown_asyncgens, loop.shutdown_default_executor):
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait_for(finish(), SHUTDOWN_S))
    finally:
        loop.close()
        for t in asyncio.all_tasks(loop):  # abandoned, on a closed loop: named in the result, silent at exit
            t._log_destroy_pending = False  # type: ignore[attr-defined]

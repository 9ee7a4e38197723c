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
next ``run()`` (see :data:`_kept`): a script that calls ``run()`` in a loop
(an experiment, a benchmark) does not pay a new event loop for each.

Nothing here knows what a run is: the engine passes the coroutine, a
``cancel`` function and a way to read the result.
"""

from __future__ import annotations

import _signal
import asyncio
import atexit
import contextlib
import os
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
    kept = _kept.pop(threading.get_ident(), None) if _keeps() else None
    loop, waker = kept if kept is not None else (asyncio.new_event_loop(), None)
    interrupts = []

    def on_sigint(signum: int, frame: Any) -> None:
        interrupts.append(signum)
        if len(interrupts) > 1:
            raise KeyboardInterrupt  # the second Ctrl-C: the user insists (the loop may be blocked)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(cancel)

    previous = _take_sigint(on_sigint)
    if previous is not None:  # a signal wakes the loop's select (else the handler waits for the next timer)
        waker = waker or _Waker(loop)
        previous_fd = signal.set_wakeup_fd(waker.fd, warn_on_full_buffer=False)
    clean = False
    try:
        value = loop.run_until_complete(main)
        clean = True
    except KeyboardInterrupt:
        value = None
        interrupts.append(signal.SIGINT)
    finally:
        if previous is not None:
            _sigint(previous)
            signal.set_wakeup_fd(previous_fd)
        if not (clean and not interrupts and _keep(loop, waker)):
            if waker is not None:
                waker.close(loop)
            close_loop(loop)
    if interrupts:
        ended = result()
        if reraise or ended is None:
            raise KeyboardInterrupt
        return ended
    return value  # type: ignore[return-value]


def _take_sigint(handler: Callable[[int, Any], None]) -> Any:
    """Install ``handler`` for Ctrl-C if this is the main thread and Python's own handler is in place (nobody
    else's, a kernel's say); returns the handler to put back, or ``None`` when nothing was installed.

    Through :mod:`_signal` (the C functions ``signal.signal``/``signal.getsignal`` wrap), whose answers are
    the handlers themselves, compared here as they are."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if _signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None
    return _sigint(handler)


def _sigint(handler: Any) -> Any:
    """Set the SIGINT handler (a function or a raw ``SIG_DFL``/``SIG_IGN`` number, as :mod:`_signal` returns
    them), returning the previous one."""
    return _signal.signal(signal.SIGINT, handler)


_kept: dict[int, tuple[asyncio.AbstractEventLoop, _Waker | None]] = {}
"""The main thread's last loop, left with nothing on it by a run that ended normally, with its :class:`_Waker` if
it had one: the next ``run()`` on that thread uses them. A loop with no task, no callback, no timer and no async
generator left is as good as new. Only the main thread keeps one (another thread's would outlive it, unclosed).
"""


def _keeps() -> bool:
    return threading.current_thread() is threading.main_thread()


def _keep(loop: asyncio.AbstractEventLoop, waker: _Waker | None = None) -> bool:
    """Keep ``loop`` (and ``waker``) for the next ``run()`` if nothing is left on it (long-lived threads only;
    else the caller closes them)."""
    if not _keeps() or threading.get_ident() in _kept or asyncio.all_tasks(loop):
        return False
    ready, timers, gens = (getattr(loop, a, None) for a in ("_ready", "_scheduled", "_asyncgens"))
    if ready is None or timers is None or gens is None or ready or gens or getattr(loop, "_default_executor", 1):
        return False  # not asyncio's own loop (nothing to check), or something is left
    if any(not t.cancelled() for t in timers):
        return False
    _kept[threading.get_ident()] = loop, waker
    return True


def _after_fork_in_child() -> None:
    """A forked child does not run the parent's kept loops: their epoll instance and sockets are the parent's too
    (a fork shares them), so the child's readers would land in the parent's loop. Each is marked closed first,
    so that neither ``close()`` nor the garbage collector takes anything out of the shared epoll instance (the
    parent's self-pipe); collecting them closes only the child's copies of the descriptors."""
    for loop, _ in _kept.values():
        loop._closed = True  # type: ignore[attr-defined]  # asyncio's own flag: close() and __del__ then do nothing
    _kept.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_kept() -> None:
    while _kept:
        loop, waker = _kept.popitem()[1]
        if waker is not None:
            waker.close(loop)
        loop.close()


class _Waker:
    """A socket pair whose read end ``loop`` watches: made the signal wake-up fd while a run goes on the main
    thread, a signal (Ctrl-C) then wakes the loop's ``select`` at once, whatever thread it landed on (Python
    runs the handler on the main thread only once that thread runs bytecode again).

    Made once per loop and kept with it (:data:`_kept`); between runs it is not the wake-up fd, and a byte left
    in it is drained by the next run's loop.
    """

    __slots__ = ("_r", "_w", "fd")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._r, self._w = socket.socketpair()
        for sock in (self._r, self._w):
            sock.setblocking(False)
        loop.add_reader(self._r.fileno(), _drain, self._r)
        self.fd = self._w.fileno()

    def close(self, loop: asyncio.AbstractEventLoop) -> None:
        with contextlib.suppress(Exception):  # the loop may be closed already (at exit)
            loop.remove_reader(self._r.fileno())
        self._r.close()
        self._w.close()


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

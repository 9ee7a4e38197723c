"""A watchdog thread that sees a step overrun its deadline when the event loop cannot.

The engine enforces the deadline with timers on the event loop. Code that
blocks the loop itself (an ``async`` tool calling ``time.sleep``, a
subscriber that waits on a lock) stops every timer, and nothing on the loop
can notice. One daemon thread per process watches the steps in flight from
outside: when a step is still running :data:`SAMPLE_AFTER_S` past its
deadline, it reads the loop thread's stack (``sys._current_frames``) and
names what the loop was busy with (an idle loop is looked at again every
:data:`SAMPLE_AFTER_S` until the step ends: it may block later). The engine puts that sentence in the
result, next to the overrun in seconds. The thread only observes: Python
cannot interrupt a thread, so the watchdog explains the overrun rather than
preventing it.

Arming and disarming are a dictionary insert and delete under a lock; the
thread sleeps until the earliest deadline and wakes only when an earlier one
arrives.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import TypeVar

SAMPLE_AFTER_S = 0.05
"""How long past the deadline a step must still be running before the loop's stack is read."""

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # agentlab's own frames (not a tool's)
_IDLE = {("selectors.py", "select"), ("base_events.py", "_run_once"), ("selectors.py", "poll")}
# Frames by which the engine hands control to other people's code: the callee is the culprit. Keyed
# by code object, registered by the functions themselves (see :func:`handoff`), so a rename or a move
# cannot silently remove the blame.
_HANDOFFS: dict[CodeType, str] = {}
F = TypeVar("F", bound=Callable[..., object])


def handoff(role: str) -> Callable[[F], F]:
    """Mark a function through which the engine calls other people's code (``role``: ``"subscriber"``,
    or ``"code"``): a loop blocked below it is blamed on the function it called."""

    def mark(fn: F) -> F:
        _HANDOFFS[fn.__code__] = role
        return fn

    return mark


class Watch:
    """One armed step: its due time (``time.monotonic``) and, once sampled, the cause of any overrun."""

    __slots__ = ("cause", "due", "thread_id")

    def __init__(self, due: float, thread_id: int) -> None:
        self.due = due
        self.thread_id = thread_id
        self.cause = ""


_lock = threading.Lock()
_cond = threading.Condition(_lock)
_active: set[Watch] = set()  # (a Watch hashes by identity)
_wake_at: list[float | None] = [None]
_thread: list[threading.Thread] = []


def arm(seconds_left: float) -> Watch:
    """Watch the calling thread's step, due ``seconds_left`` from now (sampled :data:`SAMPLE_AFTER_S` later)."""
    due = time.monotonic() + max(seconds_left, 0.0) + SAMPLE_AFTER_S
    w = Watch(due, threading.get_ident())
    with _lock:
        if not _thread:
            _thread.append(threading.Thread(target=_watch, name="agentlab-watchdog", daemon=True))
            _thread[0].start()
        _active.add(w)
        wake = _wake_at[0]
        if wake is None or due < wake:
            _cond.notify()
    return w


def disarm(w: Watch) -> str:
    """The step ended: stop watching; return what the loop was blocked in at the deadline, if anything."""
    with _lock:
        _active.discard(w)
    return w.cause


def _watch() -> None:
    while True:
        with _cond:
            now = time.monotonic()
            for w in list(_active):
                if w.due <= now:  # late: what is the loop doing? (idle: it may block later; look again)
                    w.cause = blame(sys._current_frames().get(w.thread_id))
                    if w.cause:
                        _active.discard(w)
                    else:
                        w.due = now + SAMPLE_AFTER_S
            _wake_at[0] = min((w.due for w in _active), default=None)
            wake = _wake_at[0]
            _cond.wait(None if wake is None else max(0.0, wake - now))


def _where(frame: FrameType) -> str:
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name).rsplit(".<locals>.", 1)[-1]
    return f"{name} ({code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno})"


def blame(frame: FrameType | None) -> str:
    """A sentence naming what a thread's stack shows it busy with; ``""`` when its event loop is idle."""
    stack: list[FrameType] = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    if not stack:
        return ""
    inner = stack[0]
    if (inner.f_code.co_filename.rsplit("/", 1)[-1], inner.f_code.co_name) in _IDLE:
        return ""
    for i, f in enumerate(stack[1:], start=1):
        role = _HANDOFFS.get(f.f_code)
        if role is not None:
            who = stack[i - 1]
            what = f"a subscriber, {_where(who)}," if role == "subscriber" else f"{_where(who)}"
            at = "" if who is inner else f", at {_where(inner)}"
            return f"{what} blocked the event loop past the deadline{at}"
    return f"the event loop was blocked past the deadline in {_where(inner)}"

"""Who ends a step whose sync tool runs on the event loop's own thread: that thread, or the caller's.

``run()`` hands a sync tool to a worker thread so that a tool that hangs can be
abandoned at the deadline: two thread wake-ups a step (issue 27, ~20-75 µs of a
~0.2 ms step). Where it is safe, ``run()`` instead runs its event loop on a
thread of its own (the *loop thread*) and a sync tool called alone runs right
there, with no hand-off; the caller's thread waits for the run, and at the
deadline, on Ctrl-C or on ``cancel()``, while the loop thread is still inside
the tool, it *takes the run over*: it names the call abandoned and writes the
call's ``tool_finished`` and the run's ``run_finished`` itself, and ``run()``
returns. Two wake-ups a run instead of two a step.

The :class:`Referee` is the lock both sides take. The loop thread
:meth:`~Referee.enter`\\ s before the tool and :meth:`~Referee.leave`\\ s after
it; the caller's thread (:meth:`~Referee.watch`) takes over only a call that
has entered and not left. Whoever gets the lock first decides: a tool that
returns first keeps its step (the loop thread goes on as usual), a takeover
that comes first owns the ending, and the loop thread, when the tool returns at
last, waits for the takeover to have finished writing and then leaves by
raising :class:`TakenOver`, which the engine lets through without touching the
run (see ``CallRunner.call``, ``Run._advance`` and ``agentlab._facades``). So each ending is written
once, by one thread, and never after ``run()`` returned.

Nothing here knows what a run is: the engine passes the takeover as a function.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..errors import AgentlabError

SLACK_S = 0.001
"""A call due this much earlier than the caller's thread means to wake does wake it (else it would be late)."""

SLICE_S = 0.25
"""The caller's thread looks at its flags at least this often (a signal may land on another thread)."""


class TakenOver(AgentlabError):  # noqa: N818 - not an error: the step was ended by the caller's thread
    """Raised on the loop thread, after a takeover, when the tool returns: leave without touching the run.

    An ``AgentlabError`` like every class the package defines, so an ``except Exception`` on its way out
    would catch it: the one there (``CallRunner.call``, a call refused before any attempt) lets it pass.
    It never reaches a user: ``run()`` has returned by then, and the loop's thread drops it."""


class Referee:
    """The lock both threads take around a sync call run on the loop's thread (see the module's docstring).

    ``due`` is when the run's deadline passes (``time.monotonic``; ``None``: no
    deadline): the caller's thread waits until then. Later calls are due no
    earlier (working time only grows), so it need not be woken for each.
    """

    __slots__ = ("_inside", "_lock", "_over", "_wake", "_waits_until", "cancelled", "finished", "hint", "taken")

    def __init__(self, due: float | None) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Lock()  # released to wake the caller's thread (a plain lock: safe in a signal handler)
        self._wake.acquire()
        self._over = threading.Lock()  # released once the takeover has written the ending (an Event costs 1.5 µs)
        self._over.acquire()
        self._inside: tuple[float | None, Callable[[bool], None]] | None = None  # the call on the loop thread
        self._waits_until: float | None = None  # when the caller's thread wakes by itself (None: not before woken)
        self.hint = due  # the latest deadline known
        self.cancelled = False
        self.finished = False
        self.taken = False

    # -------------------------------------------------------------- the loop thread
    def enter(self, due: float | None, take_over: Callable[[bool], None]) -> bool:
        """A sync call is about to run on the loop thread, due at ``due``; may it (no cancel asked for)?

        ``take_over(cancelled)`` ends the run from the caller's thread if the
        call is still running at ``due`` (``cancelled=False``) or on a cancel.
        """
        with self._lock:
            if self.cancelled or self.taken:
                return False
            self._inside = (due, take_over)
            if due is not None:
                self.hint = due
                late = self._waits_until is None or due < self._waits_until - SLACK_S
            else:
                late = False
        if late:  # the caller's thread would wake after this call is due
            self.wake()
        return True

    def leave(self) -> None:
        """The call returned: go on with the step, or raise :class:`TakenOver` once the takeover has ended."""
        with self._lock:
            taken = self.taken
            self._inside = None
        if taken:
            with self._over:  # wait for the takeover to have written the ending
                pass
            raise TakenOver

    def done(self) -> None:
        """The run ended on the loop thread (however it ended)."""
        self.finished = True
        self.wake()

    # ------------------------------------------------------------ any thread
    def cancel(self) -> None:
        """A cancel was asked for (``Run.cancel``, a Ctrl-C): take over a call on the loop thread. Lock-free, so a
        signal handler may call it whatever its thread was doing."""
        self.cancelled = True
        self.wake()

    def wake(self) -> None:
        """Wake the caller's thread to look again."""
        try:
            self._wake.release()
        except RuntimeError:  # already released: it will look anyway
            pass

    # ------------------------------------------------------- the caller's thread
    def watch(self, give_up_at: Callable[[], float | None]) -> bool:
        """Wait until the run ends (``False``) or was taken over here (``True``).

        ``give_up_at()`` is when to stop waiting for a run that was cancelled
        but does not end (its loop is blocked), as ``time.monotonic``: then
        this returns ``False`` with the run unfinished.
        """
        while True:
            take: Callable[[bool], None] | None = None
            with self._lock:
                if self.finished:
                    return False
                now = time.monotonic()
                if self._inside is not None:
                    due, fn = self._inside
                    if self.cancelled or (due is not None and now >= due):
                        self.taken, take, self._inside = True, fn, None  # taken once, whatever happens next
                        until: float | None = None
                    else:
                        until = due
                else:
                    until = self.hint if self.hint is not None and self.hint > now else None
                self._waits_until = until
            if take is not None:
                try:
                    take(self.cancelled)
                finally:
                    self._over.release()
                return True
            stop = give_up_at()
            if stop is not None:
                if now >= stop:
                    return False
                until = stop if until is None else min(until, stop)
            wait = SLICE_S if until is None else min(SLICE_S, max(0.0, until - now))
            self._wake.acquire(timeout=wait)

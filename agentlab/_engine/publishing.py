"""A run's events: every fact of the run to every subscriber, a failing subscriber contained.

Subscribers (the trace writer, the notebook panel, a user's callback) hear each event in order; one
that raises is named in a warning and the others still hear it, a trace that cannot be written stops
the run, and a Ctrl-C raised inside one ends the run cancelled once the others have heard the event.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
import warnings
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from .._runtime import watchdog
from ..clock import wall_time
from ..errors import TraceWriteError, safe_str
from ..events import Event, Subscriber, new_event
from ..messages import (
    Block,
    text_of,
)
from ..pricing import prices_dict
from ..results import StepRecord, Stopped
from ..vocab import EventKind
from .calls import format_error
from .parts import RunParts


class Publishing(RunParts):
    """The events part of :class:`~agentlab.loop.Run`."""

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` for every event; returns an unsubscribe function."""
        self._subscribers.append(callback)
        self._called = callees(self._subscribers)
        return lambda: self._unsubscribe(callback)

    def _unsubscribe(self, callback: Subscriber) -> None:
        if callback in self._subscribers:
            self._subscribers.remove(callback)
            self._called = callees(self._subscribers)

    def note(self, kind: str, **data: Any) -> None:
        """Emit an event of the caller's own (a panel's "paused", say) to every subscriber."""
        self._emit(kind, **data)

    @watchdog.handoff("subscriber")
    def _hand_back(self) -> None:
        """``step()`` ends or pauses and the run goes on: a subscriber that holds events (the trace writer's
        ``flush_run``) writes them now, before control goes back to the caller; one that cannot stops the run
        as a failed trace write does. ``run()`` keeps control from step to step: each step's last
        event, ``step_finished``, already put every event on disk (see :mod:`agentlab.trace.writer`)."""
        for callback in self._subscribers:
            if (flush := getattr(callback, "flush_run", None)) is not None:
                try:
                    flush(self.run_id)
                except TraceWriteError as exc:
                    self._trace_failed_by(exc)
                    return self._stop(*self._trace_failed())
        return None

    def _emit(self, kind: str, **data: Any) -> None:
        """``kind``'s event, with ``data``, at the run's ``elapsed`` now, to every subscriber."""
        if not self._subscribers:
            return None
        if kind == "run_finished":
            self._seq += 1
            event = new_event(kind, self.config.run_id, self.steps, self._seq, self.elapsed, data)
            return self._emit_ending(event, data)
        return self._publish(kind, data, self.elapsed)

    @watchdog.handoff("subscriber")
    def _publish(self, kind: str, data: dict[str, Any], t: float) -> None:
        """The event to every subscriber (:meth:`_emit`'s way for any kind but ``run_finished``), ``data`` as given.

        ``data`` is a dict the caller made for the event, and ``t`` is the reading of the run's
        ``elapsed`` the caller already took for a field of the same event (``tool_finished``'s ``end``,
        ``step_finished``'s ``elapsed``) or for the step's books (``model_called``: when the reply came), made
        with nothing emitted since; each is so a true reading at or after the previous event's ``t``."""
        called = self._called  # (a tuple, made again on each change: one that subscribes or unsubscribes while
        if not called:  # called changes the next event's subscribers, not this one's)
            return None
        self._seq += 1
        event = new_event(kind, self.config.run_id, self.steps, self._seq, t, data)
        interrupted: KeyboardInterrupt | None = None
        for callback in called:
            try:
                callback(event)
            except BaseException as exc:  # noqa: BLE001 - a subscriber's SystemExit, CancelledError...
                interrupted = self._subscriber_failed(callback, event, exc, interrupted)
        if interrupted is not None:
            self._interrupted_by_subscriber(interrupted)
        return None

    @watchdog.handoff("subscriber")
    def _emit_ending(self, event: Event, data: dict[str, Any]) -> None:
        """``run_finished`` to every subscriber. a subscriber that blocked on it overran too, and the
        next one (the trace) hears it: ``overrun_s`` and ``elapsed`` are brought up to date before each."""
        interrupted: KeyboardInterrupt | None = None
        for callback in tuple(self._subscribers):
            data.update(self._overrun(), elapsed=self.elapsed)
            try:
                callback(event)
            except BaseException as exc:  # noqa: BLE001 - contained as in _emit
                interrupted = self._subscriber_failed(callback, event, exc, interrupted)
        if self.result is not None:
            over = self._overrun()
            r = self.result
            if (r.overrun_s, r.overrun_cause, r.abandoned) != (
                over["overrun_s"],
                over["overrun_cause"],
                over["abandoned"],
            ):
                self.result = replace(r, **over)  # a subscriber overran the deadline: the result says so too
        if interrupted is not None:
            self._interrupted_by_subscriber(interrupted)

    def _subscriber_failed(
        self, callback: Subscriber, event: Event, exc: BaseException, interrupted: KeyboardInterrupt | None
    ) -> KeyboardInterrupt | None:
        """A subscriber raised. a trace that cannot be written stops the run. A Ctrl-C is kept (the
        other subscribers hear the event first, then the run ends cancelled). anything else
        (SystemExit, GeneratorExit, CancelledError...) is contained, with a warning naming the subscriber."""
        if isinstance(exc, TraceWriteError):
            self._trace_failed_by(exc)
        elif isinstance(exc, KeyboardInterrupt):
            return interrupted or exc
        else:
            warnings.warn(
                f"agentlab: subscriber {safe_str(callback)} failed on {event.kind}:\n{traceback.format_exc()}",
                stacklevel=3,  # the code that emitted the event
            )
        return interrupted

    def _trace_failed_by(self, exc: TraceWriteError) -> None:
        """A trace write failed (the first failure is the one named); the run stops at its next check."""
        self._trace_error, self._cancel = self._trace_error or exc, True

    def _interrupted_by_subscriber(self, interrupted: KeyboardInterrupt) -> None:
        """In the step's own task, step() ends the run cancelled; elsewhere (a call's task) raising would tear
        through the event loop, so it cancels the run instead."""
        with contextlib.suppress(RuntimeError):
            if asyncio.current_task() is self._stepping.task is not None:
                raise interrupted
        self.cancel()

    def _emit_start(self) -> None:
        self._emit(
            EventKind.RUN_STARTED,
            task=self.task,
            started_at=datetime.fromtimestamp(wall_time(self.clock), UTC).isoformat(),
            model=self.model.model,
            model_name=self._caps.name,
            billed=self._caps.bills,
            system=self.system,
            budget=self._limits(),
            max_tokens=self.max_tokens,
            tools=[
                {"name": t.name, "mode": t.mode, "description": t.description, "input_schema": t.input_schema}
                for t in self.tools.values()
            ],
            prices=None if self.prices is None else prices_dict(self.prices),
            caches=self._caps.caches,
            messages=list(self.messages),  # a copy: the live history keeps growing
            **({"parent": self.parent} if self.parent is not None else {}),
        )

    def _emit_end(self, outcome: str, reason: str, detail: str, text: str, error: BaseException | None) -> None:
        guard = self._input.report(self.budget, self.spent)
        self._emit(
            EventKind.RUN_FINISHED,
            outcome=outcome,
            reason=reason,
            detail=detail,
            text=text,
            steps=self.steps,
            spent=self.spent,
            elapsed=self.elapsed,
            model_calls=self.model_calls,
            nudges=self.nudges,
            error=None if error is None else format_error(error),
            guard=guard.as_dict(),
            guard_note=guard.note(),
            last_guard_check=self._input.request_fields(),  # a check that stopped the run has no model_request
            **self._overrun(),
        )
        self._report_to_parent()

    def _record(self) -> StepRecord:
        assistant = next((m for m in reversed(self.messages) if m.get("role") == "assistant"), None)
        content: list[Block] = assistant["content"] if assistant else []
        u = self.last_usage
        return StepRecord(
            step=self.steps,
            stop_reason=self.result.reason if isinstance(self.result, Stopped) else None,
            text=text_of(content),
            tool_calls=[b for b in content if b.get("type") == "tool_use"],
            cost=self._last_cost,
            spent=self.spent,
            usage=u.as_dict() if u else {},
            latency=self._last_latency,
            budget=self.snapshot,
            finished=self.finished,
            context_management=self._last_context,
        )


def callees(subscribers: list[Subscriber]) -> tuple[Subscriber, ...]:
    """The subscribers as they stand: one that subscribes or unsubscribes while an event is being published
    changes the next event's subscribers, not this one's."""
    return tuple(subscribers)

"""What the engine tells its subscribers: one flat event type, one fact each.

The trace store, the notebook panel and the CLI are all subscribers; the
engine knows none of them. Every event has the run id, the step it belongs
to, a sequence number, seconds since the run started and a ``kind`` (an
:class:`~agentlab.vocab.EventKind`, or a driver's own kind sent through
``Run.note``); the rest is in ``data`` (plain JSON-able values).

This module holds only what the engine builds and publishes. What each kind
carries, how an event becomes a trace line and how a line is checked when
read back are the trace's schema, declared once in
:mod:`agentlab.trace.schema` (``schema.KINDS``, ``schema.event_record``),
with the catalogue of kinds in its docstring and in ``docs/traces.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # an EventKind (a str), or a driver's own kind sent through Run.note
    run_id: str
    step: int
    seq: int
    t: float
    data: dict[str, Any]


def new_event(kind: str, run_id: str, step: int, seq: int, t: float, data: dict[str, Any]) -> Event:
    """``Event(kind, run_id, step, seq, t, data)``: the engine's one way to make an event."""
    return Event(kind, run_id, step, seq, t, data)


Subscriber = Callable[[Event], None]
"""Anything called with each event: the trace writer, the panel, an exporter, your own function."""

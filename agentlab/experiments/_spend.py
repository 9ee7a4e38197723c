"""What a run's trace says it spent, including a call that was in flight when its process died.

The trace is the durable record of spending: each model call's reservation
is in its ``model_request`` line (``reserved``) before the call is sent, and
its cost is in the ``model_called`` line after. A process killed mid-call
(SIGKILL, a lost Ray worker) leaves a request with no reply: the provider
may have billed it, so its reservation (the call's worst case) counts as
spent. That keeps the total a promise across crashes: what a resumed
experiment counts is never less than what was really spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson


@dataclass(frozen=True)
class Spend:
    """Dollars a trace accounts for: ``billed`` (model calls' costs) and ``in_flight`` (a call with no reply)."""

    billed: float = 0.0
    in_flight: float = 0.0

    @property
    def total(self) -> float:
        return self.billed + self.in_flight

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.billed + other.billed, self.in_flight + other.in_flight)


def trace_spend(path: Path) -> Spend:
    """The spend recorded in one run's trace file (a missing file spent nothing; a torn last line is skipped)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Spend()
    billed, open_reservation, ended = 0.0, 0.0, False
    for line in data.splitlines():
        try:
            event = orjson.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("kind")
        if kind == "model_request":
            open_reservation, ended = _money(event.get("reserved")), False
        elif kind == "model_called":
            billed += _money(event.get("cost"))
            open_reservation = 0.0
        elif kind == "run_finished":
            open_reservation, ended = 0.0, True  # a call that failed was released, not billed
    return Spend(billed, 0.0 if ended else open_reservation)


def _money(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value else 0.0

"""A run option that warns when a run's cache waste passes a limit: a subscriber the user adds.

The engine knows nothing of cache waste (it does not import :mod:`agentlab.costs`): the alarm hears the run's
events as any subscriber does (``subscribers=[al.costs.waste_alarm(0.50)]``), totals the waste as each reply
arrives by the rule :func:`~agentlab.costs.cache_busts` applies to the finished trace
(:class:`~agentlab.costs.WasteMeter`), and warns once per run when the total passes the limit. It never stops
the run: the money is already spent, and a warning says where it went (``max_cost`` is what stops a run).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from ..events import Event
from ._busts import WasteMeter


class CacheWasteWarning(UserWarning):
    """A run's cache waste passed the limit given to :func:`waste_alarm`."""


class WasteAlarm:
    """A subscriber that warns (:class:`CacheWasteWarning`) the first time a run's cache waste passes ``limit``
    USD, and keeps what it saw: ``tripped`` maps each run id whose waste passed the limit to the step, the
    waste and the number of busts at that moment.

    One alarm may watch several runs (an experiment's, run after run or at once): each has its own total. A
    waste that cannot be priced (a bust on a model without a known price: NaN) passes no limit.
    """

    def __init__(self, limit: float) -> None:
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit < 0:
            raise ValueError(f"waste_alarm(limit) takes USD as a finite number >= 0, got {limit!r}")
        self.limit = float(limit)
        self.tripped: dict[str, dict[str, Any]] = {}
        self._meters: dict[str, WasteMeter] = {}

    def __call__(self, event: Event) -> None:
        kind = event.kind
        if kind == "run_started":
            meter = self._meters[event.run_id] = WasteMeter()
            meter.started(event.data)
            self.tripped.pop(event.run_id, None)
        elif kind == "model_called":
            meter = self._meters.setdefault(event.run_id, WasteMeter())  # a resumed run sends no run_started
            meter.called(event.data, event.step, event.t)
            if meter.total > self.limit and event.run_id not in self.tripped:
                self.tripped[event.run_id] = {"step": event.step, "waste": meter.total, "busts": meter.busts}
                warnings.warn(
                    f"run {event.run_id}: cache waste ${meter.total:.4f} passed the ${self.limit:.4f} limit at step "
                    f"{event.step}, in {meter.busts} bust(s); agentlab.costs.cache_busts(trace) names each cause",
                    CacheWasteWarning,
                    stacklevel=2,
                )
        elif kind == "run_finished":
            self._meters.pop(event.run_id, None)

    def __repr__(self) -> str:
        return f"<WasteAlarm limit=${self.limit:.4f} tripped={len(self.tripped)}>"


def waste_alarm(limit: float) -> WasteAlarm:
    """A subscriber (``al.run(..., subscribers=[waste_alarm(0.50)])``) that warns once a run's cache waste, the
    USD it paid beyond what its prompt cache should have read, passes ``limit``; it never stops the run."""
    return WasteAlarm(limit)

"""The shared total budget: one ledger that every run of an experiment reserves from.

Each model call reserves its worst case before it is sent and settles to
its real cost after (the run's :class:`~agentlab._account.Account` does
both), so the total is never passed however many runs are in flight:
spent + reserved <= limit.
"""

from __future__ import annotations

import threading

from .._account import Refusal


class TotalLedger:
    """Spent and reserved dollars against ``limit`` (``None``: no limit, only counting).

    Implements :class:`agentlab._account.Ledger`. Thread-safe, so runs on
    other threads (or a Ray actor) may share it. With no limit nothing is held
    back for anyone: every reservation is granted whole and kept nowhere
    (``reserved`` stays 0), and settling only adds the cost to ``spent``. The
    run still writes the call's reservation (its worst case) in its trace
    before sending it, which is what a resumed experiment counts for a call
    that was in flight at a crash (:mod:`._spend`).
    """

    def __init__(self, limit: float | None, spent: float = 0.0) -> None:
        self.limit = limit
        self.spent = spent
        self.reserved = 0.0
        self.refused = 0
        self._held: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def left(self) -> float | None:
        """Dollars neither spent nor reserved (``None`` without a limit)."""
        return None if self.limit is None else self.limit - self.spent - self.reserved

    def reserve(self, run_id: str, amount: float, minimum: float) -> float:
        """Hold at most ``amount`` (at least ``minimum``) for a call of ``run_id``; 0 when not even that is left."""
        if self.limit is None:  # no total to hold against: granted, and kept nowhere (settle only counts)
            return amount
        with self._lock:
            left = self.limit - self.spent - self.reserved
            if left < minimum or left <= 0 < amount:
                self.refused += 1
                return 0.0
            amount = min(amount, left)
            self.reserved += amount
            self._held[run_id] = self._held.get(run_id, 0.0) + amount
            return amount

    def refusal(self, needed: float) -> Refusal:
        """Why a reservation of at least ``needed`` was refused: the experiment's total, with what it has left."""
        return Refusal("experiment", needed, self.left)

    def settle(self, run_id: str, reserved: float, actual: float) -> None:
        with self._lock:
            if self.limit is not None:  # (with none, nothing was held: see reserve)
                left = self.reserved - reserved
                self.reserved = left if left > 0.0 else 0.0
                kept = self._held.pop(run_id, 0.0) - reserved
                if kept > 1e-15:  # (another call of the run's still in flight)
                    self._held[run_id] = kept
            self.spent += actual

    def release(self, run_id: str) -> None:
        """Free what a finished run still holds (a call that failed or was cancelled cost nothing)."""
        if run_id not in self._held:  # (the usual end: every call settled) a finished run reserves no more
            return
        with self._lock:
            self.reserved = max(0.0, self.reserved - self._held.pop(run_id, 0.0))

    def forfeit(self, run_id: str) -> float:
        """A run whose process died mid-call: what it holds counts as spent (the call may have been billed).

        Returns the amount moved from reserved to spent; it equals the
        reservation the run's trace shows with no reply after it.
        """
        with self._lock:
            held = self._held.pop(run_id, 0.0)
            self.reserved = max(0.0, self.reserved - held)
            self.spent += held
            return held

    def charge(self, amount: float) -> None:
        """Count spending that was made outside a reservation (none in the engine)."""
        with self._lock:
            self.spent += amount

    def state(self) -> tuple[float, float | None, int]:
        """(spent, left, refused reservations): one call, for a remote copy (the Ray actor)."""
        with self._lock:
            return self.spent, self.left, self.refused

    def __repr__(self) -> str:
        lim = "∞" if self.limit is None else f"${self.limit:.4f}"
        return f"<TotalLedger spent ${self.spent:.4f} reserved ${self.reserved:.4f} of {lim}>"

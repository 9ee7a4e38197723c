"""One account for a run's money: every model call is reserved, charged and settled here, nowhere else.

A call's life, in the order the engine lives it:

1. :meth:`Account.reserve` holds the call's worst case against the shared total
   the run answers to (an experiment's :class:`~agentlab.experiments.TotalLedger`,
   a parent run's :class:`~agentlab._subruns.ParentLedger`, or nothing). It
   returns a :class:`Hold` (the ``max_tokens`` the call may use, what was held,
   and the worst case the call is charged at if its reply is lost), or a
   :class:`Refusal` saying who ran out and how much was left.
2. :meth:`Account.charge` charges the call once it ended, one way of four
   (:data:`How`): what its usage says, the engine's estimate (a model that
   reports no usage), the worst case (a reply lost in transit or abandoned in
   flight, which the API may have billed), or the part of a stream cut short.
   The hold is settled to that cost, and the :class:`Charge` returned is what
   happened, as data: the engine emits it as the one ``model_called`` shape.

The account holds the run's money totals (``spent``, ``model_calls`` and the
tokens read and written). It does no I/O and reads no clock: the engine
passes the numbers in, and the what-if replay (:func:`agentlab.analysis.budget_whatif`)
drives the same object over a recorded run, so the two stop at the same step.

The worst case of a call is :func:`agentlab.budget.worst_case_cost`, called
here and by the cost guard; nothing else computes it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .budget import MIN_REPLY_TOKENS, Stop, affordable_max_tokens, worst_case_cost
from .messages import Usage
from .vocab import StopReason

How = Literal["usage", "estimate", "lost", "partial"]
"""How a call was charged: its reported usage, the engine's estimate of it, its worst case, or the part that came."""

Who = Literal["experiment", "parent"]
"""Whose total refused a reservation: an experiment's shared total, or a parent run's budget."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A shared total could not cover the next call: whose, the least the call could cost, and what was left.

    ``left`` is ``None`` when the total did not say (a remote ledger). The sentence is :attr:`detail`,
    the one place such a refusal is worded.
    """

    who: Who
    needed: float
    left: float | None = None
    parent_id: str | None = None
    parent_ended: bool = False

    @property
    def reason(self) -> StopReason:
        return StopReason.EXPERIMENT_BUDGET if self.who == "experiment" else StopReason.BUDGET

    @property
    def detail(self) -> str:
        if self.who == "experiment":
            whose = "the experiment's total budget"
        else:
            ended = " (which has ended)" if self.parent_ended else ""
            whose = f"the budget left to parent run {self.parent_id}{ended}"
        left = "" if self.left is None else f", ${max(0.0, self.left):.4f} left"
        return f"{whose} cannot cover the next call (at least ${self.needed:.4f}){left}"

    def stop(self) -> Stop:
        """As the run's stop."""
        return Stop(self.reason, self.detail)


class Ledger(Protocol):
    """A spending total shared by many runs (an experiment's ``max_total_cost``, a parent run's budget).

    ``reserve`` grants at most ``amount``, at least ``minimum``, or 0 when not
    even ``minimum`` is left; ``settle`` turns a reservation into what the
    call cost. A call that fails is never settled: the ledger's owner
    releases what a run still holds when the run ends. ``refusal`` says why a
    reservation of at least ``needed`` was just refused.
    """

    def reserve(self, run_id: str, amount: float, minimum: float) -> float: ...

    def settle(self, run_id: str, reserved: float, actual: float) -> None: ...


class _Unlimited:
    """The ledger of a run on its own: every reservation granted, nothing kept."""

    def reserve(self, run_id: str, amount: float, minimum: float) -> float:
        return amount

    def settle(self, run_id: str, reserved: float, actual: float) -> None:
        return None


NO_LEDGER: Ledger = _Unlimited()


@dataclass(frozen=True, slots=True)
class Hold:
    """A call reserved: the ``max_tokens`` it may use, what the shared total holds for it, and its worst case."""

    max_tokens: int
    reserved: float
    worst: float


NOTHING_HELD = Hold(0, 0.0, 0.0)
"""What a call that no check priced holds (it is charged its worst case, 0, if lost)."""


@dataclass(frozen=True, slots=True)
class Charge:
    """What charging one call did: how, its cost, the run's total after it, and the usage it rested on.

    ``usage`` is the reply's (or the estimate's, or the part's) token counts; ``None`` for a lost reply.
    """

    how: How
    cost: float
    spent: float
    usage: Usage | None
    reserved: float

    def fields(self) -> dict[str, Any]:
        """The money fields of the call's ``model_called`` event (the one shape every outcome shares)."""
        out: dict[str, Any] = {"cost": self.cost, "spent": self.spent, "estimated": self.how != "usage"}
        if self.usage is not None:
            out["usage"] = self.usage.as_dict()
            out["context_tokens"] = self.usage.context_tokens
        if self.how == "lost":
            out["lost"] = True
        return out


class Account:
    """A run's money: what it spent and on how many calls, the tokens billed, and its shared total's holds.

    Thread-safe where it has to be: a sub-run on another thread adds what it spent
    (:meth:`add_sub_run`) while the parent's own calls are charged on its loop.
    """

    def __init__(self, run_id: str, ledger: Ledger = NO_LEDGER) -> None:
        self.run_id = run_id
        self.ledger = ledger
        self.spent = 0.0
        self.model_calls = 0
        self.input_tokens = 0  # everything the calls read (cache included) ...
        self.output_tokens = 0  # ... and wrote
        self._lock = threading.Lock()

    @property
    def shared(self) -> bool:
        """Whether the run answers to a shared total (else reservations are granted whole and kept nowhere)."""
        return self.ledger is not NO_LEDGER

    def reserve(self, input_tokens: int, rates: tuple[float, float], max_tokens: int, worst: float) -> Hold | Refusal:
        """Hold the next call's worst case against the shared total: a :class:`Hold`, or who refused.

        ``input_tokens`` at ``rates`` (input, output USD per token at their dearest) and ``max_tokens`` of
        output is what the shared total is asked for; ``worst`` is what the cost guard priced the call at
        (fees included), charged if the reply is lost. A partial grant lowers ``max_tokens`` until the call
        fits it; not even :data:`~agentlab.budget.MIN_REPLY_TOKENS` of output fitting is a refusal, and a
        reservation never exceeds what the total had left.
        """
        if not self.shared:
            return Hold(max_tokens, 0.0, worst)
        in_rate, out_rate = rates
        smallest = min(MIN_REPLY_TOKENS, max_tokens)
        want = worst_case_cost(input_tokens, in_rate, out_rate, max_tokens)
        least = worst_case_cost(input_tokens, in_rate, out_rate, smallest)
        granted = self.ledger.reserve(self.run_id, want, least)
        if granted < least or (granted <= 0 < want):
            if granted > 0:
                self.ledger.settle(self.run_id, granted, 0.0)
            return _refusal(self.ledger, least)
        if granted >= want:  # a lost reply never settles past what the shared total held for it
            return Hold(max_tokens, granted, min(worst, granted))
        allowed = max(affordable_max_tokens(granted, input_tokens, in_rate, out_rate, max_tokens), smallest)
        return Hold(allowed, granted, min(worst - (max_tokens - allowed) * out_rate, granted))

    def charge(self, hold: Hold, how: How, cost: float, usage: Usage | None = None) -> Charge:
        """Charge a call that ended (``how``), settle its hold to ``cost``, and say what happened."""
        with self._lock:
            self.spent += cost
            self.model_calls += 1
            if usage is not None:
                self.input_tokens += usage.billed_input_tokens
                self.output_tokens += usage.output_tokens
            spent = self.spent
        if self.shared:
            self.ledger.settle(self.run_id, hold.reserved, cost)
        return Charge(how, cost, spent, usage, hold.reserved)

    def add_sub_run(self, cost: float) -> None:
        """A sub-run's call was settled: the run's cost includes its sub-runs' (their tokens: :meth:`add_tokens`)."""
        with self._lock:
            self.spent += cost

    def add_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Tokens a sub-run's calls read and wrote, counted in this run's totals when the sub-run is recorded."""
        with self._lock:
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens


def _refusal(ledger: Ledger, needed: float) -> Refusal:
    """Who refused a reservation of at least ``needed``: the ledger says when it can (``refusal``)."""
    explain = getattr(ledger, "refusal", None)
    return explain(needed) if explain is not None else Refusal("experiment", needed)


def partial_usage(usage: Mapping[str, Any]) -> Usage:
    """The token counts of a stream cut short (its event's ``usage``) as a :class:`~agentlab.messages.Usage`."""
    return Usage(
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
        cache_creation_input_tokens=int(usage.get("cache_creation_input_tokens", 0)),
        cache_read_input_tokens=int(usage.get("cache_read_input_tokens", 0)),
    )

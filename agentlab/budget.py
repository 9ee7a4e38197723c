"""The three budgets, as values and pure checks.

Steps catch the model that alternates between tools forever; cost catches
eight legitimate steps with a huge context; the deadline catches the tool
that hangs. They fail independently, so each is checked on its own and the
result says which one ran out, with the numbers.

Nothing here reads a clock or calls a model: the engine passes the numbers in.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from .vocab import StopReason

CostGuard = Literal["hard", "after"]

MIN_REPLY_TOKENS = 32
"""The hard cost guard stops the run when it cannot afford even this many output tokens."""


def _check_limit(name: str, value: object, *, integer: bool = False) -> int | float | None:
    """``value`` as a plain int (``integer``) or float, or a clear error naming ``name``.

    Any real number type is accepted (numpy scalars, ``Decimal``, ``Fraction``);
    infinities, NaN, values a float cannot hold and values <= 0 are refused:
    ``None`` is how to say "no limit".
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Decimal)):
        raise TypeError(f"{name} must be a number or None, got {type(value).__name__}")
    try:
        as_float = float(value)
    except OverflowError:
        raise ValueError(f"{name} is too large to be a limit (got {_short(value)}); use None for no limit") from None
    except ValueError:  # Decimal('sNaN')
        raise ValueError(f"{name} must be a number > 0 (or None for no limit), got {value!r}") from None
    if math.isnan(as_float):
        raise ValueError(f"{name} must be > 0 (or None for no limit), got {value!r}")
    if math.isinf(as_float):
        raise ValueError(f"{name} must be finite (use None for no limit), got {value!r}")
    if as_float <= 0 or (value <= 0):
        raise ValueError(f"{name} must be > 0 (or None for no limit), got {value!r}")
    if not integer:
        return as_float if not isinstance(value, int) else value
    if isinstance(value, numbers.Integral):
        whole = int(value)
    elif as_float.is_integer() and value == int(as_float):
        whole = int(as_float)
    else:
        raise TypeError(f"{name} must be a whole number, got {value!r}")
    if whole > _MAX_INT:
        raise ValueError(f"{name} is too large to be a limit (got {_short(value)}); use None for no limit")
    return whole


_MAX_INT = 2**63 - 1


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one run. ``None`` means no limit.

    Attributes:
        max_steps: model calls allowed.
        max_cost: US dollars the run may spend on model calls.
        deadline_s: seconds of *working* time: time spent inside
            ``Run.step()`` (a run paused between steps in a notebook does not
            age; from a script this is wall-clock time). Bounds model calls,
            tools and retry waits alike.
        cost_guard: ``"hard"`` checks the worst case *before* each call and
            never lets ``spent`` pass ``max_cost``; ``"after"`` is the article's
            sketch (check once spent), kept to show the overshoot it allows.
    """

    max_steps: int | None = 8
    max_cost: float | None = 0.50
    deadline_s: float | None = 60.0
    cost_guard: CostGuard = "hard"

    def __post_init__(self) -> None:
        # Normalized in place (a frozen dataclass): numpy, Decimal and Fraction limits become int/float.
        object.__setattr__(self, "max_steps", _check_limit("max_steps", self.max_steps, integer=True))
        object.__setattr__(self, "max_cost", _check_limit("max_cost", self.max_cost))
        object.__setattr__(self, "deadline_s", _check_limit("deadline_s", self.deadline_s))
        if self.cost_guard not in ("hard", "after"):
            raise ValueError(f"cost_guard must be 'hard' or 'after', got {self.cost_guard!r}")


@dataclass(frozen=True, slots=True)
class BudgetSnapshot:
    """Where a run stands against each budget: used and limit."""

    steps: int
    max_steps: int | None
    spent: float
    max_cost: float | None
    elapsed: float
    deadline_s: float | None

    def fraction(self, which: Literal["steps", "cost", "time"]) -> float | None:
        """Share of a budget used (0..1+), ``None`` when unlimited."""
        used, limit = {
            "steps": (self.steps, self.max_steps),
            "cost": (self.spent, self.max_cost),
            "time": (self.elapsed, self.deadline_s),
        }[which]
        return None if not limit else used / limit

    def __str__(self) -> str:
        def lim(v: object, fmt: str) -> str:
            return "∞" if v is None else format(v, fmt)

        return (
            f"steps {self.steps}/{lim(self.max_steps, 'd')} · "
            f"${self.spent:.4f}/{'∞' if self.max_cost is None else f'${self.max_cost:.2f}'} · "
            f"{self.elapsed:.1f}s/{lim(self.deadline_s, 'g')}s"
        )


def affordable_max_tokens(
    remaining: float, est_input_tokens: int, input_rate: float, output_rate: float, wanted: int
) -> int:
    """The largest ``max_tokens`` whose worst-case cost fits in ``remaining`` dollars.

    Worst case = estimated input at the dearest input rate + every allowed
    output token. Returns ``wanted`` when it fits, something smaller when only
    that fits, and 0 when not even the input fits. Rates are USD per token.
    """
    left = remaining - est_input_tokens * input_rate
    if left <= 0:
        return 0
    if output_rate <= 0:
        return wanted
    return max(0, min(wanted, math.floor(left / output_rate * (1 - 1e-9))))


# ------------------------------------------------------------------ the rules
# One owner for each stop rule: the engine (loop.py) and the budget what-if
# replay (analysis.py) both call these, in this order, so they cannot disagree.


@dataclass(frozen=True, slots=True)
class Stop:
    """A budget ran out: the reason, and a sentence with the numbers."""

    reason: StopReason
    detail: str


def check_before_call(budget: Budget, steps: int, elapsed: float) -> Stop | None:
    """May step ``steps + 1`` call the model? (steps used, working seconds so far.)"""
    if budget.max_steps is not None and steps >= budget.max_steps:
        return Stop(StopReason.STEP_LIMIT, f"used all {budget.max_steps} steps")
    if budget.deadline_s is not None and elapsed >= budget.deadline_s:
        return Stop(StopReason.DEADLINE, f"{elapsed:.2f}s of {budget.deadline_s:g}s used before step {steps + 1}")
    return None


def worst_case_cost(est_input_tokens: int, input_rate: float, output_rate: float, max_tokens: int) -> float:
    """The most a call can cost: its input at the dearest rate plus every allowed output token."""
    return est_input_tokens * input_rate + max_tokens * output_rate


def guard_call(
    budget: Budget, *, steps: int, spent: float, est_input_tokens: int, input_rate: float, output_rate: float,
    max_tokens: int,
) -> int | Stop:
    """The hard cost guard: the ``max_tokens`` the next call may use, or why it may not be made.

    The worst case of the call (:func:`worst_case_cost`) must fit what is
    left of ``max_cost``; ``max_tokens`` is lowered until it does, and the run
    stops when not even :data:`MIN_REPLY_TOKENS` of output fit. Rates are USD
    per token. With no cost limit or ``cost_guard="after"`` the call is made
    as asked (the after-step check is then the only cost check).
    """
    if budget.max_cost is None or budget.cost_guard != "hard":
        return max_tokens
    remaining = budget.max_cost - spent
    smallest = min(MIN_REPLY_TOKENS, max_tokens)
    allowed = affordable_max_tokens(remaining, est_input_tokens, input_rate, output_rate, max_tokens)
    if allowed >= smallest:
        return allowed
    worst = worst_case_cost(est_input_tokens, input_rate, output_rate, smallest)
    return Stop(
        StopReason.BUDGET,
        f"spent ${spent:.4f} of ${budget.max_cost:.2f} after step {steps}; the next call would cost "
        f"at least ${worst:.4f} (~{est_input_tokens} input tokens), more than the ${remaining:.4f} left",
    )


def check_after_step(budget: Budget, steps: int, spent: float, elapsed: float) -> Stop | None:
    """Has step ``steps`` ended the run? Cost (the sketch's after-the-fact check), deadline, steps."""
    if budget.max_cost is not None and spent > budget.max_cost:
        return Stop(StopReason.BUDGET, f"spent ${spent:.4f} of ${budget.max_cost:.2f} after step {steps}")
    if budget.deadline_s is not None and elapsed >= budget.deadline_s:
        return Stop(StopReason.DEADLINE, f"{elapsed:.2f}s of {budget.deadline_s:g}s used after step {steps}")
    if budget.max_steps is not None and steps >= budget.max_steps:
        return Stop(StopReason.STEP_LIMIT, f"used all {budget.max_steps} steps without a final answer")
    return None

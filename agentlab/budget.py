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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from ._checks import is_whole
from ._shorten import shorten
from .messages import estimate_tokens, json_size, tokens_for_size
from .pricing import WEB_SEARCH_USD
from .vocab import StopReason

CostGuard = Literal["hard", "estimate", "after"]
COST_GUARDS: tuple[CostGuard, ...] = ("hard", "estimate", "after")

GuardBasis = Literal["exact", "bounded", "estimated"]
"""What the input side of a call's worst case rested on: the API's own count,
a bound the input cannot exceed, or an estimate that it can."""

MIN_REPLY_TOKENS = 32
"""The hard cost guard stops the run when it cannot afford even this many output tokens."""


def check_limit(name: str, value: object, *, integer: bool = False) -> int | float | None:
    """``value`` as a plain int (``integer``) or float, or a clear error naming ``name``.

    The one rule for a limit: :class:`Budget` (so ``run``, ``Lab``, experiments)
    and :func:`agentlab.analysis.budget_whatif` check every value through it.

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
    if as_float <= 0:  # (a positive Decimal too small for a float is 0.0 here: no limit left to keep)
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
    return shorten(repr(value), 40)


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
            never lets ``spent`` pass ``max_cost``: the input side is the
            API's exact count near the limit, else a bound the input cannot
            exceed (docs/cost-guard.md); ``"estimate"`` makes the same check
            on a token *estimate* (no extra requests, no guarantee: the
            result says by how much the estimate was off); ``"after"`` is the
            article's sketch (check once spent), kept to show the overshoot
            it allows.
    """

    max_steps: int | None = 8
    max_cost: float | None = 0.50
    deadline_s: float | None = 60.0
    cost_guard: CostGuard = "hard"

    def __post_init__(self) -> None:
        # Normalized in place (a frozen dataclass): numpy, Decimal and Fraction limits become int/float.
        object.__setattr__(self, "max_steps", check_limit("max_steps", self.max_steps, integer=True))
        object.__setattr__(self, "max_cost", check_limit("max_cost", self.max_cost))
        object.__setattr__(self, "deadline_s", check_limit("deadline_s", self.deadline_s))
        if self.cost_guard not in COST_GUARDS:
            raise ValueError(f"cost_guard must be 'hard', 'estimate' or 'after', got {self.cost_guard!r}")

    def as_dict(self) -> dict[str, Any]:
        """The limits as the trace's events carry them (``budget`` of ``run_started`` and ``step_finished``)."""
        return {
            "max_steps": self.max_steps,
            "max_cost": self.max_cost,
            "deadline_s": self.deadline_s,
            "cost_guard": self.cost_guard,
        }


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


def steps_used_up(budget: Budget, steps: int) -> bool:
    """Have ``steps`` model calls used the step limit? (Checked before each call, resumed or not.)"""
    return budget.max_steps is not None and steps >= budget.max_steps


def time_left(budget: Budget, elapsed: float) -> float | None:
    """Working seconds before the deadline after ``elapsed`` (``None``: no deadline); 0 or less: it has passed.

    The one owner of the deadline's arithmetic: the engine bounds its calls and tools by it, and every check
    below (and the what-if replay) compares it with 0."""
    return None if budget.deadline_s is None else budget.deadline_s - elapsed


def deadline_passed(budget: Budget, elapsed: float) -> bool:
    """Have ``elapsed`` working seconds reached the deadline (no time left to start anything)?"""
    left = time_left(budget, elapsed)
    return left is not None and left <= 0


def check_deadline(budget: Budget, elapsed: float, when: str) -> Stop | None:
    """The deadline's stop, ``when`` saying at which point it was checked ("before step 3")."""
    if deadline_passed(budget, elapsed):
        return Stop(StopReason.DEADLINE, f"{elapsed:.2f}s of {budget.deadline_s:g}s used {when}")
    return None


def check_before_call(budget: Budget, steps: int, elapsed: float) -> Stop | None:
    """May step ``steps + 1`` call the model? (steps used, working seconds so far.)"""
    if steps_used_up(budget, steps):
        return Stop(StopReason.STEP_LIMIT, f"used all {budget.max_steps} steps")
    return check_deadline(budget, elapsed, f"before step {steps + 1}")


def worst_case_cost(
    est_input_tokens: int, input_rate: float, output_rate: float, max_tokens: int, fees: float = 0.0
) -> float:
    """The most a call can cost: its input at the dearest rate, every allowed output token, and its server-tool fees."""
    return est_input_tokens * input_rate + max_tokens * output_rate + fees


def guard_call(
    budget: Budget,
    *,
    steps: int,
    spent: float,
    est_input_tokens: int,
    input_rate: float,
    output_rate: float,
    max_tokens: int,
    fees: float = 0.0,
    basis: GuardBasis = "estimated",
) -> int | Stop:
    """The pre-call cost guard: the ``max_tokens`` the next call may use, or why it may not be made.

    The worst case of the call (:func:`worst_case_cost`) must fit what is
    left of ``max_cost``; ``max_tokens`` is lowered until it does, and the run
    stops when not even :data:`MIN_REPLY_TOKENS` of output fit. Rates are USD
    per token; ``fees`` the most the request's server tools can charge;
    ``basis`` says what ``est_input_tokens`` is (exact, a bound, an estimate)
    and only changes the wording. With no cost limit or ``cost_guard="after"``
    the call is made as asked (the after-step check is then the only cost check).
    """
    if budget.max_cost is None or budget.cost_guard == "after":
        return max_tokens
    remaining = budget.max_cost - spent - fees
    smallest = min(MIN_REPLY_TOKENS, max_tokens)
    allowed = affordable_max_tokens(remaining, est_input_tokens, input_rate, output_rate, max_tokens)
    if allowed >= smallest:
        return allowed
    worst = worst_case_cost(est_input_tokens, input_rate, output_rate, smallest, fees)
    what = {"exact": "counted", "bounded": "at most", "estimated": "~"}[basis]
    sep = "" if basis == "estimated" else " "
    if basis == "bounded":  # a bound, not a count: say so, and how to get an exact check
        return Stop(
            StopReason.BUDGET,
            f"spent ${spent:.4f} of ${budget.max_cost:.2f} after step {steps}; the next call could cost "
            f"up to ${worst:.4f} (at most {est_input_tokens} input tokens: a bound, not a count), more than the "
            f"${budget.max_cost - spent:.4f} left. For an exact check use a model that counts tokens "
            "(AnthropicModel), FunctionModel(count_tokens=...), or cost_guard='estimate'",
        )
    return Stop(
        StopReason.BUDGET,
        f"spent ${spent:.4f} of ${budget.max_cost:.2f} after step {steps}; the next call would cost "
        f"at least ${worst:.4f} ({what}{sep}{est_input_tokens} input tokens), more than the "
        f"${budget.max_cost - spent:.4f} left",
    )


# ------------------------------------------------- the check, typed
# One function decides whether the next call may be made; the engine
# (agentlab._engine.input_tracker.InputTracker) and the what-if replay
# (agentlab.analysis.budget_whatif) both call it.

Rates = Callable[[int], tuple[float, float]]
"""``rates(input_tokens) -> (input, output)`` USD per token at their dearest for a call of that size."""


@dataclass(frozen=True, slots=True)
class GuardCheck:
    """What one pre-call check rested on and decided.

    ``basis`` is ``None`` when nothing was guarded (no ``max_cost``, no
    prices, or ``cost_guard="after"``). ``input_tokens`` is what the worst
    case priced the input at (the exact count, the bound, or the estimate);
    ``worst_case`` the most the call can cost at the ``max_tokens`` allowed
    (at the smallest reply when it stopped; on the bound when unguarded); ``wants_count`` says the bound
    could not clear the call and an exact count would decide it.
    """

    basis: GuardBasis | None
    input_bound: int
    input_tokens: int
    worst_case: float
    counted: bool
    max_tokens: int
    fees: float | None
    why: str
    stop: Stop | None = None
    wants_count: bool = False
    can_count: bool = True
    count_error: str | None = None
    count_latency: float | None = None

    @property
    def outcome(self) -> int | Stop:
        """The ``max_tokens`` the call may use, or the stop."""
        return self.stop if self.stop is not None else self.max_tokens

    def event_fields(self) -> dict[str, Any]:
        """The ``model_request`` event's guard fields (the trace's names, read back by the what-if replay)."""
        if self.basis is None:
            out: dict[str, Any] = {"input_bound": self.input_bound, "can_count": self.can_count}
        else:
            out = {
                "input_bound": self.input_bound,
                "can_count": self.can_count,
                "guard_basis": self.basis,
                "guard_input_tokens": self.input_tokens,
                "guard_fees": self.fees,
                "guard_worst_case": self.worst_case,
                "guard_why": self.why,
            }
        if self.count_error is not None:
            out["count_error"] = self.count_error
        if self.count_latency is not None:
            out["count_latency"] = self.count_latency
        return out


def check_call(
    budget: Budget,
    *,
    steps: int,
    spent: float,
    estimate: int,
    bound: int,
    billed_by_estimate: bool,
    fees: float | None,
    rates: Rates | None,
    max_tokens: int,
    counted: int | None = None,
    can_count: bool = True,
) -> GuardCheck:
    """The pre-call cost guard for step ``steps + 1``: may the call be made, with how many output tokens, and why.

    ``rates`` is ``None`` when no prices are known. ``counted`` is the API's
    exact count of the request, when the caller asked for one because an
    earlier check of the same call said ``wants_count``. ``fees`` is the most
    the request's server tools can charge (``None``: uncapped, so only an
    estimate is possible).
    """
    if rates is None or budget.max_cost is None or budget.cost_guard == "after":
        why = "not guarded: " + (
            "no prices" if rates is None else "no max_cost" if budget.max_cost is None else 'cost_guard="after"'
        )
        # Still the most the call can cost (for a reply lost in transit), on the bound: nothing was checked.
        worst = worst_case_cost(bound, *rates(bound), max_tokens, fees or 0.0) if rates is not None else 0.0
        return GuardCheck(None, bound, estimate, worst, False, max_tokens, fees, why, can_count=can_count)
    basis: GuardBasis
    if counted is not None:
        tokens, basis, wants = counted, "exact", False
    else:
        tokens, basis, wants = guard_input(
            budget,
            spent=spent,
            estimate=estimate,
            bound=bound,
            billed_by_estimate=billed_by_estimate,
            fees=fees,
            rates=rates,
            max_tokens=max_tokens,
        )
    in_rate, out_rate = rates(tokens)
    decided = guard_call(
        budget,
        steps=steps,
        spent=spent,
        est_input_tokens=tokens,
        input_rate=in_rate,
        output_rate=out_rate,
        max_tokens=max_tokens,
        fees=fees or 0.0,
        basis=basis,
    )
    stop: Stop | None
    if isinstance(decided, Stop):
        stop, allowed = decided, min(MIN_REPLY_TOKENS, max_tokens)
    else:
        stop, allowed = None, decided
    worst = worst_case_cost(tokens, in_rate, out_rate, allowed, fees or 0.0)
    if stop is not None:
        why = stop.detail
    else:
        lowered = f", max_tokens lowered to {allowed}" if allowed < max_tokens else ""
        left = budget.max_cost - spent
        why = f"{_SAYS[basis]} {tokens} input tokens: worst case ${worst:.4f} of ${left:.4f} left{lowered}"
    counted_here = basis == "exact" and counted is not None
    return GuardCheck(basis, bound, tokens, worst, counted_here, allowed, fees, why, stop, wants, can_count)


_SAYS = {"exact": "counted", "bounded": "at most", "estimated": "about"}
"""How a check's sentence names what its input rested on (:attr:`GuardCheck.why`)."""


# ------------------------------------------------- what the input may be
# The guard needs the input of the next call. Three sources, best first:
# the API's count of the exact request (free, one round trip: asked only
# when the bound below cannot clear the call), a bound the input cannot
# exceed (a token is never shorter than one byte), and an estimate (what
# cost_guard="estimate" uses, never checked against anything).

MESSAGE_OVERHEAD_TOKENS = 16
"""Tokens of framing the API may add per message (role markers, turn separators)."""
BLOCK_OVERHEAD_TOKENS = 8
"""Tokens of framing the API may add per content block (a tool_result's wrapper, say)."""
TOOL_PROMPT_TOKENS = 1024
"""The API's hidden tool-use system prompt (a few hundred tokens); counted once, in the first bound."""


def input_bound(obj: Any) -> int:
    """Tokens ``obj`` (a message, a block list, a string, tool definitions) cannot exceed as input.

    Its UTF-8 JSON length (no tokenizer yields a token shorter than a byte)
    plus the framing the API may add per message and per block. Exact-as-a-
    bound for text; images and documents are billed by their own rules, which
    their base64 size exceeds for any real file.
    """
    if isinstance(obj, str):
        return len(obj.encode("utf-8", "surrogatepass")) + BLOCK_OVERHEAD_TOKENS  # a lone surrogate: 3 bytes
    n = json_size(obj)
    if n is None:  # e.g. an int too large for orjson
        import json

        n = len(
            json.dumps(obj, separators=(",", ":"), default=str, ensure_ascii=False).encode("utf-8", "surrogatepass")
        )
    return n + _framing(obj)


def bound_and_estimate(obj: Any) -> tuple[int, int]:
    """(:func:`input_bound`, :func:`~agentlab.messages.estimate_tokens`) of ``obj``, from one serialization.

    Both measure the same compact UTF-8 JSON (orjson, the same options), and the engine grows both
    with each message it appends: serialized once, not twice. A string, or a value orjson cannot
    serialize, is measured by the two functions themselves.
    """
    if not isinstance(obj, str) and (n := json_size(obj)) is not None:
        return n + _framing(obj), tokens_for_size(n)
    return input_bound(obj), estimate_tokens(obj)


def _framing(obj: Any) -> int:
    if (type(obj) is dict or isinstance(obj, Mapping)) and "role" in obj:  # (a dict, the usual message, first)
        content = obj.get("content")
        blocks = len(content) if isinstance(content, list) else 1
        return MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS * blocks
    if isinstance(obj, list):
        return sum(_framing(x) for x in obj)
    return BLOCK_OVERHEAD_TOKENS


def request_input_bound(system: str | None, tools: list[dict[str, Any]], messages: Iterable[Any]) -> int:
    """:func:`input_bound` of a whole request, with the hidden tool prompt when tools are offered."""
    total = (input_bound(system) if system else 0) + sum(input_bound(m) for m in messages)
    if tools:
        total += sum(input_bound(t) for t in tools) + TOOL_PROMPT_TOKENS
    return total


def needs_exact_count(
    budget: Budget,
    *,
    spent: float,
    bound_tokens: int,
    input_rate: float,
    output_rate: float,
    max_tokens: int,
    fees: float = 0.0,
) -> bool:
    """Should the hard guard ask the API for the exact input count before this call?

    Only when the provable bound cannot clear the call as asked: its worst
    case at the bound does not fit what is left. Far from the limit the bound
    clears it and no extra request is made; near it, one count per call.
    """
    if budget.max_cost is None or budget.cost_guard != "hard":
        return False
    worst = worst_case_cost(bound_tokens, input_rate, output_rate, max_tokens, fees)
    return worst > budget.max_cost - spent


def guard_input(
    budget: Budget,
    *,
    spent: float,
    estimate: int,
    bound: int,
    billed_by_estimate: bool,
    fees: float | None,
    rates: Callable[[int], tuple[float, float]],
    max_tokens: int,
) -> tuple[int, GuardBasis, bool]:
    """What the guard takes as the next call's input: (tokens, basis, ask the model for an exact count?).

    ``"estimate"``: the running estimate. ``"hard"``: the bound, and a count
    is asked when the bound cannot clear the call (:func:`needs_exact_count`);
    a model that reports no usage is billed at the estimate, so the estimate
    is then exact. Uncapped server-tool fees (``fees is None``) leave only an
    estimate. ``rates(tokens)`` gives (input, output) USD per token.
    """
    if budget.cost_guard != "hard" or fees is None:
        return estimate, "estimated", False
    if billed_by_estimate:
        return estimate, "exact", False
    in_rate, out_rate = rates(bound)
    ask = needs_exact_count(
        budget,
        spent=spent,
        bound_tokens=bound,
        input_rate=in_rate,
        output_rate=out_rate,
        max_tokens=max_tokens,
        fees=fees,
    )
    return bound, "bounded", ask


DEFAULT_SERVER_TOOL_FEES: Mapping[str, float] = {"web_search": WEB_SEARCH_USD}
"""USD per use of the server tools that charge a fee (web search: :data:`agentlab.pricing.WEB_SEARCH_USD`)."""


def server_tool_fees(tools: Iterable[Mapping[str, Any]], per_use: Mapping[str, float]) -> float | None:
    """The most the request's server tools can charge in fees: ``max_uses`` x the fee per use.

    ``per_use`` maps a tool type prefix (``"web_search"``) to USD per use.
    ``None`` when a fee-charging tool has no ``max_uses``: nothing then caps
    its fees, and the guard cannot be hard for that call.
    """
    total = 0.0
    for tool in tools:
        kind = str(tool.get("type") or "")
        fee = next((usd for prefix, usd in per_use.items() if kind.startswith(prefix)), 0.0)
        if fee <= 0:
            continue
        uses = tool.get("max_uses")
        if not is_whole(uses):
            return None
        total += uses * fee
    return total


def check_after_step(budget: Budget, steps: int, spent: float, elapsed: float) -> Stop | None:
    """Has step ``steps`` ended the run? Cost (the sketch's after-the-fact check), deadline, steps."""
    if budget.max_cost is not None and spent > budget.max_cost:
        return Stop(StopReason.BUDGET, f"spent ${spent:.4f} of ${budget.max_cost:.2f} after step {steps}")
    if stop := check_deadline(budget, elapsed, f"after step {steps}"):
        return stop
    if steps_used_up(budget, steps):
        return Stop(StopReason.STEP_LIMIT, f"used all {budget.max_steps} steps without a final answer")
    return None


@dataclass(frozen=True, slots=True)
class GuardReport:
    """What a run's cost guard rested on, for the result and the panel.

    ``calls`` counts guarded calls by basis (exact / bounded / estimated);
    ``input_counts`` the exact counts asked of the model; ``estimate_short``
    the USD by which ``"estimate"`` guesses of the input fell short of the
    bill; ``over`` how far ``spent`` passed ``max_cost`` (0 when it did not).
    """

    mode: CostGuard
    calls: Mapping[str, int]
    input_counts: int = 0
    estimate_short: float = 0.0
    over: float = 0.0

    @property
    def guarantee(self) -> GuardBasis | None:
        """The weakest basis any call was guarded on (``None``: nothing was guarded)."""
        return next((b for b in ("estimated", "bounded", "exact") if self.calls.get(b)), None)

    def note(self) -> str:
        """A sentence for the result and the panel; empty when the guard was exact or bounded throughout."""
        if self.mode == "after" or self.guarantee != "estimated":
            return ""
        over = f"; spent ${self.over:.4f} past max_cost" if self.over > 0 else "; spend stayed within max_cost"
        return f"cost guard was an estimate: input estimates fell ${self.estimate_short:.4f} short of the bill{over}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "calls": dict(self.calls),
            "input_counts": self.input_counts,
            "estimate_short": self.estimate_short,
            "over": self.over,
            "guarantee": self.guarantee,
        }

"""The cost guard across a run (:class:`InputTracker`): the next request's input, the exact count, and the one check.

:func:`agentlab.budget.check_call` is the whole pre-call rule, pure: given the budget, what
was spent, what the guard knows of the next request's input (a running
estimate, a bound it cannot exceed, an exact count when one was asked) and
the call's rates (:meth:`agentlab.pricing.Prices.worst_rates`: tier, cache
writes, fast mode, geography, compaction, fallback models), it returns a
:class:`GuardCheck`: the basis, the input bound, the tokens priced, the worst
case in dollars, whether an exact count was used, the ``max_tokens`` allowed
or the stop, and a sentence. The engine (through :class:`InputTracker`, which
keeps the estimate and bound across steps and asks the model for a count) and
the what-if replay (:func:`agentlab.analysis.budget_whatif`) call the same
function, so they cannot disagree (it lives in :mod:`agentlab.budget`, which
both may import). Here: :class:`InputTracker` (the engine's state between
checks) and :func:`tool_fees` (server-tool and advisor worst cases).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .._checks import is_whole
from ..budget import (
    DEFAULT_SERVER_TOOL_FEES,
    Budget,
    GuardCheck,
    GuardReport,
    Rates,
    Stop,
    bound_and_estimate,
    check_call,
    input_bound,
    request_input_bound,
    server_tool_fees,
)
from ..errors import describe
from ..messages import Message, Usage, estimate_tokens
from ..pricing import Prices, RequestTerms, resolve_prices
from ..retry import DeadlineExceeded, RetriesExhausted
from ..vocab import StopReason


def tool_fees(tools: Iterable[Mapping[str, Any]], prices: Prices, *, bound: int, caching: Any) -> float | None:
    """The most the request's server tools can charge on top of its own tokens, or ``None`` if nothing caps it.

    Web search: ``max_uses`` x the fee per use (:func:`agentlab.budget.server_tool_fees`).
    An advisor tool (``advisor_*``) runs sub-inferences billed at its model's rates: at
    most ``max_uses`` passes, each reading at most the request's input and writing at
    most its ``max_tokens``; without both caps (or a known price) nothing bounds it.
    """
    tools = list(tools)
    if not any("type" in t for t in tools):  # custom tools only (the usual case): no fees, nothing to look up
        return 0.0
    table = {
        **DEFAULT_SERVER_TOOL_FEES,
        "web_search": getattr(prices, "web_search", DEFAULT_SERVER_TOOL_FEES["web_search"]),
    }
    fees = server_tool_fees(tools, table)
    for tool in tools:
        if not str(tool.get("type") or "").startswith("advisor_"):
            continue
        uses, out_cap, model = tool.get("max_uses"), tool.get("max_tokens"), tool.get("model")
        advisor = resolve_prices(model, None) if isinstance(model, str) else None
        if (
            fees is None
            or advisor is None
            or not isinstance(uses, int)
            or not isinstance(out_cap, int)
            or not _whole(uses)
            or not _whole(out_cap)
        ):
            return None
        a_in, a_out = advisor.worst_rates(bound, caching)
        fees += uses * (bound * a_in + out_cap * a_out)
    return fees


def _whole(v: object) -> bool:
    return is_whole(v, 0)


class InputTracker:
    """The next request's input as the cost guard sees it, kept incrementally (no history scans)."""

    def __init__(
        self, system: str | None, tools: list[dict[str, Any]], messages: Sequence[Message], *, can_count: bool
    ) -> None:
        self.estimate = (
            estimate_tokens(system or "") + estimate_tokens(tools) + sum(estimate_tokens(m) for m in messages)
        )
        self.bound = request_input_bound(system, tools, messages)
        self.can_count = can_count
        self.billed_by_estimate = False  # the last reply had no usage: the engine bills its own estimate
        self.counts = 0
        self.calls: dict[str, int] = {}
        self.estimate_short = 0.0  # USD the "estimate" guard's input estimates fell short of the bill
        self.last: GuardCheck | None = None  # the last check, for the model_request event
        self.geo: str | None = None  # the inference region the replies report, when the request did not say
        self._fee_free: object = None  # the tool list last found to hold custom tools only (no server-tool fee)
        self._rates: tuple[Any, ...] = (None, None, None, None)  # (prices, caching, terms, their rates by size)
        self._checked_rates: Rates | None = None  # the rates the last check priced the request at (None: no prices)
        self.sums: list[int] | None = None
        """When set to ``[0, 0, 0]``: the input, output and cache-read tokens of every model call the run is billed
        for (each ``model_called`` event's usage), summed as billed. An experiment's row reads them here: a
        subscriber would be called for every one of the run's events to pick those out, and a run that
        does not ask pays one test a call."""

    def reservation(self) -> tuple[int, tuple[float, float], float]:
        """What the shared total is asked to hold for the request the last :meth:`check` allowed: its input
        tokens (that check's, or the estimate if more), their rates, and the worst case that check priced
        (charged if the reply is lost).

        The rates are the request's (the same prices, caching and terms, the reported region included),
        made once per size by :meth:`~agentlab.pricing.Prices.rates_by_size`.
        """
        last = self.last
        tokens = self.estimate
        if last is not None and last.basis and last.input_tokens > tokens:
            tokens = last.input_tokens
        rates = self._checked_rates
        return tokens, rates(tokens) if rates is not None else (0.0, 0.0), last.worst_case if last else 0.0

    def request_fields(self) -> dict[str, Any]:
        """The last check's fields for the ``model_request`` event (and the run's ``last_guard_check``)."""
        return (
            self.last.event_fields()
            if self.last is not None
            else {"input_bound": self.bound, "can_count": self.can_count}
        )

    def terms(self, terms: RequestTerms | None) -> RequestTerms | None:
        """The request's terms, with the inference region replies reported when the request named none."""
        if self.geo is None or (terms is not None and terms.inference_geo is not None):
            return terms
        return replace(terms or RequestTerms(), inference_geo=self.geo)

    def appended(self, message: Message, tokens: int | None = None) -> None:
        """A message joined the history: grow the estimate and the bound."""
        if tokens is None:
            bound, tokens = bound_and_estimate(message)  # one serialization for both
        else:
            bound = input_bound(message)
        self.estimate += tokens
        self.bound += bound

    def billed(self, usage: Usage, estimated: bool, prices: Prices | None, caching: Any) -> None:
        """A reply came back with ``usage`` (``estimated`` when the model reported none)."""
        if (sums := self.sums) is not None:
            sums[0] += usage.input_tokens
            sums[1] += usage.output_tokens
            sums[2] += usage.cache_read_input_tokens
        self.estimate = tokens = usage.context_tokens
        self.billed_by_estimate = estimated
        if usage.inference_geo and usage.inference_geo != "global":
            self.geo = usage.inference_geo
        if estimated:
            return
        self.bound = tokens  # billed exactly: the bound restarts from it
        last = self.last
        short = tokens - (last.input_tokens if last is not None and last.basis else tokens)
        if last is not None and last.basis == "estimated" and short > 0 and prices is not None:
            self.estimate_short += short * prices.worst_rates(tokens, caching)[0]

    def billed_in_part(self, usage: Mapping[str, Any]) -> None:
        """A streamed reply cut short (Stop, the deadline) was billed for the part that arrived (``usage``, its
        event's): it counts in the :attr:`sums`, and nothing else follows it."""
        if (sums := self.sums) is not None:
            sums[0] += usage.get("input_tokens", 0)
            sums[1] += usage.get("output_tokens", 0)
            sums[2] += usage.get("cache_read_input_tokens", 0)

    async def check(
        self,
        budget: Budget,
        *,
        steps: int,
        spent: float,
        prices: Prices | None,
        caching: Any,
        tools: Iterable[dict[str, Any]],
        max_tokens: int,
        count: Callable[[], Awaitable[int]],
        retryable: Callable[[BaseException], bool],
        now: Callable[[], float],
        terms: RequestTerms | None = None,
    ) -> int | Stop:
        """The ``max_tokens`` the next call may use, or why it may not be made (:func:`check_call`)."""
        if self.geo is not None:
            terms = self.terms(terms)
        guarded = prices is not None and budget.max_cost is not None and budget.cost_guard != "after"
        fees: float | None = 0.0
        if guarded and prices is not None and tools is not self._fee_free:
            fees = tool_fees(tools, prices, bound=self.bound, caching=caching)
            if fees == 0.0 and isinstance(tools, list) and not any("type" in t for t in tools):
                self._fee_free = tools  # custom tools only: the same list next step charges no fee either
        self._checked_rates = rates = None if prices is None else self._rates_of(prices, caching, terms)
        result = self._rule(budget, steps, spent, fees, rates, max_tokens)
        error = latency = None
        if result.wants_count and self.can_count:
            t0 = now()
            try:
                counted = await count()
            except DeadlineExceeded as exc:
                self.last = replace(result, count_latency=now() - t0)
                return Stop(StopReason.DEADLINE, f"counting the input of step {steps + 1}: {exc}")
            except Exception as exc:
                last = exc.last if isinstance(exc, RetriesExhausted) else exc
                self.can_count = isinstance(exc, RetriesExhausted) or retryable(exc)
                error, latency = describe(last), now() - t0
                result = replace(result, can_count=self.can_count)
            else:
                latency = now() - t0
                self.counts += 1
                result = self._rule(budget, steps, spent, fees, rates, max_tokens, counted)  # on the exact count
                self.bound = self.estimate = counted
            result = replace(result, count_error=error, count_latency=latency)
        self.last = result
        if result.basis is not None:
            self.calls[result.basis] = self.calls.get(result.basis, 0) + 1
        return result.outcome

    def _rule(
        self,
        budget: Budget,
        steps: int,
        spent: float,
        fees: float | None,
        rates: Rates | None,
        max_tokens: int,
        counted: int | None = None,
    ) -> GuardCheck:
        """:func:`check_call` on what the tracker knows of the next request's input."""
        return check_call(
            budget,
            steps=steps,
            spent=spent,
            estimate=self.estimate,
            bound=self.bound,
            billed_by_estimate=self.billed_by_estimate,
            fees=fees,
            rates=rates,
            max_tokens=max_tokens,
            counted=counted,
            can_count=self.can_count,
        )

    def _rates_of(self, prices: Prices, caching: Any, terms: RequestTerms | None) -> Rates:
        """The request's rates by size (:meth:`~agentlab.pricing.Prices.rates_by_size`), made again whenever the
        prices, the caching or the terms are not the ones they were made for."""
        p, c, t, rates = self._rates
        if p is not prices or c != caching or t is not terms or rates is None:
            rates = prices.rates_by_size(caching, terms)
            self._rates = (prices, caching, terms, rates)
        return rates

    def report(self, budget: Budget, spent: float) -> GuardReport:
        over = max(0.0, spent - budget.max_cost) if budget.max_cost is not None else 0.0
        return GuardReport(budget.cost_guard, dict(self.calls), self.counts, self.estimate_short, over)

"""The cost guard's view of the next request: its estimate, its bound, its exact count.

:mod:`agentlab.budget` holds the rules, as pure functions the engine and the
what-if replay share. This holds what those rules need across steps (the
running estimate and bound of the next request's input, whether the last
reply was billed at the estimate, what each call was guarded on) and runs the
check before a call, asking the model for an exact count when the rules say
so. The engine owns one :class:`InputTracker` per run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from ..budget import (
    DEFAULT_SERVER_TOOL_FEES,
    Budget,
    GuardReport,
    Stop,
    guard_call,
    guard_input,
    input_bound,
    request_input_bound,
    server_tool_fees,
)
from ..errors import describe
from ..messages import Message, Usage, estimate_tokens
from ..pricing import Prices
from ..retry import DeadlineExceeded, RetriesExhausted
from ..vocab import StopReason


class InputTracker:
    """The next request's input as the cost guard sees it, kept incrementally (no history scans)."""

    def __init__(self, system: str | None, tools: list[dict[str, Any]], messages: Sequence[Message], *, can_count: bool) -> None:
        self.estimate = estimate_tokens(system or "") + estimate_tokens(tools) + sum(estimate_tokens(m) for m in messages)
        self.bound = request_input_bound(system, tools, messages)
        self.can_count = can_count
        self.billed_by_estimate = False  # the last reply had no usage: the engine bills its own estimate
        self.counts = 0
        self.calls: dict[str, int] = {}
        self.estimate_short = 0.0  # USD the "estimate" guard's input estimates fell short of the bill
        self.info: dict[str, Any] = {}  # the last check, for the model_request event

    def appended(self, message: Message, tokens: int | None = None) -> None:
        """A message joined the history: grow the estimate and the bound."""
        self.estimate += estimate_tokens(message) if tokens is None else tokens
        self.bound += input_bound(message)

    def billed(self, usage: Usage, estimated: bool, prices: Prices | None, caching: Any) -> None:
        """A reply came back with ``usage`` (``estimated`` when the model reported none)."""
        self.estimate = usage.context_tokens
        self.billed_by_estimate = estimated
        if estimated:
            return
        self.bound = usage.context_tokens  # billed exactly: the bound restarts from it
        short = usage.context_tokens - int(self.info.get("guard_input_tokens", usage.context_tokens))
        if self.info.get("guard_basis") == "estimated" and short > 0 and prices is not None:
            self.estimate_short += short * prices.worst_rates(usage.context_tokens, caching)[0]

    async def check(
        self, budget: Budget, *, steps: int, spent: float, prices: Prices | None, caching: Any,
        tools: Iterable[dict[str, Any]], max_tokens: int, count: Callable[[], Awaitable[int]],
        retryable: Callable[[BaseException], bool], now: Callable[[], float],
    ) -> int | Stop:
        """The ``max_tokens`` the next call may use, or why it may not be made (budget.guard_call)."""
        self.info = {"input_bound": self.bound, "can_count": self.can_count}
        if prices is None or budget.max_cost is None or budget.cost_guard == "after":
            return max_tokens
        table = {**DEFAULT_SERVER_TOOL_FEES, "web_search": getattr(prices, "web_search", DEFAULT_SERVER_TOOL_FEES["web_search"])}
        fees = server_tool_fees(tools, table)
        tokens, basis, ask = guard_input(
            budget, spent=spent, estimate=self.estimate, bound=self.bound, billed_by_estimate=self.billed_by_estimate,
            fees=fees, rates=lambda n: prices.worst_rates(n, caching), max_tokens=max_tokens,
        )
        if ask and self.can_count:
            counted = await self._count(count, retryable, steps, now)
            if isinstance(counted, Stop):
                return counted
            if counted is not None:
                tokens, basis = counted, "exact"
                self.bound = self.estimate = counted
        in_rate, out_rate = prices.worst_rates(tokens, caching)
        self.info.update(guard_basis=basis, guard_input_tokens=tokens, guard_fees=fees)
        self.calls[basis] = self.calls.get(basis, 0) + 1
        return guard_call(
            budget, steps=steps, spent=spent, est_input_tokens=tokens, input_rate=in_rate,
            output_rate=out_rate, max_tokens=max_tokens, fees=fees or 0.0, basis=basis,
        )

    async def _count(
        self, count: Callable[[], Awaitable[int]], retryable: Callable[[BaseException], bool], steps: int,
        now: Callable[[], float],
    ) -> int | Stop | None:
        """The exact count, or ``None`` (the bound decides); an endpoint that refuses is not asked again."""
        t0 = now()
        try:
            n = await count()
        except DeadlineExceeded as exc:
            return Stop(StopReason.DEADLINE, f"counting the input of step {steps + 1}: {exc}")
        except Exception as exc:
            last = exc.last if isinstance(exc, RetriesExhausted) else exc
            self.can_count = isinstance(exc, RetriesExhausted) or retryable(exc)
            self.info["count_error"] = describe(last)
            return None
        finally:
            self.info["count_latency"] = now() - t0
        self.counts += 1
        return n

    def report(self, budget: Budget, spent: float) -> GuardReport:
        over = max(0.0, spent - budget.max_cost) if budget.max_cost is not None else 0.0
        return GuardReport(budget.cost_guard, dict(self.calls), self.counts, self.estimate_short, over)


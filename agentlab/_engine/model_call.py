"""A run's model call: reserve it, send it within the deadline and the retry policy, charge what it cost.

The step (``loop.py``) asks :meth:`ModelCall._send` for the next reply; everything between the
checks before the call and the reply's stop reason happens here: the cost guard and the account's
reservation (``_hold_call``), the ``model_request`` event, the call (streamed fragments shown as
``model_delta``), retries, a reply lost in transit or cut short, and the charge (``_bill``), each
outcome charged by the run's :class:`~agentlab._account.Account` and emitted as one ``model_called``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from .._account import Charge, Hold, How, Refusal, partial_usage
from .._runtime.isolate import Raised, Returned
from .._shorten import shorten
from ..budget import (
    Stop,
)
from ..errors import AgentlabError, FatalError, ModelError, classify, describe, safe_str
from ..messages import (
    Block,
    MalformedReply,
    Reply,
    Usage,
    billed_usage,
    estimate_tokens,
    normalize_reply,
)
from ..models.base import ModelRequest
from ..models.streaming import Fragments, cut_short
from ..pricing import Prices, hard_guard_refusal, served_prices
from ..retry import DeadlineExceeded, RetriesExhausted, backoff, retrying
from ..vocab import EventKind, StopReason
from .calls import bounded
from .parts import RunParts
from .state import Halt


class ModelCall(RunParts):
    """The model-call part of :class:`~agentlab.loop.Run`."""

    def _served_prices(self, served: str | None) -> Prices | None:
        """:func:`~agentlab.pricing.served_prices` for a reply naming ``served``, once per model a run (a lookup)."""
        found = self._served.get(served, _UNSEEN)
        if found is _UNSEEN:  # a model no reply of this run named before
            found = self._served[served] = served_prices(self.prices, self.model.model, served)
        return found

    async def _send(self, held: Hold) -> tuple[Reply, float, float] | Halt:
        """The next step's model call: the reply, its latency and when it came (working seconds, the run's
        ``elapsed`` then), or why the run stops (a failed call charged)."""
        self.steps += 1
        self.phase = "calling model"
        self._announce(held)
        t_call, self._hold, self._lost = self._now(), held, 0.0
        try:
            reply = await self._call_model(t_call)
        except _RetryRefused as exc:  # a reply lost in transit was charged; its retry no longer fits the budget
            return Halt(exc.stop.reason, exc.stop.detail)
        except DeadlineExceeded as exc:
            return Halt(StopReason.DEADLINE, f"model call at step {self.steps}: {exc}")
        except RetriesExhausted as exc:
            detail = f"model call at step {self.steps} failed {exc.attempts} times: {describe(exc.last)}"
            return Halt(StopReason.MODEL_ERROR, detail, exc.last)
        except MalformedReply as exc:  # refused here, but billed by the API
            self._charge_refused(exc, self.clock.now() - t_call)
            return Halt(
                StopReason.MALFORMED_REPLY, f"step {self.steps}: {exc.problem}; raw reply: {_short(exc.raw)}", exc
            )
        except ModelError as exc:  # a reply lost in transit was charged by _call_model already
            return Halt(exc.reason, f"step {self.steps}: {exc.message}", exc)
        except Exception as exc:
            kind = classify(exc, self.policy)
            reason = StopReason.FATAL if kind == "fatal" else StopReason.MODEL_ERROR
            return Halt(reason, f"model call at step {self.steps}: {describe(exc)}", exc)
        at = self.elapsed  # one reading: the reply's latency, and its event's time (_bill)
        return reply, self._now() - t_call, at

    def _bill(self, reply: Reply, max_tokens: int, latency: float, at: float) -> Usage:
        """Charge a reply (its usage, or the same estimate the guard used), keep it, emit ``model_called``.

        ``at``: when the reply came (the reading its latency ended on), the event's ``t``."""
        estimated = reply.usage is None
        usage = reply.usage or Usage(
            input_tokens=self._input.estimate, output_tokens=min(estimate_tokens(reply.content), max_tokens)
        )
        prices = self._served_prices(reply.model)  # a fallback model may have served it
        how: How = "estimate" if estimated else "usage"
        charge = self.account.charge(self._hold, how, prices.cost(usage) if prices else 0.0, usage)
        self.last_usage = usage
        self._last_cost, self._last_latency, self._last_context = (
            charge.cost + self._lost,
            latency,
            reply.context_management,
        )
        self._input.billed(usage, estimated, self.config.prices, self._caps.caches)
        if kept := reply.kept:  # the history stays valid to send back (no empty text at its end)
            self._append({"role": "assistant", "content": kept}, tokens=usage.output_tokens)
        data: dict[str, Any] = {
            "content": reply.content,
            "stop_reason": reply.stop_reason,
            "server_tool_cost": prices.server_tool_cost(usage) if prices else 0.0,
            "request_id": reply.request_id,
            "max_tokens": max_tokens,
            "model": reply.model,
        }
        if reply.stop_details:
            data["stop_details"] = reply.stop_details
        if prices is not self.config.prices:
            data["requested_model"] = self.config.model.model
        if reply.context_management:
            data["context_management"] = reply.context_management
        self._emit_called(charge, latency, data, at)
        return usage

    def _emit_called(self, charge: Charge, latency: float, data: dict[str, Any], at: float | None = None) -> None:
        """The call's ``model_called`` event, one shape for every outcome: what the reply said (``data``), then
        the money (:meth:`~agentlab._account.Charge.fields`) and the latency; at ``at`` (the run's ``elapsed``)."""
        data.update(charge.fields(), latency=latency)
        self._publish(EventKind.MODEL_CALLED, data, self.elapsed if at is None else at)

    def _reply_problem(self, reply: Reply, usage: Usage, max_tokens: int, calls: list[Block]) -> Halt | None:
        """Why the reply ends the run: cut off, refused, window full, an unknown stop reason, bad tool ``calls``."""
        why = reply.stop_reason
        if why in ("end_turn", "stop_sequence", "pause_turn"):
            return None
        if why == "max_tokens":
            lowered = f" (lowered from {self.max_tokens} by the cost guard)" if max_tokens < self.max_tokens else ""
            last = reply.content[-1] if reply.content else {}
            inside = f", inside the input of {last.get('name')} (kept as far as it arrived)" if "input" in last else ""
            return Halt(
                StopReason.MAX_TOKENS,
                f"the reply at step {self.steps} was cut off at max_tokens={max_tokens}{lowered}{inside}",
            )
        if why == "refusal":
            return Halt(StopReason.REFUSAL, f"the model refused at step {self.steps}{reply.stop_note}")
        if why == "model_context_window_exceeded":
            return Halt(
                StopReason.CONTEXT_WINDOW,
                f"the context ({usage.context_tokens} tokens) filled the model's window at step {self.steps}",
            )
        if why != "tool_use":
            return Halt(StopReason.UNEXPECTED_STOP, f"stop_reason={why!r} at step {self.steps}")
        if not calls:
            return Halt(
                StopReason.MALFORMED_REPLY, f"stop_reason 'tool_use' but no tool_use block at step {self.steps}"
            )
        if len(calls) > 1 and len(set(ids := [c["id"] for c in calls])) < len(ids):  # (one call cannot repeat one)
            dup = next(i for i in ids if ids.count(i) > 1)
            return Halt(
                StopReason.MALFORMED_REPLY,
                f"{ids.count(dup)} tool_use blocks share the id {dup!r} at step {self.steps}: "
                "each call needs its own id for its result",
            )
        return None

    def _charge_refused(self, exc: MalformedReply, latency: float) -> None:
        """Charge a reply the gate refused: what its usage says, else (a model that bills) its worst case."""
        data = {"raw": _jsonable(exc.raw), "error": exc.problem}
        usage = billed_usage(exc.raw)
        if usage is not None:
            served = exc.raw.get("model") if isinstance(exc.raw, dict) else None
            prices = self._served_prices(served if isinstance(served, str) else None)
            charge = self.account.charge(self._hold, "usage", prices.cost(usage) if prices else 0.0, usage)
            self._input.billed(usage, False, prices, self._caps.caches)
        else:  # its usage is lost: a model that bills may have billed the worst case; one that does not, nothing
            charge = self.account.charge(self._hold, "lost", self._hold.worst if self._caps.bills else 0.0)
        self._last_cost = charge.cost + self._lost
        return self._emit_called(charge, latency, data)

    async def _hold_call(self, done: int) -> Hold | Stop:
        """The pre-call guard and the account's reservation of the next request (a :class:`Hold`), or a stop.

        ``done`` steps are finished (the wording of a stop). A retry after a reply lost in transit comes here
        too, so the hard guard counts the lost attempt before the retry is sent.
        """
        c = self.config
        if self.budget.cost_guard == "hard" and (self.budget.max_cost is not None or self.account.shared):
            if refusal := hard_guard_refusal(self._caps.request_terms):
                return Stop(StopReason.BUDGET, refusal)
        max_tokens = await self._input.check(  # the pre-call cost guard, on budget.py's rules (it may count)
            self.budget,
            steps=done,
            spent=self.spent,
            prices=c.prices,
            caching=self._caps.caches,
            tools=self._guarded_tools,
            max_tokens=c.max_tokens,
            count=self._count_input,
            retryable=self._retryable,
            now=self._now,
            terms=self._caps.request_terms,
        )
        if isinstance(max_tokens, Stop):
            return max_tokens
        tokens, rates, worst = self._input.reservation()  # at the guard's rates; settled after the call
        held = self.account.reserve(tokens, rates, max_tokens, worst)
        return held.stop() if isinstance(held, Refusal) else held

    def _announce(self, hold: Hold) -> None:
        """The ``model_request`` event: the reservation is in the trace before the call is sent (a resumed
        experiment counts it if no cost follows)."""
        guard = self._input.request_fields()  # (a dict of its own, made for this event)
        if hold.reserved:
            guard["reserved"] = hold.reserved
        data = {"max_tokens": hold.max_tokens, "estimated_input_tokens": self._input.estimate, **guard}
        self._publish(EventKind.MODEL_REQUEST, data, self.elapsed)

    def _charge_lost(self, why: str, latency: float, **extra: Any) -> None:
        """A reply lost in transit (or abandoned in flight) after the API may have billed it: charged at the
        guard's worst case, said so (``why``). No content and no usage: the history gains nothing."""
        charge = self.account.charge(self._hold, "lost", self._hold.worst)
        self._last_cost = self._lost = self._lost + charge.cost
        self._emit_called(charge, latency, {"error": why, **extra})

    def _retryable(self, error: BaseException) -> bool:
        """Whether the policy retries ``error``: a failed exact count (the cost guard's) is asked for again
        at a later check only when it failed this way."""
        return classify(error, self.policy) == "retryable"

    async def _count_input(self) -> int:
        """The next request's exact input tokens (the model's ``count_tokens``), retried like a call."""
        count_tokens = self._caps.count_tokens
        if count_tokens is None:  # the tracker asks only a model that can count (can_count)
            raise TypeError(f"{self.model.model} has no count_tokens")
        counted: int = await self._retrying(lambda: count_tokens(self._request(self.max_tokens)), "count_tokens")
        return counted

    async def _call_model(self, t_call: float) -> Reply:
        """The reply, within the deadline and the retry policy, at ``self._hold`` (max_tokens, reservation).

        ``t_call``: when the call began (``_send`` read it). An attempt whose reply was lost after the API
        may have billed it (``maybe_billed``) is charged at its worst case at once; a retry after it is
        guarded and reserved anew (``self._hold`` then changes).
        """
        parts: Fragments | None = None  # the attempt's fragments (none before the first attempt begins)
        lost = sent = False

        async def attempt() -> Reply:  # each fragment is kept, shown as a model_delta to listeners, and obeys Stop
            nonlocal parts, lost, t_call, sent
            if lost:  # the last attempt may have been billed: this one is a new call to the guard and the ledger
                held = await self._hold_call(self.steps - 1)
                if isinstance(held, Stop):
                    raise _RetryRefused(held, self.steps)
                self._hold, lost, t_call = held, False, self.clock.now()
                self._announce(held)
            parts = Fragments(self._delta, self._stopped)
            if self._cancel:  # Stop came before this request was handed over: nothing is sent, nothing billed
                raise asyncio.CancelledError
            sent = True  # from here the request may reach the API (the SDK connects and writes it)
            try:
                raw = await self.config.model.complete(self._request(self._hold.max_tokens, parts))
            except asyncio.CancelledError:  # Stop or the deadline: still in flight (charged below)
                raise
            except BaseException as exc:
                sent = False  # it failed: not in flight any more (and charged here if it may have been billed)
                if isinstance(exc, AgentlabError) and getattr(exc, "maybe_billed", False):
                    self._charge_lost(safe_str(exc), self.clock.now() - t_call)
                    lost = True
                raise
            sent = False  # answered: charged on its usage by the caller
            return normalize_reply(raw)

        try:
            return await self._retrying(attempt, "messages")
        except (asyncio.CancelledError, DeadlineExceeded) as exc:  # a stream cut short: its part is traced and charged
            max_tokens = self._hold.max_tokens
            if parts is not None and (cut := cut_short(parts, self._input.estimate, max_tokens, self.prices)):
                why = StopReason.DEADLINE if isinstance(exc, DeadlineExceeded) else StopReason.CANCELLED
                charge = self.account.charge(self._hold, "partial", cut.pop("cost"), partial_usage(cut["usage"]))
                self._last_cost = charge.cost
                self._input.billed_in_part(cut["usage"])
                self._emit_called(charge, self.clock.now() - t_call, {**cut, "stop_reason": why})
            elif sent and self._caps.bills:
                # Abandoned in flight before any of the reply arrived (a non-streamed call, a stream not yet
                # begun): the API may bill it and nothing says how much, so it costs the worst case reserved
                # for it before it was sent (within max_cost under "hard"). A model that answers locally
                # (offline, scripted, a replayed record) bills nothing: its abandoned call stays at $0.
                why = StopReason.DEADLINE if isinstance(exc, DeadlineExceeded) else StopReason.CANCELLED
                by = "the deadline" if why == StopReason.DEADLINE else "Stop"
                self._charge_lost(
                    f"abandoned by {by} while the request was in flight, before any of the reply arrived: "
                    "the API may have billed it, so it is charged at its worst case",
                    self.clock.now() - t_call,
                    stop_reason=why,
                )
            raise

    def _request(self, max_tokens: int, on_delta: Any = None) -> ModelRequest:
        c = self.config
        return ModelRequest(c.system, self.messages, self._tool_defs, max_tokens, self._time_left(), on_delta)

    def _delta(self, index: int, kind: str, text: str) -> None:
        """A fragment of a streamed reply, shown to listeners as a ``model_delta``."""
        self._emit(EventKind.MODEL_DELTA, index=index, type=kind, text=text)

    def _stopped(self) -> bool:
        """Stop was pressed: a stream in flight is closed at its next fragment."""
        return self._cancel

    async def _retrying(self, call: Callable[[], Any], request: str) -> Any:
        """``call()`` within the deadline, retried by the policy; every retry an event (a count's says so).

        The first attempt is made here; the retry loop (and the callables it takes) only after a failure.
        """
        out = await self._bounded(call)
        if isinstance(out, Raised):
            p, tag = self.policy, {} if request == "messages" else {"request": request}
            out, _ = await retrying(
                lambda: self._bounded(call),
                is_retryable=lambda e: classify(e, p) == "retryable" and not isinstance(e, MalformedReply),
                max_attempts=p.max_attempts,
                wait_for=lambda n, e: backoff(n, p.base_delay, p.max_delay, p.jitter, self.rng),
                sleep=self.clock.sleep,
                time_left=self._time_left,
                on_retry=lambda n, e, w: self._emit(EventKind.MODEL_RETRY, attempt=n, error=describe(e), wait=w, **tag),
                first=out,
            )
            if isinstance(out, Raised):
                raise out.error
        return out.value

    def _bounded(self, call: Callable[[], Any]) -> Coroutine[Any, Any, Returned | Raised]:
        """One attempt at a model request (``call()``) within the time left now: how it ended, as a value."""
        return bounded(
            call,
            is_async=True,
            where="the model",
            time_left=self._time_left(),
            own_timeout=None,
            deadline_s=self.budget.deadline_s,
            trusted=True,
            on_abandon=_nothing,
        )


class _RetryRefused(FatalError):
    """Internal: a reply was lost in transit (and charged), and the budget cannot cover sending it again."""

    def __init__(self, stop: Stop, step: int) -> None:
        detail = f"the reply of step {step} was lost in transit and charged at its worst case; a retry: {stop.detail}"
        super().__init__(detail)
        self.stop = Stop(stop.reason, detail)


def _nothing() -> None:
    """``on_abandon`` for a model call: the adapters honour their cancellation, so nothing is left running."""


def _jsonable(raw: Any) -> Any:
    import json

    try:
        json.dumps(raw)
        return raw
    except (TypeError, ValueError):
        return repr(raw)


def _short(raw: Any, n: int = 300) -> str:
    return shorten(repr(raw), n)


_UNSEEN: Any = object()  # a model no reply of the run named before (Run._served has no entry for it)

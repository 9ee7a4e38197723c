"""The engine: call the model, run the tools it asks for, hand back, repeat.

Read this file top to bottom. ``Run.step()`` is one step: the checks before a
model call (cancelled? steps? deadline? can the budget afford a reply?), the
call, the reply's stop reason, the turn's tools, and the checks after. A check
returns why the run must stop (a ``_Halt``: reason, detail, error) and the
phase applies it in one place, ``_stop``. Tool calls see the run only through
``_CallSide`` (the runner's :class:`~agentlab._engine.calls.CallContext`).
Every fact is emitted as an :class:`~agentlab.events.Event`; traces, the
notebook panel and the CLI subscribe, and none of them is special-cased here.

``run()``/``arun()`` (in :mod:`agentlab._facades`) step until finished: one code path.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import traceback
import warnings
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, TypeVar

from ._account import NO_LEDGER, NOTHING_HELD, Account, Charge, Hold, How, Ledger, Refusal, partial_usage
from ._engine.calls import CallOutcome, CallRunner, bounded, format_error, result_block
from ._engine.config import RunConfig
from ._engine.input_tracker import InputTracker
from ._engine.loopguard import LoopGuard, call_key, nudge_text
from ._engine.scheduling import plan_batches
from ._model_label import model_label
from ._options import CONFIG_NAMES, DEFAULTS, collect, documented
from ._runtime import watchdog
from ._runtime.isolate import Raised, Returned, one_turn
from ._runtime.turns import Turns
from ._shorten import shorten
from ._subruns import ParentLedger, current_call
from .budget import (
    Budget,
    BudgetSnapshot,
    CostGuard,
    Stop,
    check_after_step,
    check_before_call,
    check_deadline,
    time_left,
)
from .clock import Clock, SystemClock, wall_time
from .errors import AgentlabError, FatalError, ModelError, Policy, TraceWriteError, classify, describe, safe_str
from .events import Event, Subscriber, new_event
from .messages import (
    Block,
    MalformedReply,
    Message,
    Reply,
    Usage,
    billed_usage,
    estimate_tokens,
    normalize_reply,
    text_of,
)
from .models.base import Model, ModelRequest, capabilities
from .models.streaming import Fragments, cut_short
from .pricing import Prices, hard_guard_refusal, prices_dict, served_prices
from .results import Done, Result, StepRecord, Stopped
from .retry import DeadlineExceeded, RetriesExhausted, backoff, retrying
from .tools import Tool, result_summary
from .vocab import RESUMABLE, EventKind, Outcome, StopReason

Phase = Literal["ready", "calling model", "running tools", "awaiting tools", "done", "stopped"]


__all__ = ["Phase", "Run"]


_R = TypeVar("_R", Done, Stopped)


class _Halt(NamedTuple):
    """Why the run stops here: a check returns one, and ``Run._stop(*halt)`` applies it."""

    reason: StopReason | str
    detail: str
    error: BaseException | None = None


@documented
class Run:
    """One agent run that you advance yourself: ``await run.step()``.

    Budgets: ``max_steps`` model calls, ``max_cost`` dollars, ``deadline_s``
    seconds of *working* time (time spent inside ``step()``; a run paused
    between steps in a notebook does not age). ``None`` means no limit.

    ``run.config`` holds what was asked for (a frozen :class:`RunConfig`);
    the rest of the run's attributes are what has happened so far.
    """

    def __init__(
        self,
        task: str | Sequence[Message],
        tools: Iterable[Tool | Callable[..., Any]] | dict[str, Any] | None = None,
        *,
        model: Model | str,
        max_steps: int | None = DEFAULTS.max_steps,
        max_cost: float | None = DEFAULTS.max_cost,
        deadline_s: float | None = DEFAULTS.deadline_s,
        cost_guard: CostGuard = DEFAULTS.cost_guard,
        system: str | None = DEFAULTS.system,
        max_tokens: int = DEFAULTS.max_tokens,
        policy: Policy | None = DEFAULTS.policy,
        max_concurrency: int = DEFAULTS.max_concurrency,
        loop_nudge_at: int = DEFAULTS.loop_nudge_at,
        prices: Prices | None = DEFAULTS.prices,
        clock: Clock | None = DEFAULTS.clock,
        rng: random.Random | None = DEFAULTS.rng,
        run_id: str | None = DEFAULTS.run_id,
        subscribers: Iterable[Subscriber] = DEFAULTS.subscribers,
        approve: Any = DEFAULTS.approve,
        approval_stops_clock: bool = DEFAULTS.approval_stops_clock,
        parent: dict[str, Any] | None = None,
        counted_from: float | None = None,
        ledger: Ledger = NO_LEDGER,
    ) -> None:
        # The deadline counts set-up too: from ``counted_from`` (run()/arun() pass the moment
        # they were called, on the same clock) or from now.
        clock = clock or SystemClock()
        since = clock.now() if counted_from is None else counted_from
        # Made inside a tool of a running run: a sub-run, linked to that call, reserving from that run's budget.
        link = current_call() if parent is None else None
        if link is not None:
            parent = link.as_dict()
            ledger = link.parent.sub_run_ledger if ledger is NO_LEDGER else ledger
        given = collect(locals())  # the options as passed (clock: the one made above), once for every entry point
        self.config = c = RunConfig.create(task, tools, model=model, **{k: given[k] for k in CONFIG_NAMES})
        # State: what has happened. The budget is state too: resume() raises it.
        self.budget: Budget = c.budget
        self.messages: list[Message] = list(c.messages)
        self.loop_guard = LoopGuard(nudge_at=c.loop_nudge_at)
        """Repeated calls seen so far (the nudge, then the stop); the cost guard's report is ``result.cost_check``."""
        self.steps = 0
        self.account = Account(c.run_id, ledger)
        """The run's money: spent, model calls, tokens, and the shared total it reserves from."""
        self.phase: Phase = "ready"
        self.result: Result | None = None
        self.pending_calls: list[Block] = []
        self.nudges = 0
        self.last_usage: Usage | None = None
        self.abandoned: list[str] = []  # work left running past a deadline or a cancel (named in the result)
        self._kept: dict[int, Block] = {}  # results of pending_calls that finished before an interruption
        self._keys: list[str] = []  # the loop guard's keys of the turn's calls (pending_calls)
        self._subscribers: list[Subscriber] = list(subscribers)
        self._called = _callees(self._subscribers)  # (subscriber, what calling it calls), remade on each change
        self._link = link  # the tool call of the parent run this is a sub-run of (None: not a sub-run)
        self._sub_runs: ParentLedger | None = None  # what this run's own sub-runs reserve from (made when first asked)
        self._reported = (0.0, 0, 0)  # cost and tokens already reported to the parent
        self._tool_defs = [t.definition() for t in c.tools.values()]
        self._served: dict[str | None, Prices | None] = {}  # prices by the model a reply names (served_prices)
        self._calls = CallRunner(_CallSide(self, approve, approval_stops_clock), c.max_concurrency)
        self._last_cost = self._last_latency = 0.0
        self._hold: Hold = NOTHING_HELD  # the model call's reservation (a retry's, if a reply was lost)
        self._lost = 0.0  # what this step's replies lost in transit were charged (part of the step's cost)
        self._last_context: dict[str, Any] | None = None  # the last reply's context_management
        self._cancel = False
        self._trace_error: TraceWriteError | None = None  # issue 14: set by a failing trace writer
        self._seq = 0
        self._t0: float | None = None  # when the step in flight began (working time: _worked + now - _t0)
        self._step_task: asyncio.Task[Any] | None = None
        self._step_loop: asyncio.AbstractEventLoop | None = None
        self._step_lock = threading.Lock()  # one step at a time, whatever task or thread asks
        self._watch: watchdog.Watch | None = None
        self._turns = Turns()  # when the run's event loop gets a turn (see _tools_phase)
        self._started = False
        self.parent = parent  # where a fork came from: {"run_id", "step"}, written into run_started
        self._caps = capabilities(c.model)  # the model's optional parts, read once
        self._guarded_tools = [*self._tool_defs, *self._caps.server_tools]  # what the guard prices each call
        self._said: Callable[[], list[Block] | None] | None = self._caps.user_turn  # a replay's recorded user turns
        # The next request's input as the cost guard sees it: estimate, bound, exact count.
        self._input = InputTracker(
            c.system, self._tool_defs, self.messages, can_count=self._caps.count_tokens is not None
        )
        self._now = self.clock.now
        self._worked = self._setup_s = max(0.0, self._now() - since)  # working seconds of the steps before

    # ------------------------------------------------- the inputs (config)
    @property
    def model(self) -> Model:
        """The model the run calls."""
        return self.config.model

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The run's tools by name."""
        return self.config.tools

    @property
    def task(self) -> str:
        """What the run was asked (the first user message)."""
        return self.config.task

    @property
    def system(self) -> str | None:
        """The system prompt, if any."""
        return self.config.system

    @property
    def max_tokens(self) -> int:
        """The output limit asked for on each call (the cost guard may lower it near the budget)."""
        return self.config.max_tokens

    @property
    def policy(self) -> Policy:
        """The failure policy: which errors are recoverable, retryable or fatal."""
        return self.config.policy

    @property
    def prices(self) -> Prices | None:
        """The prices the run is charged at (``None``: looked up for the model)."""
        return self.config.prices

    @property
    def clock(self) -> Clock:
        """The clock the deadline and retries use (inject a FakeClock in tests)."""
        return self.config.clock

    @property
    def rng(self) -> random.Random:
        """The run's seeded random source (retry jitter), so an offline run reproduces."""
        return self.config.rng

    @property
    def run_id(self) -> str:
        """The run's id: its trace file's name."""
        return self.config.run_id

    @property
    def guard(self) -> LoopGuard:
        """Deprecated: ``run.loop_guard`` (``result.cost_check`` is the cost guard's report)."""
        warnings.warn("run.guard is now run.loop_guard (the loop guard)", DeprecationWarning, stacklevel=2)
        return self.loop_guard

    @property
    def sub_run_ledger(self) -> ParentLedger:
        """What runs started inside this run's tools reserve from: this run's budget (see :mod:`agentlab._subruns`)."""
        if self._sub_runs is None:
            self._sub_runs = ParentLedger(self, lambda: self.budget.max_cost, self.account.ledger)
        return self._sub_runs

    def __repr__(self) -> str:
        model = model_label(self.model.model, self._caps.name, billed=self._caps.bills)
        return (
            f"<Run {self.run_id} {self.phase} · {model} · {self.input_tokens:,} in / {self.output_tokens:,} out "
            f"tokens · {self.snapshot}>"
        )

    # ----------------------------------------------------------- public state
    @property
    def finished(self) -> bool:
        """Whether the run has ended (its ``result`` is set)."""
        return self.result is not None

    @property
    def elapsed(self) -> float:
        """Working seconds: time spent inside ``step()`` so far."""
        return self._worked if self._t0 is None else self._worked + self._now() - self._t0

    @property
    def spent(self) -> float:
        """Dollars the run has spent on model calls (its sub-runs' included)."""
        return self.account.spent

    @property
    def model_calls(self) -> int:
        """Model calls charged (a reply lost in transit and its retry are two)."""
        return self.account.model_calls

    @property
    def input_tokens(self) -> int:
        """Tokens the run's model calls read, cache included (its sub-runs' once they end)."""
        return self.account.input_tokens

    @property
    def output_tokens(self) -> int:
        """Tokens the run's model calls wrote (its sub-runs' once they end)."""
        return self.account.output_tokens

    @property
    def snapshot(self) -> BudgetSnapshot:
        """The budgets as they stand now: steps, dollars and seconds used of each limit."""
        b = self.budget
        return BudgetSnapshot(self.steps, b.max_steps, self.spent, b.max_cost, self.elapsed, b.deadline_s)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` for every event; returns an unsubscribe function."""
        self._subscribers.append(callback)
        self._called = _callees(self._subscribers)
        return lambda: self._unsubscribe(callback)

    def _unsubscribe(self, callback: Subscriber) -> None:
        if callback in self._subscribers:
            self._subscribers.remove(callback)
            self._called = _callees(self._subscribers)

    def cancel(self) -> None:
        """Stop with "cancelled": between steps at once, and a step in flight is interrupted.

        Safe from any thread (a widget callback, a signal handler, a watchdog):
        the interruption is handed to the loop the step runs on. A model call
        or tool in flight is cancelled (a sync tool's thread is abandoned);
        calls of the turn that had finished keep their results, and a resumed
        run runs only the others.
        """
        self._cancel = True
        task, loop = self._step_task, self._step_loop
        if task is None or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # no running loop here, or the step's loop has closed
            if asyncio.get_running_loop() is loop and asyncio.current_task() is task:
                return  # called from inside the step (a subscriber): it stops at the next check
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._interrupt, task)

    def _interrupt(self, task: asyncio.Task[Any]) -> None:
        if self._cancel and task is self._step_task and not task.done():
            task.cancel()

    def note(self, kind: str, **data: Any) -> None:
        """Emit an event of the caller's own (a panel's "paused", say) to every subscriber."""
        self._emit(kind, **data)

    def resume(
        self,
        *,
        max_steps: int | None | Any = ...,
        max_cost: float | None | Any = ...,
        deadline_s: float | None | Any = ...,
    ) -> None:
        """Reopen a run stopped by a budget (or cancelled), with raised limits."""
        if not isinstance(self.result, Stopped) or self.result.reason not in RESUMABLE:
            raise RuntimeError(
                f"only a run stopped by a budget or cancelled can be resumed; this one is {self.result!r}"
            )
        changes: dict[str, Any] = {
            k: v
            for k, v in (("max_steps", max_steps), ("max_cost", max_cost), ("deadline_s", deadline_s))
            if v is not ...
        }
        self.budget = replace(self.budget, **changes)
        self.result, self._cancel, self.phase, self._trace_error = None, False, "ready", None
        self._emit(EventKind.RESUMED, limits=self._limits())

    async def run(self) -> Result:
        """Step until finished; return ``Done`` or ``Stopped``."""
        while self.result is None:
            await self._advance(False)  # step() without the StepRecord nobody here reads
        return self.result

    # ------------------------------------------------------------- one step
    async def step(self, *, pause_before_tools: bool = False) -> StepRecord:
        """One step: a model call, then that turn's tools (unless paused before them).

        With ``pause_before_tools=True`` a reply that asks for tools returns
        with ``phase == "awaiting tools"`` and the calls in ``pending_calls``;
        the next ``step()`` runs them and ends the step.
        """
        await self._advance(pause_before_tools, hand_back=True)
        return self._record()

    async def advance(self, *, pause_before_tools: bool = False) -> None:
        """One step, exactly as :meth:`step`, without building the :class:`StepRecord` it returns.

        For a driver that follows the run through its events (a subscriber) and the run's attributes
        (``phase``, ``pending_calls``, ``result``) rather than through the record, as the notebook panel
        (:class:`agentlab.Lab`) does: building a record nobody reads is ~10 µs a step of an instant model
        (docs/benchmarks.md, "Panel"). The step, its events, the trace, ``pause_before_tools`` and what
        happens when control comes back to the caller are :meth:`step`'s.
        """
        await self._advance(pause_before_tools, hand_back=True)

    async def _advance(self, pause_before_tools: bool, *, hand_back: bool = False) -> None:
        """One step (see :meth:`step`), the run's state its only output; ``hand_back``: control goes back to the
        caller after it (:meth:`_hand_back`)."""
        if self.result is not None:
            raise RuntimeError(f"run {self.run_id} has finished: {self.result!r}")
        if not self._step_lock.acquire(blocking=False):
            raise RuntimeError(
                f"run {self.run_id} is already in a step (started by another task or thread): "
                "await that step before starting the next"
            )
        self._t0 = self._now()
        self._step_loop = loop = asyncio.get_running_loop()
        self._step_task = asyncio.current_task(loop)
        left = self._time_left()
        self._watch = None if left is None else watchdog.arm(left)
        try:
            if not self._started:
                self._started = True
                self._emit_start()
            if self.pending_calls:
                await self._tools_phase(self.pending_calls)
            else:
                await self._model_phase(pause_before_tools)
            if self.result is None and self.phase != "awaiting tools":
                self._after_step_checks()
            if hand_back and self.result is None:
                self._hand_back()
        except asyncio.CancelledError:
            if self.result is None:
                how = "cancelled" if self._cancel else "interrupted (the task running it was cancelled: Ctrl-C?)"
                self._stop(*self._interrupted(f"{how} during step {self.steps} ({self.phase})"))
            if not self._cancel or self._step_task is None:
                raise  # cancelled from outside: recorded above, then passed on
            self._step_task.uncancel()
        except BaseException as exc:  # a real Ctrl-C, or a bug: the run still ends, and says so
            if self.result is None:
                where = f"during step {self.steps} ({self.phase})"
                if isinstance(exc, KeyboardInterrupt):
                    self._stop(*self._interrupted(f"interrupted by Ctrl-C {where}", exc))
                else:
                    self._stop(StopReason.FATAL, f"{describe(exc)} {where}", exc)
            raise
        finally:
            self._end_step()

    @watchdog.handoff("subscriber")
    def _hand_back(self) -> None:
        """``step()`` ends or pauses and the run goes on: a subscriber that holds events (the trace writer's
        ``flush_run``) writes them now, before control goes back to the caller; one that cannot stops the run
        as a failed trace write does (issue 14). ``run()`` keeps control from step to step: each step's last
        event, ``step_finished``, already put every event on disk (see :mod:`agentlab.trace.writer`)."""
        for callback in self._subscribers:
            if (flush := getattr(callback, "flush_run", None)) is not None:
                try:
                    flush(self.run_id)
                except TraceWriteError as exc:
                    self._trace_failed_by(exc)
                    return self._stop(*self._trace_failed())
        return None

    def _end_step(self) -> None:
        """The step's books: its working time counted, the watchdog disarmed, the next step allowed."""
        if self._t0 is not None:
            self._worked += self._now() - self._t0
        self._t0, self._step_task, self._step_loop = None, None, None
        if self._watch is not None:
            watchdog.disarm(self._watch)
        self._step_lock.release()

    async def _model_phase(self, pause_before_tools: bool) -> None:
        """One model call and what its reply decides.

        Each part returns why the run must stop (a :class:`_Halt`) or what the
        next part needs; the run is stopped in one place, here.
        """
        if halt := self._may_call():  # 1. checks before spending anything: Stop, steps, deadline ...
            return self._stop(*halt)
        held = await self._hold_call(self.steps)  # ... and the cost guard, with the shared total's reservation
        if isinstance(held, Stop):
            return self._stop(held.reason, held.detail)
        answer = await self._send(held)  # 2. the model call (a failed one is charged what it cost)
        if isinstance(answer, _Halt):
            return self._stop(*answer)
        reply, latency, at = answer
        max_tokens = self._hold.max_tokens  # a retry after a lost reply was reserved anew
        usage = self._bill(reply, max_tokens, latency, at)  # 3. what it cost
        calls = reply.tool_calls  # 4. why the model stopped decides what is next
        if halt := self._reply_problem(reply, usage, max_tokens, calls):
            return self._stop(*halt)
        if reply.stop_reason == "pause_turn":
            return None  # the API paused a long turn: send the history back as is
        if reply.stop_reason != "tool_use":  # end_turn, stop_sequence
            if self._said and (said := self._said()):  # a replayed record: the user spoke again, so the run goes on
                self._append({"role": "user", "content": said})
                return self._emit(EventKind.TOOL_RESULTS, content=said)
            empty = "" if reply.content else f"the model ended step {self.steps} with no content"
            return self._finish_done(reply.text, empty, reply.parsed)
        if self._cancel:
            self.pending_calls = calls
            return self._stop(
                *self._interrupted(f"cancelled after the model call of step {self.steps}, before its tools")
            )
        if pause_before_tools:
            self.pending_calls = calls
            self.phase = "awaiting tools"
            return None
        return await self._tools_phase(calls)

    def _may_call(self) -> _Halt | None:
        """Why the next model call may not be made before anything is priced: Stop, or a budget rule (budget.py)
        on steps and time. (The cost guard comes next, :meth:`_hold_call`: it may await a token count.)"""
        if self._cancel:
            return self._interrupted(f"cancelled before step {self.steps + 1}")
        if stop := check_before_call(self.budget, self.steps, self.elapsed):
            return _Halt(stop.reason, stop.detail)
        return None

    async def _send(self, held: Hold) -> tuple[Reply, float, float] | _Halt:
        """The next step's model call: the reply, its latency and when it came (working seconds, the run's
        ``elapsed`` then), or why the run stops (a failed call charged)."""
        self.steps += 1
        self.phase = "calling model"
        self._announce(held)
        t_call, self._hold, self._lost = self._now(), held, 0.0
        try:
            reply = await self._call_model(t_call)
        except _RetryRefused as exc:  # a reply lost in transit was charged; its retry no longer fits the budget
            return _Halt(exc.stop.reason, exc.stop.detail)
        except DeadlineExceeded as exc:
            return _Halt(StopReason.DEADLINE, f"model call at step {self.steps}: {exc}")
        except RetriesExhausted as exc:
            detail = f"model call at step {self.steps} failed {exc.attempts} times: {describe(exc.last)}"
            return _Halt(StopReason.MODEL_ERROR, detail, exc.last)
        except MalformedReply as exc:  # refused here, but billed by the API
            self._charge_refused(exc, self.clock.now() - t_call)
            return _Halt(
                StopReason.MALFORMED_REPLY, f"step {self.steps}: {exc.problem}; raw reply: {_short(exc.raw)}", exc
            )
        except ModelError as exc:  # a reply lost in transit was charged by _call_model already
            return _Halt(exc.reason, f"step {self.steps}: {exc.message}", exc)
        except Exception as exc:
            kind = classify(exc, self.policy)
            reason = StopReason.FATAL if kind == "fatal" else StopReason.MODEL_ERROR
            return _Halt(reason, f"model call at step {self.steps}: {describe(exc)}", exc)
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

    def _reply_problem(self, reply: Reply, usage: Usage, max_tokens: int, calls: list[Block]) -> _Halt | None:
        """Why the reply ends the run: cut off, refused, window full, an unknown stop reason, bad tool ``calls``."""
        why = reply.stop_reason
        if why in ("end_turn", "stop_sequence", "pause_turn"):
            return None
        if why == "max_tokens":
            lowered = f" (lowered from {self.max_tokens} by the cost guard)" if max_tokens < self.max_tokens else ""
            last = reply.content[-1] if reply.content else {}
            inside = f", inside the input of {last.get('name')} (kept as far as it arrived)" if "input" in last else ""
            return _Halt(
                StopReason.MAX_TOKENS,
                f"the reply at step {self.steps} was cut off at max_tokens={max_tokens}{lowered}{inside}",
            )
        if why == "refusal":
            return _Halt(StopReason.REFUSAL, f"the model refused at step {self.steps}{reply.stop_note}")
        if why == "model_context_window_exceeded":
            return _Halt(
                StopReason.CONTEXT_WINDOW,
                f"the context ({usage.context_tokens} tokens) filled the model's window at step {self.steps}",
            )
        if why != "tool_use":
            return _Halt(StopReason.UNEXPECTED_STOP, f"stop_reason={why!r} at step {self.steps}")
        if not calls:
            return _Halt(
                StopReason.MALFORMED_REPLY, f"stop_reason 'tool_use' but no tool_use block at step {self.steps}"
            )
        if len(calls) > 1 and len(set(ids := [c["id"] for c in calls])) < len(ids):  # (one call cannot repeat one)
            dup = next(i for i in ids if ids.count(i) > 1)
            return _Halt(
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
        elif self._caps.bills:
            charge = self.account.charge(self._hold, "lost", self._hold.worst)
        else:
            return self._emit(EventKind.MODEL_CALLED, latency=latency, **data)
        self._last_cost = charge.cost + self._lost
        return self._emit_called(charge, latency, data)

    async def _hold_call(self, done: int) -> Hold | Stop:
        """The pre-call guard and the shared ledger's reservation of the next request: ``(max_tokens, reserved)``.

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

    # ------------------------------------------------------------ the tools
    async def _tools_phase(self, calls: list[Block]) -> None:
        """Run one turn's calls, reads together and writes alone; results in request order."""
        self.phase = "running tools"
        self.pending_calls = calls
        # Tools that answer at once run without a task of their own (_runtime.isolate.run), so without a
        # turn of the event loop here a fast run would never let Stop, Pause or the panel's redraws in: one
        # whenever anything waits on the loop, and at least every POLL_S (_runtime/turns.py).
        if self._turns.due(self._step_loop):
            await one_turn()
        reused = [calls[i]["id"] for i in range(len(calls)) if i in self._kept] if self._kept else []
        results = await self._run_calls(calls)
        if isinstance(results, _Halt):
            return self._stop(*results)
        self.pending_calls, self._kept = [], {}
        if self._sub_runs is not None:
            self._record_sub_runs()
        if self._said is not None:
            results += self._said() or []  # what a replayed record's user added (an interruption)
        self._append({"role": "user", "content": results})
        data: dict[str, Any] = {"content": results, "reused": reused} if reused else {"content": results}
        self._publish(EventKind.TOOL_RESULTS, data, self.elapsed)
        return None

    async def _run_calls(self, calls: list[Block]) -> list[Block] | _Halt:
        """The turn's results in request order, or why the run stops (deadline, Stop, a loop, a fatal call)."""
        if stop := check_deadline(self.budget, self.elapsed, f"at step {self.steps}, before its tools"):
            return _Halt(stop.reason, stop.detail)
        # Calls that finished before an interruption (cancel, deadline, Ctrl-C) keep their results: never run twice.
        kept = self._kept
        results: list[Block | None] = [kept.get(i) for i in range(len(calls))] if kept else [None] * len(calls)
        keys = self._keys = [call_key(c["name"], c["input"]) for c in calls]  # _keep reads them too
        if len(calls) == 1:
            batches: list[list[int]] = [[0]]  # the usual turn: one call, a batch of its own whatever its mode
        else:
            tools = self.config.tools
            batches = plan_batches([tools[c["name"]].mode if c["name"] in tools else "write" for c in calls])
        for batch in batches:
            to_run = []
            for i in batch:
                if results[i] is not None:
                    continue
                if self._cancel:
                    return self._interrupted(f"cancelled during the tools of step {self.steps}")
                call, key = calls[i], keys[i]
                verdict, count = self.loop_guard.check(key)
                if verdict == "stop":
                    return _Halt(
                        StopReason.LOOP_DETECTED,
                        f"{call['name']} was requested {count} times with the same arguments, after a nudge, "
                        f"at step {self.steps}",
                    )
                if verdict == "nudge":
                    results[i] = self._nudge(i, call, key, count)
                    continue
                to_run.append(i)
            for out in await self._calls.batch(calls, to_run, self._keep):
                if out.stop is not None:
                    return _Halt(*out.stop)
                results[out.index] = out.block
        return [r for r in results if r is not None]  # all of them: every call has its result by now

    def _nudge(self, index: int, call: Block, key: str, count: int) -> Block:
        """A repeated call is not run: its result is the last one, with a note that it repeats (the loop guard)."""
        previous, is_error = self.loop_guard.results[key]
        self.nudges += 1
        text = nudge_text(call["name"], previous, count)
        block = self._kept[index] = result_block(call["id"], text, is_error)
        self._emit(EventKind.NUDGED, call_id=call["id"], tool=call["name"], args=call["input"], count=count)
        self._calls.report(call, index, Outcome.NUDGED, 0, text, is_error, self.elapsed)
        return block

    def _keep(self, out: CallOutcome) -> None:
        """A call finished: keep its result at once, so an interrupted step never runs it again."""
        if self._sub_runs is not None:
            self._record_sub_runs()
        block, i = out.block, out.index
        if block is None:
            return
        self._kept[i] = block
        is_error = block.get("is_error", False)
        self.loop_guard.remember(self._keys[i], result_summary(block["content"]), is_error)
        tool = self.config.tools.get(self.pending_calls[i]["name"])
        if tool is not None and tool.mode == "write" and not is_error:
            self.loop_guard.reset()  # a successful write changed the world

    # ------------------------------------------------------- after each step
    def _after_step_checks(self) -> None:
        elapsed = self.elapsed  # one reading: the check and the event speak of the same instant
        if stop := check_after_step(self.budget, self.steps, self.spent, elapsed):
            return self._stop(stop.reason, stop.detail)
        self.phase = "ready"
        self._publish(
            EventKind.STEP_FINISHED, {"spent": self.spent, "elapsed": elapsed, "budget": self._limits()}, elapsed
        )
        return None

    # --------------------------------------------------------------- endings
    def _finish_done(self, text: str, note: str = "", parsed: Any = None) -> None:
        self._record_sub_runs()
        if self._trace_error is not None:  # issue 14: never Done over an incomplete trace
            return self._stop(*self._trace_failed())
        self.result = self._result(Done, text=text, detail=note, parsed=parsed)
        self.phase = "done"
        self._emit_end("done", "done", note, text, None)
        if self._trace_error is not None:  # run_finished itself could not be written: the run ends saying so
            self._stop(*self._trace_failed())
        return None

    def _result(self, kind: type[_R], **how: Any) -> _R:
        """The run's result: what every ending reports (steps, money, tokens, the guard's account), and how it ended."""
        return kind(
            self.run_id,
            self.steps,
            self.spent,
            list(self.messages),
            self.snapshot,
            self.model_calls,
            self._input.report(self.budget, self.spent),
            **self._overrun(),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            **how,
        )

    def _interrupted(self, detail: str, error: BaseException | None = None) -> _Halt:
        """A stop that was asked for (Stop, Ctrl-C, a trace writer that failed) ends the run: say which."""
        if self._trace_error is not None:
            return self._trace_failed()
        return _Halt(StopReason.CANCELLED, detail, error)

    def _trace_failed(self) -> _Halt:
        """Issue 14: a trace that cannot be written stops the run, naming the write that failed."""
        err = self._trace_error
        return _Halt(StopReason.TRACE_WRITE_FAILED, str(err), err)

    def _stop(self, reason: StopReason | str, detail: str, error: BaseException | None = None) -> None:
        self._record_sub_runs()
        self.result = self._result(Stopped, reason=reason, detail=detail, error=error)
        self.phase = "stopped"
        self._emit_end("stopped", reason, detail, self.result.text, error)

    def _overrun(self) -> dict[str, Any]:
        """By how much the deadline was overrun, why (the watchdog's sample), and what was left running."""
        d = self.budget.deadline_s
        over = 0.0 if d is None else max(0.0, self.elapsed - d)
        cause = self._watch.cause if over > 0 and self._watch is not None else ""
        if over > 0 and not cause and d is not None and self._setup_s >= d:
            cause = f"set-up (building the run: imports, tool schemas, prices) took {self._setup_s:.2f}s of the {d:g}s"
        return {"overrun_s": over, "overrun_cause": cause, "abandoned": tuple(self.abandoned)}

    # -------------------------------------------------------------- sub-runs
    def _record_sub_runs(self) -> None:
        """Record the sub-runs that ended (on this run's loop): a ``sub_run`` event each; their tokens count here."""
        if self._sub_runs is None:
            return
        for summary in self._sub_runs.take_finished():
            self.account.add_tokens(summary["input_tokens"], summary["output_tokens"])
            self._emit(EventKind.SUB_RUN, **summary, spent=self.spent)

    def _report_to_parent(self) -> None:
        """A sub-run ended: tell the parent what it cost (what is new since the last report, after a resume)."""
        if self._link is not None:
            ledger = self._link.parent.sub_run_ledger
            self._reported = ledger.ended(self, self._link, self._reported, holds=self.account.ledger is ledger)

    # ------------------------------------------------------------- plumbing
    def _time_left(self) -> float | None:
        """Working seconds before the deadline (``None``: no deadline)."""
        return time_left(self.budget, self.elapsed)

    def _served_prices(self, served: str | None) -> Prices | None:
        """:func:`~agentlab.pricing.served_prices` for a reply naming ``served``, once per model a run (a lookup)."""
        found = self._served.get(served, _UNSEEN)
        if found is _UNSEEN:  # a model no reply of this run named before
            found = self._served[served] = served_prices(self.prices, self.model.model, served)
        return found

    def _append(self, message: Message, tokens: int | None = None) -> None:
        """Grow the history and the next request's token estimate (no rescans)."""
        self.messages.append(message)
        self._input.appended(message, tokens)

    def _limits(self) -> dict[str, Any]:
        b = self.budget
        return {
            "max_steps": b.max_steps,
            "max_cost": b.max_cost,
            "deadline_s": b.deadline_s,
            "cost_guard": b.cost_guard,
        }

    def _record(self) -> StepRecord:
        assistant = next((m for m in reversed(self.messages) if m.get("role") == "assistant"), None)
        content: list[Block] = assistant["content"] if assistant else []
        u = self.last_usage
        return StepRecord(
            step=self.steps,
            stop_reason=self.result.reason if isinstance(self.result, Stopped) else None,
            text=text_of(content),
            tool_calls=[b for b in content if b.get("type") == "tool_use"],
            cost=self._last_cost,
            spent=self.spent,
            usage=u.as_dict() if u else {},
            latency=self._last_latency,
            budget=self.snapshot,
            finished=self.finished,
            context_management=self._last_context,
        )

    def _emit(self, kind: str, **data: Any) -> None:
        """``kind``'s event, with ``data``, at the run's ``elapsed`` now, to every subscriber."""
        if not self._subscribers:
            return None
        if kind == "run_finished":
            self._seq += 1
            event = new_event(kind, self.config.run_id, self.steps, self._seq, self.elapsed, data)
            return self._emit_ending(event, data)
        return self._publish(kind, data, self.elapsed)

    @watchdog.handoff("subscriber")
    def _publish(self, kind: str, data: dict[str, Any], t: float) -> None:
        """The event to every subscriber (:meth:`_emit`'s way for any kind but ``run_finished``), ``data`` as given.

        ``data`` is a dict the caller made for the event, and ``t`` is the reading of the run's
        ``elapsed`` the caller already took for a field of the same event (``tool_finished``'s ``end``,
        ``step_finished``'s ``elapsed``) or for the step's books (``model_called``: when the reply came), made
        with nothing emitted since; each is so a true reading at or after the previous event's ``t``."""
        called = self._called  # (a tuple, made again on each change: one that subscribes or unsubscribes while
        if not called:  # called changes the next event's subscribers, not this one's)
            return None
        self._seq += 1
        event = new_event(kind, self.config.run_id, self.steps, self._seq, t, data)
        interrupted: KeyboardInterrupt | None = None
        for callback in called:
            try:
                callback(event)
            except BaseException as exc:  # noqa: BLE001 - issue 24: a subscriber's SystemExit, CancelledError...
                interrupted = self._subscriber_failed(callback, event, exc, interrupted)
        if interrupted is not None:
            self._interrupted_by_subscriber(interrupted)
        return None

    @watchdog.handoff("subscriber")
    def _emit_ending(self, event: Event, data: dict[str, Any]) -> None:
        """``run_finished`` to every subscriber. Issue 24: a subscriber that blocked on it overran too, and the
        next one (the trace) hears it: ``overrun_s`` and ``elapsed`` are brought up to date before each."""
        interrupted: KeyboardInterrupt | None = None
        for callback in tuple(self._subscribers):
            data.update(self._overrun(), elapsed=self.elapsed)
            try:
                callback(event)
            except BaseException as exc:  # noqa: BLE001 - contained as in _emit
                interrupted = self._subscriber_failed(callback, event, exc, interrupted)
        if self.result is not None:
            over = self._overrun()
            r = self.result
            if (r.overrun_s, r.overrun_cause, r.abandoned) != (
                over["overrun_s"],
                over["overrun_cause"],
                over["abandoned"],
            ):
                self.result = replace(r, **over)  # a subscriber overran the deadline: the result says so too
        if interrupted is not None:
            self._interrupted_by_subscriber(interrupted)

    def _subscriber_failed(
        self, callback: Subscriber, event: Event, exc: BaseException, interrupted: KeyboardInterrupt | None
    ) -> KeyboardInterrupt | None:
        """A subscriber raised. Issue 14: a trace that cannot be written stops the run. A Ctrl-C is kept (the
        other subscribers hear the event first, then the run ends cancelled). Issue 24: anything else
        (SystemExit, GeneratorExit, CancelledError...) is contained, with a warning naming the subscriber."""
        if isinstance(exc, TraceWriteError):
            self._trace_failed_by(exc)
        elif isinstance(exc, KeyboardInterrupt):
            return interrupted or exc
        else:
            warnings.warn(
                f"agentlab: subscriber {safe_str(callback)} failed on {event.kind}:\n{traceback.format_exc()}",
                stacklevel=3,  # the code that emitted the event
            )
        return interrupted

    def _trace_failed_by(self, exc: TraceWriteError) -> None:
        """Issue 14: a trace write failed (the first failure is the one named); the run stops at its next check."""
        self._trace_error, self._cancel = self._trace_error or exc, True

    def _interrupted_by_subscriber(self, interrupted: KeyboardInterrupt) -> None:
        """In the step's own task, step() ends the run cancelled; elsewhere (a call's task) raising would tear
        through the event loop, so it cancels the run instead."""
        with contextlib.suppress(RuntimeError):
            if asyncio.current_task() is self._step_task is not None:
                raise interrupted
        self.cancel()

    def _emit_start(self) -> None:
        self._emit(
            EventKind.RUN_STARTED,
            task=self.task,
            started_at=datetime.fromtimestamp(wall_time(self.clock), UTC).isoformat(),
            model=self.model.model,
            model_name=self._caps.name,
            billed=self._caps.bills,
            system=self.system,
            budget=self._limits(),
            max_tokens=self.max_tokens,
            tools=[
                {"name": t.name, "mode": t.mode, "description": t.description, "input_schema": t.input_schema}
                for t in self.tools.values()
            ],
            prices=None if self.prices is None else prices_dict(self.prices),
            caches=self._caps.caches,
            messages=list(self.messages),  # a copy: the live history keeps growing
            **({"parent": self.parent} if self.parent is not None else {}),
        )

    def _emit_end(self, outcome: str, reason: str, detail: str, text: str, error: BaseException | None) -> None:
        guard = self._input.report(self.budget, self.spent)
        self._emit(
            EventKind.RUN_FINISHED,
            outcome=outcome,
            reason=reason,
            detail=detail,
            text=text,
            steps=self.steps,
            spent=self.spent,
            elapsed=self.elapsed,
            model_calls=self.model_calls,
            nudges=self.nudges,
            error=None if error is None else format_error(error),
            guard=guard.as_dict(),
            guard_note=guard.note(),
            last_guard_check=self._input.request_fields(),  # a check that stopped the run has no model_request
            **self._overrun(),
        )
        self._report_to_parent()


# ------------------------------------------------- what tool calls see of the run
class _CallSide:
    """The run as its tool calls see it (:class:`~agentlab._engine.calls.CallContext`): read live, changed narrowly.

    The runner reads the run's inputs and four live facts, and may change the run
    in three ways only: emit an event, give working time back (an approval wait
    that stops the clock), and name work it left running.
    """

    __slots__ = (
        "_run",
        "approval_stops_clock",
        "approve",
        "clock",
        "elapsed",
        "emit",
        "parent",
        "policy",
        "publish",
        "rng",
        "time_left",
        "tools",
    )

    def __init__(self, run: Run, approve: Any, approval_stops_clock: bool) -> None:
        c = run.config
        self._run = run
        self.tools, self.policy, self.clock, self.rng = c.tools, c.policy, c.clock, c.rng
        self.approve, self.approval_stops_clock = approve, approval_stops_clock
        self.parent: Any = run  # a run started inside a tool is this run's sub-run (see _subruns)
        # The run's own methods, bound (no extra frame on the hot path): an event to its subscribers (with its
        # data as keywords, or as a dict of its own at a time read by the caller), time left.
        self.emit, self.publish, self.time_left = run._emit, run._publish, run._time_left
        self.elapsed: Callable[[], float] = lambda: run.elapsed  # working seconds so far

    def deadline_s(self) -> float | None:
        return self._run.budget.deadline_s

    def step(self) -> int:
        return self._run.steps

    def credit(self, seconds: float) -> None:
        self._run._worked -= seconds

    def abandon(self, what: str) -> None:
        self._run.abandoned.append(what)

    def unrecorded(self) -> BaseException | None:
        return self._run._trace_error


# ---------------------------------------------------------------- helpers
class _RetryRefused(FatalError):
    """Internal: a reply was lost in transit (and charged), and the budget cannot cover sending it again."""

    def __init__(self, stop: Stop, step: int) -> None:
        detail = f"the reply of step {step} was lost in transit and charged at its worst case; a retry: {stop.detail}"
        super().__init__(detail)
        self.stop = Stop(stop.reason, detail)


_UNSEEN: Any = object()  # a model no reply of the run named before (Run._served has no entry for it)


def _callees(subscribers: list[Subscriber]) -> tuple[Subscriber, ...]:
    """The subscribers as they stand: one that subscribes or unsubscribes while an event is being published
    changes the next event's subscribers, not this one's."""
    return tuple(subscribers)


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

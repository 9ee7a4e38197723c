"""The engine: call the model, run the tools it asks for, hand back, repeat.

Read this file top to bottom. ``Run.step()`` is one step in named phases:
**check** (cancelled? steps? deadline?), **request** (the cost guard, the
account's reservation, the call), **account** (what the reply cost),
**decide** (the reply's stop reason), **tools** (the turn's calls), **check**
(cost, deadline, steps). A check returns why the run must stop (a ``Halt``)
and one method, ``_stop``, applies it.

The run's state is here (messages, steps, phase, pending calls, result); what
it was asked is its ``config`` (:class:`~agentlab._engine.config.RunConfig`);
its money is its ``account`` (:class:`~agentlab._account.Account`). The
model call (:mod:`agentlab._engine.model_call`), the events
(:mod:`agentlab._engine.publishing`) and the concurrency machinery
(:mod:`agentlab._engine.stepping`) are parts of their own. Tool calls see the
run only through ``CallSide`` (:mod:`agentlab._engine.call_side`). Every fact
is emitted as an :class:`~agentlab.events.Event`; traces, the notebook panel
and the CLI subscribe, and none of them is special-cased here.

``run()``/``arun()`` (in :mod:`agentlab._facades`) step until finished: one code path.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ._account import NO_LEDGER, NOTHING_HELD, Account, Hold, Ledger
from ._engine.call_side import CallSide
from ._engine.calls import CallOutcome, CallRunner, result_block
from ._engine.config import RunConfig
from ._engine.input_tracker import InputTracker
from ._engine.loopguard import LoopGuard, call_key, nudge_text
from ._engine.model_call import ModelCall
from ._engine.publishing import Publishing, callees
from ._engine.scheduling import plan_batches
from ._engine.state import Halt, Phase
from ._engine.stepping import Stepping
from ._model_label import model_label
from ._options import CONFIG_NAMES, DEFAULTS, collect, documented
from ._runtime.isolate import one_turn
from ._runtime.turns import Turns
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
from .clock import Clock, SystemClock
from .errors import Policy, TraceWriteError, describe
from .events import Subscriber
from .messages import (
    Block,
    Message,
    Usage,
)
from .models.base import Model, capabilities
from .pricing import Prices
from .results import Done, Result, StepRecord, Stopped
from .tools import Tool, result_summary
from .vocab import RESUMABLE, EventKind, Outcome, StopReason

__all__ = ["Phase", "Run"]


_R = TypeVar("_R", Done, Stopped)


@documented
class Run(ModelCall, Publishing):
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
        self._called = callees(self._subscribers)  # the subscribers an event goes to, remade on each change
        self._link = link  # the tool call of the parent run this is a sub-run of (None: not a sub-run)
        self._sub_runs: ParentLedger | None = None  # what this run's own sub-runs reserve from (made when first asked)
        self._reported = (0.0, 0, 0)  # cost and tokens already reported to the parent
        self._tool_defs = [t.definition() for t in c.tools.values()]
        self._served: dict[str | None, Prices | None] = {}  # prices by the model a reply names (served_prices)
        self._calls = CallRunner(CallSide(self, approve, approval_stops_clock), c.max_concurrency)
        self._last_cost = self._last_latency = 0.0
        self._hold: Hold = NOTHING_HELD  # the model call's reservation (a retry's, if a reply was lost)
        self._lost = 0.0  # what this step's replies lost in transit were charged (part of the step's cost)
        self._last_context: dict[str, Any] | None = None  # the last reply's context_management
        self._cancel = False
        self._trace_error: TraceWriteError | None = None  # set by a failing trace writer
        self._seq = 0
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
        self._setup_s = max(0.0, self._now() - since)
        self._stepping = Stepping(self._now, worked=self._setup_s)  # the step in flight, and working time

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
        return self._stepping.elapsed()

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

    def cancel(self) -> None:
        """Stop with "cancelled": between steps at once, and a step in flight is interrupted.

        Safe from any thread (a widget callback, a signal handler, a watchdog):
        the interruption is handed to the loop the step runs on. A model call
        or tool in flight is cancelled (a sync tool's thread is abandoned);
        calls of the turn that had finished keep their results, and a resumed
        run runs only the others.
        """
        self._cancel = True
        self._stepping.interrupt(lambda: self._cancel)

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
        (:class:`agentlab.Lab`) does. The step, its events, the trace, ``pause_before_tools`` and what
        happens when control comes back to the caller are :meth:`step`'s.
        """
        await self._advance(pause_before_tools, hand_back=True)

    async def _advance(self, pause_before_tools: bool, *, hand_back: bool = False) -> None:
        """One step (see :meth:`step`), the run's state its only output; ``hand_back``: control goes back to the
        caller after it (:meth:`_hand_back`)."""
        if self.result is not None:
            raise RuntimeError(f"run {self.run_id} has finished: {self.result!r}")
        self._stepping.begin(self.run_id, self._time_left())
        try:
            if not self._started:
                self._started = True
                self._emit_start()
            if self.pending_calls:  # a step paused before its tools (or interrupted in them) goes on there
                await self._tools_phase(self.pending_calls)
            else:
                await self._model_phase(pause_before_tools)  # check, request, account, decide, tools
            if self.result is None and self.phase != "awaiting tools":
                self._after_step_checks()  # check: cost, deadline, steps
            if hand_back and self.result is None:
                self._hand_back()
        except asyncio.CancelledError:
            if self.result is None:
                how = "cancelled" if self._cancel else "interrupted (the task running it was cancelled: Ctrl-C?)"
                self._stop(*self._interrupted(f"{how} during step {self.steps} ({self.phase})"))
            if not self._cancel or (task := self._stepping.task) is None:
                raise  # cancelled from outside: recorded above, then passed on
            task.uncancel()
        except BaseException as exc:  # a real Ctrl-C, or a bug: the run still ends, and says so
            if self.result is None:
                where = f"during step {self.steps} ({self.phase})"
                if isinstance(exc, KeyboardInterrupt):
                    self._stop(*self._interrupted(f"interrupted by Ctrl-C {where}", exc))
                else:
                    self._stop(StopReason.FATAL, f"{describe(exc)} {where}", exc)
            raise
        finally:
            self._stepping.end()

    async def _model_phase(self, pause_before_tools: bool) -> None:
        """A step's phases up to its tools: check, request, account, decide (then tools, then check again).

        Each phase returns why the run must stop (a :class:`Halt`) or what the
        next needs; the run is stopped in one place, ``_stop``.
        """
        if halt := self._may_call():  # check: Stop, the step limit, the deadline, before anything is spent
            return self._stop(*halt)
        held = await self._hold_call(self.steps)  # request: the cost guard, and the account's reservation ...
        if isinstance(held, Stop):
            return self._stop(held.reason, held.detail)
        answer = await self._send(held)  # ... and the call (one that failed is charged what it may have cost)
        if isinstance(answer, Halt):
            return self._stop(*answer)
        reply, latency, at = answer
        max_tokens = self._hold.max_tokens  # a retry after a lost reply was reserved anew
        usage = self._bill(reply, max_tokens, latency, at)  # account: what the reply cost
        calls = reply.tool_calls  # decide: why the model stopped says what comes next
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

    def _may_call(self) -> Halt | None:
        """Why the next model call may not be made before anything is priced: Stop, or a budget rule (budget.py)
        on steps and time. (The cost guard comes next, :meth:`_hold_call`: it may await a token count.)"""
        if self._cancel:
            return self._interrupted(f"cancelled before step {self.steps + 1}")
        if stop := check_before_call(self.budget, self.steps, self.elapsed):
            return Halt(stop.reason, stop.detail)
        return None

    # ------------------------------------------------------------ the tools
    async def _tools_phase(self, calls: list[Block]) -> None:
        """Run one turn's calls, reads together and writes alone; results in request order."""
        self.phase = "running tools"
        self.pending_calls = calls
        # Tools that answer at once run without a task of their own (_runtime.isolate.run), so without a
        # turn of the event loop here a fast run would never let Stop, Pause or the panel's redraws in: one
        # whenever anything waits on the loop, and at least every POLL_S (_runtime/turns.py).
        if self._turns.due(self._stepping.loop):
            await one_turn()
        reused = [calls[i]["id"] for i in range(len(calls)) if i in self._kept] if self._kept else []
        results = await self._run_calls(calls)
        if isinstance(results, Halt):
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

    async def _run_calls(self, calls: list[Block]) -> list[Block] | Halt:
        """The turn's results in request order, or why the run stops (deadline, Stop, a loop, a fatal call)."""
        if stop := check_deadline(self.budget, self.elapsed, f"at step {self.steps}, before its tools"):
            return Halt(stop.reason, stop.detail)
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
                    return Halt(
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
                    return Halt(*out.stop)
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
        if self._trace_error is not None:  # never Done over an incomplete trace
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

    def _interrupted(self, detail: str, error: BaseException | None = None) -> Halt:
        """A stop that was asked for (Stop, Ctrl-C, a trace writer that failed) ends the run: say which."""
        if self._trace_error is not None:
            return self._trace_failed()
        return Halt(StopReason.CANCELLED, detail, error)

    def _trace_failed(self) -> Halt:
        """A trace that cannot be written stops the run, naming the write that failed."""
        err = self._trace_error
        return Halt(StopReason.TRACE_WRITE_FAILED, str(err), err)

    def _stop(self, reason: StopReason | str, detail: str, error: BaseException | None = None) -> None:
        self._record_sub_runs()
        self.result = self._result(Stopped, reason=reason, detail=detail, error=error)
        self.phase = "stopped"
        self._emit_end("stopped", reason, detail, self.result.text, error)

    def _overrun(self) -> dict[str, Any]:
        """By how much the deadline was overrun, why (the watchdog's sample), and what was left running."""
        d = self.budget.deadline_s
        over = 0.0 if d is None else max(0.0, self.elapsed - d)
        watch = self._stepping.watch
        cause = watch.cause if over > 0 and watch is not None else ""
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

    def _append(self, message: Message, tokens: int | None = None) -> None:
        """Grow the history and the next request's token estimate (no rescans)."""
        self.messages.append(message)
        self._input.appended(message, tokens)

    def _limits(self) -> dict[str, Any]:
        """The budget's limits, as events carry them."""
        return self.budget.as_dict()

"""Running tool calls: validate, limit, retry, time out, classify, report.

The engine (``loop.py``) decides *which* calls run and in what batches; this
module runs them. Each call ends as a :class:`CallOutcome`: either a
``tool_result`` block for the model, or a reason the run must stop (a fatal
error, the deadline). Every failure goes through :func:`errors.classify`,
the one policy table.

A call is four steps, each ending in a value rather than an exception
travelling up: admission (known tool, ``max_calls`` and valid arguments in
:meth:`CallRunner._admit`, then approval), a first :meth:`CallRunner._attempt`
(:func:`bounded`, running the code through
:func:`agentlab._runtime.isolate.run`: ``Returned``, ``Raised`` or
``TimedOut``), more attempts only after a failure
(:meth:`CallRunner._retried`, ``retry.retrying``), and
:meth:`CallRunner._ended` (the outcome for the engine and the
``tool_finished`` event).

The runner sees the run only through a :class:`CallContext`: the tools, the
policy, the clock, a few facts read live (time left, the current step) and
three things it may do (emit an event, give back working time, name abandoned
work). It cannot reach into the run's state, and the engine can be read
without this file.
"""

from __future__ import annotations

import asyncio
import functools
import random
import traceback
from collections.abc import Callable, Coroutine, Mapping
from contextvars import Context
from dataclasses import dataclass
from typing import Any, Protocol

from .._runtime.isolate import Raised, Returned, TimedOut, inline, run
from .._subruns import call_context
from ..approval import Approver, needs_approval
from ..clock import Clock
from ..errors import Escaped, Policy, ToolError, UnknownTool, classify, describe, safe_str
from ..messages import Block
from ..retry import DeadlineExceeded, RetriesExhausted, backoff, retrying
from ..tools import Tool, result_summary
from ..vocab import EventKind, Outcome, StopReason


class CallContext(Protocol):
    """What running a tool call may know of its run, and change, and nothing more.

    The engine hands the runner one object with exactly these members (``loop._CallSide``):
    the run's fixed inputs, four facts read live (working time, time left, the deadline,
    the step), and the three things a call may do to its run: emit an event, give back
    working time (an approval wait that stops the clock), name work it left running.
    """

    tools: Mapping[str, Tool]
    policy: Policy
    clock: Clock
    rng: random.Random
    approve: Any  # who approves writes: a callback, True, None or an approval.Ask
    approval_stops_clock: bool  # an approval wait is not working time (and not bounded)
    parent: Any  # the run, opaque here: a run started inside a tool is its sub-run (see _subruns)

    def emit(self, kind: str, **data: Any) -> None:
        """An event to the run's subscribers."""

    def publish(self, kind: str, data: dict[str, Any], t: float) -> None:
        """An event to the run's subscribers: ``data`` a dict made for it, ``t`` a reading of :meth:`elapsed`
        taken for it with no event emitted since (the call's ``start`` or ``end``)."""

    def elapsed(self) -> float:
        """Working seconds so far (call start/end times)."""

    def time_left(self) -> float | None:
        """Seconds before the deadline; ``None``: no deadline."""

    def deadline_s(self) -> float | None:
        """The limit itself, for messages."""

    def step(self) -> int:
        """The step the calls belong to."""

    def credit(self, seconds: float) -> None:
        """Give seconds back to the run's working time."""

    def abandon(self, what: str) -> None:
        """Name work left running past a deadline or a cancel (the result lists it)."""

    def unrecorded(self) -> BaseException | None:
        """The trace write that failed, if the run's trace can no longer be written (its writer's ``on_error``
        is ``"stop"``): a call made then would leave no record, so it is not made."""


@dataclass(slots=True)
class CallOutcome:
    index: int
    block: Block | None  # the tool_result block; None when the run must stop
    stop: tuple[StopReason, str, BaseException | None] | None = None


CANCELLED_TEXT = "cancelled: another call of this turn stopped the run"


def result_block(call_id: str, text: str | list[Block], is_error: bool) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    if is_error:
        block["is_error"] = True
    return block


def format_error(exc: BaseException) -> dict[str, str]:
    """An exception as trace data: type, message and the full traceback (of the original, if carried)."""
    if isinstance(exc, Escaped):
        exc = exc.original
    return {"type": type(exc).__name__, "message": safe_str(exc), "traceback": "".join(traceback.format_exception(exc))}


async def bounded(
    work: Callable[[], Any],
    *,
    is_async: bool,
    where: str,
    time_left: float | None,
    own_timeout: float | None,
    deadline_s: float | None,
    on_abandon: Callable[[], None],
    trusted: bool = False,
    context: Context | None = None,
    alone: bool = False,
) -> Returned | Raised:
    """One attempt at ``work()`` within the time left and the tool's own timeout; how it ended, as a value.

    The owner of the rule "whose limit passed": the run's deadline ends the
    attempt as :class:`DeadlineExceeded` (the run stops); the tool's own,
    shorter timeout as ``TimeoutError``, which the policy table calls
    retryable. Work that ignores its cancellation is abandoned
    (``on_abandon``), never waited for past the limit. ``trusted`` async code
    (the model adapters) runs in the caller's task instead
    (:func:`~agentlab._runtime.isolate.inline`). Untrusted code runs in
    ``context`` if given (see :func:`~agentlab._subruns.call_context`).
    """
    if time_left is not None and time_left <= 0:
        return Raised(DeadlineExceeded(f"not started: the {deadline_s:g}s deadline had passed"))
    wait = time_left if own_timeout is None else own_timeout if time_left is None else min(time_left, own_timeout)
    if wait is not None:  # the earlier of the two limits (both are > 0 here: the deadline's checked above)
        wait = max(0.0, wait)
    if trusted and is_async:
        out = await inline(work, wait, where)
    else:
        out = await run(
            work,
            is_async=is_async,
            timeout=wait,
            where=where,
            on_abandon=on_abandon,
            context=context,
            alone=alone,
        )
    if not isinstance(out, TimedOut):
        return out
    if time_left is not None and wait is not None and time_left <= wait:
        return Raised(DeadlineExceeded(f"still running when the {deadline_s:g}s deadline passed"))
    return Raised(TimeoutError(f"no answer within its own {own_timeout:g}s timeout"))


class CallRunner:
    """Runs one run's tool calls; remembers per-tool call counts for ``max_calls``."""

    def __init__(self, ctx: CallContext, max_concurrency: int) -> None:
        self.ctx = ctx
        self.sem = asyncio.Semaphore(max_concurrency)
        self.calls_per_tool: dict[str, int] = {}
        self.approver = Approver(
            ctx.approve,
            stops_clock=ctx.approval_stops_clock,
            emit=ctx.emit,
            time_left=ctx.time_left,
            now=ctx.clock.now,
            credit=ctx.credit,
            step=ctx.step,
        )

    async def batch(
        self, calls: list[Block], indices: list[int], on_done: Callable[[CallOutcome], None] = lambda out: None
    ) -> list[CallOutcome]:
        """Run the calls at ``indices`` together; on a fatal outcome cancel the rest.

        ``on_done`` hears of each call the moment it finishes, so a step
        interrupted halfway still knows which calls ran (and keeps their results).
        """
        if len(indices) <= 1:
            outs = []
            for i in indices:
                outs.append(await self.call(calls[i], i, alone=True))
                on_done(outs[-1])
            return outs

        async def one(i: int) -> CallOutcome:
            out = await self._limited(calls[i], i)
            on_done(out)
            return out

        tasks = [asyncio.ensure_future(one(i)) for i in indices]
        pending = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if any(t.result().stop is not None for t in done):
                    break
        finally:  # a stop, or this step itself being cancelled: no sibling runs on
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        stops = [t.result() for t in tasks if not t.cancelled() and t.result().stop is not None]
        return stops or [t.result() for t in tasks]

    async def _limited(self, call: Block, index: int) -> CallOutcome:
        async with self.sem:
            return await self.call(call, index)

    async def call(self, call: Block, index: int, alone: bool = False) -> CallOutcome:
        """Run one call to its end: admitted, attempted (retried by the policy), classified, reported.

        ``alone``: the only call of its batch (a sync tool's answer may then be waited for on its worker)."""
        ctx = self.ctx
        name, call_id = call["name"], call["id"]
        tool = ctx.tools.get(name)
        start = ctx.elapsed()  # the call's start, and its tool_started's time: one reading
        mode = tool.mode if tool else None
        ctx.publish(
            EventKind.TOOL_STARTED,
            {"call_id": call_id, "tool": name, "mode": mode, "args": call["input"], "index": index},
            start,
        )
        if (lost := ctx.unrecorded()) is not None:  # tool_started is not on disk: a call no trace shows is not made
            text = "not run: the run's trace could not be written"
            self.report(call, index, Outcome.CANCELLED, 0, text, True, start)
            return CallOutcome(index, None, (StopReason.TRACE_WRITE_FAILED, str(lost), lost))
        attempts = 0
        try:
            if tool is None:
                known = ", ".join(ctx.tools) or "none"
                msg = f"the model asked for a tool named {name!r}, which is not registered (tools: {known})"
                raise UnknownTool(msg)
            kwargs = self._admit(tool, call)
            if needs_approval(tool, self.approver.all_writes):  # (asked here: most calls need none)
                kwargs = await self.approver(tool, kwargs, call_id)  # a human may say no, or edit
            self.calls_per_tool[tool.name] = self.calls_per_tool.get(tool.name, 0) + 1
            out = await self._attempt(tool, kwargs, call["id"], alone)
            if isinstance(out, Returned):  # the usual call: no retry loop is built
                attempts = 1
            else:
                out, attempts = await self._retried(tool, kwargs, call["id"], alone, out)
        except asyncio.CancelledError:
            self.report(call, index, Outcome.CANCELLED, attempts, CANCELLED_TEXT, True, start)
            raise
        except Exception as exc:  # refused before any attempt: unknown, over max_calls, invalid, not approved
            out = Raised(exc)
        return self._ended(call, index, tool, out, attempts, start)

    def _admit(self, tool: Tool, call: Block) -> dict[str, Any]:
        """The arguments the tool will be called with, if ``max_calls`` lets it be called (raises if not).

        Approval comes after (in :meth:`call`), and the call counts once approved."""
        if tool.max_calls is not None and self.calls_per_tool.get(tool.name, 0) >= tool.max_calls:
            raise ToolError(
                f"{tool.name} may be called at most {tool.max_calls} times in a run, and it has been.",
                hint="answer with what you have, or use another tool.",
            )
        return tool.validate(call["input"])

    def _attempt(
        self, tool: Tool, kwargs: dict[str, Any], call_id: str, alone: bool = False
    ) -> Coroutine[Any, Any, Returned | Raised]:
        """One attempt at the call (to await): the tool run by :func:`bounded`, in a context naming the call.

        Async tools run as their own tasks, sync ones on daemon threads the run can abandon."""
        ctx = self.ctx
        where = f"tool {tool.name}"
        return bounded(
            functools.partial(tool.fn, **kwargs),
            is_async=tool.is_async,
            where=where,
            time_left=ctx.time_left(),
            own_timeout=tool.timeout,
            deadline_s=ctx.deadline_s(),
            on_abandon=lambda: ctx.abandon(
                f"{where} (call {call_id}, still running in its {'task' if tool.is_async else 'thread'})"
            ),
            context=call_context(ctx.parent, ctx.step(), call_id),
            alone=alone,
        )

    async def _retried(
        self,
        tool: Tool,
        kwargs: dict[str, Any],
        call_id: str,
        alone: bool,
        first: Raised,
    ) -> tuple[Returned | Raised, int]:
        """After a first attempt that failed: attempt again while the policy (``retry.retrying``) says so."""
        ctx = self.ctx
        p, r = ctx.policy, tool.retry  # the tool's own retry settings, else the run's policy
        base = r.base_delay if r and r.base_delay is not None else p.base_delay
        cap = r.max_delay if r and r.max_delay is not None else p.max_delay

        async def attempt() -> Returned | Raised:
            return await self._attempt(tool, kwargs, call_id, alone)

        return await retrying(
            attempt,
            first=first,
            is_retryable=lambda e: classify(e, p) == "retryable",
            max_attempts=r.max_attempts if r and r.max_attempts is not None else p.max_attempts,
            wait_for=lambda n, e: backoff(n, base, cap, p.jitter, ctx.rng),
            sleep=ctx.clock.sleep,
            time_left=ctx.time_left,
            on_retry=lambda n, e, w: ctx.emit(
                EventKind.TOOL_RETRY, call_id=call_id, tool=tool.name, attempt=n, error=describe(e), wait=w
            ),
        )

    def _ended(
        self, call: Block, index: int, tool: Tool | None, out: Returned | Raised, attempts: int, start: float
    ) -> CallOutcome:
        """The call's outcome for the engine from how it ended; ``tool_finished`` says the same."""
        ctx, name, call_id = self.ctx, call["name"], call["id"]
        if isinstance(out, Returned):
            assert tool is not None
            try:  # text capped at tool.max_result_chars, or content blocks as given
                content = tool.result_content(out.value)
            except Exception as unshown:
                out = Raised(unshown)
            else:
                outcome = Outcome.OK if attempts == 1 else Outcome.RETRIED
                self.report(call, index, outcome, attempts, result_summary(content), False, start)
                return CallOutcome(index, result_block(call_id, content, False))
        exc = out.error
        if isinstance(exc, DeadlineExceeded):
            self.report(call, index, Outcome.FATAL, attempts, str(exc), True, start)
            return CallOutcome(index, None, (StopReason.DEADLINE, f"tool {name} at step {ctx.step()}: {exc}", None))
        if isinstance(exc, RetriesExhausted):
            text = (
                f"{describe(exc.last)} (gave up after {exc.attempts} attempts). "
                "Next step: try again later or get this from another tool."
            )
            self.report(call, index, Outcome.RECOVERABLE, exc.attempts, text, True, start, exc.last)
            return CallOutcome(index, result_block(call_id, text, True))
        attempts, text = attempts or 1, describe(exc)
        if classify(exc, ctx.policy) == "fatal":
            self.report(call, index, Outcome.FATAL, attempts, text, True, start, exc)
            return CallOutcome(index, None, (StopReason.FATAL, f"{text} (tool {name}, step {ctx.step()})", exc))
        if not isinstance(exc, ToolError):
            text += " Next step: check the arguments, or try another approach."
        self.report(call, index, Outcome.RECOVERABLE, attempts, text, True, start, exc)
        return CallOutcome(index, result_block(call_id, text, True))

    def report(
        self,
        call: Block,
        index: int,
        outcome: Outcome,
        attempts: int,
        text: str,
        is_error: bool,
        start: float,
        error: BaseException | None = None,
    ) -> None:
        """Emit ``tool_finished`` for a call, whatever its outcome (its ``end`` is the event's time: one reading)."""
        ctx = self.ctx
        name = call["name"]
        tool = ctx.tools.get(name)
        end = ctx.elapsed()
        data = {
            "call_id": call["id"],
            "tool": name,
            "mode": tool.mode if tool else None,
            "args": call["input"],
            "index": index,
            "outcome": outcome,
            "attempts": attempts,
            "result": text,
            "is_error": is_error,
            "start": start,
            "end": end,
            "error": None if error is None else format_error(error),
        }
        ctx.publish(EventKind.TOOL_FINISHED, data, end)

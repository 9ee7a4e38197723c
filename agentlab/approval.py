"""A human in the loop: asking before a write runs.

A tool made with ``@tool(mode="write", approve=True)``, or every write of a
run given ``approve=callback``, is shown to someone before it runs. The
answer is one of three:

* approve: the call runs as the model asked;
* deny: the run stops with a fatal :class:`~agentlab.PermissionDenied`. The
  model is never told: a denial handed back is an invitation to find another
  route to the same write (the seed article's point about permissions);
* edit: the call runs with the arguments the human wrote instead (checked
  against the tool's schema like the model's own).

A callback receives an :class:`ApprovalRequest` and returns ``True``
(approve), ``False`` or a string (deny, the string is the reason), or a dict
(the edited arguments); it may be async. Without a callback, a tool that
asks for approval prompts on the terminal (:func:`terminal_prompt`); the
notebook panel (:class:`agentlab.Lab`) supplies its own Approve / Deny
buttons.

Waiting for the answer is working time, bounded by the deadline, unless the
run is made with ``approval_stops_clock=True``: then the wait is neither
bounded nor counted.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .errors import PermissionDenied
from .retry import DeadlineExceeded
from .tools import Tool
from .vocab import EventKind

Answer = bool | str | dict[str, Any]
ApproveCallback = Callable[["ApprovalRequest"], "Answer | Awaitable[Answer]"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One call waiting for a human: which tool, with which arguments."""

    tool: str
    args: dict[str, Any]
    call_id: str
    mode: str
    step: int
    description: str = ""

    def __str__(self) -> str:
        return f"{self.tool}({json.dumps(self.args, ensure_ascii=False, default=str)})"


@dataclass(frozen=True, slots=True)
class Ask:
    """Who answers, and about which calls: every write, or only tools made with ``approve=True``.

    ``Run(approve=callback)`` means ``Ask(callback)``; ``approve=True`` means
    ``Ask(terminal_prompt)``; :class:`agentlab.Lab` passes its panel here.
    """

    prompt: ApproveCallback
    all_writes: bool = True


class ApprovalDenied(PermissionDenied):
    """A human said no to a call. Fatal: the run stops, the model is not told."""


def needs_approval(tool: Tool, all_writes: bool) -> bool:
    """A tool that asks for it always; every write too when the run asks for all writes."""
    return bool(getattr(tool, "approve", False)) or (all_writes and tool.mode == "write")


def interpret(answer: Any, request: ApprovalRequest) -> dict[str, Any]:
    """The arguments to run with, or :class:`ApprovalDenied`; a bad answer is named."""
    if answer is True:
        return dict(request.args)
    if answer is False or answer is None:
        raise ApprovalDenied(f"the call {request} was denied by the approver")
    if isinstance(answer, str):
        raise ApprovalDenied(f"the call {request} was denied by the approver: {answer}")
    if isinstance(answer, dict):
        return dict(answer)
    raise TypeError(
        f"an approval callback must return True (approve), False or a reason string (deny) or a dict "
        f"(edited arguments); it returned {type(answer).__name__}"
    )


def terminal_prompt(request: ApprovalRequest) -> Answer:
    """Ask on the terminal: y(es), n(o) [reason], or e(dit) with new JSON arguments."""
    print(f"\nagentlab: step {request.step} wants to run the write {request}", file=sys.stderr)
    while True:
        line = input("approve? [y]es / [n]o [reason] / [e]dit {json}: ").strip()
        word, _, rest = line.partition(" ")
        word = word.lower()
        if word in ("y", "yes"):
            return True
        if word in ("n", "no"):
            return rest.strip() or False
        if word in ("e", "edit"):
            try:
                edited = json.loads(rest)
            except json.JSONDecodeError as exc:
                print(f"not JSON: {exc}", file=sys.stderr)
                continue
            if isinstance(edited, dict):
                return edited
            print("the arguments must be a JSON object", file=sys.stderr)


class Approver:
    """The engine's one question before a call runs: may it, and with what arguments?

    ``approve`` is the run's option: a callback (asked for every write),
    ``True`` (every write, asked on the terminal), ``None`` (only tools made
    with ``approve=True``, asked on the terminal) or an :class:`Ask`.
    ``time_left`` bounds the wait (the deadline); with ``stops_clock`` the
    wait is unbounded and ``credit(seconds)`` gives it back to the run.
    """

    def __init__(
        self,
        approve: ApproveCallback | bool | None,
        *,
        stops_clock: bool,
        emit: Callable[..., None],
        time_left: Callable[[], float | None],
        now: Callable[[], float],
        credit: Callable[[float], None],
        step: Callable[[], int],
    ) -> None:
        if isinstance(approve, Ask):
            ask = approve
        elif approve is None or isinstance(approve, bool):
            ask = Ask(terminal_prompt, all_writes=bool(approve))
        elif callable(approve):
            ask = Ask(approve)
        else:
            raise TypeError(f"approve must be a callback, True or None, got {type(approve).__name__}")
        self.prompt, self.all_writes = ask.prompt, ask.all_writes
        self.stops_clock = stops_clock
        self.emit, self.time_left, self.now, self.credit, self.step = emit, time_left, now, credit, step

    async def __call__(self, tool: Tool, kwargs: dict[str, Any], call_id: str) -> dict[str, Any]:
        if not needs_approval(tool, self.all_writes):
            return kwargs
        request = ApprovalRequest(tool.name, dict(kwargs), call_id, tool.mode, self.step(), tool.description)
        self.emit(EventKind.APPROVAL_REQUESTED, call_id=call_id, tool=tool.name, args=request.args)
        t0 = self.now()
        try:
            answer = await self._ask(self.prompt, request)
        finally:
            waited = self.now() - t0
            if self.stops_clock:
                self.credit(waited)
        args = interpret_and_report(answer, request, self.emit, waited)
        return tool.validate(args) if args != request.args else kwargs

    async def _ask(self, callback: ApproveCallback, request: ApprovalRequest) -> Any:
        if inspect.iscoroutinefunction(callback):
            work: Awaitable[Any] = callback(request)
        else:
            from ._runtime.isolate import in_thread

            work = in_thread(lambda: callback(request), "the approval callback")
        left = None if self.stops_clock else self.time_left()
        if left is None:
            out = await work
        else:
            try:
                async with asyncio.timeout(max(0.0, left)):
                    out = await work
            except TimeoutError:
                raise DeadlineExceeded(f"still waiting for approval of {request} when the deadline passed") from None
        if inspect.isawaitable(out):
            out = await out
        return out


def interpret_and_report(
    answer: Any, request: ApprovalRequest, emit: Callable[..., None], waited: float
) -> dict[str, Any]:
    try:
        args = interpret(answer, request)
    except ApprovalDenied as exc:
        emit(
            EventKind.APPROVAL_ANSWERED,
            call_id=request.call_id,
            tool=request.tool,
            answer="deny",
            reason=str(exc),
            waited=waited,
        )
        raise
    edited = args != request.args
    emit(
        EventKind.APPROVAL_ANSWERED,
        call_id=request.call_id,
        tool=request.tool,
        answer="edit" if edited else "approve",
        args=args if edited else None,
        waited=waited,
    )
    return args

"""Sub-runs: a run started inside a tool (an agent calling an agent) belongs to the run whose tool started it.

While a tool call runs, a context variable names the run and the call
(:func:`call_context` makes the context each attempt runs in, in a task of
its own or on a worker thread), and it follows the tool into the threads it
starts: a thread pool's workers (``ThreadPoolExecutor``,
``loop.run_in_executor``) and threads of its own. A
:class:`~agentlab.loop.Run` made there links to that parent, the way an
imported Claude Code subagent links to its session
(``parent = {run_id, step, tool_use_id}`` in ``run_started``), and reserves
each model call from the parent through a :class:`ParentLedger`: the
parent's ``max_cost`` is the sub-runs' limit too, and the parent's own
ledger (an experiment's total, a grandparent) is reserved from in turn, so
no total anywhere up the chain is passed. What a sub-run spends is added to
the parent's account (its ``spent``) as it is settled; when the sub-run ends, the parent
records a ``sub_run`` event (its cost and tokens), which the trace frames
fold into the step that started it.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
from collections.abc import Callable
from contextvars import Context, ContextVar, copy_context
from dataclasses import dataclass
from typing import Any

from ._account import Refusal


@dataclass(frozen=True, slots=True)
class Link:
    """The tool call a sub-run was started in."""

    parent: Any  # the parent Run
    step: int
    tool_use_id: str

    def as_dict(self) -> dict[str, Any]:
        """As ``run_started.parent`` (the shape imported Claude Code subagents have)."""
        return {"run_id": self.parent.run_id, "step": self.step, "tool_use_id": self.tool_use_id}


_CALL: ContextVar[tuple[Any, int, str] | None] = ContextVar("agentlab_tool_call", default=None)
"""The tool call running in this context: its run, step and call id (the :class:`Link` is made when asked for)."""


def current_call() -> Link | None:
    """The tool call a run made here belongs to, if any: the one running in this context, else the one that
    started this thread (a thread a tool started itself, which copies no context)."""
    held = _CALL.get()
    if held is None:
        held = getattr(threading.current_thread(), _STARTED_IN, None)
    return None if held is None else Link(*held)


# ------------------------------------------- the link across threads a tool starts
# A context variable does not cross into a thread by itself: ThreadPoolExecutor.submit (which
# loop.run_in_executor calls) and threading.Thread run their code in the new thread's own context.
# A run a tool starts there must still be the tool's sub-run (never free of its budget), so:
# - a function submitted to a thread pool from inside a tool call runs in a copy of the submitter's
#   context (what asyncio.to_thread does), and
# - a thread started from inside a tool call (not a pool's worker, not one of the lab's own workers, which
#   serve many runs) remembers the call it was started in.
# Both apply only inside a tool call: code outside any run is untouched.

_STARTED_IN = "_agentlab_started_in"
_submitting = threading.local()  # set while a pool's submit runs: the threads it starts are the pool's


def _submit_in_context(submit: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(submit)
    def wrapped(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if _CALL.get() is None:
            return submit(self, fn, *args, **kwargs)
        _submitting.on = True
        try:
            return submit(self, copy_context().run, fn, *args, **kwargs)
        finally:
            _submitting.on = False

    wrapped.__agentlab__ = True  # type: ignore[attr-defined]
    return wrapped


def _start_remembering(start: Callable[[threading.Thread], None]) -> Callable[[threading.Thread], None]:
    @functools.wraps(start)
    def wrapped(self: threading.Thread) -> None:
        held = _CALL.get()
        if held is not None and not getattr(_submitting, "on", False) and not self.name.startswith("agentlab-"):
            setattr(self, _STARTED_IN, held)
        start(self)

    wrapped.__agentlab__ = True  # type: ignore[attr-defined]
    return wrapped


_installed = False


def _install() -> None:
    """Carry the tool call across the threads a tool starts (idempotent). Installed when the first tool
    call runs, not when agentlab is imported: a process that never runs a tool keeps the stdlib as it was."""
    global _installed
    pool = concurrent.futures.ThreadPoolExecutor
    if not getattr(pool.submit, "__agentlab__", False):
        pool.submit = _submit_in_context(pool.submit)  # type: ignore[method-assign]
    if not getattr(threading.Thread.start, "__agentlab__", False):
        threading.Thread.start = _start_remembering(threading.Thread.start)  # type: ignore[method-assign,assignment]
    _installed = True


def call_context(parent: Any, step: int, call_id: str) -> Context:
    """A copy of the current context naming the tool call, for one attempt at it to run in.

    The tool's code runs in it whatever runs it (its own task, a worker thread), so what the tool sets stays
    there, and a run the tool starts finds its parent. A context runs on one thread at a time: each attempt
    gets its own.
    """
    if not _installed:
        _install()
    context = copy_context()
    if parent is not None:
        context.run(_CALL.set, (parent, step, call_id))
    return context


class ParentLedger:
    """What a parent's sub-runs reserve from: the parent's ``max_cost``, then the parent's own ledger.

    Implements :class:`agentlab._account.Ledger`. Thread-safe: a sub-run may run
    on a sync tool's thread. ``limit()`` reads the parent's limit when asked
    (``resume()`` may raise it); ``spent`` is the parent's, children included.
    """

    def __init__(self, parent: Any, limit: Callable[[], float | None], outer: Any) -> None:
        self._parent = parent
        self._limit = limit
        self._outer = outer  # the parent's own ledger: an experiment's total, a grandparent's, or unlimited
        self._lock = threading.Lock()
        self._held: dict[str, float] = {}
        self.finished: list[dict[str, Any]] = []  # sub-runs that ended, for the parent to record as events
        self.spent = 0.0  # by sub-runs, settled

    @property
    def parent_id(self) -> str:
        return str(self._parent.run_id)

    @property
    def reserved(self) -> float:
        return sum(self._held.values())

    @property
    def parent_ended(self) -> bool:
        return self._parent.result is not None

    def reserve(self, run_id: str, amount: float, minimum: float) -> float:
        with self._lock:
            if self.parent_ended:  # its cost is final: a sub-run left running (or started late) may not add to it
                return 0.0
            limit = self._limit()
            if limit is not None:
                left = limit - self._parent.spent - self.reserved
                if left < minimum or left <= 0 < amount:
                    return 0.0
                amount = min(amount, left)
            granted: float = self._outer.reserve(self._parent.run_id, amount, minimum)
            if granted > 0:
                self._held[run_id] = self._held.get(run_id, 0.0) + granted
            return granted

    def settle(self, run_id: str, reserved: float, actual: float) -> None:
        with self._lock:
            held = self._held.get(run_id, 0.0) - reserved
            if held > 1e-15:
                self._held[run_id] = held
            else:
                self._held.pop(run_id, None)
            self._outer.settle(self._parent.run_id, reserved, actual)
            self._parent.account.add_sub_run(actual)  # the parent's cost includes its sub-runs'
            self.spent += actual

    def refusal(self, needed: float) -> Refusal:
        """Why a reservation of at least ``needed`` was refused: the parent's budget, or the total above it."""
        limit = self._limit()
        left = None if limit is None else limit - self._parent.spent - self.reserved
        if self.parent_ended or (left is not None and left < needed):
            return Refusal("parent", needed, left, self.parent_id, self.parent_ended)
        explain = getattr(self._outer, "refusal", None)
        return explain(needed) if explain is not None else Refusal("experiment", needed)

    def release(self, run_id: str) -> None:
        """Free what a finished sub-run still holds (a call that failed or was cancelled cost nothing)."""
        with self._lock:
            held = self._held.pop(run_id, 0.0)
            if held > 0:
                self._outer.settle(self._parent.run_id, held, 0.0)

    def ended(self, child: Any, link: Link, reported: tuple[float, int, int], *, holds: bool) -> tuple[float, int, int]:
        """A sub-run finished: free what it still holds and keep its summary until the parent records it
        (on the parent's own loop). ``reported`` is what earlier ends reported (a resumed sub-run ends again);
        returns what has now been reported. ``holds``: the sub-run reserved from this ledger."""
        if holds:
            self.release(child.run_id)
        cost, i, o = reported
        result = child.result
        summary = {
            "run_id": child.run_id,
            "tool_use_id": link.tool_use_id,
            "model": child.model.model,
            "outcome": getattr(result, "outcome", ""),
            "reason": str(getattr(result, "reason", "")),
            "steps": child.steps,
            "cost": child.spent - cost,
            "input_tokens": child.input_tokens - i,
            "output_tokens": child.output_tokens - o,
        }
        with self._lock:
            self.finished.append(summary)
        return child.spent, child.input_tokens, child.output_tokens

    def take_finished(self) -> list[dict[str, Any]]:
        with self._lock:
            out, self.finished = self.finished, []
            return out

"""What a run's tool calls see of it: the runner's :class:`~agentlab._engine.calls.CallContext`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CallSide:
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

    def __init__(self, run: Any, approve: Any, approval_stops_clock: bool) -> None:
        c = run.config
        self._run = run
        self.tools, self.policy, self.clock, self.rng = c.tools, c.policy, c.clock, c.rng
        self.approve, self.approval_stops_clock = approve, approval_stops_clock
        self.parent: Any = run  # a run started inside a tool is this run's sub-run (see _subruns)
        # The run's own methods, bound: an event to its subscribers (with its
        # data as keywords, or as a dict of its own at a time read by the caller), time left.
        self.emit, self.publish, self.time_left = run._emit, run._publish, run._time_left
        self.elapsed: Callable[[], float] = lambda: run.elapsed  # working seconds so far

    def deadline_s(self) -> float | None:
        return self._run.budget.deadline_s

    def step(self) -> int:
        return self._run.steps

    def credit(self, seconds: float) -> None:
        self._run._stepping.worked -= seconds

    def abandon(self, what: str) -> None:
        self._run.abandoned.append(what)

    def unrecorded(self) -> BaseException | None:
        return self._run._trace_error

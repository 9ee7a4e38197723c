"""``run()`` and ``arun()``: a :class:`~agentlab.loop.Run` stepped to the end, with its trace written.

The engine (:mod:`agentlab.loop`) steps one run; these are the two ways of
driving one to its end, from a script or a notebook cell (``run``, through
:mod:`agentlab._runtime.driver`) or from async code (``arun``). They take the run's
options spelled out (see :mod:`agentlab._options`) and add ``trace``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._options import DEFAULTS, collect, documented
from ._runtime.driver import run_to_end
from .budget import CostGuard
from .clock import Clock, SystemClock
from .errors import Policy
from .events import Subscriber
from .loop import Run
from .messages import Message
from .models.base import Model
from .pricing import Prices
from .results import Result
from .tools import Tool

__all__ = ["arun", "run"]


@documented
async def arun(
    task: str | Sequence[Message],
    tools: Iterable[Tool | Callable[..., Any]] | dict[str, Any] | None = None,
    *,
    trace: Any = True,
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
) -> Result:
    """Run to the end on the current event loop (``await`` it in a notebook).

    ``trace`` writes the events to the runs folder (``True``: ``$AGENTLAB_RUNS``
    or ``./runs``; a path; or ``False``). Cancelling the awaiting task records
    the run as ``Stopped("cancelled")`` (trace complete), then passes the
    cancellation on, as asyncio expects. ``model`` is required: a model id
    (Claude; needs ``ANTHROPIC_API_KEY``), ``"offline"``, or a model object.
    """
    r, writer = _prepare(task, tools, trace, model, collect(locals()))
    try:
        return await _to_end(r, writer)
    finally:  # the caller's loop may be closed next, cancelling nothing: close what the run opened on it
        close_pool = getattr(r.model, "close_pool", None)
        if close_pool is not None:
            await close_pool()


@documented
def run(
    task: str | Sequence[Message],
    tools: Iterable[Tool | Callable[..., Any]] | dict[str, Any] | None = None,
    *,
    trace: Any = True,
    reraise_interrupt: bool = False,
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
) -> Result:
    """Run to the end, from a script *or* inside Jupyter (see :mod:`agentlab._runtime.driver`).

    Ctrl-C ends the run as ``Stopped("cancelled")`` with its trace complete,
    and returns that result; ``reraise_interrupt=True`` raises
    ``KeyboardInterrupt`` instead, once the run has recorded its end.
    ``trace`` and ``model`` are as in :func:`arun`.
    """
    r, writer = _prepare(task, tools, trace, model, collect(locals()))
    return run_to_end(_to_end(r, writer), cancel=r.cancel, result=lambda: r.result, reraise_interrupt=reraise_interrupt)


def _prepare(
    task: str | Sequence[Message],
    tools: Any,
    trace: Any,
    model: Model | str,
    options: dict[str, Any],
) -> tuple[Run, Any]:
    """The run and its trace writer; the deadline counts from here (set-up included)."""
    options["clock"] = clock = options.get("clock") or SystemClock()
    since = clock.now()
    subscribers = list(options.pop("subscribers", ()))
    writer = None
    if trace is not False and trace is not None:
        from .trace.writer import TraceWriter

        writer = trace if isinstance(trace, TraceWriter) else TraceWriter(None if trace is True else trace)
        subscribers.append(writer)
    try:
        return Run(task, tools, model=model, subscribers=subscribers, counted_from=since, **options), writer
    except BaseException:
        if writer is not None:
            writer.close()
        raise


async def _to_end(r: Run, writer: Any) -> Result:
    try:
        return await r.run()
    finally:
        if writer is not None:
            writer.close()

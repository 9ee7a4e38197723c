"""The Ray backend: cells as Ray tasks, the total-budget ledger in a Ray actor.

Each cell runs in a worker as an ordinary run on that worker's own event
loop; its model calls reserve from (and settle to) one :class:`LedgerActor`,
so the total holds across every worker and machine. Traces are written by
the workers into the experiment folder (shared storage on a real cluster);
rows come back to the driver, which saves each one as it arrives.

Connect to a cluster with ``ray.init(address="ray://head:10001")`` (or set
``RAY_ADDRESS``) before ``exp.run()``; with no Ray running, a local one starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._account import NO_LEDGER
from ..vocab import StopReason
from ._spend import Spend, trace_spend
from .cells import GRADE_SUFFIX, Cell, CellRunner, not_run_row
from .folder import TRACE_SUFFIX
from .ledger import TotalLedger


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise ImportError("backend='ray' needs Ray: pip install 'agentlab-loop[ray]'") from exc
    return ray


class RemoteLedger:
    """A :class:`agentlab.budget.Ledger` whose bookkeeping lives in a Ray actor (blocking calls, one per model call)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def reserve(self, run_id: str, amount: float, minimum: float) -> float:
        return float(_ray().get(self.actor.reserve.remote(run_id, amount, minimum)))

    def settle(self, run_id: str, reserved: float, actual: float) -> None:
        _ray().get(self.actor.settle.remote(run_id, reserved, actual))

    def release(self, run_id: str) -> None:
        _ray().get(self.actor.release.remote(run_id))


def _cell_task(runner: CellRunner, cell: Cell, actor: Any) -> dict[str, Any]:
    """One cell in a worker, on the same driver as :func:`agentlab.run` (a stubborn tool cannot hold the worker)."""
    from .._runtime.driver import run_to_end

    live: list[Any] = []

    def cancel() -> None:
        for run in live:
            run.cancel()

    return run_to_end(
        runner.run(cell, NO_LEDGER if actor is None else RemoteLedger(actor), before=live.append),
        cancel=cancel,
        result=lambda: None,
    )


async def run_ray(
    cells: list[Cell],
    runner: CellRunner,
    ledger: TotalLedger,
    concurrency: int,
    started: Callable[[Cell], None],
    finished: Callable[[Cell, dict[str, Any]], None],
    exhausted: Callable[[], bool],
    stopping: Callable[[], bool],
    traces: Path | None = None,
) -> None:
    """Submit at most ``concurrency`` cells at a time; the driver's ledger mirrors the actor's at the end."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    # No total: nothing to hold, so no actor round trips (the driver adds up the rows).
    actor: Any = (
        None if ledger.limit is None else ray.remote(num_cpus=0)(TotalLedger).remote(ledger.limit, ledger.spent)
    )
    remote = ray.remote(num_cpus=1, max_retries=0)(_cell_task)
    runner_ref = ray.put(runner)
    pending: dict[Any, Cell] = {}
    queue = list(cells)

    def left_state() -> tuple[float | None, int]:
        _, left, refused = ray.get(actor.state.remote())
        return left, refused

    try:
        while queue or pending:
            while queue and len(pending) < concurrency:
                cell = queue.pop(0)
                if stopping():
                    finished(cell, not_run_row(cell, StopReason.CANCELLED))
                    continue
                if actor is not None:
                    left, refused = left_state()
                    if left is not None and (left <= 0 or refused > 0):
                        finished(cell, not_run_row(cell, StopReason.EXPERIMENT_BUDGET))
                        continue
                started(cell)
                pending[remote.remote(runner_ref, cell, actor)] = cell
            if not pending:
                continue
            ready, _ = await asyncio.to_thread(ray.wait, list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                cell = pending.pop(ref)
                try:
                    row = ray.get(ref)
                except Exception as exc:  # the worker died mid-cell: its trace says what it spent
                    row = lost_worker_row(cell, exc, traces, actor)
                if actor is None:
                    ledger.charge(row.get("cost", 0.0) + row.get("score_cost", 0.0))
                else:
                    ledger.spent = ray.get(actor.state.remote())[0]
                finished(cell, row)
            if stopping():
                for ref in pending:
                    ray.cancel(ref)
    finally:
        if actor is not None:
            ledger.spent = ray.get(actor.state.remote())[0]
            ray.kill(actor)


def lost_worker_row(cell: Cell, exc: BaseException, traces: Path | None, actor: Any) -> dict[str, Any]:
    """The row of a cell whose worker died: cost from its trace, its reservations released as spent.

    Its reason, ``"worker failed"``, is a rerun reason: the next ``run()``
    runs the cell again (this attempt's trace is kept, and still counts).
    """
    spend = Spend()
    if traces is not None:
        spend = trace_spend(traces / f"{cell.run_id}{TRACE_SUFFIX}") + trace_spend(
            traces / f"{cell.run_id}{GRADE_SUFFIX}{TRACE_SUFFIX}"
        )
    if actor is not None:  # a call in flight when the worker died may have been billed: its hold becomes spending
        for rid in (cell.run_id, cell.run_id + GRADE_SUFFIX):
            _ray().get(actor.forfeit.remote(rid))
    note = f"; its trace billed ${spend.billed:.6f}" + (
        f" and held ${spend.in_flight:.6f} for a call in flight" if spend.in_flight else ""
    )
    return {
        **not_run_row(cell, "worker failed"),
        "outcome": "error",
        "cost": spend.total,
        "error": f"the worker running this cell died ({type(exc).__name__}: {exc}){note}",
    }

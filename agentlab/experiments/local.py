"""The local backend: every cell on one event loop, at most ``concurrency`` at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .._account import Ledger
from ..loop import Run
from ..vocab import StopReason
from .cells import Cell, CellRunner, not_run_row


async def run_local(
    cells: list[Cell],
    runner: CellRunner,
    ledger: Ledger,
    concurrency: int,
    started: Callable[[Cell], None],
    finished: Callable[[Cell, dict[str, Any]], None],
    exhausted: Callable[[], bool],
    stopping: Callable[[], bool],
    live: dict[str, Run],
) -> None:
    """Run the cells; each finished cell is reported at once (and so saved at once)."""
    queue = iter(cells)

    async def worker() -> None:
        for cell in queue:
            if stopping():
                finished(cell, not_run_row(cell, StopReason.CANCELLED))
                continue
            if exhausted():
                finished(cell, not_run_row(cell, StopReason.EXPERIMENT_BUDGET))
                continue
            started(cell)

            def track(run: Run, key: str = cell.run_id) -> None:
                live[key] = run

            row = await runner.run(cell, ledger, before=track)
            live.pop(cell.run_id, None)
            finished(cell, row)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(cells)) or 1)))

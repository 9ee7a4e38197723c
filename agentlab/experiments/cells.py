"""One cell of an experiment (task × config × repeat) run as an ordinary :class:`~agentlab.Run`.

Everything here is what a worker needs, local or on Ray: the cell's seed and
run id come from its task, config and repeat (so a rerun gives the same
run), its trace goes to the experiment folder, and whatever goes wrong
becomes the cell's row instead of an exception.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .._account import NO_LEDGER, Ledger
from .._engine.calls import format_error
from ..events import new_event
from ..loop import Run
from ..results import Stopped
from ..trace.writer import TraceWriter
from ..vocab import StopReason
from .folder import keep_attempt
from .grid import RUN_KEYS, Config, describe, is_factory
from .scorers import ModelGraded
from .tasks import Task

GRADE_SUFFIX = "-grade"
"""A cell's grading run is ``<cell run id>-grade``."""

ROW_COLUMNS = [
    "task_id",
    "config",
    "repeat",
    "outcome",
    "reason",
    "steps",
    "cost",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "seconds",
    "score",
    "score_cost",
    "run_id",
    "error",
]


@dataclass(frozen=True)
class Cell:
    """One run to make: a task under a config, the ``repeat``-th time."""

    task: Task
    config: Config
    repeat: int

    # Each computed on first read and kept (a frozen dataclass allows it: the value goes straight into the
    # instance's dict): a cell's run id is read about seven times a run, each a SHA-256 of its key.
    @cached_property
    def key(self) -> str:
        return f"{self.task.id}\x1f{self.config.name}\x1f{self.repeat}"

    @cached_property
    def _digest(self) -> str:
        return hashlib.sha256(self.key.encode("utf-8", "surrogatepass")).hexdigest()

    @cached_property
    def seed(self) -> int:
        """Derived from task, config and repeat: the same cell always gets the same seed."""
        return int(self._digest[:8], 16)

    @cached_property
    def run_id(self) -> str:
        return "x" + self._digest[:14]


SETUP_FAILED = "setup_failed"
"""The one event in the trace of a cell whose run could not be built: ``error`` {type, message, traceback}."""


def one_line(exc: BaseException) -> str:
    """An exception as a row's ``error``: its type and the first line of its message."""
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0]}" if first else type(exc).__name__


def base_row(cell: Cell) -> dict[str, Any]:
    row = {"task_id": cell.task.id, "config": cell.config.name, "repeat": cell.repeat, "run_id": cell.run_id}
    if meta := cell.task.meta:  # (most tasks have none: no comprehension to run)
        row.update({f"task_{k}" if k in ROW_COLUMNS else k: v for k, v in meta.items()})
    return row


def not_run_row(cell: Cell, reason: str, outcome: str = "not run", error: str = "") -> dict[str, Any]:
    """The row of a cell whose run never made a step: it never started (the total ran out, the experiment was
    stopped) or its setup failed (`outcome="error"`, with the error's text)."""
    return {
        **base_row(cell),
        "outcome": outcome,
        "reason": reason,
        "steps": 0,
        "cost": 0.0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "seconds": 0.0,
        "score": None,
        "score_cost": 0.0,
        "error": error,
    }


@dataclass
class CellRunner:
    """Builds and runs one cell. Picklable (Ray ships it to workers) when its parts are.

    ``earlier``: the run ids that had a trace in ``traces`` when the experiment began (the local backend
    lists the folder once, while it holds it: no other process adds a trace, and each cell runs once), so
    a cell with no earlier attempt makes no check on disk; ``None`` (Ray's workers, where a task may be
    retried) checks the disk for each cell.
    """

    tools: Any
    model: Any
    scorer: Callable[..., Any] | None
    traces: Path | None
    earlier: frozenset[str] | None = None
    _split: dict[str, tuple[dict[str, Any], Any, dict[str, Any] | None]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def run_options(self, cell: Cell) -> dict[str, Any]:
        split = self._split.get(cell.config.name)
        if split is None:  # a config's options split once: the run's, the model (or factory), the factory's
            params = dict(cell.config.params)
            model = params.pop("model", self.model)
            keys = {k: params.pop(k) for k in list(params) if k not in RUN_KEYS} if is_factory(model) else None
            split = self._split[cell.config.name] = (params, model, keys)
        params, model, keys = split
        if keys is not None:
            model = model(cell.task, cell.seed, **keys)
        return {**params, "model": model, "rng": random.Random(cell.seed), "run_id": cell.run_id}

    def make_tools(self, task: Task) -> Sequence[Any]:
        return (
            self.tools(task) if callable(self.tools) and not isinstance(self.tools, (list, tuple, dict)) else self.tools
        )

    def _keep_earlier(self, run_id: str) -> None:
        """An unfinished earlier attempt at this cell (and its grading run): kept aside, its spending still
        counts (:meth:`~.folder.Folder.spent`)."""
        assert self.traces is not None
        earlier = self.earlier
        for rid in (run_id, run_id + GRADE_SUFFIX):
            if earlier is None or rid in earlier:
                keep_attempt(self.traces, rid)

    async def run(
        self, cell: Cell, ledger: Ledger = NO_LEDGER, before: Callable[[Run], None] | None = None
    ) -> dict[str, Any]:
        """Run the cell to its end and return its row; never raises for the cell's own trouble."""
        row = base_row(cell)
        writer = TraceWriter(self.traces) if self.traces is not None else None
        tools = None
        try:
            if self.traces is not None and (self.earlier is None or self.earlier):  # (none: nothing to keep aside)
                self._keep_earlier(cell.run_id)
            tools = self.make_tools(cell.task)
            subs: list[Any] = [writer] if writer is not None else []
            run = Run(cell.task.input, tools, subscribers=subs, ledger=ledger, **self.run_options(cell))
            # The row's tokens: the usage of each model call the run is billed for, summed by its cost guard as
            # it bills them (a subscriber would be called for each of the run's events to pick those out).
            used = run._input.sums = [0, 0, 0]
            if before is not None:
                before(run)
            try:
                result = await run.run()
            finally:
                _release_held(ledger, cell.run_id)
        except Exception as exc:  # a broken tool factory, model factory or option: this cell's row says so
            if writer is not None:  # the row gets one line; the traceback goes to the cell's trace
                writer(new_event(SETUP_FAILED, cell.run_id, 0, 0, time.time(), {"error": format_error(exc)}))
                writer.close()
            return not_run_row(cell, "setup failed", outcome="error", error=one_line(exc))
        finally:
            _release(tools)
        score, score_cost, error = None, 0.0, ""
        err = result.error if isinstance(result, Stopped) else None  # (a Done has none)
        if err is not None:
            error = f"{type(err).__name__}: {err}"
        if self.scorer is not None and str(getattr(result, "reason", "")) not in (
            StopReason.EXPERIMENT_BUDGET,
            StopReason.CANCELLED,
        ):
            try:
                ascore = getattr(self.scorer, "ascore", None)
                if ascore is not None:
                    traced = (
                        {"subscribers": [writer]} if writer is not None and isinstance(self.scorer, ModelGraded) else {}
                    )
                    try:  # the grading run is traced too: its spending is in the folder if the process dies
                        score, score_cost = await ascore(
                            result, cell.task, ledger=ledger, run_id=cell.run_id + GRADE_SUFFIX, **traced
                        )
                    finally:
                        _release_held(ledger, cell.run_id + GRADE_SUFFIX)
                else:
                    score = self.scorer(result, cell.task)
            except Exception as exc:
                error = (error + "; " if error else "") + f"scorer failed: {type(exc).__name__}: {exc}"
        if writer is not None:
            writer.close()
        if isinstance(score, bool):
            score = float(score)
        return {
            **row,
            "outcome": result.outcome,
            "reason": str(result.reason),
            "steps": result.steps,
            "cost": result.spent,
            "input_tokens": used[0],
            "output_tokens": used[1],
            "cache_read_tokens": used[2],
            "seconds": result.elapsed,
            "score": score,
            "score_cost": score_cost,
            "error": error,
        }


def _release_held(ledger: Ledger, run_id: str) -> None:
    release = getattr(ledger, "release", None)
    if callable(release):
        release(run_id)


def _release(tools: Any) -> None:
    """Close what a tool factory opened, if it says how (``tools.close()``)."""
    if tools is None or type(tools) in (list, tuple, dict):  # (no close: skip the failed lookup, an exception)
        return
    close = getattr(tools, "close", None)
    if callable(close):
        close()


def config_columns(configs: Sequence[Config]) -> list[str]:
    """Every option that appears in some config: each becomes its own column."""
    cols: list[str] = []
    for c in configs:
        for k in describe(c.params):
            if k not in cols:
                cols.append(k)
    return cols

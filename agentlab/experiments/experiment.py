"""An experiment: tasks × configurations × repeats, run under one hard total budget.

Many runs are one more subscriber level, not a second engine: each cell is
an ordinary :class:`agentlab.Run` with a trace writer and a shared
:class:`~.ledger.TotalLedger`; the experiment schedules them (locally on one
event loop, or on Ray), saves each finished row at once, and reports progress
as its own event stream.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .._checks import whole
from .._runtime.driver import run_to_end
from ..loop import Run
from ..models.base import Model
from ..models.request_rules import check_cell
from ..models.resolve import MissingAPIKey, resolve_model
from ..pricing import resolve_prices
from ..trace.files import check_name
from ..vocab import StopReason
from .cells import Cell, CellRunner, config_columns
from .experiment_result import ExperimentResult
from .folder import Folder, spec_of
from .grid import Config, check_config, describe, factory_keys, is_factory, load_configs
from .ledger import TotalLedger
from .progress import (
    ExperimentEvent,
    ExperimentSubscriber,
    LineProgress,
    ProgressWidget,
    TqdmProgress,
    terminal_progress,
)
from .scorers import BUILT_IN
from .tasks import Task, load_tasks

BACKENDS = ("local", "ray")


class Experiment:
    """A grid of tasks × configs × repeats with one total budget, saved to a folder.

    Args:
        tasks: strings, dicts (``id``, ``input``, optional ``target`` and
            metadata), a DataFrame, or a ``.jsonl`` path.
        configs: :func:`agentlab.grid` output, ``{name: options}``, or a list of option dicts.
        tools: a list of tools shared by every run, or ``tools(task) -> list``
            for fresh state per run.
        model: the model of configs that name none (an id, a model, or a
            factory ``model(task, seed, **options)``; offline factories use
            the seed, so a rerun gives identical rows).
        scorer: ``scorer(result, task) -> float | bool | None``, or a built-in name.
        max_total_cost: dollars all runs together may spend; never exceeded.
        folder: where the manifest, rows and traces go (default ``./experiments``);
            the experiment lives in ``folder / name``.
        backend: ``"local"`` (one event loop) or ``"ray"`` (cells as Ray tasks).
        progress: ``"auto"`` shows a widget in a notebook and a bar on a terminal (stderr is a tty; tqdm when
            installed, else a plain line each second), nothing otherwise; ``True`` / ``"tqdm"`` always a terminal
            bar; ``False`` none.
    """

    def __init__(
        self,
        tasks: Any,
        configs: Any,
        *,
        tools: Any = None,
        model: Model | str | Callable[..., Model] | None = None,
        scorer: Callable[..., Any] | str | None = None,
        repeats: int = 1,
        concurrency: int = 8,
        max_total_cost: float | None = None,
        deadline_s: float | None = None,
        folder: str | Path | None = None,
        name: str | None = None,
        backend: str = "local",
        progress: bool | str = "auto",
        subscribers: Iterable[ExperimentSubscriber] = (),
    ) -> None:
        self.tasks = load_tasks(tasks)
        self.configs = load_configs(configs)
        for c in self.configs:
            check_config(c, model)
            check_cell(c.name, c.params.get("model", model), c.params)  # what the API would refuse, before any cell
        whole("concurrency", concurrency)
        whole("repeats", repeats)
        if max_total_cost is not None and (
            not isinstance(max_total_cost, (int, float)) or math.isnan(max_total_cost) or max_total_cost <= 0
        ):
            raise ValueError(f"max_total_cost must be a number > 0 (or None), got {max_total_cost!r}")
        if deadline_s is not None and (not isinstance(deadline_s, (int, float)) or deadline_s <= 0):
            raise ValueError(f"deadline_s must be a number > 0 (or None), got {deadline_s!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if isinstance(scorer, str):
            if scorer not in BUILT_IN:
                raise ValueError(f"unknown scorer {scorer!r}; built in: {', '.join(BUILT_IN)}")
            scorer = BUILT_IN[scorer]
        if max_total_cost is not None:
            for c in self.configs:
                _check_priced(c, c.params.get("model", model), c.params.get("prices"), self.tasks[0])
        self.model = model
        self.tools = tools
        self.scorer = scorer
        self.repeats = repeats
        self.concurrency = concurrency
        self.max_total_cost = None if max_total_cost is None else float(max_total_cost)
        self.deadline_s = deadline_s
        self.name = "experiment" if name is None else check_name(name, "experiment name")  # stays inside folder=
        self.folder = Folder(Path(folder or "experiments") / self.name)
        self.backend = backend
        self.progress = progress
        self._subscribers: list[ExperimentSubscriber] = list(subscribers)
        self._stop = threading.Event()
        self._live: dict[str, Run] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.ledger: TotalLedger | None = None
        self.spent_before = 0.0
        """What the folder's runs had spent when the last ``run()`` began (counted against ``max_total_cost``)."""

    # ------------------------------------------------------------- the grid
    @property
    def cells(self) -> list[Cell]:
        """Every cell, config-major: the order of the rows (cells run in :attr:`schedule` order)."""
        return [Cell(t, c, r) for c in self.configs for t in self.tasks for r in range(self.repeats)]

    @property
    def schedule(self) -> list[Cell]:
        """The order cells run in: round-robin, every config on a task before the next task.

        A grid cut short (by the total, the deadline or Stop) then leaves
        every config with about as many runs, on the same tasks, so the
        configs can still be compared (``cells`` keeps the rows' order).
        """
        return [Cell(t, c, r) for r in range(self.repeats) for t in self.tasks for c in self.configs]

    def subscribe(self, callback: ExperimentSubscriber) -> Callable[[], None]:
        """Call ``callback(ExperimentEvent)`` for the experiment's events; returns an unsubscribe function."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def stop(self) -> None:
        """Stop every run at its next safe point (thread-safe); finished runs are kept."""
        self._stop.set()
        loop = self._loop
        for r in list(self._live.values()):
            if loop is not None and loop.is_running():
                loop.call_soon_threadsafe(r.cancel)
            else:
                r.cancel()

    def _emit(self, kind: str, **kw: Any) -> None:
        if not self._subscribers:  # (no progress view, no subscriber: no event to build, twice a cell)
            return
        event = ExperimentEvent(kind, **kw)
        for s in list(self._subscribers):
            try:
                s(event)
            except Exception:  # a broken progress view must not break the experiment
                import traceback
                import warnings

                warnings.warn(f"agentlab: experiment subscriber {s!r} failed:\n{traceback.format_exc()}", stacklevel=2)

    # ------------------------------------------------------------- running
    def run(self) -> ExperimentResult:
        """Run every unfinished cell, from a script or inside Jupyter (like :func:`agentlab.run`).

        The same driver as :func:`agentlab.run` (:mod:`agentlab._runtime.driver`): a
        task a run left behind (a tool that ignores its cancellation) cannot
        hold this call, and Ctrl-C (or interrupting the kernel) stops every run
        at its next safe point and returns what the folder holds.
        """
        return run_to_end(self.arun(), cancel=self.stop, result=self.result)

    async def arun(self) -> ExperimentResult:
        """Run every unfinished cell on the current event loop; returns the result of all cells.

        The folder is this process's while it runs: another process (or a
        second run of it here) gets :class:`~.folder.FolderInUse` at once.

        Raises:
            MissingAPIKey: a config's model is a Claude id and no key is set (raised before any cell runs, so a
                grid whose model cannot be called is one error, not a folder of failed rows).
        """
        check_models_callable(self.configs, self.model)  # before the folder is touched or a cell is run
        with self.folder.own():
            return await self._arun()

    async def _arun(self) -> ExperimentResult:
        self._stop.clear()
        self._loop = asyncio.get_running_loop()
        spec = spec_of(self.tasks, self.configs, self.repeats)
        self.folder.open(
            spec,
            name=self.name,
            limits={"max_total_cost": self.max_total_cost, "concurrency": self.concurrency, "backend": self.backend},
        )
        kept = self.folder.finished_rows()
        cells = self.cells
        wanted = {(c.task.id, c.config.name, c.repeat) for c in cells}
        kept = {k: v for k, v in kept.items() if k in wanted}
        todo = [c for c in self.schedule if (c.task.id, c.config.name, c.repeat) not in kept]
        # Everything the folder's runs spent, a call in flight at a crash included (its reservation, from its trace).
        self.spent_before = self.folder.spent(kept).total
        self.ledger = ledger = TotalLedger(self.max_total_cost, self.spent_before)
        self._attach_progress()
        rows: dict[tuple[str, str, int], dict[str, Any]] = dict(kept)
        out = self.folder.appender()
        self._emit(
            "experiment_started",
            spent=ledger.spent,
            data={"cells": len(cells), "skipped": len(kept), "max_total_cost": self.max_total_cost},
        )
        loop = asyncio.get_running_loop()
        deadline = None if self.deadline_s is None else loop.call_later(self.deadline_s, self.stop)

        subscribers = self._subscribers  # (the list itself: one added while the experiment runs hears the rest)

        def started(cell: Cell) -> None:
            if subscribers:
                self._emit("cell_started", cell=cell.key)

        def finished(cell: Cell, row: dict[str, Any]) -> None:
            row = out.write(row)  # redacted, in one unbuffered write: a SIGKILL after this loses nothing
            rows[(cell.task.id, cell.config.name, cell.repeat)] = row
            if subscribers:
                self._emit("cell_finished", cell=cell.key, row=row, spent=self._spent())

        limited = ledger.limit is not None  # (checked before each cell: with no total, nothing runs out)

        def exhausted() -> bool:
            if not limited:
                return False
            left = ledger.left
            return left is not None and (left <= 0 or ledger.refused > 0)

        # The local backend checks for earlier attempts against one listing, taken while the folder is held.
        earlier = None if self.backend == "ray" else self.folder.trace_ids()
        runner = CellRunner(self.tools, self.model, self.scorer, self.folder.traces, earlier)
        try:
            if self.backend == "ray":
                from .ray import run_ray

                await run_ray(
                    todo,
                    runner,
                    ledger,
                    self.concurrency,
                    started,
                    finished,
                    exhausted,
                    self._stop.is_set,
                    self.folder.traces,
                )
            else:
                from .local import run_local

                await run_local(
                    todo, runner, ledger, self.concurrency, started, finished, exhausted, self._stop.is_set, self._live
                )
        except asyncio.CancelledError:
            self.stop()
            raise
        finally:
            if deadline is not None:
                deadline.cancel()
            out.close()
            from ..trace._compact import store_later

            store_later(self.folder.traces)  # the finished runs into the columnar store, off this path
            self._emit("experiment_finished", spent=self._spent())
            self._loop = None
        ordered = [
            rows[(c.task.id, c.config.name, c.repeat)] for c in cells if (c.task.id, c.config.name, c.repeat) in rows
        ]
        return ExperimentResult(ordered, self.configs, self.folder.path, self.max_total_cost)

    def _spent(self) -> float:
        return 0.0 if self.ledger is None else self.ledger.spent

    def _attach_progress(self) -> None:
        if self.progress is False or any(
            isinstance(s, (TqdmProgress, LineProgress, ProgressWidget)) for s in self._subscribers
        ):
            return
        if _in_notebook():
            widget = ProgressWidget(on_stop=self.stop)
            from IPython.display import display

            display(widget)
            self._subscribers.append(widget)
        elif self.progress is True or self.progress == "tqdm" or (self.progress == "auto" and _stderr_is_terminal()):
            self._subscribers.append(terminal_progress())

    def result(self) -> ExperimentResult:
        """What the folder holds now (finished cells only), without running anything."""
        kept = self.folder.finished_rows()
        rows = [
            kept[(c.task.id, c.config.name, c.repeat)]
            for c in self.cells
            if (c.task.id, c.config.name, c.repeat) in kept
        ]
        return ExperimentResult(rows, self.configs, self.folder.path, self.max_total_cost)

    def __repr__(self) -> str:
        return (
            f"<Experiment {self.name}: {len(self.tasks)} tasks × {len(self.configs)} configs × {self.repeats} "
            f"= {len(self.cells)} runs; total {'∞' if self.max_total_cost is None else f'${self.max_total_cost:.2f}'}>"
        )


def check_models_callable(configs: Iterable[Config], default: Any) -> None:
    """Every config's model id can be called here: one clear error naming the configs, before the first cell.

    A model id is resolved as a run would resolve it (:func:`~agentlab.models.resolve.resolve_model`), once per
    id; model objects and factories are the caller's and are not built here.
    """
    users: dict[str, list[str]] = {}
    for c in configs:
        spec = c.params.get("model", default)
        if isinstance(spec, str):
            users.setdefault(spec, []).append(c.name)
    for spec, names in users.items():
        try:
            resolve_model(spec)
        except (MissingAPIKey, ValueError) as exc:
            which = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            raise type(exc)(f"config {which}: {exc} No cell was run.") from None


def _check_priced(config: Config, model: Any, prices: Any, task: Task) -> None:
    if model is None or prices is not None:
        return
    if is_factory(model):  # build one (offline factories are cheap) to learn which model it prices as
        model = model(task, 0, **{k: v for k, v in config.params.items() if k in factory_keys(model)})
    model_id = model if isinstance(model, str) else getattr(model, "model", None)
    if not isinstance(model_id, str) or resolve_prices(model_id, None) is None:
        raise ValueError(
            f"config {config.name!r}: max_total_cost is set but model {model_id!r} has no known price; "
            "pass prices=agentlab.Prices(...) in the config or drop max_total_cost"
        )


def _stderr_is_terminal() -> bool:
    import sys

    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty is not None and isatty())


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


__all__ = ["Experiment", "config_columns", "describe", "StopReason"]

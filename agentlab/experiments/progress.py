"""Progress of an experiment: one event stream, and two subscribers (tqdm, notebook widget).

The experiment emits an :class:`ExperimentEvent` when it starts, when a cell
starts or finishes, and when it ends. :class:`ProgressState` folds those
events into counts, dollars and an ETA (pure logic, tested alone); the bar
and the widget only draw it.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._safe_text import NO_MATH, html_text

ExperimentSubscriber = Callable[["ExperimentEvent"], None]


@dataclass(frozen=True)
class ExperimentEvent:
    """``kind``: experiment_started, cell_started, cell_finished, experiment_finished."""

    kind: str
    cell: str = ""
    row: dict[str, Any] | None = None
    spent: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProgressState:
    """Counts of cells by state, dollars spent of the total, and time left (estimated)."""

    total: int = 0
    skipped: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    not_run: int = 0
    spent: float = 0.0
    max_total_cost: float | None = None
    started: float | None = None
    now: Callable[[], float] = time.monotonic
    finished: bool = False

    def update(self, e: ExperimentEvent) -> None:
        if e.kind == "experiment_started":
            self.total = e.data.get("cells", 0)
            self.skipped = e.data.get("skipped", 0)
            self.max_total_cost = e.data.get("max_total_cost")
            self.spent = e.spent
            self.started = self.now()
        elif e.kind == "cell_started":
            self.running += 1
        elif e.kind == "cell_finished":
            row = e.row or {}
            if row.get("outcome") == "not run":
                self.not_run += 1
            else:
                self.running = max(0, self.running - 1)
                if row.get("outcome") == "done":
                    self.done += 1
                else:
                    self.failed += 1
            self.spent = e.spent
        elif e.kind == "experiment_finished":
            self.spent, self.running, self.finished = e.spent, 0, True

    @property
    def completed(self) -> int:
        return self.done + self.failed + self.not_run

    @property
    def eta(self) -> float | None:
        """Seconds left at the pace so far (``None`` before the first cell ends)."""
        ran = self.completed - self.not_run
        left = self.total - self.skipped - self.completed
        if self.started is None or ran <= 0:
            return None
        return (self.now() - self.started) / ran * max(0, left)

    def line(self) -> str:
        cost = f"${self.spent:.4f}" + ("" if self.max_total_cost is None else f" of ${self.max_total_cost:.2f}")
        eta = "" if self.eta is None or self.finished else f" · ~{self.eta:.0f}s left"
        kept = f" · {self.skipped} kept from before" if self.skipped else ""
        return (
            f"{self.done} done · {self.running} running · {self.failed} stopped/failed · {self.not_run} not run"
            f" of {self.total} · {cost}{eta}{kept}"
        )


class TqdmProgress:
    """A terminal progress bar (``tqdm``), a subscriber of the experiment's events."""

    def __init__(self, **tqdm_options: Any) -> None:
        self.state = ProgressState()
        self.options = tqdm_options
        self.bar: Any = None

    def __call__(self, e: ExperimentEvent) -> None:
        self.state.update(e)
        if e.kind == "experiment_started":
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.state.total, initial=self.state.skipped, unit="run", **self.options)
        if self.bar is None:
            return
        if e.kind == "cell_finished":
            self.bar.update(1)
        cost = f"${self.state.spent:.4f}" + (
            "" if self.state.max_total_cost is None else f"/${self.state.max_total_cost:.2f}"
        )
        self.bar.set_postfix_str(f"{self.state.failed} stopped · {self.state.not_run} not run · {cost}", refresh=False)
        if e.kind == "experiment_finished":
            self.bar.close()


class LineProgress:
    """A plain progress line on stderr (when ``tqdm`` is not installed), at most once a second."""

    def __init__(self, stream: Any = None, every: float = 1.0) -> None:
        import sys

        self.state = ProgressState()
        self.stream = stream or sys.stderr
        self.every = every
        self._last = -1e9

    def __call__(self, e: ExperimentEvent) -> None:
        self.state.update(e)
        now = self.state.now()
        if e.kind in ("experiment_started", "experiment_finished") or now - self._last >= self.every:
            self._last = now
            print(self.state.line(), file=self.stream, flush=True)


def terminal_progress() -> ExperimentSubscriber:
    """A tqdm bar when tqdm is installed (``agentlab-loop[progress]``), else a plain line."""
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return LineProgress()
    return TqdmProgress()


LIVE: weakref.WeakSet[ProgressWidget] = weakref.WeakSet()
"""Progress widgets alive in this process: a notebook saved after its run asks them for their text."""


class ProgressWidget:
    """The notebook's view of an experiment: counts, dollars of the total, ETA, and a Stop button."""

    def __init__(self, on_stop: Callable[[], None] | None = None) -> None:
        import ipywidgets as w

        LIVE.add(self)

        self.state = ProgressState()
        self.bar = w.IntProgress(value=0, min=0, max=1, description="runs")
        self.text = w.HTML("waiting to start")
        self.stop = w.Button(description="Stop", button_style="warning")
        if on_stop is not None:
            self.stop.on_click(lambda _b: on_stop())
        self.box = w.VBox([w.HBox([self.bar, self.stop]), self.text])

    def __call__(self, e: ExperimentEvent) -> None:
        self.state.update(e)
        s = self.state
        self.bar.max = max(1, s.total)
        self.bar.value = s.skipped + s.completed
        self.text.value = f"<span class='agentlab-experiment {NO_MATH}'>{html_text(s.line())}</span>"
        if s.finished:
            self.stop.disabled = True

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget, with the progress line as its text: what a terminal, an export or a viewer
        without widgets shows (kept current in saved notebooks: see :data:`LIVE`)."""
        bundle = self.box._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = self.state.line()
        return bundle

"""A run read back: :class:`Trace` (one run), :class:`Traces` (many), :class:`StepView`.

Each step is stored once: the events carry what a step *adds* to the
history (the reply, the tool results), never the whole history, which would
grow quadratically with the run. :meth:`Trace.messages_at` rebuilds the
exact messages the model received at any step.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._checks import is_whole
from ..messages import text_of
from ..vocab import EventKind
from . import display
from .frames import Frames, Rows, calls_frame, events_frame, gc_paused, runs_frame, steps_frame, summarize
from .schema import SCHEMA_VERSION, record

if TYPE_CHECKING:
    import pandas as pd


# ------------------------------------------------------------- one run
@dataclass(frozen=True)
class StepView:
    """What happened at one step: what was sent, what came back, what the tools did.

    ``sent`` is the whole history the model received; ``new`` is what it
    had not seen before: the first messages at the first step, then what
    followed its previous reply (the tool results).
    """

    run_id: str
    step: int
    sent: list[dict[str, Any]] = field(repr=False)
    new: list[dict[str, Any]] = field(repr=False)
    reply: dict[str, Any] | None = field(repr=False)
    calls: list[dict[str, Any]] = field(repr=False)
    events: list[dict[str, Any]] = field(repr=False)

    @property
    def text(self) -> str:
        """The text the model wrote at this step."""
        return text_of((self.reply or {}).get("content"))

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        """The tool calls the model asked for, with their full arguments."""
        content = (self.reply or {}).get("content") or []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]

    def __repr__(self) -> str:
        return display.step_text(self)

    def _repr_html_(self) -> str:
        return display.step_html(self)


class Trace(Frames):
    """One run read back from its trace file.

    ``trace.step(4)`` says what happened at step four; ``trace.messages_at(4)``
    is exactly what the model received then; ``.steps``, ``.calls``,
    ``.events`` and ``.runs`` are DataFrames (see ``docs/traces.md``).
    """

    def __init__(self, events: list[dict[str, Any]], file: str | os.PathLike[str] | None = None) -> None:
        self.records = events
        self.file = Path(file) if file is not None else None
        first = events[0] if events else {}
        self.run_id: str = first.get("run_id") or (self.file.stem if self.file else "")
        self.version = first.get("v", SCHEMA_VERSION)
        if self.version > SCHEMA_VERSION:
            warnings.warn(
                f"{self.file}: written with trace schema v{self.version}, newer than this agentlab "
                f"(v{SCHEMA_VERSION}); some fields may be missing",
                stacklevel=2,
            )

    # -- what the run was
    @cached_property
    def started(self) -> dict[str, Any]:
        """The ``run_started`` event: task, model, budgets, tools and their modes."""
        return next((e for e in self.records if e.get("kind") == EventKind.RUN_STARTED), {})

    @cached_property
    def finished(self) -> dict[str, Any] | None:
        """The last ``run_finished`` event (a resumed run has several), or None."""
        return next((e for e in reversed(self.records) if e.get("kind") == EventKind.RUN_FINISHED), None)

    @cached_property
    def summary(self) -> dict[str, Any]:
        """The run's row of the ``runs`` frame, as a dict."""
        return summarize(self.records, self.run_id, self.file)[0]

    @property
    def outcome(self) -> str:
        """How the run ended: ``done``, ``stopped`` or ``unfinished`` (a trace cut short)."""
        return self.summary["outcome"]

    @property
    def reason(self) -> str:
        """Why it ended (``done``, ``budget``, ``deadline``...), as in ``Stopped.reason``."""
        return self.summary["reason"]

    @property
    def step_numbers(self) -> list[int]:
        """The steps that made a model request, in order."""
        return sorted(self._history[1])

    def __len__(self) -> int:
        """The number of steps."""
        return len(self.step_numbers)

    def __iter__(self) -> Iterator[StepView]:
        return (self.step(k) for k in self.step_numbers)

    # -- the messages, rebuilt
    @cached_property
    def _history(self) -> tuple[list[dict[str, Any]], dict[int, int]]:
        """The full history once, and for each step how much of it was sent."""
        first = self.started.get("messages")
        history = list(first) if isinstance(first, list) else []
        sent: dict[int, int] = {}
        results: dict[str, Any] = {}
        for e in self.records:
            kind = e.get("kind")
            if kind == EventKind.TOOL_FINISHED and isinstance(e.get("call_id"), str):
                results[e["call_id"]] = e.get("result")
            if kind == EventKind.MODEL_REQUEST:
                sent[e["step"]] = len(history)
            elif kind == EventKind.MODEL_CALLED and "content" in e:
                sent.setdefault(e["step"], len(history))
                history.append({"role": "assistant", "content": e["content"]})
            elif kind == EventKind.TOOL_RESULTS and isinstance(e.get("content"), list):
                history.append({"role": "user", "content": [_with_content(b, results) for b in e["content"]]})
        return history, sent

    def messages_at(self, step: int) -> list[dict[str, Any]]:
        """Exactly the messages the model received at ``step`` (1-based), rebuilt
        from the first messages and what each earlier step added. Redacted
        secrets stay redacted."""
        history, sent = self._history
        if not is_whole(step):
            raise TypeError(f"step must be an int, got {type(step).__name__}")
        if step not in sent:
            have = f"steps {min(sent)}..{max(sent)}" if sent else "no steps"
            raise ValueError(f"step {step} is not in run {self.run_id} (it has {have})")
        return copy.deepcopy(history[: sent[step]])

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The whole history at the end of the trace."""
        return copy.deepcopy(self._history[0])

    def step(self, k: int) -> StepView:
        """What happened at step ``k``: messages sent, the reply, each tool call and its result."""
        sent = self.messages_at(k)
        new = sent
        if k != min(self._history[1]):  # after the first step: what came after the last reply
            last_reply = max((i for i, m in enumerate(sent) if m.get("role") == "assistant"), default=-1)
            new = sent[last_reply + 1 :]
        events = [e for e in self.records if e.get("step") == k and e.get("kind") != EventKind.RUN_STARTED]
        called = [e for e in events if e.get("kind") == EventKind.MODEL_CALLED]
        reply = next((e for e in called if "content" in e), called[0] if called else None)  # not a lost attempt
        finished = {e["call_id"]: e for e in events if e.get("kind") == EventKind.TOOL_FINISHED}
        calls: list[dict[str, Any]] = []
        for e in events:
            if e.get("kind") == EventKind.TOOL_STARTED:
                done = finished.pop(e["call_id"], None)
                calls.append(done or {**e, "outcome": "unfinished"})
        calls.extend(finished.values())  # finished without a start event (nudged)
        calls.sort(key=lambda c: c.get("index", 0))
        return StepView(self.run_id, k, sent, new, reply, calls, events)

    # -- DataFrames
    @cached_property
    def rows(self) -> Rows:  # type: ignore[override]
        """This run's rows (see :class:`Rows`); the frames are built from them."""
        run, steps, calls = summarize(self.records, self.run_id, self.file)
        return Rows([run], steps, calls)

    @cached_property
    def events(self) -> pd.DataFrame:
        """One row per event (see ``docs/traces.md``)."""
        return events_frame([self])

    # -- display
    def __repr__(self) -> str:
        return display.trace_text(self)

    def _repr_html_(self) -> str:
        return display.trace_html(self)


class LogTrace(Trace):
    """A run summarized in bulk from its log (:mod:`._columns`), whose events were let go once read:
    parsed again from the log's bytes, kept as they were read, the first time they are asked for.
    Holding a million parsed events cost more to build and to free than reading them once more."""

    def __init__(self, trace: Trace, data: bytes, parse: Callable[[bytes], list[dict[str, Any]]]) -> None:
        self.file, self.run_id, self.version = trace.file, trace.run_id, trace.version
        self._data = data
        self._parse = parse
        self._records: list[dict[str, Any]] | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        if self._records is None:
            self._records = self._parse(self._data)
        return self._records

    @records.setter
    def records(self, value: list[dict[str, Any]]) -> None:
        self._records = value


class Traces(Frames):
    """Many runs: ``.runs``, ``.steps``, ``.calls`` and ``.events`` DataFrames.

    Frames are built when first read, so loading a folder to look at the
    ``runs`` table does not pay for the per-event one.
    """

    def __init__(self, traces: Iterable[Trace], folder: Path | None = None) -> None:
        self._traces: list[Trace] | None = [t for t in traces if t.records]
        self.folder = folder
        self._by_id = {t.run_id: t for t in self._traces}
        self._from_logs = list(self._by_id)
        self._stored: list[tuple[str, str]] = []
        self._load: Callable[[Path], Trace] = _no_loader
        self._parts: list[Any] | None = None

    @classmethod
    def _from_parts(cls, parts: list[Any], folder: Path | None) -> Traces:
        """Runs read from their logs whose frames come from ``parts`` (in order): bulk batches
        (:class:`~._columns.Batch`) and plain :class:`Traces`, each giving the four frames of its runs
        and its :class:`Trace` objects (every one with events: a batch's are parsed again only if read)."""
        self = cls([], folder)
        self._traces = [t for p in parts for t in p.traces]
        self._by_id = {t.run_id: t for t in self._traces}
        self._from_logs = list(self._by_id)
        self._parts = parts
        return self

    def _joined(self, name: str) -> pd.DataFrame:
        """Frame ``name`` of every part, in order (one part: its frame as it is)."""
        import pandas as pd

        parts = self._parts or [Traces([], self.folder)]
        frames = [getattr(p, name) for p in parts]
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per run (see ``docs/traces.md``)."""
        return self._joined("runs") if self._parts is not None else runs_frame(self.rows.runs)

    @cached_property
    def steps(self) -> pd.DataFrame:
        """One row per model call (see ``docs/traces.md``)."""
        return self._joined("steps") if self._parts is not None else steps_frame(self.rows.steps)

    @cached_property
    def calls(self) -> pd.DataFrame:
        """One row per tool call (see ``docs/traces.md``)."""
        return self._joined("calls") if self._parts is not None else calls_frame(self.rows.calls)

    @property
    def run_rows(self) -> list[dict[str, Any]]:
        """Each run's row of the ``runs`` frame as a dict, without building a frame (what a repr shows)."""
        if self._parts is None:
            return self.rows.runs
        return [r for p in self._parts for r in (p.runs_rows if hasattr(p, "runs_rows") else p.run_rows)]

    @classmethod
    def _with_store(
        cls,
        frames: dict[str, pd.DataFrame],
        stored: list[tuple[str, str]],
        loaded: list[Trace],
        folder: Path,
        order: list[Path],
        load: Callable[[Path], Trace],
        parts: list[Any] | None = None,
    ) -> Traces:
        """Runs read from the store (their frames; each :class:`Trace` read from its log when asked for)
        beside runs read from their logs, in the folder's file order, as if every one came from its log."""
        import numpy as np
        import pandas as pd

        self = cls(loaded, folder) if parts is None else cls._from_parts(parts, folder)
        own = {name: getattr(self, name) for name in frames} if loaded else {}  # the logs' frames, built once
        self.__dict__.pop("rows", None)  # the logs' rows alone (built on the way): rows covers every run
        self._parts = None  # the frames are set below
        self._traces = None
        self._stored = stored
        self._load = load
        if loaded:
            rank = {f.name: i for i, f in enumerate(order)}
            joined = {n: pd.concat([frames[n], own[n]], ignore_index=True) for n in frames}
            runs = joined["runs"]
            run_rank = {r: rank.get(Path(f).name, len(rank)) for r, f in zip(runs["run_id"], runs["file"], strict=True)}
            for name, df in joined.items():
                keys = (
                    [rank.get(Path(f).name, len(rank)) for f in df["file"]]
                    if name == "runs"
                    else [run_rank[r] for r in df["run_id"]]
                )
                joined[name] = df.take(np.argsort(np.asarray(keys), kind="stable")).reset_index(drop=True)
            frames = joined
        for name, df in frames.items():
            self.__dict__[name] = df  # the cached frames
        return self

    @property
    def traces(self) -> list[Trace]:
        """Every run's :class:`Trace` (runs read from the store are read from their logs now)."""
        if self._traces is None:
            for run_id, name in self._stored:
                if run_id not in self._by_id:
                    self._by_id[run_id] = self._stored_trace(run_id, name)
            ids = list(self.runs["run_id"])
            self._traces = [self._by_id[r] for r in ids if r in self._by_id]
        return self._traces

    def _stored_trace(self, run_id: str, name: str) -> Trace:
        file = (self.folder or Path()) / name
        return self._load(file) if file.is_file() else self._from_events(run_id)

    def _from_events(self, run_id: str) -> Trace:
        """A stored run whose log is gone: its records rebuilt from the events frame."""
        ev = self.events
        rows = ev[ev["run_id"] == run_id]
        records = [
            record(r, q, s, t, k, d)
            for r, q, s, t, k, d in zip(
                rows["run_id"], rows["seq"], rows["step"], rows["t"], rows["kind"], rows["data"], strict=True
            )
        ]
        return Trace(records, None)

    @property
    def sources(self) -> dict[str, str]:
        """Where each run's frames were read from: ``"store"`` (the columnar store) or ``"log"`` (its JSONL).

        A run still being written, or finished after the last compaction, is read from its log; this says which
        figures are as fresh as the logs and which as the store (``agentlab compact`` brings the rest in).
        """
        return {**{run_id: "store" for run_id, _ in self._stored}, **{run_id: "log" for run_id in self._from_logs}}

    def __len__(self) -> int:
        return len(self.traces) if self._traces is not None else len(self.runs)

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.traces)

    def __getitem__(self, run_id: str) -> Trace:
        return self.run(run_id)

    def run(self, run_id: str) -> Trace:
        """One run's :class:`Trace`, by id."""
        if run_id not in self._by_id and self._traces is None:
            name = dict(self._stored).get(run_id)
            if name is not None:
                self._by_id[run_id] = self._stored_trace(run_id, name)
        try:
            return self._by_id[run_id]
        except KeyError:
            raise KeyError(f"no run {run_id!r} among the {len(self)} loaded from {self.folder}") from None

    @cached_property
    def rows(self) -> Rows:  # type: ignore[override]
        """Every run's rows, concatenated."""
        runs: list[dict[str, Any]] = []
        steps: list[tuple[Any, ...]] = []
        calls: list[dict[str, Any]] = []
        with gc_paused():
            for t in self.traces:
                r, s, c = t.rows
                runs.extend(r)
                steps.extend(s)
                calls.extend(c)
        return Rows(runs, steps, calls)

    @cached_property
    def events(self) -> pd.DataFrame:
        """One row per event, every run."""
        return self._joined("events") if self._parts is not None else events_frame(self.traces)

    def __repr__(self) -> str:
        return display.traces_text(self)

    def _repr_html_(self) -> str:
        return display.traces_html(self)


def _no_loader(file: Path) -> Trace:  # pragma: no cover - only store-backed Traces load lazily
    raise RuntimeError(f"no loader for {file}")


def _with_content(block: Any, results: dict[str, Any]) -> Any:
    """A tool_result block with its content back, when the writer stored it once in ``tool_finished``."""
    if isinstance(block, dict) and block.get("content_ref") == "tool_finished":
        block = {k: v for k, v in block.items() if k != "content_ref"}
        tid = block.get("tool_use_id")
        block["content"] = results.get(tid, "") if isinstance(tid, str) else ""
    return block


for _public in (StepView, Trace, Traces, LogTrace):
    _public.__module__ = "agentlab.trace"  # the path users import them from (reprs, pickles, the reference)

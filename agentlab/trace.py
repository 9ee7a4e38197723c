"""Traces: every event of a run on disk, and the run read back as data.

Writing: :class:`TraceWriter` is an engine subscriber that appends each event
to ``<runs>/<run_id>.jsonl`` as one JSON line and hands it to the operating
system at once (one unbuffered ``write`` per event), so a process killed by
SIGKILL or a kernel restart leaves every finished event readable. Secrets are
redacted before a line is written (:mod:`agentlab.redact`).

Each step is stored once: the events carry what a step *adds* to the history
(the reply, the tool results), never the whole history, which would grow
quadratically with the run. :meth:`Trace.messages_at` rebuilds the exact
messages the model received at any step.

Reading: :func:`load_run` gives one run as a :class:`Trace`; :func:`load_runs`
gives a folder of runs as :class:`Traces`. Both expose pandas DataFrames whose
columns are documented in ``docs/traces.md``. A file cut short by a crash loads
with a :class:`TruncatedTraceWarning` naming the file, never an exception.
pandas is imported only when a DataFrame is asked for.
"""

from __future__ import annotations

import copy
import gc
import json
import math
import os
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .events import SCHEMA_VERSION, Event
from .redact import Redactor

if TYPE_CHECKING:
    import pandas as pd

RUNS_ENV = "AGENTLAB_RUNS"
SUFFIX = ".jsonl"
PREVIEW_CHARS = 200
BASE_FIELDS = ("v", "run_id", "seq", "step", "t", "kind")
_BASE = frozenset(BASE_FIELDS)
# Kinds whose fields are numbers and limits only: nothing in them can be a secret.
_PLAIN_KINDS = frozenset({"model_request", "step_finished", "paused", "resumed"})

_written: dict[str, Path] = {}
"""Run id -> the absolute folder this process wrote it to, so ``result.trace``
finds a run written with ``trace="some/folder"`` (or before a ``chdir``)."""


def runs_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The runs folder: ``path``, else ``$AGENTLAB_RUNS``, else ``./runs``."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a folder path (str or Path) or None, got {type(path).__name__}")
    return Path(path or os.environ.get(RUNS_ENV) or "runs")


class TruncatedTraceWarning(UserWarning):
    """A trace file ends in (or contains) a line that is not complete JSON."""


# ------------------------------------------------------------------ writing
class TraceWriter:
    """A subscriber that appends each event to ``<runs>/<run_id>.jsonl``.

    One writer may serve many runs. A run's file is closed when the run
    finishes (and reopened if the run is resumed), so a long-lived writer
    holds no file handles between runs.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, redactor: Redactor | None = None) -> None:
        self.dir = runs_dir(path)
        self.redactor = redactor or Redactor()
        self._files: dict[str, Any] = {}

    def file_of(self, run_id: str) -> Path:
        """Where this writer puts the events of ``run_id``."""
        return self.dir / f"{run_id}{SUFFIX}"

    def __call__(self, event: Event) -> None:
        record = event.as_record()
        line = _dumps(record)
        if event.kind not in _PLAIN_KINDS and self.redactor.needs_redaction(line):
            line = _dumps(self.redactor.redact(record))
        f = self._files.get(event.run_id)
        if f is None:
            f = self._open(event.run_id)
        f.write(line)  # one unbuffered write: the OS has the whole line now
        if event.kind == "run_finished":
            self._files.pop(event.run_id).close()

    def _open(self, run_id: str) -> Any:
        if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith("."):
            raise ValueError(f"run_id {run_id!r} cannot name a trace file")
        self.dir.mkdir(parents=True, exist_ok=True)
        f = self._files[run_id] = open(self.file_of(run_id), "ab", buffering=0)
        _written[run_id] = self.dir.resolve()
        return f

    def close(self) -> None:
        """Close every open trace file (events already written stay on disk)."""
        for f in self._files.values():
            f.close()
        self._files.clear()

    def __del__(self) -> None:  # a paused run left behind still closes its file
        files = getattr(self, "_files", None)
        if files:
            self.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _dumps(record: dict[str, Any]) -> bytes:
    """One JSON line (UTF-8, newline included). orjson is about ten times faster than
    ``json.dumps`` here (1 µs against 12 µs for a typical event), which matters
    inside a step budget of ~0.15 ms; values it cannot encode fall back to the
    standard library, anything unknown becomes its ``str``."""
    try:
        return orjson.dumps(record, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    except (TypeError, orjson.JSONEncodeError):
        return (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")


# ------------------------------------------------------------------ reading
def read_events(file: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The events in one trace file, in order.

    A line that is not complete JSON (a crash mid-write leaves at most the
    last one) is skipped with a :class:`TruncatedTraceWarning` naming the file.
    """
    file = Path(file)
    data = file.read_bytes()
    body = data.strip()
    if not body:
        return []
    try:  # one parse for the whole file: faster than a parse per line
        events = orjson.loads(b"[" + body.replace(b"\n", b",") + b"]")
        if all(isinstance(e, dict) for e in events):
            return events
    except ValueError:
        pass
    events, bad = [], []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = orjson.loads(line)
        except ValueError:
            bad.append(n)
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad.append(n)
    if bad:
        where = f"line {bad[0]}" if len(bad) == 1 else f"lines {', '.join(map(str, bad[:5]))}"
        warnings.warn(
            f"{file}: skipped {where} (not complete JSON; was the run killed while writing?); "
            f"loaded the {len(events)} complete events",
            TruncatedTraceWarning,
            stacklevel=2,
        )
    return events


def _trace_files(path: str | os.PathLike[str] | None) -> list[Path]:
    p = runs_dir(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(
            f"no runs folder at {str(p)!r}: pass path= (a folder or a .jsonl file) or set ${RUNS_ENV}"
        )
    return sorted(p.glob(f"*{SUFFIX}"))


def _find_run_file(run_id: str, path: str | os.PathLike[str] | None) -> Path:
    if not isinstance(run_id, str) or not run_id.strip():
        raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
    if run_id.endswith(SUFFIX) and Path(run_id).is_file():
        return Path(run_id)
    if "/" in run_id or "\\" in run_id:
        raise ValueError(f"run_id must be a run id (or a path to a {SUFFIX} file), got {run_id!r}")
    folders = [runs_dir(path)]
    if path is None and run_id in _written:
        folders.insert(0, _written[run_id])
    for folder in folders:
        file = folder / f"{run_id}{SUFFIX}"
        if file.is_file():
            return file
    folder = folders[-1]
    matches = sorted(folder.glob(f"{run_id}*{SUFFIX}")) if folder.is_dir() else []
    if len(matches) == 1:  # a unique prefix, like a short git hash
        return matches[0]
    known = [m.stem for m in matches] or ([f.stem for f in sorted(folder.glob(f"*{SUFFIX}"))][-5:] if folder.is_dir() else [])
    hint = f"; runs there include: {', '.join(known)}" if known else ("" if folder.is_dir() else " (no such folder)")
    if len(matches) > 1:
        raise ValueError(f"run_id {run_id!r} matches {len(matches)} runs in {str(folder)!r}{hint}")
    raise FileNotFoundError(
        f"no trace for run {run_id!r} in {str(folder)!r}{hint} (a run made with trace=False writes none; "
        f"pass path= or set ${RUNS_ENV} if it went elsewhere)"
    )


def load_run(run_id: str, path: str | os.PathLike[str] | None = None) -> Trace:
    """One run's trace: ``run_id`` (or a unique prefix of it, or a ``.jsonl`` path)
    in the runs folder ``path`` (default: ``$AGENTLAB_RUNS`` or ``./runs``)."""
    file = _find_run_file(run_id, path)
    return Trace(read_events(file), file)


def load_runs(path: str | os.PathLike[str] | None = None) -> Traces:
    """Every run in a runs folder (or one ``.jsonl`` file), as DataFrames.

    Columns and dtypes are documented in ``docs/traces.md``.
    """
    files = _trace_files(path)
    traces = []
    with _gc_paused():
        for f in files:
            t = Trace(read_events(f), f)
            _ = t._rows  # summarize while the parsed events are still in the CPU cache: 3-5x faster than later
            traces.append(t)
    return Traces(traces, runs_dir(path))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small dicts.

    Parsing creates only acyclic containers, yet each batch of new objects
    triggers a collection that rescans everything loaded so far: with it
    on, loading thousands of runs took about three times as long.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
        content = (self.reply or {}).get("content") or []
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        """The tool calls the model asked for, with their full arguments."""
        content = (self.reply or {}).get("content") or []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]

    def __repr__(self) -> str:
        from .report import step_text

        return step_text(self)

    def _repr_html_(self) -> str:
        from .report import step_html

        return step_html(self)


Rows = tuple[list[dict[str, Any]], list[tuple[Any, ...]], list[dict[str, Any]]]


class _Frames:
    """The runs/steps/calls frames of one run or many, built once from ``_rows``."""

    _rows: Rows

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per run (see ``docs/traces.md``)."""
        return _runs_frame(self._rows[0])

    @cached_property
    def steps(self) -> pd.DataFrame:
        """One row per model call (see ``docs/traces.md``)."""
        return _steps_frame(self._rows[1])

    @cached_property
    def calls(self) -> pd.DataFrame:
        """One row per tool call (see ``docs/traces.md``)."""
        return _calls_frame(self._rows[2])


class Trace(_Frames):
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
                f"(v{SCHEMA_VERSION}); some fields may be missing", stacklevel=2,
            )

    # -- what the run was
    @cached_property
    def started(self) -> dict[str, Any]:
        """The ``run_started`` event: task, model, budgets, tools and their modes."""
        return next((e for e in self.records if e.get("kind") == "run_started"), {})

    @cached_property
    def finished(self) -> dict[str, Any] | None:
        """The last ``run_finished`` event (a resumed run has several), or None."""
        return next((e for e in reversed(self.records) if e.get("kind") == "run_finished"), None)

    @cached_property
    def summary(self) -> dict[str, Any]:
        """The run's row of the ``runs`` frame, as a dict."""
        return _summarize(self.records, self.run_id, self.file)[0]

    @property
    def outcome(self) -> str:
        return self.summary["outcome"]

    @property
    def reason(self) -> str:
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
        history = list(self.started.get("messages") or [])
        sent: dict[int, int] = {}
        for e in self.records:
            kind = e.get("kind")
            if kind == "model_request":
                sent[e["step"]] = len(history)
            elif kind == "model_called" and "content" in e:
                sent.setdefault(e["step"], len(history))
                history.append({"role": "assistant", "content": e["content"]})
            elif kind == "tool_results":
                history.append({"role": "user", "content": e["content"]})
        return history, sent

    def messages_at(self, step: int) -> list[dict[str, Any]]:
        """Exactly the messages the model received at ``step`` (1-based), rebuilt
        from the first messages and what each earlier step added. Redacted
        secrets stay redacted."""
        history, sent = self._history
        if isinstance(step, bool) or not isinstance(step, int):
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
            new = sent[last_reply + 1:]
        events = [e for e in self.records if e.get("step") == k and e.get("kind") != "run_started"]
        reply = next((e for e in events if e.get("kind") == "model_called"), None)
        finished = {e["call_id"]: e for e in events if e.get("kind") == "tool_finished"}
        calls: list[dict[str, Any]] = []
        for e in events:
            if e.get("kind") == "tool_started":
                done = finished.pop(e["call_id"], None)
                calls.append(done or {**e, "outcome": "unfinished"})
        calls.extend(finished.values())  # finished without a start event (nudged)
        calls.sort(key=lambda c: c.get("index", 0))
        return StepView(self.run_id, k, sent, new, reply, calls, events)

    # -- DataFrames
    @cached_property
    def _rows(self) -> Rows:  # type: ignore[override]
        run, steps, calls = _summarize(self.records, self.run_id, self.file)
        return [run], steps, calls

    @cached_property
    def events(self) -> pd.DataFrame:
        """One row per event (see ``docs/traces.md``)."""
        return _events_frame([self])

    # -- display
    def __repr__(self) -> str:
        from .report import trace_text

        return trace_text(self)

    def _repr_html_(self) -> str:
        from .report import trace_html

        return trace_html(self)


class Traces(_Frames):
    """Many runs: ``.runs``, ``.steps``, ``.calls`` and ``.events`` DataFrames.

    Frames are built when first read, so loading a folder to look at the
    ``runs`` table does not pay for the per-event one.
    """

    def __init__(self, traces: Iterable[Trace], folder: Path | None = None) -> None:
        self.traces = [t for t in traces if t.records]
        self.folder = folder
        self._by_id = {t.run_id: t for t in self.traces}

    def __len__(self) -> int:
        return len(self.traces)

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.traces)

    def __getitem__(self, run_id: str) -> Trace:
        return self.run(run_id)

    def run(self, run_id: str) -> Trace:
        """One run's :class:`Trace`, by id."""
        try:
            return self._by_id[run_id]
        except KeyError:
            raise KeyError(f"no run {run_id!r} among the {len(self)} loaded from {self.folder}") from None

    @cached_property
    def _rows(self) -> Rows:  # type: ignore[override]
        runs: list[dict[str, Any]] = []
        steps: list[tuple[Any, ...]] = []
        calls: list[dict[str, Any]] = []
        with _gc_paused():
            for t in self.traces:
                r, s, c = t._rows
                runs.extend(r)
                steps.extend(s)
                calls.extend(c)
        return runs, steps, calls

    @cached_property
    def events(self) -> pd.DataFrame:
        """One row per event, every run."""
        return _events_frame(self.traces)

    def __repr__(self) -> str:
        from .report import traces_text

        return traces_text(self)

    def _repr_html_(self) -> str:
        from .report import traces_html

        return traces_html(self)


# ------------------------------------------------------- rows (pure logic)
def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def _summarize(
    events: list[dict[str, Any]], run_id: str, file: Path | None
) -> tuple[dict[str, Any], list[tuple[Any, ...]], list[dict[str, Any]]]:
    """One pass over a run's events: its ``runs`` row, ``steps`` rows and ``calls`` rows."""
    started: dict[str, Any] = {}
    finished: dict[str, Any] | None = None
    limits: dict[str, Any] = {}
    steps: list[tuple[Any, ...]] = []
    calls: list[dict[str, Any]] = []
    open_calls: dict[str, dict[str, Any]] = {}
    tokens = [0, 0, 0, 0]
    spent = 0.0
    nudges = 0
    last: dict[str, Any] = {}
    for e in events:
        kind = e.get("kind")
        last = e
        if kind == "model_called":
            usage = e.get("usage")
            if usage is None:
                continue
            i, o = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
            cw, cr = usage.get("cache_creation_input_tokens", 0), usage.get("cache_read_input_tokens", 0)
            tokens[0] += i
            tokens[1] += o
            tokens[2] += cw
            tokens[3] += cr
            spent = e.get("spent", spent)
            content = e.get("content") or []
            n_calls = sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_use")
            steps.append((
                run_id, e["step"], i, o, cw, cr, i + cw + cr, e.get("cost", 0.0), spent,
                e.get("latency", 0.0), n_calls, e.get("stop_reason") or "", bool(e.get("estimated")), e["t"],
            ))
        elif kind == "tool_started":
            open_calls[e["call_id"]] = e
        elif kind == "tool_finished":
            open_calls.pop(e["call_id"], None)
            calls.append(_call_row(run_id, e, e.get("outcome", "")))
        elif kind == "nudged":
            nudges += 1
        elif kind == "run_started":
            started = e
            limits = dict(e.get("budget") or {})
        elif kind == "resumed":
            limits.update(e.get("limits") or {})
        elif kind == "run_finished":
            finished = e
    for e in open_calls.values():  # started, never finished: the process died here
        calls.append(_call_row(run_id, e, "unfinished"))
    calls.sort(key=lambda c: (c["step"], c["index"]))
    if finished is not None:
        outcome, reason, detail = finished.get("outcome", ""), finished.get("reason", ""), finished.get("detail", "")
        n_steps, seconds = finished.get("steps", 0), finished.get("elapsed", 0.0)
        model_calls = finished.get("model_calls", len(steps))
        spent = finished.get("spent", spent)
        nudges = finished.get("nudges", nudges)
    else:
        outcome, reason = "incomplete", ""
        detail = f"the trace ends at step {last.get('step', 0)} with a {last.get('kind', 'missing')!r} event"
        n_steps = max((e.get("step", 0) for e in events), default=0)
        seconds, model_calls = last.get("t", 0.0), len(steps)
    run = {
        "run_id": run_id, "task": started.get("task", ""), "model": started.get("model", ""),
        "outcome": outcome, "reason": reason, "detail": detail, "steps": n_steps, "model_calls": model_calls,
        "cost": spent, "input_tokens": tokens[0], "output_tokens": tokens[1],
        "cache_write_tokens": tokens[2], "cache_read_tokens": tokens[3], "seconds": seconds,
        "started_at": started.get("started_at"), "nudges": nudges,
        "max_steps": _num(limits.get("max_steps")), "max_cost": _num(limits.get("max_cost")),
        "deadline_s": _num(limits.get("deadline_s")), "file": "" if file is None else str(file),
    }
    return run, steps, calls


def _call_row(run_id: str, e: dict[str, Any], outcome: str) -> dict[str, Any]:
    start = e.get("start", e.get("t"))
    end = e.get("end") if outcome != "unfinished" else None
    result = e.get("result")
    preview = "" if result is None else str(result)
    if len(preview) > PREVIEW_CHARS:
        preview = preview[: PREVIEW_CHARS - 1] + "…"
    return {
        "run_id": run_id, "step": e.get("step", 0), "call_id": e.get("call_id", ""), "index": e.get("index", 0),
        "tool": e.get("tool", ""), "mode": e.get("mode"), "args": e.get("args") or {}, "outcome": outcome,
        "attempts": e.get("attempts", 0), "is_error": bool(e.get("is_error", outcome == "unfinished")),
        "start": _num(start), "end": _num(end), "duration": _num(end) - _num(start), "result_preview": preview,
    }


# ------------------------------------------------------------ DataFrames
RUNS_COLUMNS = {
    "run_id": "str", "task": "str", "model": "str", "outcome": "str", "reason": "str", "detail": "str",
    "steps": "int64", "model_calls": "int64", "cost": "float64", "input_tokens": "int64",
    "output_tokens": "int64", "cache_write_tokens": "int64", "cache_read_tokens": "int64",
    "seconds": "float64", "started_at": "datetime64[ns, UTC]", "nudges": "int64",
    "max_steps": "float64", "max_cost": "float64", "deadline_s": "float64", "file": "str",
}
STEPS_COLUMNS = {
    "run_id": "str", "step": "int64", "input_tokens": "int64", "output_tokens": "int64",
    "cache_write_tokens": "int64", "cache_read_tokens": "int64", "context_tokens": "int64",
    "cost": "float64", "cumulative_cost": "float64", "latency": "float64", "tool_calls": "int64",
    "stop_reason": "str", "estimated": "bool", "t": "float64",
}
CALLS_COLUMNS = {
    "run_id": "str", "step": "int64", "call_id": "str", "index": "int64", "tool": "str", "mode": "str",
    "args": "object", "outcome": "str", "attempts": "int64", "is_error": "bool", "start": "float64",
    "end": "float64", "duration": "float64", "result_preview": "str",
}
EVENTS_COLUMNS = {"run_id": "str", "seq": "int64", "step": "int64", "t": "float64", "kind": "str", "data": "object"}


def _frame(columns: dict[str, list[Any]], dtypes: dict[str, str]) -> pd.DataFrame:
    import pandas as pd

    out = {}
    for name, dtype in dtypes.items():
        values = columns[name]
        if dtype == "object":
            s = pd.Series(values, dtype=object)
        elif dtype.startswith("datetime64"):
            s = pd.to_datetime(pd.Series(values, dtype=object), utc=True, errors="coerce", format="ISO8601")
            s = s.astype(dtype)
        elif dtype == "str":
            s = pd.Series(values, dtype=_str_dtype())
        else:
            s = pd.Series(values, dtype=dtype)
        out[name] = s
    return pd.DataFrame(out)


def _str_dtype() -> Any:
    """pandas 3's string dtype (missing = NaN); plain objects on pandas 2."""
    import pandas as pd

    return "str" if int(pd.__version__.split(".")[0]) >= 3 else object


def _runs_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return _frame({c: [r[c] for r in rows] for c in RUNS_COLUMNS}, RUNS_COLUMNS)


def _steps_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    return _frame({c: [r[i] for r in rows] for i, c in enumerate(STEPS_COLUMNS)}, STEPS_COLUMNS)


def _calls_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return _frame({c: [r[c] for r in rows] for c in CALLS_COLUMNS}, CALLS_COLUMNS)


def _events_frame(traces: Iterable[Trace]) -> pd.DataFrame:
    cols: dict[str, list[Any]] = {c: [] for c in EVENTS_COLUMNS}
    with _gc_paused():
        _event_columns(traces, cols)
    return _frame(cols, EVENTS_COLUMNS)


def _event_columns(traces: Iterable[Trace], cols: dict[str, list[Any]]) -> None:
    for t in traces:
        recs = t.records
        cols["run_id"].extend(e.get("run_id", t.run_id) for e in recs)
        cols["seq"].extend(e.get("seq", 0) for e in recs)
        cols["step"].extend(e.get("step", 0) for e in recs)
        cols["t"].extend(e.get("t", math.nan) for e in recs)
        cols["kind"].extend(e.get("kind", "") for e in recs)
        cols["data"].extend({k: v for k, v in e.items() if k not in _BASE} for e in recs)

"""Trace records -> rows -> DataFrames (pure logic; pandas only when a frame is built).

Columns and dtypes are documented in ``docs/traces.md``.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cache, cached_property
from itertools import chain, compress, repeat
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .._safe_text import clean
from .._shorten import shorten
from ._tags import INT_LIMIT
from .schema import (  # the columns (described there)
    CALLS_COLUMNS,
    EVENTS_COLUMNS,
    PREVIEW_CHARS,
    RUNS_COLUMNS,
    STEPS_COLUMNS,
)

if TYPE_CHECKING:
    import pandas as pd

    from .runs import Trace


@contextmanager
def gc_paused() -> Iterator[None]:
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
            # Turned back on, the collector would at once scan every object made meanwhile (a
            # tenth of a second for a million events); frozen first, they go straight to the
            # oldest generation instead, where the next full collection sees them as usual.
            gc.freeze()
            gc.enable()
            gc.unfreeze()


class Rows(NamedTuple):
    """A run's (or many runs') rows before they become DataFrames.

    ``steps`` rows are tuples in :data:`STEPS_COLUMNS` order (a step row is
    built per model call, so it is kept as cheap as a tuple can be).
    """

    runs: list[dict[str, Any]]
    steps: list[tuple[Any, ...]]
    calls: list[dict[str, Any]]


class Frames:
    """The runs/steps/calls frames of one run or many, built once from ``rows``."""

    rows: Rows

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per run (see ``docs/traces.md``)."""
        return runs_frame(self.rows.runs)

    @cached_property
    def steps(self) -> pd.DataFrame:
        """One row per model call (see ``docs/traces.md``)."""
        return steps_frame(self.rows.steps)

    @cached_property
    def calls(self) -> pd.DataFrame:
        """One row per tool call (see ``docs/traces.md``)."""
        return calls_frame(self.rows.calls)


# ------------------------------------------------------- rows (pure logic)
def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def _i64(x: Any) -> int:
    """``x`` as an int that fits an int64 column (a huge one raises, and the reader skips its line)."""
    n = int(x)
    if not -INT_LIMIT < n < INT_LIMIT:
        raise OverflowError(f"{n} does not fit an int64 column")
    return n


def _str_or_none(x: Any) -> str | None:
    return None if x is None else str(x)


_SUMMARIZED = frozenset(
    {"model_called", "sub_run", "tool_started", "tool_finished", "nudged", "run_started", "resumed", "run_finished"}
)
"""The kinds :func:`summarize` reads (every other event only counts as the trace's last one)."""


def summarize(
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
    last: dict[str, Any] = events[-1] if events else {}
    # only the kinds read below, picked at C speed: half the events (requests, results, step ends) are skipped
    for e in compress(events, map(_SUMMARIZED.__contains__, map(dict.get, events, repeat("kind")))):
        kind = e["kind"]
        if kind == "model_called":
            usage = e.get("usage")
            if usage is None:
                continue
            # int()/float()/str(): a value of the wrong type raises here, and the reader then
            # re-reads the file strictly, skipping that line (see reader.load_runs)
            i, o = _i64(usage.get("input_tokens", 0)), _i64(usage.get("output_tokens", 0))
            cw, cr = _i64(usage.get("cache_creation_input_tokens", 0)), _i64(usage.get("cache_read_input_tokens", 0))
            thinking = _i64(usage.get("thinking_tokens", 0))  # the part of o that was reasoning
            tokens[0] += i
            tokens[1] += o
            tokens[2] += cw
            tokens[3] += cr
            spent = _num(e.get("spent", spent))
            content = e.get("content") or []
            n_calls = [isinstance(b, dict) and b.get("type") for b in content].count("tool_use")
            steps.append(
                (
                    run_id,
                    e["step"],
                    i,
                    o,
                    thinking,
                    cw,
                    cr,
                    i + cw + cr,
                    _num(e.get("cost", 0.0)),
                    spent,
                    _num(e.get("latency", 0.0)),
                    n_calls,
                    str(e.get("stop_reason") or ""),
                    bool(e.get("estimated")),
                    float(e["t"]),
                    _num(e.get("server_tool_cost", 0.0)),  # web searches etc., billed per request; included in cost
                    0.0,  # sub_run_cost: what runs started by this step's tools spent (a sub_run event adds it below)
                    _num(
                        e.get("recorded_cost")
                    ),  # what an imported record says the call cost, beside the repriced cost
                )
            )
        elif kind == "sub_run":  # a run started by this step's tools: its cost is part of the step's
            cost = _num(e.get("cost", 0.0))
            at = next((n for n in range(len(steps) - 1, -1, -1) if steps[n][1] == e.get("step")), None)
            if at is not None:
                row = list(steps[at])
                row[_COST] += cost
                row[_SUB_RUN_COST] += cost
                row[_SPENT] = max(row[_SPENT], _num(e.get("spent", row[_SPENT])))  # the parent's spent, with it
                steps[at] = tuple(row)
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
    run = run_row(
        run_id,
        file,
        started,
        finished,
        limits,
        tokens,
        spent,
        nudges,
        len(steps),
        last,
        lambda: max((e.get("step", 0) for e in events), default=0),
    )
    return run, steps, calls


def run_row(
    run_id: str,
    file: Path | None,
    started: dict[str, Any],
    finished: dict[str, Any] | None,
    limits: dict[str, Any],
    tokens: list[int],
    spent: float,
    nudges: int,
    model_calls_seen: int,
    last: dict[str, Any],
    last_step: Callable[[], int],
) -> dict[str, Any]:
    """A run's ``runs`` row from what its events added up to: :func:`summarize` and the bulk reader
    (:mod:`._columns`) both end here, so the two give the same row by construction. ``last_step`` is
    called only for a run with no ``run_finished`` (the highest step its events name)."""
    if finished is not None:
        outcome, reason = str(finished.get("outcome", "")), str(finished.get("reason", ""))
        detail = str(finished.get("detail", ""))
        n_steps, seconds = _i64(finished.get("steps", 0)), _num(finished.get("elapsed", 0.0))
        model_calls = _i64(finished.get("model_calls", model_calls_seen))
        spent = _num(finished.get("spent", spent))
        nudges = _i64(finished.get("nudges", nudges))
    else:
        outcome, reason = "incomplete", ""
        detail = f"the trace ends at step {last.get('step', 0)} with a {last.get('kind', 'missing')!r} event"
        n_steps = last_step()
        seconds, model_calls = last.get("t", 0.0), model_calls_seen
    run = {
        "run_id": run_id,
        "task": str(started.get("task", "")),
        "model": str(started.get("model", "")),
        "outcome": outcome,
        "reason": reason,
        "detail": detail,
        "steps": n_steps,
        "model_calls": model_calls,
        "cost": spent,
        "input_tokens": tokens[0],
        "output_tokens": tokens[1],
        "cache_write_tokens": tokens[2],
        "cache_read_tokens": tokens[3],
        "seconds": seconds,
        "started_at": started.get("started_at") if isinstance(started.get("started_at"), str) else None,
        "nudges": nudges,
        "max_steps": _num(limits.get("max_steps")),
        "max_cost": _num(limits.get("max_cost")),
        "deadline_s": _num(limits.get("deadline_s")),
        "file": "" if file is None else str(file),
        "recorded_cost": _num((started.get("recorded") or {}).get("recorded_cost")),
        **_audit(started),
    }
    return run


def _audit(started: dict[str, Any]) -> dict[str, Any]:
    """An imported run's audit, as the runs frame shows it (a status and the number of findings)."""
    audit = (started.get("recorded") or {}).get("audit")
    audit = audit if isinstance(audit, dict) else {}
    findings = audit.get("findings")
    return {
        "audit": str(audit.get("status") or ""),
        "audit_findings": len(findings) if isinstance(findings, list) else 0,
    }


def _call_row(run_id: str, e: dict[str, Any], outcome: str) -> dict[str, Any]:
    get = e.get
    start = _num(get("start", get("t")))
    end = _num(get("end")) if outcome != "unfinished" else math.nan
    result = get("result")
    return {
        "run_id": run_id,
        "step": get("step", 0),
        "call_id": str(get("call_id", "")),
        "index": _i64(get("index", 0)),
        "tool": str(get("tool", "")),
        "mode": _str_or_none(get("mode")),
        "args": get("args") or {},
        "outcome": str(outcome),
        "attempts": _i64(get("attempts", 0)),
        "is_error": bool(get("is_error", outcome == "unfinished")),
        "start": start,
        "end": end,
        "duration": end - start,
        "result_preview": shorten("" if result is None else str(result), PREVIEW_CHARS),
    }


# ------------------------------------------------------------ DataFrames
_COST, _SPENT, _SUB_RUN_COST = map(list(STEPS_COLUMNS).index, ("cost", "cumulative_cost", "sub_run_cost"))
"""Their places in a step's row tuple (a sub_run event adds to them)."""
"""The four frames, in order: the store's tables have the same names and columns."""


def build_frame(columns: dict[str, Any], dtypes: dict[str, str]) -> pd.DataFrame:
    """A frame of these columns in these dtypes (the bulk reader, :mod:`._columns`, passes finished Series,
    taken as they are: its columns' names and order come from the same definitions)."""
    with gc_paused():  # the values are acyclic; a collection here would rescan every loaded event
        return _build(columns, dtypes)


def _build(columns: dict[str, Any], dtypes: dict[str, str]) -> pd.DataFrame:
    import pandas as pd

    out = {}
    for name, dtype in dtypes.items():
        values = columns[name]
        if isinstance(values, pd.Series):  # built ahead, in bulk (:mod:`._columns`)
            s = values
        elif dtype == "object":
            s = pd.Series(values, dtype=object)
        elif dtype == "json":
            from ._json import JSONArray

            s = pd.Series(JSONArray.from_events(values) if name == "data" else JSONArray.from_dicts(values))
        elif dtype.startswith("datetime64"):
            s = pd.to_datetime(pd.Series(values, dtype=object), utc=True, errors="coerce", format="ISO8601")
            s = s.astype(dtype)
        elif dtype == "str":  # arrow strings are UTF-8; a lone surrogate is shown as U+FFFD, not a crash
            s = text_series(values)
        else:
            s = pd.Series(values, dtype=dtype)
        out[name] = s
    # copy=False: the columns are not copied into one block per dtype (a tenth of a second for a million
    # events); each column is its own array, as it was built. Copy-on-write keeps them apart all the same.
    return pd.DataFrame(out, copy=False)


def text_series(values: list[Any]) -> pd.Series:
    """A text column. Arrow-backed (pandas 3), it is built straight from the list by ``pyarrow.array``
    (a third of the time pandas' own conversion takes), and only a list holding something else than
    text or None (converted as pandas converts it) or a lone surrogate (which UTF-8 cannot hold,
    cleaned value by value) takes the slow way: checking every value first took a third of loading a
    million events from the logs."""
    import pandas as pd

    dtype = _str_dtype()
    if dtype == "str":
        arrow = arrow_str_dtype()
        if arrow is not None:
            import pyarrow as pa

            try:
                return pd.Series(pd.arrays.ArrowStringArray(pa.array(values, pa.large_string()), dtype=arrow))
            except (TypeError, ValueError):  # not all text (pyarrow refuses; pandas converts), or a lone surrogate
                pass
        try:
            return pd.Series(values, dtype=dtype)
        except UnicodeEncodeError:
            pass
    return pd.Series([clean(v) if isinstance(v, str) else v for v in values], dtype=dtype)


@cache
def arrow_str_dtype() -> Any:
    """pandas' ``str`` dtype when pyarrow holds it (what ``dtype="str"`` gives), else None."""
    import pandas as pd

    dtype = pd.Series([], dtype="str").dtype
    return dtype if getattr(dtype, "storage", None) == "pyarrow" else None


def _str_dtype() -> Any:
    """pandas 3's string dtype (missing = NaN); plain objects on pandas 2."""
    import pandas as pd

    return "str" if int(pd.__version__.split(".")[0]) >= 3 else object


def runs_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return build_frame({c: list(map(itemgetter(c), rows)) for c in RUNS_COLUMNS}, RUNS_COLUMNS)


def steps_frame(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    columns = list(map(list, zip(*rows, strict=True))) if rows else [[] for _ in STEPS_COLUMNS]  # transposed in C
    return build_frame(dict(zip(STEPS_COLUMNS, columns, strict=True)), STEPS_COLUMNS)


def calls_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return build_frame({c: list(map(itemgetter(c), rows)) for c in CALLS_COLUMNS}, CALLS_COLUMNS)


def events_frame(traces: Iterable[Trace]) -> pd.DataFrame:
    """The events themselves stand in the ``data`` column: each is cut to its data only when read (:mod:`._json`)."""
    traces = list(traces)
    cols: dict[str, list[Any]] = {c: [] for c in EVENTS_COLUMNS}
    with gc_paused():
        event_columns(traces, cols)
        cols["data"] = list(chain.from_iterable(t.records for t in traces))
    return build_frame(cols, EVENTS_COLUMNS)


def event_columns(traces: list[Trace], cols: dict[str, list[Any]]) -> None:
    """Every event's base fields (run_id, seq, step, t, kind) as columns; ``map(dict.get, ...)`` runs at C speed.

    The frames and the store's compaction both gather them here.
    """
    get = dict.get
    for t in traces:
        recs = t.records
        n = len(recs)
        cols["run_id"].extend(map(get, recs, repeat("run_id", n), repeat(t.run_id, n)))
        cols["seq"].extend(map(get, recs, repeat("seq", n), repeat(0, n)))
        cols["step"].extend(map(get, recs, repeat("step", n), repeat(0, n)))
        cols["t"].extend(map(get, recs, repeat("t", n), repeat(math.nan, n)))
        cols["kind"].extend(map(get, recs, repeat("kind", n), repeat("", n)))

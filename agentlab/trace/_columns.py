"""Many runs' logs -> the runs/steps/calls/events columns in bulk: one pass per field over every event.

:func:`~.frames.summarize` walks each run's events in Python, a dict per call and a tuple per step:
most of a load from the logs once orjson has parsed them. Here the same figures come from one
``map(dict.get, ...)`` per field over the events of every run at once (C speed), numpy for the
arithmetic (tool calls per step: a cumulative sum over the flattened reply content; the calls' order:
one stable ``np.lexsort``) and Arrow for the text columns (a run id per row: a take from the runs' ids).

It is an accelerator, never a second definition: every field it reads is checked to be of a type it
converts exactly as :func:`~.frames.summarize` does, and anything else (a field of another type, a
resumed run, a sub-run, a call never finished, a NaN tag, a blob) is found when its log is added, while its
events are in the cache, and that run takes the per-run path, which stays the reference. The runs row is
built by :func:`~.frames.run_row`, the same function the reference ends in. ``tests/test_trace_bulk.py``
holds the two to equal frames on every fixture and on damaged logs.
"""

from __future__ import annotations

import math
from array import array
from collections import defaultdict
from functools import cached_property
from itertools import chain, compress, repeat
from operator import eq, lt
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._shorten import shorten
from ..errors import AgentlabError
from ._tags import BASE_VALUES, fits, markers, plausible
from .frames import (
    CALLS_COLUMNS,
    EVENTS_COLUMNS,
    PREVIEW_CHARS,
    STEPS_COLUMNS,
    arrow_str_dtype,
    build_frame,
    run_row,
    runs_frame,
    text_series,
)

if TYPE_CHECKING:
    from .runs import Trace

_NUMBER = {float, int, bool, type(None)}
"""What ``float(x)`` (``NaN`` for None) and ``np.array(..., float64)`` turn into the same float."""
_MISSING = object()
_ORDER_KINDS = ("resumed", "sub_run")
"""Kinds whose effect depends on where they fall among the others: a run holding one is summarized event by event."""


class NotBulk(AgentlabError):
    """A field the bulk pass does not convert exactly as the reference would: the batch is read run by run."""


def available() -> bool:
    """The bulk path builds Arrow-backed text columns: pandas 3's ``str`` with pyarrow (else every run goes
    the per-run way, whose text columns pandas converts itself)."""
    return arrow_str_dtype() is not None


def _types(values: list[Any]) -> set[type]:
    return {*map(type, values)}


def _arrow(values: list[Any], type_: Any = None) -> Any:
    """``pa.array`` of a field's values: one C pass that converts them and tells their type at once."""
    try:
        return pa.array(values, type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise NotBulk(f"{exc}") from exc


def _texts(values: list[Any], *, none: bool = False) -> Any:
    """Text as an Arrow array (``str()`` of a str is itself); None (a null) only where the reference keeps it."""
    arr = _arrow(values, pa.large_string())
    if arr.null_count and not none:
        raise NotBulk("a text field missing")
    return arr


def _arrow_text(values: Any) -> pd.Series:
    """A ``str`` column from a list of str/None or an Arrow array (a lone surrogate: the reference's cleaning)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return pd.Series(pd.arrays.ArrowStringArray(values.cast(pa.large_string()), dtype=arrow_str_dtype()))
    return text_series(values)


def _dbl(values: list[Any]) -> array:
    """``_num`` of each value (None is NaN, an int or a bool its float) as doubles; TypeError for anything else."""
    try:
        return array("d", values)
    except TypeError:
        if not _types(values) <= _NUMBER:
            raise
        return array("d", [math.nan if v is None else v for v in values])


_TEXT, _TEXT_OR_NONE = {str}, {str, type(None)}


def _fields(trace: Trace, codes: defaultdict[Any, int]) -> tuple[Any, ...] | None:
    """One run's fields, taken while its events are in the cache: one ``map(dict.get, ...)`` per field over
    the events that carry it. None (or TypeError) where a value is of a type the bulk pass does not convert
    exactly as :func:`~.frames.summarize` does (that run is then summarized by it)."""
    ev = trace.records
    get: Any = dict.get
    try:
        kinds, step, seq, t = zip(*map(BASE_VALUES, ev), strict=True)
    except KeyError:
        return None
    if not plausible(kinds, step, seq, t):
        return None  # the reference's plausibility check: this log is read line by line
    kc = list(map(codes.__getitem__, kinds))
    if _RESUMED in kc or _SUB_RUN in kc:
        return None  # their effect depends on where they fall among the others: event by event
    rid = trace.run_id
    ids: list[Any] | None = list(map(get, ev, repeat("run_id"), repeat(rid)))
    if ids is not None and ids.count(rid) == len(ids):
        ids = None
    mc = list(compress(ev, map(eq, kc, repeat(_MC))))
    usage = list(map(get, mc, repeat("usage")))
    spent = list(map(get, mc, repeat("spent"), repeat(_MISSING)))
    if None in usage or _MISSING in spent:  # a lost attempt, or spent carried over: event by event
        return None
    content = list(map(get, mc, repeat("content")))
    if None in content:
        content = [c or [] for c in content]
    stop = list(map(get, mc, repeat("stop_reason")))
    ts_at = list(compress(range(len(kc)), map(eq, kc, repeat(_TS))))
    tf_at = list(compress(range(len(kc)), map(eq, kc, repeat(_TF))))
    tf = list(map(ev.__getitem__, tf_at))
    f_id, tool, outcome = (
        list(map(get, tf, repeat(k), repeat(d))) for k, d in (("call_id", None), ("tool", ""), ("outcome", ""))
    )
    mode, result = list(map(get, tf, repeat("mode"))), list(map(get, tf, repeat("result")))
    s_id = list(map(get, map(ev.__getitem__, ts_at), repeat("call_id")))
    if (
        not _types(f_id) <= _TEXT
        or not _types(s_id) <= _TEXT
        or not _types(tool) <= _TEXT
        or not _types(outcome) <= _TEXT
        or not _types(mode) <= _TEXT_OR_NONE
        or not _types(result) <= _TEXT_OR_NONE
        or not _types(stop) <= _TEXT_OR_NONE
        or "unfinished" in outcome
        or _unfinished(ts_at, s_id, tf_at, f_id)
    ):
        return None
    start = list(map(get, tf, repeat("start"), repeat(_MISSING)))
    if _MISSING in start:  # no start: the reference takes the event's t
        start = [t[at] if v is _MISSING else v for at, v in zip(tf_at, start, strict=True)]
    args = list(map(get, tf, repeat("args")))
    if not all(args):
        args = [a or {} for a in args]
    ints = {
        "step": array("q", step),
        "seq": array("q", seq),
        "i": array("q", map(get, usage, repeat("input_tokens"), repeat(0))),
        "o": array("q", map(get, usage, repeat("output_tokens"), repeat(0))),
        "cw": array("q", map(get, usage, repeat("cache_creation_input_tokens"), repeat(0))),
        "cr": array("q", map(get, usage, repeat("cache_read_input_tokens"), repeat(0))),
        "index": array("q", map(get, tf, repeat("index"), repeat(0))),
        "attempts": array("q", map(get, tf, repeat("attempts"), repeat(0))),
    }
    floats = {
        "t": array("d", t),
        "spent": _dbl(spent),
        "cost": _dbl(list(map(get, mc, repeat("cost"), repeat(0.0)))),
        "latency": _dbl(list(map(get, mc, repeat("latency"), repeat(0.0)))),
        "stc": _dbl(list(map(get, mc, repeat("server_tool_cost"), repeat(0.0)))),
        "rc": _dbl(list(map(get, mc, repeat("recorded_cost")))),
        "end": _dbl(list(map(get, tf, repeat("end")))),
        "start": _dbl(start),
    }
    if not all(map(fits, ints.values())):
        return None
    lists = {
        "clen": list(map(len, content)),
        "uses": list(map(eq, map(get, chain.from_iterable(content), repeat("type")), repeat("tool_use"))),
        "stop": stop,
        "estimated": list(map(bool, map(get, mc, repeat("estimated")))),
        "f_id": f_id,
        "tool": tool,
        "mode": mode,
        "args": args,
        "outcome": outcome,
        "is_error": list(map(bool, map(get, tf, repeat("is_error"), repeat(False)))),
        "result": result,
    }
    return kc, ids, ints, floats, lists


_KNOWN = ("model_called", "tool_started", "tool_finished", "run_started", "run_finished", "nudged", *_ORDER_KINDS)
_MC, _TS, _TF, _RS, _RF, _, _RESUMED, _SUB_RUN = range(len(_KNOWN))


def _unfinished(ts_at: list[int], s_id: list[str], tf_at: list[int], f_id: list[str]) -> bool:
    """Whether a call is started and never finished, as the reference finds it (a dict of open calls). When the
    calls finish in the order they start, each after its start, none is left open: the walk is skipped."""
    if s_id == f_id and all(map(lt, ts_at, tf_at)):
        return False
    open_calls: set[str] = set()
    for _, is_start, call_id in sorted(chain(zip(ts_at, repeat(True), s_id), zip(tf_at, repeat(False), f_id))):
        if is_start:
            open_calls.add(call_id)
        else:
            open_calls.discard(call_id)
    return bool(open_calls)


def _last(codes: list[int], code: int) -> int | None:
    """Where the last event of kind ``code`` is (the reference keeps the last run_started and run_finished)."""
    try:
        return len(codes) - 1 - codes[::-1].index(code)
    except ValueError:
        return None


def parse(data: bytes) -> list[dict[str, Any]]:
    """A log that is one complete event a line (ending with a newline), parsed in one call."""
    return orjson.loads(b"[" + data[:-1].replace(b"\n", b",") + b"]")


class Batch:
    """Runs read from their logs, summarized together.

    :meth:`add` takes each run's fields right after its log is parsed, while its events are still in
    the CPU cache (the same passes over events parsed earlier, cold, took nine times as long); a run
    :meth:`add` turns down goes the per-run way. :meth:`close` then computes every figure in bulk, so a
    run that does not fit is known at load time, as with the reference; pandas frames are built only
    when asked for."""

    def __init__(self) -> None:
        self.traces: list[Trace] = []
        self._logs: list[tuple[bytes, int]] = []  # each log's bytes and line count
        self._ends: list[tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]] = []
        self._kind_codes: defaultdict[Any, int] = defaultdict(int, {k: n for n, k in enumerate(_KNOWN)})
        self._kind_codes.default_factory = self._kind_codes.__len__  # a kind first seen: the next code
        self._kc: list[int] = []
        self._lens: list[int] = []
        self._ids: dict[int, list[Any]] = {}
        self._ints = {k: array("q") for k in ("step", "seq", "i", "o", "cw", "cr", "index", "attempts")}
        self._floats = {k: array("d") for k in ("t", "spent", "cost", "latency", "stc", "rc", "end", "start")}
        self._lists: dict[str, list[Any]] = {
            k: []
            for k in ("clen", "uses", "stop", "estimated", "f_id", "tool", "mode", "args", "outcome")
            + ("is_error", "result")
        }

    def add(self, trace: Trace, data: bytes, lines: int) -> bool:
        """Take one run's fields (False, taking nothing, if a field is of a type the bulk pass does not
        convert exactly as the reference). ``data`` is its log (``lines`` lines), parsed into ``trace``; the
        batch keeps those bytes and lets the parsed events go (see :class:`~.runs.LogTrace`)."""
        from .runs import LogTrace

        try:
            got = _fields(trace, self._kind_codes)
        except (TypeError, ValueError, OverflowError, AttributeError):
            return False
        if got is None:
            return False
        kc, ids, ints, floats, lists = got
        if ids is not None:
            self._ids[len(self.traces)] = ids
        ev = trace.records
        started, finished = _last(kc, _RS), _last(kc, _RF)
        self._ends.append(({} if started is None else ev[started], None if finished is None else ev[finished], ev[-1]))
        self.traces.append(LogTrace(trace, data, parse))
        self._logs.append((data, lines))
        self._lens.append(len(ev))
        self._kc.extend(kc)
        for k, v in ints.items():
            self._ints[k].extend(v)
        for k, v in floats.items():
            self._floats[k].extend(v)
        for k, v in lists.items():
            self._lists[k].extend(v)
        return True

    def close(self) -> None:
        """Every figure of the runs added, in bulk (:class:`NotBulk` if one cannot be: the runs are then
        summarized one by one; :meth:`add` checked each, so this is not expected)."""
        try:
            self._close()
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError, pa.ArrowException) as exc:
            raise NotBulk(f"{type(exc).__name__}: {exc}") from exc

    def _close(self) -> None:
        n = len(self.traces)
        lens = np.array(self._lens, dtype=np.int64)
        self.starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
        self.file_of = np.repeat(np.arange(n, dtype=np.int64), lens)
        self.codes = np.array(self._kc, dtype=np.int64)
        self.kind_names = list(self._kind_codes)
        self.step = np.frombuffer(self._ints["step"], dtype=np.int64)
        self.seq = np.frombuffer(self._ints["seq"], dtype=np.int64)
        self.t = np.frombuffer(self._floats["t"], dtype=np.float64)
        self._calls()
        self._steps()
        self._runs()
        self.run_ids = pa.array([t.run_id for t in self.traces], pa.large_string())

    def where(self, kind: str) -> np.ndarray:
        """The positions of the events of ``kind``, in order."""
        code = self._kind_codes.get(kind)
        return np.empty(0, dtype=np.int64) if code is None else np.flatnonzero(self.codes == code)

    # -- steps: one row per model_called event
    def _steps(self) -> None:
        at = self.where("model_called")
        ints, floats, lists = self._ints, self._floats, self._lists
        i, o, cw, cr = (np.frombuffer(ints[k], dtype=np.int64) for k in ("i", "o", "cw", "cr"))
        lens = np.array(lists["clen"], dtype=np.int64)
        total = np.concatenate(([0], np.cumsum(np.array(lists["uses"], dtype=np.int64))))
        ends = np.cumsum(lens)
        stop = _texts(lists["stop"], none=True)
        if stop.null_count:
            stop = pc.fill_null(stop, "")
        self.step_at = at
        self.steps_cols: dict[str, Any] = {
            "step": self.step[at],
            "input_tokens": i,
            "output_tokens": o,
            "cache_write_tokens": cw,
            "cache_read_tokens": cr,
            "context_tokens": i + cw + cr,
            "cost": np.frombuffer(floats["cost"], dtype=np.float64),
            "cumulative_cost": np.frombuffer(floats["spent"], dtype=np.float64),
            "latency": np.frombuffer(floats["latency"], dtype=np.float64),
            "tool_calls": total[ends] - total[ends - lens],
            "stop_reason": stop,
            "estimated": np.array(lists["estimated"], dtype=bool),
            "t": self.t[at],
            "server_tool_cost": np.frombuffer(floats["stc"], dtype=np.float64),
            "sub_run_cost": np.zeros(len(at)),
            "recorded_cost": np.frombuffer(floats["rc"], dtype=np.float64),
        }

    # -- calls: one row per tool_finished event (a run with a call left unfinished is not added)
    def _calls(self) -> None:
        at = self.where("tool_finished")
        lists = self._lists
        outcome = _texts(lists["outcome"])
        start_ = np.frombuffer(self._floats["start"], dtype=np.float64)
        end = np.frombuffer(self._floats["end"], dtype=np.float64)
        result = _texts(lists["result"], none=True)
        if result.null_count:
            result = pc.fill_null(result, "")
        long = np.flatnonzero(pc.utf8_length(result).to_numpy() > PREVIEW_CHARS)
        if len(long):
            text = result.to_pylist()
            for n in long.tolist():
                text[n] = shorten(text[n], PREVIEW_CHARS)
            result = pa.array(text, pa.large_string())
        index = np.frombuffer(self._ints["index"], dtype=np.int64)
        step = self.step[at]
        order = np.lexsort((index, step, self.file_of[at]))  # stable: the reference's sort by (step, index)
        self.call_at = at[order]
        cols: dict[str, Any] = {
            "step": step,
            "call_id": _texts(lists["f_id"]),
            "index": index,
            "tool": _texts(lists["tool"]),
            "mode": _texts(lists["mode"], none=True),
            "args": _objects(lists["args"]),
            "outcome": outcome,
            "attempts": np.frombuffer(self._ints["attempts"], dtype=np.int64),
            "is_error": np.array(lists["is_error"], dtype=bool),
            "start": start_,
            "end": end,
            "duration": end - start_,
            "result_preview": result,
        }
        if not np.array_equal(order, np.arange(len(order))):
            cols = {k: v.take(order) for k, v in cols.items()}
        self.calls_cols = cols

    # -- runs: one row per log, by the reference's own run_row
    def _runs(self) -> None:
        n = len(self.traces)
        nudges = np.bincount(self.file_of[self.where("nudged")], minlength=n).tolist()
        step_file = self.file_of[self.step_at]
        per = np.bincount(step_file, minlength=n)
        ends = np.cumsum(per)
        sums = []
        for name in ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens"):
            total = np.concatenate(([0], np.cumsum(self.steps_cols[name])))
            sums.append((total[ends] - total[ends - per]).tolist())
        spent = self.steps_cols["cumulative_cost"]
        last_spent = [float(spent[e - 1]) if k else 0.0 for e, k in zip(ends.tolist(), per.tolist(), strict=True)]
        max_step = np.maximum.reduceat(self.step, self.starts).tolist()
        rows = []
        for f, (t, (begun, finished, last)) in enumerate(zip(self.traces, self._ends, strict=True)):
            rows.append(
                run_row(
                    t.run_id,
                    t.file,
                    begun,
                    finished,
                    dict(begun.get("budget") or {}),
                    [s[f] for s in sums],
                    last_spent[f],
                    nudges[f],
                    int(per[f]),
                    last,
                    lambda f=f: max_step[f],  # type: ignore[misc]
                )
            )
        self.runs_rows = rows
        self.step_file, self.call_file = step_file, self.file_of[self.call_at]

    # -- frames, when asked for
    def _lines(self) -> Any:
        """Every event's log line, an Arrow string array over the logs' bytes as read (no copy)."""
        chunks = []
        for data, _ in self._logs:
            newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == _NEWLINE)
            offsets = np.empty(len(newlines) + 1, dtype=np.int64)
            offsets[0] = 0
            offsets[1:] = newlines + 1
            chunks.append(pa.LargeStringArray.from_buffers(len(newlines), pa.py_buffer(offsets), pa.py_buffer(data)))
        return pa.chunked_array(chunks, pa.large_string())

    def _run_ids(self, files: np.ndarray) -> pd.Series:
        return _arrow_text(self.run_ids.take(pa.array(files)))

    @cached_property
    def runs(self) -> pd.DataFrame:
        return runs_frame(self.runs_rows)

    @cached_property
    def steps(self) -> pd.DataFrame:
        cols = {k: _series(v, STEPS_COLUMNS[k]) for k, v in self.steps_cols.items()}
        return build_frame({"run_id": self._run_ids(self.step_file), **cols}, STEPS_COLUMNS)

    @cached_property
    def calls(self) -> pd.DataFrame:
        cols = {k: _series(v, CALLS_COLUMNS[k]) for k, v in self.calls_cols.items()}
        return build_frame({"run_id": self._run_ids(self.call_file), **cols}, CALLS_COLUMNS)

    @cached_property
    def events(self) -> pd.DataFrame:
        from ._json import JSONArray

        if self._ids:
            ids = chain.from_iterable(
                self._ids.get(n) or repeat(t.run_id, k)
                for n, (t, k) in enumerate(zip(self.traces, self._lens, strict=True))
            )
            run_id = _arrow_text(list(ids))
        else:
            run_id = self._run_ids(self.file_of)
        cols = {
            "run_id": run_id,
            "seq": pd.Series(self.seq, dtype="int64", copy=False),
            "step": pd.Series(self.step, dtype="int64", copy=False),
            "t": pd.Series(self.t, dtype="float64", copy=False),
            "kind": _arrow_text(pa.array(self.kind_names, pa.large_string()).take(pa.array(self.codes))),
            "data": pd.Series(JSONArray.from_lines(self._lines())),
        }
        return build_frame(cols, EVENTS_COLUMNS)


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _series(values: Any, dtype: str) -> Any:
    """A column built ahead where the frames' own conversion would be slower (text through Arrow)."""
    if dtype == "str":
        return _arrow_text(values)
    if dtype == "json":
        from ._json import JSONArray

        return pd.Series(JSONArray(values))
    return pd.Series(values, dtype=dtype, copy=False)


# ------------------------------------------------------------ the logs' bytes, before parsing
_NEWLINE = ord("\n")


def scan(data: bytes) -> tuple[int, bool]:
    """A log's line count, and whether it holds a NaN tag or a blob marker (:func:`~._tags.markers`)."""
    return data.count(b"\n"), any(markers(data))

"""Many runs' logs -> the runs/steps/calls/events columns in bulk: one pass per field over every event.

:func:`~.frames.summarize` walks each run's events in Python, a dict per call and a tuple per step:
most of a load from the logs once orjson has parsed them. Here the same figures come from passes at C speed
over each run's events (an ``itemgetter`` of a kind's fields transposed by ``zip``, or a ``map(dict.get, ...)``
per field where one is missing), numpy for the
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
import struct
from array import array
from collections import defaultdict
from functools import cache, cached_property
from itertools import chain, compress, islice, repeat
from operator import eq, itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .._shorten import shorten
from ..errors import AgentlabError
from ._deferred import Deferred
from ._tags import NEXT_ANY, NEXT_SPREAD, fits, markers, well_typed
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
_NAN = array("d", [math.nan])
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


def _joined(values: list[Any]) -> Any:
    """A text field of every run as one Arrow array (its types checked when each log was added)."""
    return _texts(values, none=True)


def _arrow_text(values: Any) -> pd.Series:
    """A ``str`` column from a list of str/None or an Arrow array (a lone surrogate: the reference's cleaning)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return pd.Series(pd.arrays.ArrowStringArray(values.cast(pa.large_string()), dtype=arrow_str_dtype()))
    return text_series(values)


def _packed(code: str, values: Any) -> array:
    """``array(code, values)`` of an event field (every event's step, seq, t), through ``struct``: array's own
    conversion parses each item as a call's argument (``PyArg_Parse``), a third more time here. The same
    values are taken and refused (:class:`struct.error` where array raises TypeError or OverflowError)."""
    return array(code, struct.pack(f"{len(values)}{code}", *values))


def _dbl(values: list[Any]) -> array:
    """``_num`` of each value (None is NaN, an int or a bool its float) as doubles; TypeError for anything else."""
    try:
        return array("d", values)
    except TypeError:
        if values.count(None) == len(values):  # a field no event holds (recorded_cost, mostly)
            return _NAN * len(values)
        if not _types(values) <= _NUMBER:
            raise
        return array("d", [math.nan if v is None else v for v in values])


_TEXT, _TEXT_OR_NONE = {str}, {str, type(None)}


_MC_FIELDS = (
    ("usage", None),
    ("spent", _MISSING),
    ("content", None),
    ("stop_reason", None),
    ("cost", 0.0),
    ("latency", 0.0),
    ("server_tool_cost", 0.0),
    ("estimated", None),
)
_USAGE_FIELDS = tuple(
    (k, 0) for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
)
_TF_FIELDS = (
    ("call_id", None),
    ("tool", ""),
    ("outcome", ""),
    ("mode", None),
    ("result", None),
    ("args", None),
    ("index", 0),
    ("attempts", 0),
    ("is_error", False),
    ("start", _MISSING),
    ("end", None),
)


_BASE = itemgetter("step", "seq", "t", "kind", "run_id")
"""An event's base fields, as :func:`_fields` reads them (a KeyError where one is missing: read field by field)."""


def _take(rows: list[Any], fields: tuple[tuple[str, Any], ...]) -> list[Any]:
    """Each of ``fields`` over ``rows`` (as a tuple; a list where one is missing, its default): one
    ``itemgetter`` pass transposed by ``zip`` while every row holds them all, else a ``map(dict.get, ...)`` per
    field."""
    if rows:
        try:
            return [*zip(*map(_getter(fields), rows), strict=True)]
        except KeyError:
            pass
    get: Any = dict.get
    return [list(map(get, rows, repeat(k), repeat(d))) for k, d in fields]


@cache
def _getter(fields: tuple[tuple[str, Any], ...]) -> Any:
    return itemgetter(*(k for k, _ in fields))


def _fields(trace: Trace, codes: dict[str, defaultdict[Any, int]], refused: set[int]) -> tuple[Any, ...] | None:
    """One run's fields, taken while its events are in the cache: the base fields of every event in one pass,
    then those of the kinds read (model_called, tool_finished) in one pass each. None (or TypeError,
    :class:`NotBulk`) where a value is of a type the bulk pass does not convert exactly as
    :func:`~.frames.summarize` does, or the run needs its events walked in order (a resumed run, a sub-run, a
    call never finished): that run is then summarized by the reference."""
    ev = trace.records
    get: Any = dict.get
    rid = trace.run_id
    base: Any
    try:  # the base fields in one pass, transposed (five passes of dict.get took a fifth more)
        base = zip(*map(_BASE, ev), strict=True)
    except KeyError:  # one missing (a run id most likely): a pass per field, a missing one its default
        base = [*(list(map(get, ev, repeat(k))) for k in ("step", "seq", "t", "kind"))]
        base.append(list(map(get, ev, repeat("run_id"), repeat(rid))))
    step, seq, t, kinds, ids = base
    if not well_typed(step, seq, t, None):
        return None  # the reference's plausibility check: this log is read line by line
    kind_codes = codes["kind"]
    known = len(kind_codes)
    kc = list(map(kind_codes.__getitem__, kinds))
    if len(kind_codes) > known:  # kinds first seen: one that is not text is never taken
        refused.update(c for k, c in islice(kind_codes.items(), known, None) if type(k) is not str)
    if not refused.isdisjoint(kc):
        return None  # a kind not text; or a resumed run or a sub-run, whose effect depends on where it falls
    if ids.count(rid) == len(ids):
        ids = None
    kinds_of = bytes(kc)  # ValueError past 256 kinds in a batch (never seen): that run goes the per-run way
    mc = list(compress(ev, kinds_of.translate(_IS[_MC])))  # a kind's events: a 0/1 byte each, no call per event
    usage, spent, content, stop, cost, latency, stc, estimated = _take(mc, _MC_FIELDS)
    if None in usage or _MISSING in spent:  # a lost attempt, or spent carried over: event by event
        return None
    if None in content:
        content = [c or [] for c in content]
    rc = list(map(get, mc, repeat("recorded_cost")))
    tf = list(compress(ev, kinds_of.translate(_IS[_TF])))
    f_id, tool, outcome, mode, result, args, index, attempts, is_error, start, end = _take(tf, _TF_FIELDS)
    f_id = list(f_id)  # compared with s_id, a list
    s_id = list(map(get, compress(ev, kinds_of.translate(_IS[_TS])), repeat("call_id")))
    texts = {"f_id": f_id, "result": result}
    if (
        not _types(f_id) <= _TEXT
        or not _types(s_id) <= _TEXT
        or not _types(tool) <= _TEXT
        or not _types(outcome) <= _TEXT
        or not _types(mode) <= _TEXT_OR_NONE
        or not _types(result) <= _TEXT_OR_NONE
        or not _types(stop) <= _TEXT_OR_NONE
        or "unfinished" in outcome
        or (s_id != f_id and _unfinished(kc, s_id, f_id))
    ):
        return None
    if _MISSING in start:  # no start: the reference takes the event's t
        t_tf = list(compress(t, kinds_of.translate(_IS[_TF])))
        start = [t_tf[n] if v is _MISSING else v for n, v in enumerate(start)]
    if not all(args):
        args = [a or {} for a in args]
    i, o, cw, cr = _take(usage, _USAGE_FIELDS)
    thinking = list(map(get, usage, repeat("thinking_tokens"), repeat(0)))  # in few replies: not in _USAGE_FIELDS
    ints = {
        "step": _packed("q", step),
        "seq": _packed("q", seq),
        "i": array("q", i),
        "o": array("q", o),
        "th": array("q", thinking),
        "cw": array("q", cw),
        "cr": array("q", cr),
        "index": array("q", index),
        "attempts": array("q", attempts),
        "clen": array("q", map(len, content)),
    }
    every = array("q")
    for v in ints.values():
        every.extend(v)
    if not fits(np.frombuffer(every, dtype=np.int64)):  # the reference's plausible() ranges, in one numpy pass
        return None
    floats = {
        "t": _packed("d", t),
        "spent": _dbl(spent),
        "cost": _dbl(cost),
        "latency": _dbl(latency),
        "stc": _dbl(stc),
        "rc": _dbl(rc),
        "end": _dbl(end),
        "start": _dbl(start),
    }
    for k, values in (("tool", tool), ("outcome", outcome), ("mode", mode), ("stop", stop)):
        ints[k] = array("q", map(codes[k].__getitem__, values))  # a few distinct values: Arrow takes them at close
    flags = {
        "uses": array("b", map(eq, map(get, chain.from_iterable(content), repeat("type")), repeat("tool_use"))),
        "estimated": array("b", map(bool, estimated)),
        "is_error": array("b", map(bool, is_error)),
    }
    return kinds_of, ids, ints, floats, flags, texts, args, s_id == f_id


_CODED = ("tool", "outcome", "mode", "stop")
"""Text fields of few distinct values (their types checked per run: text, or None where the reference keeps
it), kept as codes: converting each value to Arrow at close, long after it was parsed, took a tenth of a load."""


def _coder() -> defaultdict[Any, int]:
    codes: defaultdict[Any, int] = defaultdict(int)
    codes.default_factory = codes.__len__
    return codes


_KNOWN = ("model_called", "tool_started", "tool_finished", "run_started", "run_finished", "nudged", *_ORDER_KINDS)
_MC, _TS, _TF, _RS, _RF, _NUDGED, _RESUMED, _SUB_RUN = range(len(_KNOWN))
_IS = {code: bytes(int(n == code) for n in range(256)) for code in (_MC, _TS, _TF)}
"""A kind's selector: a run's kind codes as bytes, translated by it, are 1 at that kind's events and 0 elsewhere
(``compress`` then takes them)."""


def _unfinished(kc: list[int], s_id: list[str], f_id: list[str]) -> bool:
    """Whether a call is started and never finished, as the reference finds it (a dict of open calls), for a
    run whose calls do not finish in the order they start (when they do, the batch checks each finish comes
    after its start, in bulk)."""
    ts_at = compress(range(len(kc)), map(eq, kc, repeat(_TS)))
    tf_at = compress(range(len(kc)), map(eq, kc, repeat(_TF)))
    open_calls: set[str] = set()
    for _, is_start, call_id in sorted(chain(zip(ts_at, repeat(True), s_id), zip(tf_at, repeat(False), f_id))):
        if is_start:
            open_calls.add(call_id)
        else:
            open_calls.discard(call_id)
    return bool(open_calls)


def _run_row(
    trace: Trace, ev: list[dict[str, Any]], kc: bytes, ints: dict[str, Any], floats: dict[str, Any]
) -> dict[str, Any]:
    """A run's row, by the reference's own :func:`~.frames.run_row`, from its fields as :func:`_fields` took
    them: made while its events are hot (the same at close, reading the run's first and last events again,
    took a twentieth of a load)."""
    started, finished = _last(kc, _RS), _last(kc, _RF)
    begun = {} if started is None else ev[started]
    spent = floats["spent"]
    return run_row(
        trace.run_id,
        trace.file,
        begun,
        None if finished is None else ev[finished],
        dict(begun.get("budget") or {}),
        [sum(ints[k]) for k in ("i", "o", "cw", "cr")],
        spent[-1] if spent else 0.0,
        kc.count(_NUDGED),
        len(ints["i"]),
        ev[-1],
        lambda: max(ints["step"]),
    )


def _last(codes: bytes, code: int) -> int | None:
    """Where the last event of kind ``code`` is (the reference keeps the last run_started and run_finished)."""
    at = codes.rfind(code)
    return None if at < 0 else at


def parse(data: bytes) -> list[dict[str, Any]]:
    """A log that is one complete event a line (ending with a newline), parsed in one call: its last newline
    made a comma too and a ``null`` put after it (then dropped), so the bytes are copied twice, not three times
    (``data[:-1]`` is a copy)."""
    events = orjson.loads(b"[" + data.replace(b"\n", b",") + b"null]")
    events.pop()
    return events


class Batch:
    """Runs read from their logs, summarized together.

    :meth:`add` takes each run's fields right after its log is parsed, while its events are still in
    the CPU cache (the same passes over events parsed earlier, cold, took nine times as long); a run
    :meth:`add` turns down goes the per-run way. :meth:`close` then computes every figure in bulk, so a
    run that does not fit is known at load time, as with the reference; pandas frames are built only
    when asked for."""

    def __init__(self) -> None:
        self.traces: list[Trace] = []
        self._logs: list[bytes] = []  # each log's bytes (cut into lines when a row of data is first read)
        self.runs_rows: list[dict[str, Any]] = []  # each run's row, made as it is added (its events hot)
        self._codes = {k: _coder() for k in ("kind", *_CODED)}  # each value first seen: the next code
        self._kind_codes = self._codes["kind"]
        self._kind_codes.update((k, n) for n, k in enumerate(_KNOWN))
        self._refused_kinds = {_RESUMED, _SUB_RUN}  # and any kind not text
        self._kc = bytearray()  # every event's kind code (a byte: :func:`_fields` refuses a 257th kind)
        self._lens: list[int] = []
        self._paired: list[bool] = []  # each run's calls finish in the order they start (ids alone checked)
        self._ids: dict[int, list[Any]] = {}
        self._got: list[tuple[array, ...]] = []  # each run's ints, floats, flags (_layout's order), joined at close
        self._layout: tuple[tuple[str, ...], ...] = ((), (), ())  # the names of the ints, floats and flags
        self._ints: dict[str, bytearray] = {}
        self._floats: dict[str, bytearray] = {}
        self._flags: dict[str, bytearray] = {}
        self._texts: dict[str, list[Any]] = {"f_id": [], "result": []}
        self._args: list[Any] = []

    def add(self, trace: Trace, data: bytes, lines: int) -> bool:
        """Take one run's fields (False, taking nothing, if a field is of a type the bulk pass does not
        convert exactly as the reference). ``data`` is its log (``lines`` lines: :func:`scan`), parsed
        into ``trace``; the
        batch keeps those bytes and lets the parsed events go (see :class:`~.runs.LogTrace`)."""
        from .runs import LogTrace

        try:
            got = _fields(trace, self._codes, self._refused_kinds)
        except (TypeError, ValueError, OverflowError, AttributeError, struct.error, NotBulk):
            return False
        if got is None:
            return False
        kc, ids, ints, floats, flags, texts, args, paired = got
        ev = trace.records
        try:
            row = _run_row(trace, ev, kc, ints, floats)
        except (TypeError, ValueError, OverflowError, AttributeError):
            return False
        if ids is not None:
            self._ids[len(self.traces)] = ids
        self.runs_rows.append(row)
        self.traces.append(LogTrace(trace, data, parse))
        self._logs.append(data)
        self._lens.append(len(ev))
        self._paired.append(paired)
        self._kc += kc
        if not self._got:
            self._layout = (tuple(ints), tuple(floats), tuple(flags))
        self._got.append((*ints.values(), *floats.values(), *flags.values()))  # each field extended here took longer
        for k, v in texts.items():
            self._texts[k].extend(v)
        self._args.extend(args)
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
        self.file_of = np.repeat(np.arange(n, dtype=np.int64), lens)
        self.codes = np.frombuffer(self._kc, dtype=np.uint8).astype(np.int64)
        joined = map(bytearray().join, zip(*self._got, strict=True))  # one transpose: a lookup per run took 20 ms
        self._ints, self._floats, self._flags = ({k: next(joined) for k in names} for names in self._layout)
        self._got = []
        self.kind_names = [k if type(k) is str else "" for k in self._kind_codes]  # not text: held by no run added
        self.step = np.frombuffer(self._ints["step"], dtype=np.int64)
        self.seq = np.frombuffer(self._ints["seq"], dtype=np.int64)
        self.t = np.frombuffer(self._floats["t"], dtype=np.float64)
        self._calls()
        self._steps()
        self._runs()
        self.run_ids = pa.array([t.run_id for t in self.traces], pa.large_string())

    def _decoded(self, name: str) -> Any:
        """Text field ``name`` of every row, from its codes: one Arrow take from its few distinct values."""
        values = pa.array(list(self._codes[name]), pa.large_string())
        return values.take(pa.array(np.frombuffer(self._ints[name], dtype=np.int64)))

    def where(self, kind: str) -> np.ndarray:
        """The positions of the events of ``kind``, in order."""
        code = self._kind_codes.get(kind)
        return np.empty(0, dtype=np.int64) if code is None else np.flatnonzero(self.codes == code)

    # -- steps: one row per model_called event
    def _steps(self) -> None:
        at = self.where("model_called")
        ints, floats = self._ints, self._floats
        i, o, cw, cr = (np.frombuffer(ints[k], dtype=np.int64) for k in ("i", "o", "cw", "cr"))
        lens = np.frombuffer(ints["clen"], dtype=np.int64)
        total = np.concatenate(([0], np.cumsum(np.frombuffer(self._flags["uses"], dtype=np.int8), dtype=np.int64)))
        ends = np.cumsum(lens)
        stop = self._decoded("stop")
        if stop.null_count:
            stop = pc.fill_null(stop, "")
        self.step_at = at
        self.steps_cols: dict[str, Any] = {
            "step": self.step[at],
            "input_tokens": i,
            "output_tokens": o,
            "thinking_tokens": np.frombuffer(ints["th"], dtype=np.int64),
            "cache_write_tokens": cw,
            "cache_read_tokens": cr,
            "context_tokens": i + cw + cr,
            "cost": np.frombuffer(floats["cost"], dtype=np.float64),
            "cumulative_cost": np.frombuffer(floats["spent"], dtype=np.float64),
            "latency": np.frombuffer(floats["latency"], dtype=np.float64),
            "tool_calls": total[ends] - total[ends - lens],
            "stop_reason": stop,
            "estimated": np.frombuffer(self._flags["estimated"], dtype=np.int8).astype(bool),
            "t": self.t[at],
            "server_tool_cost": np.frombuffer(floats["stc"], dtype=np.float64),
            "sub_run_cost": np.zeros(len(at)),
            "recorded_cost": np.frombuffer(floats["rc"], dtype=np.float64),
        }

    # -- calls: one row per tool_finished event (a run with a call left unfinished is not added)
    def _calls(self) -> None:
        at = self.where("tool_finished")
        paired, started = np.array(self._paired, dtype=bool), self.where("tool_started")
        if not (started[paired[self.file_of[started]]] < at[paired[self.file_of[at]]]).all():
            raise NotBulk("a call finished before it started")  # an edited log: the reference's walk, run by run
        texts = self._texts
        start_ = np.frombuffer(self._floats["start"], dtype=np.float64)
        end = np.frombuffer(self._floats["end"], dtype=np.float64)
        result = _joined(texts["result"])
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
            "call_id": _joined(texts["f_id"]),
            "index": index,
            "tool": self._decoded("tool"),
            "mode": self._decoded("mode"),
            "args": _objects(self._args),
            "outcome": self._decoded("outcome"),
            "attempts": np.frombuffer(self._ints["attempts"], dtype=np.int64),
            "is_error": np.frombuffer(self._flags["is_error"], dtype=np.int8).astype(bool),
            "start": start_,
            "end": end,
            "duration": end - start_,
            "result_preview": result,
        }
        if not np.array_equal(order, np.arange(len(order))):
            cols = {k: v.take(order) for k, v in cols.items()}
        self.calls_cols = cols

    # -- runs: one row per log (made by add)
    def _runs(self) -> None:
        step_file = self.file_of[self.step_at]
        self.step_file, self.call_file = step_file, self.file_of[self.call_at]

    # -- frames, when asked for
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
            "data": pd.Series(JSONArray.from_lines(_Lines(self._logs, len(self.codes)))),
        }
        return build_frame(cols, EVENTS_COLUMNS)


def _objects(values: list[Any]) -> np.ndarray:
    """An object array of ``values`` as they are (``fromiter``: assigning the list to an empty array looked into
    each dict as a possible sequence, 6x slower)."""
    return np.fromiter(values, dtype=object, count=len(values))


def _series(values: Any, dtype: str) -> Any:
    """A column built ahead where the frames' own conversion would be slower (text through Arrow)."""
    if dtype == "str":
        return _arrow_text(values)
    if dtype == "json":
        from ._json import JSONArray

        return pd.Series(JSONArray(values))
    return pd.Series(values, dtype=dtype, copy=False)


# ------------------------------------------------------------ the logs' bytes, before parsing


def scan(data: bytes) -> tuple[int, bool]:
    """How many lines a log has (its newlines: where they are is found only when a row of ``data`` is read,
    :class:`_Lines`), and whether it holds a NaN tag or a blob marker (:func:`~._tags.markers`). The markers'
    regular expression runs only where some ``$`` is followed by a byte a marker's could be."""
    b = np.frombuffer(data, dtype=np.uint8)
    maybe = bool(((b[:-1] == _DOLLAR) & ((b[1:] | NEXT_SPREAD) == NEXT_ANY)).any())
    return int(np.count_nonzero(b == _NEWLINE)), maybe and any(markers(data))


class _Lines(Deferred):
    """Every event's log line, an Arrow string array over the logs' bytes as read (no copy), found the first
    time a row of the events' ``data`` is read (as the store leaves that column on disk until then): a load
    that reads no ``data`` does not look for the newlines of 300 MB of logs."""

    def __init__(self, logs: list[bytes], length: int) -> None:
        super().__init__(length)
        self._logs = logs

    def _read(self) -> Any:
        return _lines(self._logs)


def _lines(logs: list[bytes]) -> Any:
    """Each log's lines as one chunk of an Arrow string array over its bytes (no copy)."""
    chunks = []
    for data in logs:
        newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == _NEWLINE)
        offsets = np.empty(len(newlines) + 1, dtype=np.int64)
        offsets[0] = 0
        offsets[1:] = newlines + 1
        chunks.append(pa.LargeStringArray.from_buffers(len(newlines), pa.py_buffer(offsets), pa.py_buffer(data)))
    return pa.chunked_array(chunks, pa.large_string())


_NEWLINE, _DOLLAR = ord("\n"), ord("$")

"""Reading traces: files -> event records, robustly; folders -> :class:`Traces`.

The loader never fails on a folder: a line that is not complete JSON, JSON of
the wrong shape or types, a directory named like a trace file, an unreadable
file: each is skipped with one warning naming the file (and lines), and every
readable event is loaded. A byte-order mark is ignored; a lone surrogate
(escaped by the writer) and ``NaN`` written by other tools read back as text
and floats.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ._blobs import REF_MARKER, resolve
from ._tags import BASE_VALUES, markers, plausible
from ._tags import untag as _floats
from .files import find_run_file, runs_dir, trace_files
from .frames import gc_paused
from .runs import Trace, Traces
from .schema import FLOAT_TAG, well_formed

_BOM = b"\xef\xbb\xbf"


class TruncatedTraceWarning(UserWarning):
    """A trace file ends in (or contains) a line that is not a complete, well-formed event; or a
    file in a runs folder could not be read."""


# ------------------------------------------------------------------ reading
def read_events(file: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The events in one trace file, in order.

    A line that is not a complete, well-formed event (a crash mid-write
    leaves at most the last one) is skipped with one
    :class:`TruncatedTraceWarning` naming the file and the lines.
    """
    file = Path(file)
    return _events(file, file.read_bytes())


def _events(file: Path, data: bytes) -> list[dict[str, Any]]:
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    body = data.strip()
    if not body:
        return []
    events: list[Any] | None = None
    try:  # one parse for the whole file: faster than a parse per line
        events = orjson.loads(b"[" + body.replace(b"\n", b",") + b"]")
    except ValueError:
        pass
    if events is not None and len(events) == body.count(b"\n") + 1 and _plausible(events):
        tagged, refs = markers(body)
        if tagged:
            events = [_floats(e) for e in events]
        return resolve(file, events) if refs else events  # images stored once: put back
    return _read_strictly(file, data)


def _read_strictly(file: Path, data: bytes) -> list[dict[str, Any]]:
    """Line by line, each checked with :func:`~agentlab.trace.schema.well_formed`: the slow path, taken when the
    fast one finds a problem.
    """
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    events, bad = [], []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        event = _parse_line(line)
        if event is not None and well_formed(event):
            events.append(_floats(event) if FLOAT_TAG.encode() in line else event)
        else:
            bad.append(n)
    if bad:
        where = (
            f"line {bad[0]}"
            if len(bad) == 1
            else f"{len(bad)} lines ({', '.join(map(str, bad[:5]))}{'...' if len(bad) > 5 else ''})"
        )
        warnings.warn(
            f"{file}: skipped {where}: not a complete, well-formed event (was the run killed while writing, "
            f"or the file edited?); loaded the {len(events)} complete events",
            TruncatedTraceWarning,
            stacklevel=2,
        )
    return resolve(file, events) if REF_MARKER in data else events


def _plausible(events: list[Any]) -> bool:
    """Every event a dict whose base fields pass :func:`~._tags.plausible`.

    Kind-specific fields are checked where the frames read them (:func:`~.frames.summarize`
    raises on a bad one, and the file is then read again strictly)."""
    if not events or {*map(type, events)} != {dict}:
        return False
    try:
        kinds, steps, seqs, ts = zip(*map(BASE_VALUES, events), strict=True)
    except KeyError:
        return False
    return plausible(kinds, steps, seqs, ts)


def _parse_line(line: bytes) -> Any:
    if line.startswith(_BOM):
        line = line[len(_BOM) :]
    try:
        return orjson.loads(line)
    except ValueError:
        pass
    try:  # what orjson refuses but is readable: lone surrogate escapes, NaN/Infinity from other writers
        return json.loads(line.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return None


def load_run(run_id: str, path: str | os.PathLike[str] | None = None) -> Trace:
    """One run's trace: ``run_id`` (or a unique prefix of it, or a ``.jsonl`` path)
    in the runs folder ``path`` (default: ``$AGENTLAB_RUNS`` or ``./runs``)."""
    file = find_run_file(run_id, path)
    return _trace(file, read_events(file))


def read_trace(file: Path) -> Trace:
    """One log file as a summarized :class:`Trace` (what :func:`load_run` returns for it)."""
    return _trace(file, read_events(file))


def trace_of(file: Path, data: bytes) -> Trace:
    """:func:`read_trace` of a log's bytes, read already (the store also cuts its lines)."""
    return _trace(file, _events(file, data))


def _trace(file: Path, events: list[dict[str, Any]], t: Trace | None = None) -> Trace:
    """A summarized :class:`Trace` (``t``, when it was made of these events already); a field of the
    wrong type found while summarizing sends the file through the strict reader (which skips that line
    with a warning)."""
    t = Trace(events, file) if t is None else t
    try:
        _ = t.rows  # summarize while the parsed events are at hand
        return t
    except _SUMMARY_ERRORS:
        pass
    t = Trace(_read_strictly(file, file.read_bytes()), file)
    try:
        _ = t.rows
    except _SUMMARY_ERRORS as exc:  # a shape the strict reader does not know: keep the loader standing
        warnings.warn(
            f"{file}: skipped the whole file: {type(exc).__name__}: {exc}", TruncatedTraceWarning, stacklevel=3
        )
        t = Trace([], file)
    return t


_SUMMARY_ERRORS = (TypeError, ValueError, KeyError, AttributeError, OverflowError, IndexError)


def load_runs(path: str | os.PathLike[str] | None = None) -> Traces:
    """Every run in a runs folder (or one ``.jsonl`` file), as DataFrames.

    Columns and dtypes are documented in ``docs/traces.md``. Runs the
    folder's store holds fresh (``agentlab compact``) are read from it; every
    other run (not stored yet, still being written, resumed since) from its
    log, with the same frames either way. A file that cannot be read (a
    directory named like a trace, no permission) is skipped with a
    :class:`TruncatedTraceWarning` naming it.
    """
    every = trace_files(path)
    folder = runs_dir(path)
    frames, stored, files = _from_store(folder, every)
    with gc_paused():
        parts = _read_logs(files)
    traces = [t for part in parts for t in part.traces]
    if frames is None:
        return Traces._from_parts(parts, folder)
    return Traces._with_store(frames, stored, traces, folder, every, load=read_trace, parts=parts)


def _read_logs(files: list[Path]) -> list[Any]:
    """The parts the logs' frames are built from, in file order, each with its :class:`Trace` objects.

    A log that parses in one piece (one event a line, no NaN tag, no blob) joins its neighbours in a
    :class:`~._columns.Batch`, summarized in bulk; any other (cut short, damaged, a lone surrogate) and
    any run the batch refuses is read and summarized on its own, by the reference path, as before."""
    columns = _bulk_module()

    def read() -> Iterator[tuple[Path, bytes]]:  # one file at a time: each is parsed while its bytes are in the cache
        for f in files:
            try:
                data = f.read_bytes()
            except (OSError, MemoryError) as exc:
                why = (
                    "it is a directory"
                    if f.is_dir()
                    else (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
                )
                warnings.warn(f"{f}: skipped the whole file: {why}", TruncatedTraceWarning, stacklevel=4)
                continue
            yield f, data

    if columns is None:
        return [Traces([_trace(f, _events(f, data)) for f, data in read()])]

    def logs() -> Iterator[tuple[Trace, Any]]:
        for f, data in read():
            lines, marked = columns.scan(data)
            events = None if marked else _whole(columns, data, lines)
            if events is not None and _has_base(events[0]):
                yield Trace(events, f), (data, lines)
            else:
                yield _trace(f, _events(f, data)), None

    return _parts(columns, logs())


def _parts(columns: Any, logs: Iterable[tuple[Trace, Any]]) -> list[Any]:
    """Runs in file order (each with its log's bytes and line count if it parsed in one piece, else None)
    as parts: a bulk :class:`~._columns.Batch` for each stretch of such runs, a :class:`Traces` for each
    stretch of others. ``logs`` is consumed lazily: each run is added to its batch right after its log is
    parsed."""
    parts: list[Any] = []
    others: list[Trace] = []
    batch = None
    for t, log in logs:
        if log is not None:
            if batch is None:
                if others:
                    parts.append(Traces(others))
                    others = []
                batch = columns.Batch()
            if batch.add(t, *log):
                continue
            t = _by_reference(t)
        if batch is not None:
            parts.extend(_closed(columns, batch))
            batch = None
        others.append(t)
    if batch is not None:
        parts.extend(_closed(columns, batch))
    if others:
        parts.append(Traces(others))
    return parts


def _closed(columns: Any, batch: Any) -> list[Any]:
    """``batch`` closed, as parts: itself (its runs were each checked when added), or, should a figure still
    not convert in bulk, its runs summarized one by one."""
    if not batch.traces:  # its first run was turned down
        return []
    try:
        batch.close()
        return [batch]
    except columns.NotBulk:
        return [Traces([_by_reference(t) for t in batch.traces])]


def _bulk_module() -> Any:
    """:mod:`._columns` when it can run here (pyarrow and pandas' Arrow strings), else None."""
    try:
        import agentlab.trace._columns as columns
    except ImportError:
        return None
    return columns if columns.available() else None


_SPACE = b" \t\r\n\x0b\x0c"


def _whole(columns: Any, data: bytes, lines: int) -> list[dict[str, Any]] | None:
    """The events of a log that is one complete event a line (it starts with ``{`` and ends with one
    newline after a line that is not blank), parsed in one call; None for any other."""
    if data[:1] != b"{" or data[-1:] != b"\n" or data[-2] in _SPACE:
        return None
    try:
        events = columns.parse(data)
    except ValueError:
        return None
    return events if len(events) == lines else None


def _has_base(first: Any) -> bool:
    """Whether a log's first record can make a :class:`Trace` (the rest is checked in bulk)."""
    return type(first) is dict and type(first.get("v", 0)) is int


def _by_reference(t: Trace) -> Trace:
    """A log the bulk pass turned down, read as :func:`_events` reads it (its bytes held no marker and
    parsed in one piece, so only the plausibility check is left) and summarized by :func:`_trace`."""
    file = t.file
    assert file is not None
    if _plausible(t.records):
        return _trace(file, t.records, t)
    return _trace(file, _read_strictly(file, file.read_bytes()))


def _from_store(folder: Path, files: list[Path]) -> tuple[Any, list[tuple[str, str]], list[Path]]:
    """The frames of the runs the store holds fresh, those runs (id, log name), and the log files still to read.
    A part found damaged while its rows are read is left out (warned about): its runs are read from their logs."""
    from ._store import DamagedPart, available, frames_of, log_sizes, read, store_dir

    if not folder.is_dir() or not store_dir(folder).is_dir() or not available():
        return None, [], files
    sizes = log_sizes(folder)
    damaged: set[str] = set()
    while True:
        tables, deferred, covered = read(folder, sizes, damaged)
        if not covered:
            return None, [], files
        try:
            frames = frames_of(tables, folder, deferred)
        except DamagedPart as bad:  # a fault past the file's footer: read the store again without that part
            bad.warn()
            damaged.add(bad.name)
            continue
        break
    stored = list(
        zip(tables["runs"].column("run_id").to_pylist(), tables["runs"].column("file").to_pylist(), strict=True)
    )
    return frames, stored, [f for f in files if f.name not in covered]

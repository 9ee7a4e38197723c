"""Building the store from the logs: a batch of runs at a time, at run end, after an experiment, or for a folder.

Every part is derived from the JSONL logs through the same reader and frames
``load_runs`` uses, which is why the store's frames equal the logs' (see
:mod:`._store` for the layout and its guarantees).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from itertools import chain, repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._background import batcher
from ._background import flush as flush_background
from ._store import (
    available,
    chosen,
    day_of,
    log_sizes,
    merge_tiers,
    owner_column,
    parts,
    schema,
    store_dir,
    string_array,
    write_part,
)
from ._tags import data_of
from .files import runs_dir
from .frames import TABLES, event_columns, gc_paused
from .reader import trace_of
from .runs import Trace, Traces
from .writer import TraceWriter, dumps

if TYPE_CHECKING:
    import pyarrow as pa


def _json(value: Any) -> str:
    return dumps(value)[:-1].decode()


def _tables(traces: list[Trace], sizes: list[int], logs: list[list[bytes] | None]) -> dict[str, pa.Table]:
    """The four tables of these runs, built from the same frames ``load_runs`` gives (``logs``: each
    run's log lines, where its events were read from them)."""
    import pyarrow as pa

    many = Traces(traces)
    frames = {"runs": many.runs, "steps": many.steps, "calls": many.calls}
    runs = frames["runs"].copy()
    runs["file"] = [Path(f).name for f in runs["file"]]
    runs["_bytes"] = sizes
    frames["runs"] = runs
    calls = frames["calls"].copy()
    calls["args"] = [_json(a) for a in calls["args"]]
    frames["calls"] = calls
    out = {name: pa.Table.from_pandas(df, schema=schema(name), preserve_index=False) for name, df in frames.items()}
    cols: dict[str, list[Any]] = {c.name: [] for c in TABLES["events"]} | {"_run": []}
    with gc_paused():
        event_columns(traces, cols)
        cols["t"] = list(map(float, cols["t"]))  # the store's t is a double, whatever the log wrote
        cols["_run"] = list(chain.from_iterable(repeat(t.run_id, len(t.records)) for t in traces))
        data = _data_texts(traces, logs)
    cols.pop("data")
    table = pa.table(cols, schema=schema("events").remove(schema("events").get_field_index("data")))
    out["events"] = table.add_column(table.schema.get_field_index("kind") + 1, schema("events").field("data"), data)
    return out


_BASE_PREFIX = (
    r'^\{"v":\d+,"run_id":"[^"\\]*","seq":-?\d+,"step":-?\d+,'
    r'"t":(?:-?[0-9.eE+-]+|\{"\$float":"-?[A-Za-z]+"\}),"kind":"[^"\\]*"(?:,|(\}))'
)
"""A line as the writer writes it: the base fields first, in this order (``Event.as_record``), then the
kind's own fields. Cutting this prefix off a line leaves the event's ``data`` as JSON, at C speed. A run id
or kind with an escape in it (run ids have none: ``files.check_name``) does not match, and its line is
serialised anew: a third less work for the regex than allowing escapes."""


def _data_texts(traces: list[Trace], logs: list[list[bytes] | None]) -> Any:
    """Each event's ``data`` as JSON text: cut from its log line where the line has the writer's shape
    (the text then parses to the same dict; one regex pass over the batch, at C speed), else
    written anew from the parsed event."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def anew() -> pa.Array:
        return string_array([_json(data_of(e)) for t in traces for e in t.records])

    lines: list[bytes] = []
    for t, log in zip(traces, logs, strict=True):
        if log is None or len(log) != len(t.records):
            return anew()
        lines.extend(log)
    try:
        arr = pa.array(lines, pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8 (a raw surrogate from another tool)
        return anew()
    ok = pc.match_substring_regex(arr, _BASE_PREFIX)
    cut = pc.replace_substring_regex(arr, _BASE_PREFIX, "{\\1", max_replacements=1)
    if pc.all(ok).as_py():
        return cut
    records = [e for t in traces for e in t.records]
    texts = cut.to_pylist()
    for i in (~ok.to_numpy(zero_copy_only=False)).nonzero()[0]:
        texts[i] = _json(data_of(records[i]))
    return string_array(texts)


def _lines(data: bytes) -> list[bytes]:
    """A log's non-blank lines (what the reader parses, one event each, when none is skipped)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return [line for line in data.split(b"\n") if line.strip()]


def store_runs(folder: Path, files: Iterable[Path], *, merge: bool = True) -> int:
    """Store these runs' logs (a batch: one part per day), then merge tiers; returns how many runs were stored."""
    import pyarrow.compute as pc

    traces: list[Trace] = []
    sizes: list[int] = []
    logs: list[list[bytes] | None] = []
    with gc_paused():
        for f in files:
            try:
                size = f.stat().st_size  # before reading: a log that grows meanwhile is seen as stale, never as fresh
                data = f.read_bytes()
                t = trace_of(f, data)
            except OSError:
                continue
            if t.records:
                traces.append(t)
                sizes.append(size)
                logs.append(_lines(data))
    if not traces:
        return 0
    root = store_dir(folder)
    tables = _tables(traces, sizes, logs)
    days = [day_of(s) for s in tables["runs"].column("started_at").to_pandas()]
    for day in sorted(set(days)):
        ids = [rid for rid, d in zip(tables["runs"].column("run_id").to_pylist(), days, strict=True) if d == day]
        if len(set(days)) == 1:
            part = tables
        else:  # each row goes with the run whose log holds it (a sub_run event's run_id names the child)
            part = {
                n: t.filter(pc.is_in(t.column(owner_column(n)), value_set=string_array(ids))) for n, t in tables.items()
            }
        write_part(root, day, part, 0)
    if merge:
        merge_tiers(folder)
    return len(traces)


def compact(folder: str | os.PathLike[str], *, rebuild: bool = False, batch: int = 2000) -> dict[str, int]:
    """Bring the store of a runs folder up to date with its logs: store every run not stored fresh,
    in batches, then merge each day into one part. ``rebuild``: throw the store away first and
    re-derive it from the logs. Returns counts (``stored``, ``fresh``, ``parts``)."""
    import shutil

    path = runs_dir(folder)
    if not path.is_dir():
        raise FileNotFoundError(f"no runs folder at {str(path)!r}: give the folder that holds the .jsonl traces")
    if not available():
        raise ModuleNotFoundError("the trace store needs pyarrow: pip install 'agentlab-loop[store]'")
    flush_background()  # runs this process handed to the background: stored once, not twice
    if rebuild and store_dir(path).exists():
        shutil.rmtree(store_dir(path))
    todo, fresh = _unstored(path)
    for start in range(0, len(todo), batch):
        store_runs(path, [path / n for n in todo[start : start + batch]], merge=False)
    merge_tiers(path, full=True)
    return {"stored": len(todo), "fresh": len(fresh), "parts": len(parts(path))}


def _unstored(folder: Path) -> tuple[list[str], set[str]]:
    """The logs in ``folder`` the store does not hold fresh (by name, sorted), and those it does."""
    found = parts(folder)
    logs = log_sizes(folder, sized=bool(found))  # nothing stored yet (a new experiment's): no size to compare
    fresh: set[str] = set()
    for names in chosen(found, logs).values():
        fresh |= {n for n in names if n in logs}
    return sorted(n for n in logs if n not in fresh), fresh


def store_later(folder: Path) -> None:
    """After an experiment: hand every run in its folder not stored yet to the background (when pyarrow is
    installed), whose worker process stores them off the experiment's path, as :class:`StoredTraceWriter`'s
    runs are (:mod:`._background`: written before a normal exit, a failure warned). The experiment returns
    without waiting: ``load_runs`` reads a run from its log until it is stored, with the same frames, and
    ``agentlab.sql`` and ``agentlab compact`` store what is pending first. Writing the store on the
    experiment's path cost ~0.33 ms a 5-step run, a third of such a run (docs/benchmarks.md)."""
    if not available() or not folder.is_dir():
        return
    try:
        todo, _ = _unstored(folder)
    except Exception as exc:  # noqa: BLE001 - the store is derived: never fail an experiment over it
        warnings.warn(
            f"the runs in {folder} were not all stored: {type(exc).__name__}: {exc} "
            "(the logs are whole; agentlab compact retries)",
            UserWarning,
            stacklevel=2,
        )
        return
    batcher().submit_all(folder, [folder / name for name in todo])


class StoredTraceWriter(TraceWriter):
    """A :class:`~.writer.TraceWriter` that also adds each run to the folder's store once it finishes.

    The run hands its closed log to a background thread (:mod:`._background`) and goes on: the
    thread stores the runs that finished within about a second of each other as one part, so the
    run does not pay a part's fixed cost (~10-17 ms, about as long as a 50-step run) on its path.
    Until its batch is written, ``load_runs`` reads the run from its log (the same frames). The
    pending runs are written before a normal exit; :meth:`flush` writes them now. A store write
    that fails is warned (:class:`~.writer.TraceWriteWarning`), never raised: the log holds every
    event, and ``agentlab compact`` adds the run.

    Not the default: a one-run script would pay pyarrow's and pandas' import at exit for a store
    ``agentlab compact`` can build later (docs/benchmarks.md).
    """

    def __call__(self, event: Any) -> None:
        super().__call__(event)
        if event.kind == "run_finished":
            batcher().submit(self.dir, self.file_of(event.run_id))

    def flush(self, timeout: float | None = None) -> bool:
        """Store now every run that finished and is not stored yet (this writer's and any other in the process),
        and wait until they are; returns whether none is left pending (``timeout``: seconds to wait at most)."""
        return flush_background(timeout)

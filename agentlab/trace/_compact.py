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
from ._blobs import REF_MARKER
from ._store import (
    DamagedPart,
    StoreNotRepaired,
    available,
    check,
    chosen,
    commit,
    day_of,
    locked,
    log_sizes,
    merge_locked,
    owner_column,
    parts,
    remove,
    schema,
    stage,
    store_dir,
    string_array,
    tables_of,
    tidy,
)
from ._tags import data_of
from .files import runs_dir
from .frames import event_columns, gc_paused
from .reader import trace_of
from .runs import Trace, Traces
from .schema import HEAD_PATTERN, TABLES
from .writer import TraceWriter, dumps

if TYPE_CHECKING:
    import pyarrow as pa


def _json(value: Any) -> str:
    return dumps(value)[:-1].decode()


def _tables(
    traces: list[Trace], sizes: list[int], logs: list[list[bytes] | None], many: Traces | None = None
) -> dict[str, pa.Table]:
    """The four tables of these runs, built from the same frames ``load_runs`` gives (``logs``: each
    run's log lines, where its events were read from them; ``many``: their frames, when built already)."""
    import pyarrow as pa

    many = Traces(traces) if many is None else many
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
    ok = pc.match_substring_regex(arr, HEAD_PATTERN)
    ok = pc.and_(ok, pc.invert(pc.match_substring(arr, REF_MARKER.decode())))  # a payload stored by reference:
    # the line holds the reference, the log's reader puts the payload back, and so does the store (one shape)
    cut = pc.replace_substring_regex(arr, HEAD_PATTERN, "{\\1", max_replacements=1)
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
    """Store these runs' logs (a batch: one part per day), then merge tiers; returns how many runs were stored.

    Each log is read before the store's lock is taken (the slow part); under the lock, a run another process
    stored meanwhile (the same log size) is left out, and one the store holds from an older log (resumed
    since) is replaced in the same commit, so the store never holds a run twice."""
    read = _read(files)
    if not read[0]:
        return 0
    with locked(folder):
        stored = _store_locked(folder, *read)
        if merge:
            remove(folder, merge_locked(folder))
    return stored


def _store_locked(folder: Path, traces: list[Trace], sizes: list[int], logs: list[list[bytes] | None]) -> int:
    """Store these read runs, replacing any copy the store holds of them (the store's lock held)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not traces:
        return 0
    many = Traces(traces)
    found = parts(folder, days={day_of(s) for s in many.runs["started_at"]})  # a run's copies are all in its day
    held = {n: size for p in found for n, size in p.files().items()}
    last = {Path(t.file or "").name: i for i, t in enumerate(traces)}  # a log given twice is stored once
    todo = [i for name, i in last.items() if held.get(name) != sizes[i]]
    if not todo:
        return 0  # another process stored them, from the same logs
    everyone = todo == list(range(len(traces)))
    traces = [traces[i] for i in todo]
    tables = _tables(traces, [sizes[i] for i in todo], [logs[i] for i in todo], many if everyone else None)
    names = set(tables["runs"].column("file").to_pylist())
    days = [day_of(s) for s in tables["runs"].column("started_at").to_pandas()]
    old = [p for p in found if names.intersection(p.files())]
    root = store_dir(folder)
    tidy(folder, set(days) | {p.day for p in old})
    staged = []
    for day in sorted(set(days) | {p.day for p in old}):
        ids = [rid for rid, d in zip(tables["runs"].column("run_id").to_pylist(), days, strict=True) if d == day]
        if len(set(days)) == 1 and ids:
            pieces = [tables]
        else:  # each row goes with the run whose log holds it (a sub_run event's run_id names the child)
            value_set = string_array(ids)
            pieces = [
                {n: t.filter(pc.is_in(t.column(owner_column(n)), value_set=value_set)) for n, t in tables.items()}
            ]
        replaced = [p for p in old if p.day == day]
        keep = {i: kept for i, p in enumerate(replaced) if (kept := set(p.files()) - names)}
        if keep:  # the other runs of a part that held an older copy of one of these: written again beside them
            pieces.append(tables_of(folder, replaced, keep))
        part = {n: pa.concat_tables([piece[n] for piece in pieces]) for n in tables}
        if part["runs"].num_rows:
            staged.append(stage(root, day, part, max((p.tier for p in replaced), default=0)))
    commit(root, old, staged)
    return len(traces)


def compact(
    folder: str | os.PathLike[str], *, rebuild: bool = False, verify: bool = False, batch: int = 2000
) -> dict[str, int]:
    """Bring the store of a runs folder up to date with its logs: replace every damaged part, store every run
    not stored fresh, in batches, then merge each day into one part. ``rebuild``: throw every part away first
    and re-derive the store from the logs. Returns counts (``stored``, ``fresh``, ``parts``, ``repaired``: the
    damaged parts replaced, each warned about). A part is damaged when a file of it does not open as its table
    (its footer and columns); ``verify``: or when any of its rows does not read (every part read whole). Holds
    the store's lock throughout: a second compaction waits, then finds the runs stored. Raises ``OSError`` when a
    damaged part cannot be removed, or holds the only copy of a run (:class:`~._store.StoreNotRepaired`, an
    ``OSError``)."""
    path = runs_dir(folder)
    if not path.is_dir():
        raise FileNotFoundError(f"no runs folder at {str(path)!r}: give the folder that holds the .jsonl traces")
    if not available():
        raise ModuleNotFoundError("the trace store needs pyarrow: pip install 'agentlab-loop[store]'")
    flush_background()  # runs this process handed to the background: stored once, not twice
    stored = repaired = 0
    with locked(path):
        if rebuild:
            commit(store_dir(path), parts(path), [])
        damaged = _damaged(path, rows=verify)
        for _ in range(3):  # a fault found only while merging: that part goes, and its runs are stored again
            for bad in damaged:
                bad.warn(stacklevel=2)
            repaired += len(damaged) - len(remove(path, damaged))
            tidy(path)
            todo, fresh = _unstored(path)
            for start in range(0, len(todo), batch):
                stored += _store_locked(path, *_read([path / n for n in todo[start : start + batch]]))
            damaged = merge_locked(path, full=True)
            if not damaged:
                break
        tidy(path)
        kept = remove(path, _damaged(path, rows=verify))  # a last try; a part holding the only copy of a run stays
        left = _damaged(path, rows=verify)
    if left:
        first = next((k for k in kept if k.name == left[0].name), left[0])
        raise StoreNotRepaired(f"{store_dir(path)}: {len(left)} damaged part(s) could not be replaced: {first}")
    return {"stored": stored, "fresh": len(fresh), "parts": len(parts(path)), "repaired": repaired}


def _damaged(folder: Path, *, rows: bool = False) -> list[DamagedPart]:
    """Every part of the store one of whose files does not open as its table (``rows``: or does not read whole)."""
    damaged: list[DamagedPart] = []
    found = parts(folder, damaged)
    return damaged + [bad for p in found if (bad := check(folder, p, rows=rows)) is not None]


def _read(files: Iterable[Path]) -> tuple[list[Trace], list[int], list[list[bytes] | None]]:
    """The runs in these logs (those with events), each log's size and its lines."""
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
    return traces, sizes, logs


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

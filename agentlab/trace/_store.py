"""The columnar store: the four frames as Parquet tables beside the JSONL logs.

The JSONL files stay the crash-safe log of each run; the store is what
analysis reads, and it can be thrown away and rebuilt from the logs at any
time (``agentlab compact RUNS_DIR --rebuild``). Layout, under ``<runs>/_store``::

    runs/day=2026-12-03/part-<tier>-<time_ns>-<id>.parquet
    steps/day=2026-12-03/part-<same name>.parquet
    calls/...   events/...

**Partitioned by day** (the UTC day each run started): new runs only ever
touch today's folder, so compaction never rewrites old days, and DuckDB,
Polars, Spark and Ray Data read ``day=`` folders as a hive-partitioned column
(a filter on ``day`` skips whole folders). One experiment writes to its own
runs folder, so experiment x day is the partition in practice. Within a day,
parts are merged by tiers: sixteen parts of one tier become one of the next,
and ``agentlab compact`` merges a day into one part, so a folder of 100,000
runs a day stays a few files per table per day instead of 400,000.

**Crash-safe**: every file is written under a dot-name (``.part-....tmp``,
which no glob of ``*.parquet`` matches) and renamed into place, so no reader
ever sees half a file; a part's ``runs`` file is written last and is what
makes the part count (a part without it is ignored). A merge writes the
merged part before it removes what it replaces; until then a run is in two
parts, and readers keep one.

**Fresh or stale**: the ``runs`` table keeps, per run, the size its JSONL file
had when the run was stored (``_bytes``). A run whose log has grown since
(still being written, or resumed) is read from its log instead, and stored
again by the next compaction.

This module knows the layout and reads and merges parts; :mod:`._compact`
builds parts from the logs. Needs ``pyarrow`` (``pip install
'agentlab-loop[store]'``); without it everything reads the JSONL, as before.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .frames import TABLES

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


STORE_DIR = "_store"
MERGE_AT = 16
"""Parts of one tier in a day that are merged into one part of the next tier."""
TOP_TIER = 3
ORPHAN_AGE_S = 600.0
"""A table file whose part has no ``runs`` file is removed by compaction once it is this old
(younger, it may belong to a part being written right now)."""
ARROW_TYPES = {
    "str": "string",
    "int64": "int64",
    "float64": "float64",
    "bool": "bool",
    "object": "string",
    "json": "string",
}
HIDDEN = {
    "runs": (("_bytes", "int64", "the size of the run's log when it was stored (fresh or stale)"),),
    "events": (
        (
            "_run",
            "string",
            "the run whose log holds the event (a sub_run event's run_id names the sub-run)",
        ),
    ),
}
"""Store-only columns: the size of the run's log when it was stored (to tell fresh from stale), and the run
whose log holds each event."""


def owner_column(table: str) -> str:
    """The column that names each row's run, the run whose log holds the row: ``_run`` in ``events`` (a
    ``sub_run`` event's ``run_id`` names the sub-run), ``run_id`` in the other tables."""
    return "_run" if table == "events" else "run_id"


JSON_COLUMNS = {t: (c.name,) for t, cols in TABLES.items() for c in cols if c.dtype == "json"}
"""The free-form columns (one a table: ``calls.args``, ``events.data``), JSON text in the store: read from disk
only when a row of them is read.
"""
MAX_DEFERRED_PARTS = 64
"""Up to this many parts, the JSON columns wait on disk (each part's files held open until read);
a store of more parts (not compacted for months) reads them at once instead, holding no files."""


def available() -> bool:
    """Whether pyarrow is installed (the store needs it; without it, the JSONL is read)."""
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None


def store_dir(folder: Path) -> Path:
    return folder / STORE_DIR


def schema(table: str) -> pa.Schema:
    """The Parquet schema of one table, from the frames' column definitions (``docs/traces.md``)."""
    import pyarrow as pa

    fields = []
    for col in TABLES[table]:
        if col.dtype.startswith("datetime64"):
            typ = pa.timestamp("ns", tz="UTC")
        else:
            typ = pa.type_for_alias(ARROW_TYPES[col.dtype])
        fields.append(pa.field(col.name, typ, nullable=col.dtype not in ("int64", "bool")))
    fields += [pa.field(name, pa.type_for_alias(dtype), nullable=False) for name, dtype, _ in HIDDEN.get(table, ())]
    return pa.schema(fields)


# ------------------------------------------------------------ writing
def _write_table(table: pa.Table, path: Path) -> None:
    """Write under a dot-name, then rename: a reader sees the whole file or none."""
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _part_name(tier: int) -> str:
    return f"part-{tier}-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"


def day_of(started: Any) -> str:
    import pandas as pd

    return "none" if started is None or pd.isna(started) else started.strftime("%Y-%m-%d")


def write_part(root: Path, day: str, tables: dict[str, pa.Table], tier: int) -> str:
    name = _part_name(tier)
    for table in ("events", "calls", "steps", "runs"):  # runs last: it makes the part count
        folder = root / table / f"day={day}"
        folder.mkdir(parents=True, exist_ok=True)
        _write_table(tables[table], folder / name)
    return name


def string_array(values: list[str]) -> pa.Array:
    import pyarrow as pa

    return pa.array(values, type=pa.string())


# ------------------------------------------------------------ reading
@dataclass
class Part:
    day: str
    name: str
    runs: pa.Table

    @property
    def tier(self) -> int:
        return int(self.name.split("-")[1])

    def path(self, root: Path, table: str) -> Path:
        return root / table / f"day={self.day}" / self.name


def parts(folder: Path) -> list[Part]:
    """Every complete part (one whose runs file exists and reads), oldest first."""
    import pyarrow.parquet as pq

    root = store_dir(folder)
    out = []
    for path in sorted((root / "runs").glob("day=*/part-*.parquet"), key=lambda p: p.name.split("-")[2:]):
        try:
            runs = pq.read_table(path, schema=schema("runs"))
        except FileNotFoundError:  # merged away since the glob: the merged part is listed (or is being written)
            continue
        except (
            OSError,
            ValueError,
        ) as exc:  # unreadable (a disk fault): those runs are read from their logs
            warnings.warn(
                f"{path}: skipped a store file that does not read ({exc}); its runs are read from their logs",
                UserWarning,
                stacklevel=3,
            )
            continue
        out.append(Part(path.parent.name.removeprefix("day="), path.name, runs))
    return out


def chosen(found: list[Part], logs: dict[str, int] | None) -> dict[int, set[str]]:
    """For each part (by position), the run files to take from it: fresh ones, each from its newest part."""
    best: dict[str, int] = {}
    for i, p in enumerate(found):
        names = p.runs.column("file").to_pylist()
        sizes = p.runs.column("_bytes").to_pylist()
        for name, size in zip(names, sizes, strict=True):
            if logs is None or logs.get(name, size) == size:
                best[name] = i
    out: dict[int, set[str]] = {}
    for name, i in best.items():
        out.setdefault(i, set()).add(name)
    return out


class Deferred:
    """A JSON text column read the first time it is needed, once for every view of it.

    A million events' ``data`` is most of a load's bytes unpacked (the text of every event) and most of
    its time and memory, yet a cost analysis never reads it; so ``load_runs`` leaves it where it is (on
    disk in the store: :class:`StoredColumn`; in the logs' bytes, uncut, for the bulk reader) until a row
    of it is read. ``take`` gives another view of the same column, sharing the one read. A subclass says
    how the column is read (:meth:`_read`).
    """

    def __init__(self, length: int, order: Any = None) -> None:
        self._order = order  # positions into the column as read (None: as it is)
        self._cache: list[Any] = []  # shared by every view: [the column, read]
        self._lock = threading.Lock()
        self._len = length

    def __len__(self) -> int:
        return self._len

    def take(self, positions: Any) -> Deferred:
        import numpy as np

        view = copy.copy(self)  # what it reads from, the cache and its lock shared
        positions = np.asarray(positions, dtype=np.intp)
        view._order = positions if self._order is None else self._order[positions]
        view._len = len(positions)
        return view

    def _base(self) -> pa.ChunkedArray:
        with self._lock:
            if not self._cache:
                self._cache.append(self._read())
            return self._cache[0]

    def _read(self) -> pa.ChunkedArray:
        """The whole column's text, in its order (called once, under the lock)."""
        raise NotImplementedError

    def array(self) -> pa.ChunkedArray:
        """The column's text, read now if it was not yet (every view shares one read)."""
        base = self._base()
        if self._order is None:
            return base
        import pyarrow as pa

        return base.take(pa.array(self._order))


class StoredColumn(Deferred):
    """One JSON column of the store's chosen rows, read from its files. The files are held open from the
    load on, so a merge that replaces them meanwhile (``agentlab compact``) does not take the rows away (on
    POSIX an open file stays readable after it is removed)."""

    def __init__(self, sources: list[tuple[Any, Any]], column: str, length: int, order: Any = None) -> None:
        super().__init__(length, order)
        self._sources = sources
        self._column = column

    def _read(self) -> pa.ChunkedArray:
        import pyarrow as pa
        import pyarrow.parquet as pq

        chunks: list[Any] = []
        for handle, rows in self._sources:  # Arrow's own pool: these buffers stay, and it packs them best
            chunks.extend(_batches(pq.ParquetFile(handle), rows, self._column))
            handle.close()  # read: the file is no longer needed
        return pa.chunked_array(chunks, type=pa.string())


READ_TRIES = 5
"""A merge may replace parts between listing them and opening their files: list again, up to this many times."""
BATCH_ROWS = 65536
"""Rows read at a time when a column is converted (its decoding buffers are this size, not the column's)."""


class _Plan:
    """One table's chosen rows across parts, each part's file held open, read column by column when converted.

    Reading one column of every part, converting it to its pandas form and dropping the Arrow copy before
    the next keeps a load's peak near the frames' own size (one column's buffers on top), where reading
    whole tables first held every column twice at the peak."""

    def __init__(self, table: str, sources: list[tuple[Any, Any, Any]]) -> None:
        self.table = table
        self.sources = sources  # (open file, its ParquetFile, the rows taken from it or None for all)
        self.order: Any = None  # positions into the concatenated pieces (None: as they are)

    @property
    def length(self) -> int:
        return sum(pf.metadata.num_rows if rows is None else len(rows) for _, pf, rows in self.sources)

    def batches(self, name: str) -> Iterator[pa.Array]:
        for _, pf, rows in self.sources:
            yield from _batches(pf, rows, name)

    def column(self, name: str, *, ordered: bool = True) -> pa.ChunkedArray:
        import pyarrow as pa

        typ = schema(self.table).field(name).type
        out = pa.chunked_array([c.cast(typ) for c in self.batches(name)], type=typ)
        if ordered and self.order is not None:
            out = out.take(pa.array(self.order))
        return out

    def values(self, name: str, dtype: str) -> Any:
        """One column in the dtype ``load_runs`` gives it from the logs (a numpy or pandas array), built a slice
        of rows at a time: numbers into one writable array, text straight into the large strings pandas holds."""
        import numpy as np
        import pyarrow as pa

        if dtype in ("int64", "float64", "bool"):
            values = np.empty(self.length, dtype=dtype)
            at = 0
            for col in self.batches(name):
                values[at : at + len(col)] = col.to_numpy(zero_copy_only=False)  # a float's null: NaN
                at += len(col)
            return values if self.order is None else values[self.order]
        text = pa.chunked_array([c.cast(pa.large_string()) for c in self.batches(name)], type=pa.large_string())
        if self.order is not None:
            text = text.take(pa.array(self.order))
        return text.to_pandas().array  # pandas' text dtype (Arrow-backed on pandas 3; objects on 2), as the logs'

    def owners(self) -> pa.ChunkedArray:
        """Each row's run, in the pieces' order (see :func:`owner_column`)."""
        return self.column(owner_column(self.table), ordered=False)

    def whole(self) -> pa.Table:
        """Every column of the chosen rows, in load order (what a merge writes)."""
        import pyarrow as pa

        return pa.table([self.column(f.name) for f in schema(self.table)], schema=schema(self.table))

    def close(self) -> None:
        for handle, _, _ in self.sources:
            handle.close()


def _batches(pf: Any, rows: Any, name: str) -> Iterator[pa.Array]:
    """One column of a part's file, the chosen ``rows`` of it (None: all), a slice of rows at a time (so reading
    it never holds a whole column's decoding buffers at once)."""
    import numpy as np
    import pyarrow as pa

    start = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=[name]):
        col = batch.column(0)
        if rows is not None:
            lo, hi = np.searchsorted(rows, (start, start + len(col)))
            col = col.take(pa.array(rows[lo:hi] - start))
        start += batch.num_rows
        yield col


def _open(p: Part, root: Path, table: str, names: set[str] | None, ids: Any) -> tuple[Any, Any, Any]:
    """One part's file of ``table``, held open, and the rows of the chosen runs in it (None: all)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    handle = pa.OSFile(str(p.path(root, table)))  # held open: a merge that removes the file leaves it readable
    try:
        pf = pq.ParquetFile(handle)
        rows = None
        if names is not None:
            owner = pf.read(columns=[owner_column(table)]).column(0)
            keep = pc.is_in(owner, value_set=ids)
            rows = np.flatnonzero(keep.to_numpy(zero_copy_only=False))
    except BaseException:
        handle.close()
        raise
    return handle, pf, rows


def _plans(found: list[Part], picked: dict[int, set[str]], root: Path) -> tuple[pa.Table, dict[str, _Plan]]:
    """The chosen runs' ``runs`` rows (in file-name order, as ``load_runs`` reads a folder) and, for the other
    tables, the files and rows to read them from, in the same order: the one place rows are picked and ordered,
    for a load (converted column by column, :func:`frames_of`) and a merge (whole tables, :meth:`_Plan.whole`)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    pieces = []
    plans = {t: _Plan(t, []) for t in ("steps", "calls", "events")}
    try:
        for i, names in sorted(picked.items()):
            p = found[i]
            runs = p.runs
            whole = len(names) == runs.num_rows
            ids = None
            if not whole:
                runs = runs.filter(pc.is_in(runs.column("file"), value_set=string_array(sorted(names))))
                ids = pc.unique(runs.column("run_id"))
            pieces.append(runs)
            for table, plan in plans.items():
                plan.sources.append(_open(p, root, table, None if whole else names, ids))
    except BaseException:
        for plan in plans.values():
            plan.close()
        raise
    runs = pa.concat_tables(pieces) if pieces else schema("runs").empty_table()
    files = runs.column("file").to_numpy(zero_copy_only=False)
    order = np.argsort(files, kind="stable")
    if not (order == np.arange(len(order))).all():
        runs = runs.take(pa.array(order))
        ids = runs.column("run_id")
        for plan in plans.values():
            rank = pc.index_in(plan.owners(), value_set=ids).to_numpy(zero_copy_only=False)
            plan.order = np.argsort(rank, kind="stable")
    return runs, plans


def read(folder: Path, logs: dict[str, int]) -> tuple[dict[str, Any], dict[str, Deferred], set[str]]:
    """The store's ``runs`` table for the runs it holds fresh, what to read of the other tables (their
    files held open, converted by :func:`frames_of`; their JSON columns are :class:`Deferred`, by table),
    and the log file names they cover."""
    with system_pool():
        return _read(folder, logs)


def _read(folder: Path, logs: dict[str, int]) -> tuple[dict[str, Any], dict[str, Deferred], set[str]]:
    root = store_dir(folder)
    for _ in range(READ_TRIES):
        found = parts(folder)
        if not found:
            return {}, {}, set()
        picked = chosen(found, logs)
        try:
            runs, plans = _plans(found, picked, root)
        except FileNotFoundError:  # a merge replaced some parts after they were listed: list them again
            continue
        break
    else:
        warnings.warn(
            f"{root}: the store kept changing while it was read; every run is read from its log",
            UserWarning,
            stacklevel=3,
        )
        return {}, {}, set()
    lazy = len(picked) <= MAX_DEFERRED_PARTS
    deferred: dict[str, Deferred] = {}
    if lazy:
        for t in JSON_COLUMNS:
            plan = plans[t]
            sources = [(handle, rows) for handle, _, rows in plan.sources]
            deferred[t] = StoredColumn(sources, JSON_COLUMNS[t][0], plan.length, plan.order)
    covered = set(runs.column("file").to_pylist())
    return {"runs": runs, **plans}, deferred, covered


_pool_lock = threading.Lock()
_pool_state: list[Any] = []  # while loads run: [the pool to restore, how many loads]


@contextlib.contextmanager
def system_pool() -> Iterator[None]:
    """Arrow allocates from the C library's ``malloc`` meanwhile, as numpy and pandas do.

    Arrow's default pool (mimalloc) keeps the pages a column's decoding buffers freed for its own later use,
    where numpy's arrays cannot reuse them: loading a million events then peaked ~50 MiB (a third) higher.
    The default pool is process-wide: it is switched for the loads' duration (nested or concurrent loads
    counted) and restored after the last; buffers keep the pool they came from, so nothing else changes."""
    import pyarrow as pa

    with _pool_lock:
        if _pool_state:
            _pool_state[1] += 1
        else:
            _pool_state[:] = [pa.default_memory_pool(), 1]
            pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        with _pool_lock:
            _pool_state[1] -= 1
            if not _pool_state[1]:
                pa.set_memory_pool(_pool_state[0])
                _pool_state.clear()


def frames_of(tables: dict[str, Any], folder: Path, deferred: dict[str, Deferred]) -> dict[str, pd.DataFrame]:
    """The store's chosen rows -> the four DataFrames, with the dtypes ``load_runs`` gives from the logs
    (``tables`` is left holding only ``runs``: the others are read, column by column, and converted)."""
    with system_pool():
        return _frames(tables, folder, deferred)


def _frames(tables: dict[str, Any], folder: Path, deferred: dict[str, Deferred]) -> dict[str, pd.DataFrame]:
    import pandas as pd

    from ._json import JSONArray

    out = {}
    runs = tables["runs"].drop_columns([h[0] for h in HIDDEN["runs"]])
    df = runs.to_pandas()
    prefix = str(folder / "x")[:-1]
    df["file"] = (prefix + df["file"]).astype(df["run_id"].dtype)
    out["runs"] = df
    for name in ("steps", "calls", "events"):
        plan: _Plan = tables.pop(name)
        columns: dict[str, Any] = {}  # arrays, not Series: a frame built from Series aligns (takes) each one
        try:
            for col in TABLES[name]:
                if col.dtype == "json":
                    text = deferred[name] if name in deferred else plan.column(col.name)
                    columns[col.name] = JSONArray.from_arrow(text)
                else:
                    columns[col.name] = plan.values(col.name, col.dtype)
        finally:
            if name not in deferred:
                plan.close()  # else the Deferred closes each file once it has read its column
        out[name] = pd.DataFrame(columns, copy=False)
    return out


# ------------------------------------------------------------ compacting
@contextlib.contextmanager
def _merge_lock(folder: Path) -> Iterator[bool]:
    """One merger at a time per store (others skip: the next one merges)."""
    root = store_dir(folder)
    root.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield True
        return
    with open(root / ".lock", "wb") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True


def _merge(folder: Path, group: list[Part], tier: int, logs: dict[str, int] | None) -> None:
    root = store_dir(folder)
    picked = chosen(group, logs)
    runs, plans = _plans(group, picked, root)
    try:
        tables = {"runs": runs, **{name: plan.whole() for name, plan in plans.items()}}
    finally:
        for plan in plans.values():
            plan.close()  # before the files are removed (Windows refuses to remove an open file)
    if tables["runs"].num_rows:
        write_part(root, group[0].day, tables, tier)
    for p in group:  # runs first: from here on the old part no longer counts
        try:
            p.path(root, "runs").unlink()
        except FileNotFoundError:
            pass
        except OSError:  # held open (Windows: a load still to read its data): left whole, the newer part wins
            continue
        for table in ("steps", "calls", "events"):
            with contextlib.suppress(OSError):  # a file left behind is an orphan, removed by a later compaction
                p.path(root, table).unlink()


def log_sizes(folder: Path, *, sized: bool = True) -> dict[str, int]:
    """Each run log in ``folder`` by name, with its size (``sized=False``: 0 each, without a ``stat`` a file)."""
    from .files import SUFFIX

    out = {}
    with os.scandir(folder) as it:
        for entry in it:
            try:
                if entry.name.endswith(SUFFIX) and entry.is_file():
                    out[entry.name] = entry.stat().st_size if sized else 0
            except OSError as exc:  # a link that cannot be followed (a loop): not a log, and said so
                warnings.warn(
                    f"{entry.path}: skipped (a link that cannot be followed: {exc})", UserWarning, stacklevel=2
                )
    return out


def merge_tiers(folder: Path, *, full: bool = False) -> None:
    """Merge a day's parts: ``MERGE_AT`` of one tier into one of the next; ``full``: each day into one part,
    dropping rows of runs whose log changed (they are stored anew)."""
    if not full and not _tier_full(folder):
        return  # the common case at run end: nothing to merge, and no part read to find that out
    with _merge_lock(folder) as mine:
        if not mine:
            return
        found = parts(folder)
        by_day: dict[str, list[Part]] = {}
        for p in found:
            by_day.setdefault(p.day, []).append(p)
        logs = log_sizes(folder)
        for day_parts in by_day.values():
            if full:
                ids = [n for p in day_parts for n in p.runs.column("file").to_pylist()]
                stale = any(
                    logs.get(n, s) != s
                    for p in day_parts
                    for n, s in zip(
                        p.runs.column("file").to_pylist(),
                        p.runs.column("_bytes").to_pylist(),
                        strict=True,
                    )
                )
                if len(day_parts) > 1 or stale or len(ids) != len(set(ids)):
                    _merge(folder, day_parts, TOP_TIER, logs)
                continue
            for tier in range(TOP_TIER):
                group = [p for p in day_parts if p.tier == tier]
                if len(group) >= MERGE_AT:
                    _merge(folder, group, tier + 1, logs)
                    day_parts = [p for p in day_parts if p not in group]
        _remove_orphans(folder)


def _tier_full(folder: Path) -> bool:
    """Whether some day has ``MERGE_AT`` parts of one tier (from the file names alone)."""
    counts: dict[tuple[str, str], int] = {}
    for path in (store_dir(folder) / "runs").glob("day=*/part-*.parquet"):
        key = (path.parent.name, path.name.split("-")[1])
        counts[key] = counts.get(key, 0) + 1
    return any(n >= MERGE_AT and int(tier) < TOP_TIER for (_, tier), n in counts.items())


def _remove_orphans(folder: Path) -> None:
    root = store_dir(folder)
    live = {(p.parent.name, p.name) for p in (root / "runs").glob("day=*/part-*.parquet")}
    now = time.time()
    for table in ("steps", "calls", "events"):
        for p in (root / table).glob("day=*/*"):
            orphan = p.name.startswith("part-") and (p.parent.name, p.name) not in live
            if orphan or p.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    if now - p.stat().st_mtime > ORPHAN_AGE_S:
                        p.unlink()

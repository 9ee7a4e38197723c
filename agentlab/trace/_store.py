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

**Each run once, for every reader**: every change holds the store's lock (:func:`locked`), and puts its new
parts in place by :func:`commit`: written under dot-names (``.part-....tmp``, which no glob of ``*.parquet``
matches), then, table by table, the old copy removed before the new one is renamed in, a part's ``runs`` file
last (it is what makes the part count). A reader of the folder as it stands never finds a run in two parts;
a crash leaves at most files of a part without its ``runs`` file, which the next change removes (:func:`tidy`).

**Damaged parts** (a file that does not read as its table) are skipped with a warning by every reader, their
runs read from the logs, and replaced by ``agentlab compact``. A part an older agentlab wrote, without a column
added since, is not damaged: every reader fills the column as such a run's logs give it (:data:`ADDED`), and
``agentlab compact`` rewrites it with every column.

**Fresh or stale**: the ``runs`` table keeps, per run, the size its JSONL file
had when the run was stored (``_bytes``). A run whose log has grown since
(still being written, or resumed) is read from its log instead, and stored
again by the next compaction, or by the next store of that run (which replaces the older copy).

This module knows the layout and reads and merges parts; :mod:`._compact`
builds parts from the logs. Needs ``pyarrow`` (``pip install
'agentlab-loop[store]'``); without it everything reads the JSONL, as before.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AgentlabError
from ._deferred import Deferred
from .schema import ARROW_TYPES, HIDDEN, TABLES

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


STORE_DIR = "_store"
MERGE_AT = 16
"""Parts of one tier in a day that are merged into one part of the next tier."""
TOP_TIER = 3


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


RUN_ID = "run_id"
"""A fill that is the row's own ``run_id`` (see :data:`ADDED`)."""

ADDED: dict[str, dict[str, Any]] = {
    "runs": {"recorded_cost": math.nan, "audit": "", "audit_findings": 0},
    "steps": {"thinking_tokens": 0, "sub_run_cost": 0.0, "recorded_cost": math.nan},
    "events": {"_run": RUN_ID},
}
"""The columns the store gained after its first release, and what a part written before each one holds in its
place: what the logs of a run written before it existed give for it (0 thinking tokens, no recorded cost, no audit
finding; ``_run``: the event's own ``run_id``, as no sub-run existed yet). A part an older agentlab wrote is read
as if it had them, by ``load_runs``, ``agentlab.sql`` and a merge (which writes them: ``agentlab compact`` brings
every part to the current columns). A column added to the frames without a fill here fails a test
(``tests/test_trace_store_versions.py``): every reader would report such a part damaged."""


def missing_columns(got: pa.Schema, table: str) -> list[str]:
    """The columns of :data:`ADDED` a file of ``table`` with schema ``got`` does not have (an older agentlab's)."""
    return [name for name in ADDED.get(table, ()) if got.get_field_index(name) < 0]


def _fill(table: str, name: str, length: int, run_ids: Any = None) -> pa.Array:
    """Column ``name`` of :data:`ADDED` for ``length`` rows of a part written before it (``run_ids``: the rows'
    own ``run_id`` column, for the fill that is one)."""
    import pyarrow as pa

    value = ADDED[table][name]
    typ = schema(table).field(name).type
    if value == RUN_ID:
        return run_ids.cast(typ)
    if isinstance(value, float) and math.isnan(value):
        return pa.nulls(length, typ)  # as the store writes a NaN (read back as NaN)
    return pa.repeat(pa.scalar(value, type=typ), length)


def with_added(got: pa.Table, table: str) -> pa.Table:
    """A table read from a part, with the columns of :data:`ADDED` its version did not write."""
    for name in missing_columns(got.schema, table):
        run_ids = got.column("run_id") if ADDED[table][name] == RUN_ID else None
        got = got.append_column(schema(table).field(name), _fill(table, name, got.num_rows, run_ids))
    return got


# ------------------------------------------------------------ writing
TABLE_NAMES = ("runs", "steps", "calls", "events")
LOCK_FILE = ".lock"


@contextlib.contextmanager
def locked(folder: Path, *, shared: bool = False) -> Iterator[None]:
    """The store's lock: every change to the store holds it alone; ``agentlab.sql`` holds it ``shared`` while
    it lists and reads the files, so no change lands in the middle of a query.

    Writers wait for each other (none skips its work), so two processes never store one run twice. The lock is
    ``flock`` on ``_store/.lock``, a file the store never deletes; one deleted by hand is noticed after locking
    (its inode is no longer the path's) and the new file is locked instead, so a second owner cannot appear.
    A store a reader cannot write (a read-only copy) is read without the lock."""
    root = store_dir(folder)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: one writer per folder is the caller's to ensure
        yield
        return
    if not shared:
        root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_FILE
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            if not shared:
                raise
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:  # no store, or one nobody may write: nothing can change under the reader
                yield
                return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)  # the file was replaced while we waited: lock the one that is there now
    try:
        yield
    finally:
        os.close(fd)


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


@dataclass
class Staged:
    """A part written under hidden names (``.part-....staged.tmp``, which no ``*.parquet`` glob matches), not yet
    seen by any reader: :func:`commit` puts it in place."""

    day: str
    name: str

    def path(self, root: Path, table: str) -> Path:
        return root / table / f"day={self.day}" / self.name

    def hidden(self, root: Path, table: str) -> Path:
        return self.path(root, table).with_name(f".{self.name}.staged.tmp")


def stage(root: Path, day: str, tables: dict[str, pa.Table], tier: int) -> Staged:
    part = Staged(day, _part_name(tier))
    for table in ("events", "calls", "steps", "runs"):
        folder = root / table / f"day={day}"
        folder.mkdir(parents=True, exist_ok=True)
        _write_table(tables[table], part.hidden(root, table))
    return part


def commit(root: Path, old: list[Part], new: list[Staged]) -> None:
    """Replace the parts ``old`` by the staged parts ``new``, so that no reader ever sees a run twice.

    No set of files can be swapped at once, so each table goes from the old copy to none to the new one:
    first the old parts' ``runs`` files go (from then on those parts do not count for ``load_runs``, which
    reads their runs from the logs meanwhile), then table by table the old files are removed before the new
    ones are renamed in, and the new ``runs`` files come last (the new parts count). A reader of the folder
    as it stands (DuckDB, Polars, Spark) sees each run at most once in each table at every moment, whatever
    the point a crash stops this at; the next write removes what such a crash left (:func:`tidy`).
    A file that cannot be removed stops the commit before the copy that would double it is put in place."""
    for table in TABLE_NAMES:
        for p in old:
            with contextlib.suppress(FileNotFoundError):
                p.path(root, table).unlink()
        if table == "runs":
            continue  # the new runs files go last
        for s in new:
            os.replace(s.hidden(root, table), s.path(root, table))
    for s in new:
        os.replace(s.hidden(root, "runs"), s.path(root, "runs"))


def write_part(root: Path, day: str, tables: dict[str, pa.Table], tier: int) -> str:
    """A new part (runs no part holds yet), in place once it returns. The store's lock must be held."""
    part = stage(root, day, tables, tier)
    commit(root, [], [part])
    return part.name


def string_array(values: list[str]) -> pa.Array:
    import pyarrow as pa

    return pa.array(values, type=pa.string())


# ------------------------------------------------------------ reading
@dataclass
class Part:
    day: str
    name: str
    runs: pa.Table

    def files(self) -> dict[str, int]:
        """Each run log the part holds, by name, with the size it had when it was stored (``_bytes``)."""
        return dict(zip(self.runs.column("file").to_pylist(), self.runs.column("_bytes").to_pylist(), strict=True))

    @property
    def tier(self) -> int:
        return int(self.name.split("-")[1])

    def path(self, root: Path, table: str) -> Path:
        return root / table / f"day={self.day}" / self.name


class StoreNotRepaired(AgentlabError, OSError):
    """``compact`` left a damaged part in place: it could not be removed, or it holds the only copy of a run."""


class DamagedPart(AgentlabError):
    """A part one of whose files does not read as its table (cut short, empty, not Parquet, other columns)."""

    def __init__(self, day: str, name: str, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.day, self.name, self.path = day, name, path
        self.why = " ".join(why.split())  # on one line: Arrow's messages end in newlines

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"

    @classmethod
    def of(cls, path: Path, why: str) -> DamagedPart:
        """The part ``path`` (a file of one of its tables) belongs to."""
        return cls(path.parent.name.removeprefix("day="), path.name, path, why)

    def warn(self, stacklevel: int = 3) -> None:
        warnings.warn(
            f"{self.path}: skipped a damaged store part ({self.why}); its runs are read from their logs "
            "(agentlab compact replaces it)",
            UserWarning,
            stacklevel=stacklevel + 1,
        )


def _unreadable(got: pa.Schema, table: str) -> str | None:
    """Why a file with schema ``got`` is not a part of ``table`` (a column missing or of another type), or None."""
    added = ADDED.get(table, {})
    for field in schema(table):
        i = got.get_field_index(field.name)
        if i < 0:
            if field.name in added:
                continue  # written before the column existed: read with its fill
            return f"it has no column {field.name!r}: not a {table} file"
        if got.field(i).type != field.type:
            return f"its column {field.name!r} is {got.field(i).type}, not {field.type}"
    return None


def read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged Parquet file raises (an I/O fault, a file that is not Parquet or not whole)."""
    import pyarrow as pa

    return (OSError, ValueError, pa.ArrowException)


def parts(folder: Path, damaged: list[DamagedPart] | None = None, days: set[str] | None = None) -> list[Part]:
    """Every complete part (one whose runs file exists and reads), oldest first (``days``: of those days only).
    A runs file that does not read is skipped with a warning, or added to ``damaged`` when given (what
    ``compact`` replaces)."""
    import pyarrow.parquet as pq

    root = store_dir(folder)
    out = []
    listed = (
        (root / "runs").glob("day=*/part-*.parquet")
        if days is None
        else [p for day in sorted(days) for p in (root / "runs" / f"day={day}").glob("part-*.parquet")]
    )
    for path in sorted(listed, key=lambda p: p.name.split("-")[2:]):
        day = path.parent.name.removeprefix("day=")
        try:
            runs = pq.ParquetFile(path).read()
            why = _unreadable(runs.schema, "runs")
        except FileNotFoundError:  # merged away since the glob: the merged part is listed (or is being written)
            continue
        except read_errors() as exc:  # unreadable (a disk fault, a cut copy): those runs are read from their logs
            why = f"it does not read: {exc}"
        if why is not None:
            bad = DamagedPart(day, path.name, path, why)
            if damaged is None:
                bad.warn()
            else:
                damaged.append(bad)
            continue
        out.append(Part(day, path.name, with_added(runs, "runs").select(schema("runs").names)))
    return out


def check(folder: Path, p: Part, *, rows: bool = False) -> DamagedPart | None:
    """Whether every file of part ``p`` opens as its table: its footer and columns, and (``rows``) every row."""
    return inspect(folder, p, rows=rows)[0]


def outdated(folder: Path, p: Part) -> dict[str, list[str]]:
    """The columns of :data:`ADDED` each file of part ``p`` lacks, by table (an older agentlab wrote it); empty for
    a part with every column."""
    return inspect(folder, p)[1]


def inspect(folder: Path, p: Part, *, rows: bool = False) -> tuple[DamagedPart | None, dict[str, list[str]]]:
    """:func:`check` and :func:`outdated` of part ``p`` from one read of each file's schema (``rows``: of the
    whole file). A damaged part's columns are not looked at further."""
    import pyarrow.parquet as pq

    root = store_dir(folder)
    lacking = {}
    for table in TABLE_NAMES:
        path = p.path(root, table)
        try:
            got = pq.read_table(path).schema if rows else pq.read_schema(path)
            why = _unreadable(got, table)
        except FileNotFoundError:
            why = "it is missing"
        except read_errors() as exc:
            why = f"it does not read: {exc}"
        if why is not None:
            return DamagedPart(p.day, p.name, path, why), {}
        if lacks := missing_columns(got, table):
            lacking[table] = lacks
    return None, lacking


def chosen(found: list[Part], logs: dict[str, int] | None) -> dict[int, set[str]]:
    """For each part (by position), the run files to take from it: fresh ones, each from its newest part."""
    best: dict[str, int] = {}
    for i, p in enumerate(found):
        for name, size in p.files().items():
            if logs is None or logs.get(name, size) == size:
                best[name] = i
    out: dict[int, set[str]] = {}
    for name, i in best.items():
        out.setdefault(i, set()).add(name)
    return out


class StoredColumn(Deferred):
    """One JSON column of the store's chosen rows, read from its files. The files are held open from the
    load on, so a merge that replaces them meanwhile (``agentlab compact``) does not take the rows away (on
    POSIX an open file stays readable after it is removed)."""

    def __init__(self, sources: list[tuple[Any, Any, Path]], column: str, length: int, order: Any = None) -> None:
        super().__init__(length, order)
        self._sources = sources
        self._column = column

    def _read(self) -> pa.ChunkedArray:
        import pyarrow as pa
        import pyarrow.parquet as pq

        chunks: list[Any] = []
        for handle, rows, path in self._sources:  # Arrow's own pool: these buffers stay, and it packs them best
            try:
                chunks.extend(_batches(pq.ParquetFile(handle), rows, self._column))
            except read_errors() as exc:  # a fault inside the file found now: named, with the way to repair it
                raise DamagedPart.of(
                    path,
                    f"its {self._column!r} column does not read: {exc}; agentlab compact --verify "
                    "replaces the part, and load_runs then reads those runs from their logs",
                ) from None
            finally:
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
        self.paths: list[Path] = []  # each source's path
        self.order: Any = None  # positions into the concatenated pieces (None: as they are)

    @property
    def length(self) -> int:
        return sum(pf.metadata.num_rows if rows is None else len(rows) for _, pf, rows in self.sources)

    def batches(self, name: str) -> Iterator[pa.Array]:
        for (_, pf, rows), path in zip(self.sources, self.paths, strict=True):
            try:
                yield from _column(pf, rows, self.table, name)
            except read_errors() as exc:  # a fault inside the file, past its footer
                raise DamagedPart.of(path, f"it does not read: {exc}") from None

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


def _column(pf: Any, rows: Any, table: str, name: str) -> Iterator[pa.Array]:
    """Column ``name`` of a part's file of ``table``, the chosen ``rows`` of it, a slice at a time
    (:func:`_batches`); a column of :data:`ADDED` that an older agentlab's part does not have comes as its fill."""
    if pf.schema_arrow.get_field_index(name) >= 0:
        yield from _batches(pf, rows, name)
    elif ADDED[table][name] == RUN_ID:
        yield from (_fill(table, name, len(ids), ids) for ids in _batches(pf, rows, "run_id"))
    else:
        yield _fill(table, name, pf.metadata.num_rows if rows is None else len(rows))


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
    """One part's file of ``table``, held open, and the rows of the chosen runs in it (None: all).
    Raises :class:`DamagedPart` for a file that does not read as the table (``FileNotFoundError`` as is:
    a merge removed it since it was listed)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = p.path(root, table)
    try:
        handle = pa.OSFile(str(path))  # held open: a merge that removes the file leaves it readable
    except FileNotFoundError:
        if p.path(root, "runs").exists():  # a commit removes a part's runs file first: this one is damaged
            raise DamagedPart(p.day, p.name, path, "it is missing") from None
        raise
    except read_errors() as exc:  # a folder in its place, no permission
        raise DamagedPart(p.day, p.name, path, f"it does not open: {exc}") from None
    try:
        try:
            pf = pq.ParquetFile(handle)
            why = _unreadable(pf.schema_arrow, table)
            rows = None
            if why is None and names is not None:
                name = owner_column(table)
                owner = pa.chunked_array(list(_column(pf, None, table, name)), schema(table).field(name).type)
                keep = pc.is_in(owner, value_set=ids)
                rows = np.flatnonzero(keep.to_numpy(zero_copy_only=False))
        except FileNotFoundError:
            raise
        except read_errors() as exc:
            why = f"it does not read: {exc}"
        if why is not None:
            raise DamagedPart(p.day, p.name, path, why)
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
                plan.paths.append(p.path(root, table))
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


def read(
    folder: Path, logs: dict[str, int], skip: set[str] | frozenset[str] = frozenset()
) -> tuple[dict[str, Any], dict[str, Deferred], set[str]]:
    """The store's ``runs`` table for the runs it holds fresh, what to read of the other tables (their
    files held open, converted by :func:`frames_of`; their JSON columns are :class:`Deferred`, by table),
    and the log file names they cover."""
    with system_pool():
        return _read(folder, logs, skip)


def _read(folder: Path, logs: dict[str, int], skip: set[str] | frozenset[str]) -> tuple[Any, Any, set[str]]:
    root = store_dir(folder)
    races = 0
    damaged = set(skip)
    while True:
        found = [p for p in parts(folder) if p.name not in damaged]
        if not found:
            return {}, {}, set()
        picked = chosen(found, logs)
        try:
            runs, plans = _plans(found, picked, root)
        except FileNotFoundError:  # a merge replaced some parts after they were listed: list them again
            races += 1
            if races < READ_TRIES:
                continue
            warnings.warn(
                f"{root}: the store kept changing while it was read; every run is read from its log",
                UserWarning,
                stacklevel=3,
            )
            return {}, {}, set()
        except DamagedPart as bad:  # its runs come from their logs; every other part is still read
            bad.warn()
            damaged.add(bad.name)
            continue
        break
    lazy = len(picked) <= MAX_DEFERRED_PARTS
    deferred: dict[str, Deferred] = {}
    if lazy:
        for t in JSON_COLUMNS:
            plan = plans[t]
            sources = [(handle, rows, path) for (handle, _, rows), path in zip(plan.sources, plan.paths, strict=True)]
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
        except BaseException:  # a damaged file: every file this load holds is let go
            for left in (plan, *(tables.pop(n) for n in ("steps", "calls", "events") if n in tables)):
                left.close()
            raise
        finally:
            if name not in deferred:
                plan.close()  # else the Deferred closes each file once it has read its column
        out[name] = pd.DataFrame(columns, copy=False)
    return out


# ------------------------------------------------------------ compacting
def tables_of(folder: Path, group: list[Part], picked: dict[int, set[str]]) -> dict[str, pa.Table]:
    """Every table's rows of the runs ``picked`` from the parts ``group`` (by position), in load order."""
    runs, plans = _plans(group, picked, store_dir(folder))
    try:
        return {"runs": runs, **{name: plan.whole() for name, plan in plans.items()}}
    finally:
        for plan in plans.values():
            plan.close()  # before the files are removed (Windows refuses to remove an open file)


def _merge(folder: Path, group: list[Part], tier: int, logs: dict[str, int] | None) -> None:
    """The parts ``group`` (of one day) replaced by one part of ``tier``, without the runs whose log changed since
    they were stored (they are stored anew). The store's lock must be held."""
    root = store_dir(folder)
    tables = tables_of(folder, group, chosen(group, logs))
    new = [stage(root, group[0].day, tables, tier)] if tables["runs"].num_rows else []
    commit(root, group, new)


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
    """:func:`merge_locked` under the store's lock."""
    if not full and not _tier_full(folder):
        return  # the common case at run end: nothing to merge, and no part read to find that out
    with locked(folder):
        merge_locked(folder, full=full)


def merge_locked(folder: Path, *, full: bool = False) -> list[DamagedPart]:
    """Merge a day's parts: ``MERGE_AT`` of one tier into one of the next; ``full``: each day into one part with
    every column (:data:`ADDED`), dropping rows of runs whose log changed (they are stored anew). The store's lock
    must be held. A part that turns out damaged while it is read is left out of its merge and returned (the caller
    replaces it)."""
    if not full and not _tier_full(folder):
        return []
    found = parts(folder)
    by_day: dict[str, list[Part]] = {}
    for p in found:
        by_day.setdefault(p.day, []).append(p)
    logs = log_sizes(folder)
    damaged: list[DamagedPart] = []
    for day_parts in by_day.values():
        groups = []
        if full:
            names = [n for p in day_parts for n in p.files()]
            stale = any(logs.get(n, size) != size for p in day_parts for n, size in p.files().items())
            old = any(outdated(folder, p) for p in day_parts)  # written with the columns as they were: rewritten
            if len(day_parts) > 1 or stale or old or len(names) != len(set(names)):
                groups.append((day_parts, TOP_TIER))
        else:
            for tier in range(TOP_TIER):
                group = [p for p in day_parts if p.tier == tier]
                if len(group) >= MERGE_AT:
                    groups.append((group, tier + 1))
        for group, tier in groups:
            try:
                _merge(folder, group, tier, logs)
            except DamagedPart as bad:  # a fault inside a file whose footer reads: the rest of the day waits
                damaged.append(bad)
    return damaged


def _tier_full(folder: Path) -> bool:
    """Whether some day has ``MERGE_AT`` parts of one tier (from the file names alone)."""
    counts: dict[tuple[str, str], int] = {}
    for path in (store_dir(folder) / "runs").glob("day=*/part-*.parquet"):
        key = (path.parent.name, path.name.split("-")[1])
        counts[key] = counts.get(key, 0) + 1
    return any(n >= MERGE_AT and int(tier) < TOP_TIER for (_, tier), n in counts.items())


def tidy(folder: Path, days: set[str] | None = None) -> None:
    """Remove what an interrupted write left (``days``: in those days only): files of a table whose part has no
    ``runs`` file, and hidden temporary files. The store's lock must be held: then no part is being written, and
    such a file is a crash's leftover that a reader of the folder as it stands would otherwise still see."""
    root = store_dir(folder)
    pattern = "day=*" if days is None else None
    folders = (
        [d for t in TABLE_NAMES for d in (root / t).glob(pattern)]
        if pattern
        else [root / t / f"day={day}" for t in TABLE_NAMES for day in days or ()]
    )
    live = {(p.parent.name, p.name) for p in (root / "runs").glob("day=*/part-*.parquet")}
    for d in folders:
        if not d.is_dir():
            continue
        for p in d.iterdir():
            leftover = p.name.startswith(".") and p.name.endswith(".tmp")
            orphan = p.name.startswith("part-") and (p.parent.name, p.name) not in live
            if leftover or orphan:
                _delete(p)


def remove(folder: Path, damaged: list[DamagedPart]) -> list[DamagedPart]:
    """Remove every file of these parts (the store's lock held): their runs are stored again from their logs.
    A part that holds a run whose log is gone is the only copy of that run: it is kept, and returned (its ``why``
    says so), for the caller to report rather than lose the run."""
    import pyarrow.parquet as pq

    root = store_dir(folder)
    logs = log_sizes(folder, sized=False)
    kept = []
    for bad in damaged:
        try:
            held = pq.read_table(root / "runs" / f"day={bad.day}" / bad.name, columns=["file"]).column(0).to_pylist()
        except read_errors():  # its runs file does not read: nothing of it can be read, and nothing is lost
            held = []
        gone = sorted(set(held) - set(logs))
        if gone:
            bad.why += (
                f"; it holds {len(gone)} run(s) whose log is gone ({', '.join(gone[:3])}), the only copy: "
                "kept (move it out of the store to drop them)"
            )
            kept.append(bad)
            continue
        for table in TABLE_NAMES:
            _delete(root / table / f"day={bad.day}" / bad.name)
    return kept


def _delete(path: Path) -> None:
    """Remove a file of the store, or whatever took its name (a folder too); gone already is fine."""
    import shutil

    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()

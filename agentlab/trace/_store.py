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
import os
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
"""Store-only columns: the size of the run's log when it was stored (to tell fresh from stale)."""


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


def _select(found: list[Part], chosen: dict[int, set[str]], root: Path) -> dict[str, pa.Table]:
    """The chosen runs' rows of all four tables (whole parts where every run in them is chosen)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    pieces: dict[str, list[pa.Table]] = {t: [] for t in TABLES}
    for i, names in sorted(chosen.items()):
        p = found[i]
        runs = p.runs
        whole = len(names) == runs.num_rows
        if not whole:
            runs = runs.filter(pc.is_in(runs.column("file"), value_set=string_array(sorted(names))))
            ids = pc.unique(runs.column("run_id"))
        pieces["runs"].append(runs)
        for table in ("steps", "calls", "events"):
            t = pq.read_table(p.path(root, table), schema=schema(table))
            owners = _owner(t)
            pieces[table].append(t if whole else t.filter(pc.is_in(owners, value_set=ids)))
    return {t: pa.concat_tables(v) if v else schema(t).empty_table() for t, v in pieces.items()}


def _owner(t: pa.Table) -> Any:
    """Each row's run: the events table says it (``_run``: a ``sub_run`` event's ``run_id`` names the
    sub-run, not the run whose log holds it); in the other tables it is the ``run_id``."""
    return t.column("_run") if "_run" in t.column_names else t.column("run_id")


def _sorted(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """Runs in file-name order, each run's rows in the order its log gives them (as ``load_runs`` reads a folder)."""
    import numpy as np
    import pyarrow as pa

    runs = tables["runs"]
    files = runs.column("file").to_numpy(zero_copy_only=False)
    order = np.argsort(files, kind="stable")
    if (order == np.arange(len(order))).all():
        return tables
    rank = dict(zip(runs.column("run_id").to_pylist(), np.argsort(order).tolist(), strict=False))
    out = {"runs": runs.take(pa.array(order))}
    for name in ("steps", "calls", "events"):
        t = tables[name]
        owners = _owner(t).to_pylist()
        ranks = np.array([rank[r] for r in owners]) if t.num_rows else np.array([], int)
        out[name] = t.take(pa.array(np.argsort(ranks, kind="stable")))
    return out


def read(folder: Path, logs: dict[str, int]) -> tuple[dict[str, pa.Table], set[str]]:
    """The store's tables for the runs it holds fresh, and the log file names they cover."""
    root = store_dir(folder)
    found = parts(folder)
    if not found:
        return {}, set()
    picked = chosen(found, logs)
    tables = _sorted(_select(found, picked, root))
    covered = set(tables["runs"].column("file").to_pylist())
    return tables, covered


def frames_of(tables: dict[str, pa.Table], folder: Path) -> dict[str, pd.DataFrame]:
    """Arrow tables -> the four DataFrames, with the dtypes ``load_runs`` gives from the logs."""
    import pandas as pd

    from ._json import JSONArray

    out = {}
    runs = tables["runs"].drop_columns([h[0] for h in HIDDEN["runs"]])
    df = runs.to_pandas()
    prefix = str(folder / "x")[:-1]
    df["file"] = (prefix + df["file"]).astype(df["run_id"].dtype)
    out["runs"] = df
    out["steps"] = tables["steps"].to_pandas()
    calls = tables["calls"]
    df = calls.drop_columns(["args"]).to_pandas()
    df.insert(
        calls.schema.get_field_index("args"),
        "args",
        pd.Series(JSONArray.from_arrow(calls.column("args"))),
    )
    out["calls"] = df
    events = tables["events"]
    df = events.drop_columns(["data", "_run"]).to_pandas()
    df["data"] = pd.Series(JSONArray.from_arrow(events.column("data")))
    out["events"] = df
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
    tables = _sorted(_select(group, picked, root))
    if tables["runs"].num_rows:
        write_part(root, group[0].day, tables, tier)
    for p in group:  # runs first: from here on the old part no longer counts
        for table in ("runs", "steps", "calls", "events"):
            with contextlib.suppress(FileNotFoundError):
                p.path(root, table).unlink()


def log_sizes(folder: Path) -> dict[str, int]:
    from .files import SUFFIX

    out = {}
    with os.scandir(folder) as it:
        for entry in it:
            if entry.name.endswith(SUFFIX) and entry.is_file():
                out[entry.name] = entry.stat().st_size
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

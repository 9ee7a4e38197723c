"""SQL over a runs folder: DuckDB reading the store's Parquet files as they stand.

The views are plain ``read_parquet`` over the day folders, the same files
DuckDB, Polars, Spark or Ray Data read on a cluster; nothing is loaded into
Python but the query's answer, so an aggregate over a hundred million
events runs in bounded memory.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._compact import compact as compact_folder
from ._store import (
    ADDED,
    HIDDEN,
    RUN_ID,
    TABLE_NAMES,
    Part,
    StoreNotRepaired,
    inspect,
    locked,
    parts,
    schema,
    store_dir,
)
from .files import SUFFIX, runs_dir

if TYPE_CHECKING:
    import pandas as pd

_HIDDEN = {table: f"exclude ({', '.join(name for name, _, _ in columns)})" for table, columns in HIDDEN.items()}
"""The store-only columns each view leaves out (a user's ``select *`` shows the columns of ``docs/traces.md``)."""
_SETTINGS = {
    "enable_progress_bar": False,  # it would print over the caller's output
    "disable_parquet_prefetching": True,
}
"""How each query's DuckDB is set up. DuckDB reads ahead the Parquet column chunks a scan will need into its own
buffers, as much as its memory limit (80 % of the machine) allows: over 100M events that read-ahead was
~90 MiB of an aggregate's +110 MiB peak, and it grew with the table. The files are local (a runs folder): the
aggregate took no more CPU without it, a selective query ~25 ms more of 150 (docs/benchmarks.md), so it is off,
and the peak is the row group each thread decodes (~21 MiB over 10M or 100M events)."""


def sql(query: str, path: str | os.PathLike[str] | None = None, *, compact: bool = True) -> pd.DataFrame:
    """Run ``query`` (DuckDB SQL) over the tables ``runs``, ``steps``, ``calls`` and ``events`` of a runs
    folder (default ``$AGENTLAB_RUNS`` or ``./runs``) and return the answer as a DataFrame.

    ``compact`` (default) first stores runs not stored yet, so the answer counts every run
    in the folder. Columns are those of ``docs/traces.md`` plus ``day`` (the partition);
    ``file`` holds the log's name, and ``events.data`` is JSON text (``data->>'tool'``).
    The query reads the store under its lock, shared: it waits for a change in progress (another
    process compacting), and none starts until it has read, so it counts each run once. A damaged
    part is left out, with a warning naming it (``agentlab compact`` replaces it; ``compact=True``
    does so first). Needs ``pip install 'agentlab-loop[store]'`` (pyarrow and duckdb).
    """
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"query must be a non-empty SQL string, got {query!r}")
    try:
        import duckdb
    except ModuleNotFoundError:
        raise ModuleNotFoundError("agentlab.sql needs duckdb: pip install 'agentlab-loop[store]'") from None
    folder = runs_dir(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"no runs folder at {str(folder)!r}: pass path= or set $AGENTLAB_RUNS")
    if compact and any(folder.glob(f"*{SUFFIX}")):
        try:
            compact_folder(folder)
        except StoreNotRepaired as exc:  # the query still reads every other part (that one is left out)
            warnings.warn(str(exc), UserWarning, stacklevel=2)
    con = duckdb.connect()
    for name, value in _SETTINGS.items():
        try:
            con.execute(f"set {name} = {str(value).lower()}")
        except duckdb.CatalogException:  # an older DuckDB without the setting: it reads as it always did
            pass
    try:
        with locked(folder, shared=True):  # no change to the store lands while it is listed and read
            found = _readable(folder, parts(folder))
            _views(con, folder, found)
            try:
                return con.execute(query).df()
            except duckdb.Error as exc:  # a fault inside a file, past its footer?
                if isinstance(exc, (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException)):
                    raise  # the query's own mistake
                whole = _readable(folder, [p for p, _ in found], rows=True)
                if len(whole) == len(found):
                    raise
            _views(con, folder, whole)
            return con.execute(query).df()
    finally:
        con.close()


def _literal(table: str, name: str) -> str:
    """A column of :data:`~._store.ADDED` as DuckDB SQL: its fill, of the column's type."""
    value = ADDED[table][name]
    if value == RUN_ID:
        return '"run_id"'
    typ = {"int64": "bigint", "double": "double", "string": "varchar", "bool": "boolean"}[
        str(schema(table).field(name).type)
    ]
    text = "null" if isinstance(value, float) and math.isnan(value) else "'" + str(value).replace("'", "''") + "'"
    return f"{text}::{typ}"


def _readable(folder: Path, found: list[Part], *, rows: bool = False) -> list[tuple[Part, dict[str, list[str]]]]:
    """The parts whose files read as their tables (``rows``: every row too), each with the columns an older
    agentlab did not write in it (:func:`~._store.inspect`); each other part warned about."""
    out = []
    for p in found:
        bad, lacking = inspect(folder, p, rows=rows)
        if bad is None:
            out.append((p, lacking))
        else:
            bad.warn(stacklevel=4)
    return out


def _views(con: Any, folder: Path, found: list[tuple[Part, dict[str, list[str]]]]) -> None:
    """One view a table over the files of the parts ``found``; a part an older agentlab wrote has the columns it
    lacks filled as ``load_runs`` fills them (:data:`~._store.ADDED`)."""
    root = store_dir(folder)
    for table in TABLE_NAMES:
        if found:
            groups: dict[tuple[str, ...], list[Part]] = {}
            for p, lacking in found:
                groups.setdefault(tuple(lacking.get(table, ())), []).append(p)
            scans = []
            for lacks, group in groups.items():
                listed = ", ".join("'" + str(p.path(root, table)).replace("'", "''") + "'" for p in group)
                filled = "".join(f', {_literal(table, name)} as "{name}"' for name in lacks)
                scans.append(f"select *{filled} from read_parquet([{listed}], hive_partitioning = true)")
            columns = ", ".join(f'"{name}"' for name in [*schema(table).names, "day"])
            con.execute(
                f"create or replace view {table} as select * {_HIDDEN.get(table, '')} "
                f"from (select {columns} from ({' union all by name '.join(scans)}))"
            )
        else:
            empty = schema(table).empty_table()
            con.register(f"_{table}_empty", empty)
            con.execute(
                f"create or replace view {table} as select * {_HIDDEN.get(table, '')}, "
                f"null::varchar as day from _{table}_empty"
            )

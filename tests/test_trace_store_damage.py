"""A damaged Parquet part never stops a reader: ``load_runs`` and ``agentlab.sql`` skip it with a warning naming it
(its runs come from their logs), and ``agentlab compact`` replaces it from the logs and says so."""

from __future__ import annotations

import io
import re
import shutil
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import agentlab as al
from agentlab.cli import main
from agentlab.trace import _store, compact
from agentlab.trace._compact import store_runs

from .trace_fixtures import a_run, assert_at_most_once_outside, assert_same_frames, from_logs


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _zero_bytes(path: Path) -> None:
    path.write_bytes(b"")


def _garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * (path.stat().st_size // 256 + 1))


def _footer_cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-8])  # the footer's length and the closing magic gone


def _magic_only(path: Path) -> None:
    path.write_bytes(b"PAR1PAR1")


def _other_table(path: Path) -> None:
    """A whole Parquet file, of columns this table does not have."""
    pq.write_table(pa.table({"something": ["else"]}), path)


def _other_types(path: Path) -> None:
    """The table's own columns, each as text: a file another tool rewrote."""
    table = pq.read_table(path)
    pq.write_table(table.cast(pa.schema([pa.field(f.name, pa.string()) for f in table.schema])), path)


def _missing(path: Path) -> None:
    path.unlink()


def _a_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _body_garbled(path: Path) -> None:
    """The footer intact, the column data overwritten: found only when the rows are read."""
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    for i in range(4, len(data) - footer - 8):
        data[i] = 0xFF
    path.write_bytes(bytes(data))


DAMAGE = {
    f.__name__.strip("_").replace("_", " "): f
    for f in (
        _truncated,
        _zero_bytes,
        _garbage,
        _footer_cut,
        _magic_only,
        _other_table,
        _other_types,
        _missing,
        _a_folder,
        _body_garbled,
    )
}


EVERY_TABLE = (
    "select (select count(*) from runs) as runs, (select count(*) from steps) as steps, "
    "(select sum(cost) from steps) as cost, (select count(distinct tool) from calls) as tools, "
    "(select sum(length(data)) from events) as data"
)
"""A query that reads a column of every table (a count alone may be answered from the files' footers)."""


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """Three runs in two parts: r0 and r1 in the first, r2 in the second (the one each test damages)."""
    folder = tmp_path_factory.mktemp("damage") / "runs"
    for i in range(3):
        a_run(folder, f"r{i}")
    store_runs(folder, [folder / "r0.jsonl", folder / "r1.jsonl"])
    store_runs(folder, [folder / "r2.jsonl"])
    return folder


def _damaged_copy(stored: Path, tmp_path: Path, table: str, damage: str) -> tuple[Path, Path]:
    folder = tmp_path / "runs"
    shutil.copytree(stored, folder)
    second = sorted((folder / "_store" / "runs").glob("day=*/part-*.parquet"))[-1]
    target = folder / "_store" / table / second.parent.name / second.name
    DAMAGE[damage](target)
    return folder, target


@pytest.mark.parametrize(
    ("damage", "table"),
    [(d, t) for d in DAMAGE for t in ("runs", "steps", "calls", "events") if (d, t) != ("missing", "runs")],
)
def test_a_damaged_part_is_skipped_by_every_reader_and_replaced_by_compact(stored, tmp_path, table, damage, capsys):
    folder, target = _damaged_copy(stored, tmp_path, table, damage)
    logs = from_logs(folder)
    with pytest.warns(UserWarning, match="damaged|did not read") as said:
        loaded = al.load_runs(folder)
    assert any(target.name in str(w.message) for w in said), [str(w.message) for w in said]
    assert_same_frames(logs, loaded)
    assert loaded.sources["r2"] == "log"
    assert loaded.sources["r0"] == "store"  # the other part is still read from the store
    with pytest.warns(UserWarning, match=f"{target.name}.*damaged store part"):
        answer = al.sql(EVERY_TABLE, folder, compact=False)
    kept = logs.steps[logs.steps["run_id"] != "r2"]
    assert answer["runs"].iloc[0] == 2  # the damaged part's run left out, never counted twice, never a failure
    assert answer["steps"].iloc[0] == len(kept)
    assert answer["cost"].iloc[0] == pytest.approx(kept["cost"].sum(), abs=1e-12)

    with pytest.warns(UserWarning, match=f"{target.name}.*damaged store part"):
        assert main(["compact", str(folder)]) == 0
    assert "1 damaged part(s) replaced from the logs" in capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        healed = al.load_runs(folder)
        answer = al.sql("select count(*) as n, sum(cost) as cost from runs", folder, compact=False)
    assert set(healed.sources.values()) == {"store"}
    assert_same_frames(logs, healed)
    assert answer["n"].iloc[0] == 3
    assert answer["cost"].iloc[0] == pytest.approx(logs.runs["cost"].sum(), abs=1e-12)
    assert all(set(runs) == {"r0", "r1", "r2"} for runs in assert_at_most_once_outside(folder).values())


def test_a_part_whose_runs_file_is_gone_is_not_read_and_compact_removes_the_rest(stored, tmp_path):
    """No runs file: the part does not count (its runs come from their logs, without a warning), and the next
    compaction removes its other files before storing those runs again, so DuckDB never finds them twice."""
    folder, target = _damaged_copy(stored, tmp_path, "runs", "missing")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert al.load_runs(folder).sources == {"r0": "store", "r1": "store", "r2": "log"}
        assert compact(folder)["stored"] == 1
    assert all(set(runs) == {"r0", "r1", "r2"} for runs in assert_at_most_once_outside(folder).values())
    assert not list((folder / "_store").rglob(target.name))


def test_sql_over_a_folder_with_a_damaged_part_stores_around_it(stored, tmp_path):
    """The default ``sql()`` replaces the damaged part before it reads: every run is counted once."""
    folder, _ = _damaged_copy(stored, tmp_path, "events", "truncated")
    with pytest.warns(UserWarning, match="damaged store part"):
        answer = al.sql("select count(distinct _run) as n from read_parquet('" + str(folder) + "/_store/events/*/*')")
    assert answer["n"].iloc[0] == 3


def test_a_part_compact_cannot_remove_fails_the_command(stored, tmp_path, monkeypatch, capsys):
    """A damaged part whose files stay (the store read-only to this user) is not left silently: exit 1, named."""
    folder, target = _damaged_copy(stored, tmp_path, "steps", "garbage")
    monkeypatch.setattr("agentlab.trace._compact.remove", lambda folder, damaged: list(damaged))  # none removed
    with pytest.warns(UserWarning):
        assert main(["compact", str(folder)]) == 1
    assert "damaged part(s) could not be replaced" in capsys.readouterr().err


def test_a_damaged_part_holding_the_only_copy_of_a_run_is_kept_and_compact_says_so(stored, tmp_path, capsys):
    """The run's log was deleted, so its damaged part holds the only copy: compact keeps the part (a later fix of
    the file can still read it), stores the rest, and exits 1 naming the run."""
    folder, target = _damaged_copy(stored, tmp_path, "events", "garbage")
    (folder / "r2.jsonl").unlink()
    damaged = f"{target.name}: skipped a damaged store part"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["compact", str(folder)]) == 1
        err = capsys.readouterr().err
        assert "r2.jsonl" in err and "log is gone" in err
        assert target.exists()
        assert _said(seen) == {damaged}
        seen.clear()
        assert al.load_runs(folder).sources == {"r0": "store", "r1": "store"}
        assert _said(seen) == {damaged}
        seen.clear()
        assert al.sql("select count(*) as n from runs", folder)["n"].iloc[0] == 2  # the default sql() answers
        assert _said(seen) == {damaged, "log is gone (r2.jsonl)"}  # and says what it could not store


def _said(seen: list[warnings.WarningMessage]) -> set[str]:
    """What the warnings in ``seen`` told the user, each by the words a test looks for; any other warning whole."""
    told = set()
    for w in seen:
        text = str(w.message)
        found = re.search(r"[^/\s]+: skipped a damaged store part|log is gone \(r2\.jsonl\)", text)
        told.add(found.group(0) if found else text)
    return told


def test_a_parquet_file_written_by_another_tool_reads_as_the_store(stored, tmp_path):
    """Not damage: the same columns and types, rewritten by plain pyarrow (another tool's writer) still read."""
    folder, _ = _damaged_copy(stored, tmp_path, "steps", "missing")
    (folder / "_store").rename(tmp_path / "aside")
    shutil.copytree(stored / "_store", folder / "_store")
    for path in (folder / "_store").rglob("part-*.parquet"):
        buf = io.BytesIO()
        pq.write_table(pq.read_table(path), buf, compression="snappy")
        path.write_bytes(buf.getvalue())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = al.load_runs(folder)
    assert set(loaded.sources.values()) == {"store"}
    assert_same_frames(from_logs(folder), loaded)


def test_a_data_column_damaged_past_its_footer_is_named_when_read_and_replaced_by_a_verifying_compact(
    stored, tmp_path, capsys
):
    """Only the pages of ``events.data`` garbled: the load defers that column, so the fault shows when a row of it is
    read, as an error naming the file and the repair; ``agentlab compact --verify`` finds it and replaces the part."""
    folder, target = _damaged_copy(stored, tmp_path, "events", "missing")
    shutil.copy(stored / "_store" / "events" / target.parent.name / target.name, target)
    meta = pq.ParquetFile(target).metadata
    column = meta.row_group(0).column(meta.schema.names.index("data"))
    data = bytearray(target.read_bytes())
    start = column.dictionary_page_offset or column.data_page_offset
    data[start : start + column.total_compressed_size] = b"\xff" * column.total_compressed_size
    target.write_bytes(bytes(data))
    loaded = al.load_runs(folder)
    with pytest.raises(_store.DamagedPart, match=f"{target.name}.*'data' column.*agentlab compact --verify"):
        loaded.events["data"].tolist()
    with pytest.warns(UserWarning, match=f"{target.name}.*damaged store part"):
        assert main(["compact", "--verify", str(folder)]) == 0
    assert "1 damaged part(s) replaced from the logs" in capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        healed = al.load_runs(folder)
    assert_same_frames(from_logs(folder), healed)

"""A store part written by an older agentlab (before a column existed) is read, not reported damaged: every reader
fills the columns it lacks as the logs of such a run give them, and ``agentlab compact`` rewrites it whole."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import agentlab as al
from agentlab.trace import _store, compact
from agentlab.trace._compact import store_runs

from .trace_fixtures import a_run, assert_same_frames, from_logs

FIRST_RELEASE = {
    "runs": [
        "run_id", "task", "model", "outcome", "reason", "detail", "steps", "model_calls", "cost", "input_tokens",
        "output_tokens", "cache_write_tokens", "cache_read_tokens", "seconds", "started_at", "nudges", "max_steps",
        "max_cost", "deadline_s", "file", "_bytes",
    ],
    "steps": [
        "run_id", "step", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens", "context_tokens",
        "cost", "cumulative_cost", "latency", "tool_calls", "stop_reason", "estimated", "t", "server_tool_cost",
    ],
    "calls": [
        "run_id", "step", "call_id", "index", "tool", "mode", "args", "outcome", "attempts", "is_error", "start", "end",
        "duration", "result_preview",
    ],
    "events": ["run_id", "seq", "step", "t", "kind", "data"],
}  # fmt: skip
"""Each table's columns in the store's first release (a479299, 2026-12-03), read from that commit's schema: the
parts on users' disks that are oldest."""

EVERY_TABLE = (
    "select (select count(*) from runs) as runs, (select sum(cost) from runs) as cost, "
    "(select count(*) from runs where recorded_cost is null) as unrecorded, (select max(audit) from runs) as audit, "
    "(select sum(audit_findings) from runs) as findings, (select count(*) from steps) as steps, "
    "(select sum(thinking_tokens) from steps) as thinking, (select sum(sub_run_cost) from steps) as sub_runs, "
    "(select count(*) from steps where recorded_cost is null) as steps_unrecorded, "
    "(select count(distinct tool) from calls) as tools, (select sum(length(data)) from events) as data"
)


def _as_written_before(folder: Path, part: Path) -> None:
    """Rewrite one part's files as the store's first release wrote them: without the columns added since."""
    root = folder / "_store"
    for table in _store.TABLE_NAMES:
        path = root / table / part.parent.name / part.name
        old = pq.read_table(path)
        pq.write_table(old.select([n for n in old.schema.names if n in FIRST_RELEASE[table]]), path)


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> tuple[Path, Path]:
    """The same three runs stored twice, in two parts each (r0 and r1, then r2): as this agentlab writes them, and
    with the first part as the first release wrote it."""
    current = tmp_path_factory.mktemp("versions") / "runs"
    for i in range(3):
        a_run(current, f"r{i}")
    store_runs(current, [current / "r0.jsonl", current / "r1.jsonl"])
    store_runs(current, [current / "r2.jsonl"])
    older = current.parent / "older"
    shutil.copytree(current, older)
    _as_written_before(older, sorted((older / "_store" / "runs").glob("day=*/part-*.parquet"))[0])
    return current, older


def test_every_column_the_store_gained_since_its_first_release_has_a_fill():
    """A column added to a table without saying what an older part holds in its place would make every reader
    report the parts on users' disks damaged."""
    for table in _store.TABLE_NAMES:
        gained = [name for name in _store.schema(table).names if name not in FIRST_RELEASE[table]]
        assert sorted(gained) == sorted(_store.ADDED.get(table, {})), table


def test_a_part_an_older_agentlab_wrote_loads_as_its_logs_do_without_a_warning(stores):
    _, older = stores
    assert [p for p in _store.parts(older) if _store.outdated(older, p)]  # the older part is there, and known
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "damaged store part"
        loaded = al.load_runs(older)
    assert set(loaded.sources.values()) == {"store"}  # not read from the logs around it
    assert_same_frames(from_logs(older), loaded)


def test_sql_over_an_older_part_without_compacting_answers_as_over_a_current_store(stores):
    current, older = stores

    def columns(folder: Path) -> dict[str, list[str]]:
        return {t: list(al.sql(f"select * from {t}", folder, compact=False).columns) for t in ("runs", "steps")}

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        answer = al.sql(EVERY_TABLE, older, compact=False)
        shown = columns(older)
    expected = al.sql(EVERY_TABLE, current, compact=False)
    assert answer.to_dict("records") == expected.to_dict("records")
    assert answer["runs"].iloc[0] == 3 and answer["unrecorded"].iloc[0] == 3 and answer["thinking"].iloc[0] == 0
    assert shown == columns(current)


@pytest.mark.parametrize("alone", [False, True], ids=["beside-a-current-part", "the-days-only-part"])
def test_compact_rewrites_an_older_part_with_every_column_and_the_same_rows(stores, tmp_path, alone):
    current, older = stores
    folder = tmp_path / "runs"
    shutil.copytree(older, folder)
    if alone:  # one part for the day (nothing else to merge it with), as the first release wrote it
        shutil.rmtree(folder)
        shutil.copytree(current, folder)
        compact(folder)
        (only,) = (folder / "_store" / "runs").glob("day=*/part-*.parquet")
        _as_written_before(folder, only)
    before = al.load_runs(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counts = compact(folder)
    assert counts["repaired"] == 0 and counts["stored"] == 0  # nothing re-read from the logs
    assert not [p for p in _store.parts(folder) if _store.outdated(folder, p)]
    for table in _store.TABLE_NAMES:
        for path in (folder / "_store" / table).glob("day=*/part-*.parquet"):
            assert pq.read_schema(path).names == _store.schema(table).names, path
    assert_same_frames(before, al.load_runs(folder))


def test_an_older_part_with_one_run_grown_since_reads_the_others_from_it(stores, tmp_path):
    """A run whose log grew since it was stored is read from its log; the part's other runs are still picked out of
    the older part (by each event's owner, which such a part does not write: its own run_id)."""
    _, older = stores
    folder = tmp_path / "runs"
    shutil.copytree(older, folder)
    with (folder / "r0.jsonl").open("ab") as log:
        log.write(b"\n")  # the log is longer than when it was stored: stale
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = al.load_runs(folder)
    assert loaded.sources == {"r0": "log", "r1": "store", "r2": "store"}
    assert_same_frames(from_logs(folder), loaded)


FIRST_RELEASE_FOLDER = Path(__file__).parent / "fixtures" / "store_first_release" / "folder"
"""Logs and a store part written by agentlab at 79cdab0 itself (see that folder's README): made by

    for i in range(3):
        script = [reply(f"step {j}", ("lookup", {"key": f"r{i}-{j}"}), ("missing", {"key": "x"})) for j in range(2)]
        al.run(f"task {i}", [lookup, missing], model=al.ScriptedModel(script + [reply(f"done {i}")]),
               trace=folder, clock=al.FakeClock(), max_cost=1.0, run_id=f"first-release-{i}")
    agentlab.trace._store.compact(folder)
"""


def test_a_store_the_first_release_wrote_reads_as_its_logs_and_compacts_to_the_current_columns(tmp_path):
    folder = tmp_path / "folder"
    shutil.copytree(FIRST_RELEASE_FOLDER, folder)
    (part,) = _store.parts(folder)
    assert _store.outdated(folder, part) == {table: list(added) for table, added in _store.ADDED.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = al.load_runs(folder)
        asked = al.sql(EVERY_TABLE, folder, compact=False)
    assert set(loaded.sources.values()) == {"store"} and len(loaded.runs) == 3
    assert_same_frames(from_logs(folder), loaded)
    assert compact(folder) == {"stored": 0, "fresh": 3, "parts": 1, "repaired": 0}
    assert not _store.outdated(folder, _store.parts(folder)[0])
    assert_same_frames(loaded, al.load_runs(folder))
    assert asked.to_dict("records") == al.sql(EVERY_TABLE, folder, compact=False).to_dict("records")

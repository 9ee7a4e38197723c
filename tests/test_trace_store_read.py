"""Reading the store column by column: the same frames as the logs whatever the parts hold, frames a user can edit,
and a load that races a merge."""

from __future__ import annotations

import pyarrow as pa

import agentlab as al
from agentlab import reply
from agentlab.trace import _store, compact
from agentlab.trace._compact import store_runs

from .trace_fixtures import a_run, assert_same_frames, from_logs, sub_run


def test_parts_stored_out_of_order_and_partly_stale_load_as_the_logs_do(tmp_path, monkeypatch):
    """Runs stored in an order unlike their files' (parts written as runs finished), one part holding a run whose
    log grew since: the frames still equal the logs', row for row, with every column read a slice at a time."""
    monkeypatch.setattr(_store, "BATCH_ROWS", 3)  # many slices per column, and slices cut through a run's rows
    folder = tmp_path / "runs"
    for run_id in ("m", "z", "a", "q"):
        a_run(folder, run_id, steps=3)
    store_runs(folder, [folder / "z.jsonl", folder / "q.jsonl"])
    store_runs(folder, [folder / "m.jsonl", folder / "a.jsonl"])
    with (folder / "q.jsonl").open("ab") as log:  # q's log grew after it was stored: its stored rows are skipped
        log.write(b"\n")
    logs = from_logs(folder)
    stored = al.load_runs(folder)
    assert stored.sources == {"a": "store", "m": "store", "q": "log", "z": "store"}
    assert list(stored.runs["run_id"]) == ["a", "m", "q", "z"]
    assert_same_frames(logs, stored)


def test_frames_loaded_from_the_store_can_be_edited(tmp_path):
    """A frame read from the store is an ordinary frame: a number or a text can be set in place."""
    folder = tmp_path / "runs"
    a_run(folder, "edit")
    compact(folder)
    stored = al.load_runs(folder)
    steps, events = stored.steps, stored.events
    steps.loc[0, "cost"] = 42.0
    steps.loc[0, "input_tokens"] = 7
    events.loc[0, "kind"] = "renamed"
    assert steps["cost"].iloc[0] == 42.0 and steps["input_tokens"].iloc[0] == 7
    assert events["kind"].iloc[0] == "renamed"


def test_a_load_that_races_a_merge_reads_the_merged_store(tmp_path, monkeypatch):
    """A merge may remove the parts a load has just listed; the load lists them again and gets the same frames."""
    folder = tmp_path / "runs"
    for run_id in ("r1", "r2", "r3"):
        a_run(folder, run_id)
        store_runs(folder, [folder / f"{run_id}.jsonl"])
    logs = from_logs(folder)
    listed = _store.parts
    raced = []

    def listed_then_merged(where):
        found = listed(where)
        if not raced:
            raced.append(True)
            _store.merge_tiers(where, full=True)  # the listed parts are gone before the load opens them
        return found

    monkeypatch.setattr(_store, "parts", listed_then_merged)
    stored = al.load_runs(folder)
    assert raced and set(stored.sources.values()) == {"store"}
    assert_same_frames(logs, stored)


def test_a_load_leaves_arrows_default_memory_pool_as_it_was(tmp_path):
    """The load allocates from the system pool meanwhile (its peak is lower), then puts the default pool back."""
    folder = tmp_path / "runs"
    a_run(folder, "pool")
    compact(folder)
    before = pa.default_memory_pool().backend_name
    stored = al.load_runs(folder)
    stored.events["data"].iloc[0]
    assert pa.default_memory_pool().backend_name == before


def test_a_sub_run_event_stored_in_a_batch_of_two_days_is_kept(tmp_path):
    """A batch of runs that started on two days is split into a part per day: the parent's ``sub_run`` event
    (whose ``run_id`` names the child, stored in an earlier batch) goes with the parent's rows, not lost."""
    folder = tmp_path / "runs"
    sub_run(folder)  # a fake clock: these runs started on the clock's first day
    al.run("today", model=al.ScriptedModel([reply("done")]), trace=folder, max_cost=None, run_id="today")
    child = next(f for f in folder.glob("*.jsonl") if f.stem not in ("parent", "today"))
    store_runs(folder, [child])  # the child ended first: the background stored it in a batch of its own
    store_runs(folder, [folder / "parent.jsonl", folder / "today.jsonl"])
    stored = al.load_runs(folder)
    assert set(stored.sources.values()) == {"store"}
    assert len(set(stored.runs["started_at"].dt.date)) == 2
    assert_same_frames(from_logs(folder), stored)

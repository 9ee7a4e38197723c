"""The store never holds a run twice as any reader sees it: DuckDB or Polars reading the folder as it stands,
``agentlab.sql`` with or without compaction, while other processes compact or a resumed run is stored again."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import agentlab as al
from agentlab import reply
from agentlab.trace import StoredTraceWriter, _store, compact
from agentlab.trace._compact import store_runs

from .helpers import ROOT, within
from .trace_fixtures import a_run, assert_at_most_once_outside, assert_same_frames, from_logs, lookup

COMPACT = "import sys; from agentlab.cli import main; sys.exit(main(['compact', sys.argv[1]]))"


def _waiting_on(lock: Path) -> int:
    """How many processes wait for the ``flock`` on ``lock`` (Linux's /proc/locks lists each waiter with ``->``)."""
    inode = f":{os.stat(lock).st_ino} "
    return sum("->" in line and inode in line for line in Path("/proc/locks").read_text().splitlines())


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="counts the lock's waiters in /proc/locks (Linux)")
@pytest.mark.parametrize("compactors", [2, 3])
def test_compactors_that_overlap_a_held_lock_never_show_a_run_twice_to_duckdb(tmp_path, compactors):
    """While one process holds the store's lock (as a merge does), two or three ``agentlab compact`` start on the
    same folder: they wait, then store each run once; DuckDB reading the Parquet files directly never finds a run
    in two parts, and finally finds each run once with the logs' cost."""
    folder = tmp_path / "runs"
    for i in range(6):
        a_run(folder, f"r{i}")
    store_runs(folder, [folder / "r0.jsonl", folder / "r1.jsonl"])  # some stored already, some not
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with _store.locked(folder):
        procs = [
            subprocess.Popen([sys.executable, "-c", COMPACT, str(folder)], env=env, stdout=subprocess.PIPE)
            for _ in range(compactors)
        ]
        lock = folder / "_store" / _store.LOCK_FILE

        def all_waiting() -> None:
            while _waiting_on(lock) < compactors:
                assert all(p.poll() is None for p in procs), "a compactor ended while the lock was held"
                threading.Event().wait(0.05)

        within(300, all_waiting, "the compactors never reached the store's lock")
        assert_at_most_once_outside(folder)
    while any(p.poll() is None for p in procs):  # they take the lock in turn: read the folder all the while
        assert_at_most_once_outside(folder)
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out
    seen = assert_at_most_once_outside(folder)
    assert all(set(runs) == {f"r{i}" for i in range(6)} for runs in seen.values())
    logs = from_logs(folder)
    answer = al.sql("select count(*) as n, sum(cost) as cost from runs", folder, compact=False)
    assert answer["n"].iloc[0] == 6
    assert answer["cost"].iloc[0] == pytest.approx(logs.runs["cost"].sum(), abs=1e-12)


def test_a_run_resumed_under_the_stored_writer_is_in_the_store_once(tmp_path):
    """A run stopped at its step limit is stored as it finishes, resumed, and stored again: DuckDB over the folder
    and ``sql(compact=False)`` find it once, with every step of its log, and its batch-mate is kept."""
    folder = tmp_path / "runs"
    writer = StoredTraceWriter(folder)
    script = [reply(None, ("lookup", {"key": str(i)})) for i in range(3)] + [reply("done")]
    run = al.Run("resumed", [lookup], model=al.ScriptedModel(script), max_cost=None, max_steps=2, run_id="again")
    run.subscribe(writer)
    assert asyncio.run(run.run()).reason == "step limit"
    al.run("other", [lookup], model=al.ScriptedModel([reply("done")]), trace=writer, max_cost=None, run_id="other")
    assert writer.flush(timeout=300)
    run.resume(max_steps=8)
    assert isinstance(asyncio.run(run.run()), al.Done)
    assert writer.flush(timeout=300)
    seen = assert_at_most_once_outside(folder)
    assert seen["runs"] == {"again": 1, "other": 1}
    logs = from_logs(folder)
    steps = al.sql("select run_id, count(*) as n from steps group by run_id order by run_id", folder, compact=False)
    assert dict(zip(steps["run_id"], steps["n"], strict=True)) == logs.steps.groupby("run_id").size().to_dict()
    stored = al.load_runs(folder)
    assert set(stored.sources.values()) == {"store"}
    assert_same_frames(logs, stored)


def test_a_run_stored_again_by_two_processes_at_once_is_stored_once(tmp_path):
    """The same finished logs handed to the store by two processes (a compaction and a run's worker): the
    second finds them stored from the same logs and writes nothing."""
    folder = tmp_path / "runs"
    for i in range(3):
        a_run(folder, f"s{i}")
    files = sorted(folder.glob("*.jsonl"))
    assert store_runs(folder, files) == 3
    assert store_runs(folder, files) == 0
    assert assert_at_most_once_outside(folder)["runs"] == {"s0": 1, "s1": 1, "s2": 1}


def test_sql_waits_for_a_change_in_progress_and_counts_each_run_once(tmp_path):
    """A query while another process changes the store waits for the change, then counts each run once (the
    default, which stores runs first, and ``compact=False``)."""
    folder = tmp_path / "runs"
    for i in range(4):
        a_run(folder, f"q{i}")
    compact(folder)
    answers: dict[bool, int] = {}
    with _store.locked(folder):  # a merge in progress
        threads = [
            threading.Thread(target=lambda c=c: answers.update({c: int(al.sql(COUNT, folder, compact=c)["n"].iloc[0])}))
            for c in (True, False)
        ]
        for t in threads:
            t.start()
        threading.Event().wait(0.2)
        assert answers == {}  # neither query read the store under the change
        a_run(folder, "q4")
    for t in threads:
        t.join(timeout=300)
    assert answers[True] == 5  # it stored q4 first
    assert answers[False] in (4, 5)  # q4 counted if the other query stored it before this one read


COUNT = "select count(*) as n from runs"

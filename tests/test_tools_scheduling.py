"""One turn's calls: reads run together, writes alone and in order, results in request order."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest

import agentlab as al
from agentlab import reply
from agentlab._engine.scheduling import plan_batches

from .helpers import Recorder, Seen, last_tool_results


def test_plan_groups_consecutive_reads_and_isolates_writes():
    """["read","read","write","read","read"] runs as [0,1], [2], [3,4]."""
    assert plan_batches(["read", "read", "write", "read", "read"]) == [[0, 1], [2], [3, 4]]
    assert plan_batches(["write", "write"]) == [[0], [1]]
    assert plan_batches([]) == []


def test_three_reads_run_at_the_same_time():
    """Three reads in one turn are all in flight together (each waits until all three started)."""
    all_started = threading.Barrier(3, timeout=5)

    @al.tool(mode="read")
    def lookup(n: int) -> str:
        all_started.wait()  # would time out (BrokenBarrierError) if the reads ran one by one
        return f"record {n}"

    rec = Recorder()
    seen = Seen(lambda m, t: reply(None, *[("lookup", {"n": i}) for i in (3, 1, 2)]) if len(m) == 1 else reply("done"))
    result = al.run("q", [lookup], model=al.FunctionModel(seen), trace=False, subscribers=[rec])
    assert isinstance(result, al.Done)
    results = last_tool_results(seen.requests[1])
    assert [b["content"] for b in results] == ["record 3", "record 1", "record 2"]
    ids = [b["id"] for b in seen.requests[1][-2]["content"] if b["type"] == "tool_use"]
    assert [b["tool_use_id"] for b in results] == ids
    spans = [(e.data["start"], e.data["end"]) for e in rec.of("tool_finished")]
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # every start precedes every end


def test_a_write_runs_alone_between_reads_and_the_read_after_sees_it():
    """read, write, read on one record: the write starts after the first read, the last read sees it."""
    state = {"status": "late"}
    running = []
    overlap = []

    def enter(name):
        running.append(name)
        overlap.append(list(running))

    @al.tool(mode="read")
    async def get_status() -> str:
        enter("read")
        await asyncio.sleep(0)  # a turn of the loop: anything started beside it is running now
        running.remove("read")
        return state["status"]

    @al.tool(mode="write")
    async def set_status(status: str) -> str:
        enter("write")
        await asyncio.sleep(0)
        state["status"] = status
        running.remove("write")
        return "updated"

    seen = Seen(
        lambda m, t: (
            reply(None, ("get_status", {}), ("set_status", {"status": "shipped"}), ("get_status", {}))
            if len(m) == 1
            else reply("done")
        )
    )
    al.run("q", [get_status, set_status], model=al.FunctionModel(seen), trace=False, loop_nudge_at=5)
    assert [b["content"] for b in last_tool_results(seen.requests[1])] == ["late", "updated", "shipped"]
    assert ["write"] in overlap and not any("write" in o and len(o) > 1 for o in overlap)


def test_max_concurrency_bounds_parallel_reads():
    """No more reads run at once than max_concurrency."""
    now, peak = [0], [0]
    full = asyncio.Event()  # three reads are running: the bound is reached, not passed

    @al.tool(mode="read")
    async def r(n: int) -> str:
        now[0] += 1
        peak[0] = max(peak[0], now[0])
        if now[0] == 3:
            full.set()
        await asyncio.wait_for(full.wait(), 10)  # the first reads hold until three run at once
        now[0] -= 1
        return "ok"

    model = al.ScriptedModel([reply(None, *[("r", {"n": i}) for i in range(7)]), reply("done")])
    al.run("q", [r], model=model, trace=False, max_concurrency=3)
    assert peak[0] == 3


def _counter_db(path):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE counters (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
    db.execute("INSERT INTO counters VALUES (1, 0)")
    db.commit()
    db.close()


def _increment_tool(path, mode, n_calls):
    """A read-modify-write on one SQLite row, with a window in which a race can strike."""
    others_read = threading.Barrier(n_calls, timeout=2.0)

    def increment(by: int) -> str:
        db = sqlite3.connect(path, timeout=10)
        try:
            (value,) = db.execute("SELECT value FROM counters WHERE id = 1").fetchone()
            try:
                others_read.wait()  # wait (briefly) for concurrent callers to read too
            except threading.BrokenBarrierError:
                pass
            db.execute("UPDATE counters SET value = ? WHERE id = 1", (value + by,))
            db.commit()
            return f"now {value + by}"
        finally:
            db.close()

    return al.tool(increment, mode=mode)


@pytest.mark.parametrize(("mode", "lost"), [("write", False), ("read", True)])
def test_parallel_writes_to_one_sqlite_row_lose_nothing_when_serialized(tmp_path, mode, lost):
    """Six increments of one row: serialized as writes none is lost; run concurrently, updates vanish."""
    path = tmp_path / "shop.db"
    _counter_db(path)
    n = 6
    tool = _increment_tool(path, mode, n)
    model = al.ScriptedModel([reply(None, *[("increment", {"by": 1}) for _ in range(n)]), reply("done")])
    t0 = time.monotonic()
    al.run("q", [tool], model=model, trace=False, loop_nudge_at=100, max_concurrency=n)
    assert time.monotonic() - t0 < 30
    (value,) = sqlite3.connect(path).execute("SELECT value FROM counters WHERE id = 1").fetchone()
    assert (value < n) if lost else (value == n)

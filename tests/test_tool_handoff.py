"""Sync tools on worker threads: every answer arrives, slow ones never hold the loop, idle threads go."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

import agentlab as al
from agentlab import reply

from .helpers import Recorder, Seen, last_tool_results


def test_a_sync_tool_waiting_for_an_async_tool_of_its_turn_is_not_stuck_behind_the_hand_off():
    """The loop's thread blocks only briefly for a sync answer: an async read of the same turn still runs."""
    ready = threading.Event()

    @al.tool(mode="read")
    def wait_for_flag() -> str:
        return "flag seen" if ready.wait(timeout=5) else "flag never set"

    @al.tool(mode="read")
    async def set_flag() -> str:
        await asyncio.sleep(0)
        ready.set()
        return "flag set"

    calls = [("wait_for_flag", {}), ("set_flag", {})]
    seen = Seen(lambda m, t: reply(None, *calls) if len(m) == 1 else reply("done"))
    result = al.run("q", [wait_for_flag, set_flag], model=al.FunctionModel(seen), trace=False, deadline_s=30)
    assert isinstance(result, al.Done)
    assert [b["content"] for b in last_tool_results(seen.requests[1])] == ["flag seen", "flag set"]


def test_every_answer_arrives_whether_a_sync_tool_answers_at_once_or_after_the_hand_off(tmp_path):
    """Quick and slow answers in turn (the hand-off taken, then the future): each reaches the model, in order."""

    @al.tool(mode="read")
    def lookup(n: int) -> str:
        if n % 3 == 2:
            time.sleep(0.002)  # past the hand-off: followed with a future
        if n % 7 == 6:
            raise al.ToolError(f"no record {n}")
        return f"record {n}"

    steps = 60
    got: list[str] = []

    def model(messages, tools):
        if len(messages) > 1:
            got.append(messages[-1]["content"][0]["content"])
        n = len(got)
        return reply(None, ("lookup", {"n": n})) if n < steps else reply("done")

    rec = Recorder()
    result = al.run(
        "q", [lookup], model=al.FunctionModel(model), trace=tmp_path, subscribers=[rec], max_steps=steps + 1
    )
    assert isinstance(result, al.Done)
    assert [("no record" in g) if n % 7 == 6 else g == f"record {n}" for n, g in enumerate(got)] == [True] * steps
    finished = rec.of("tool_finished")
    assert [e.data["outcome"] for e in finished].count("recoverable") == len([n for n in range(steps) if n % 7 == 6])


def test_sync_tools_answering_from_many_runs_at_once_all_finish():
    """Runs on several threads share the worker pool: no answer is lost between a worker and its loop."""

    @al.tool(mode="read")
    def echo(n: int) -> str:
        return f"echo {n}"

    def one(seed: int) -> al.Result:
        script = [reply(None, ("echo", {"n": seed * 100 + i})) for i in range(30)] + [reply("done")]
        return al.run("q", [echo], model=al.ScriptedModel(script), trace=False, max_steps=40, deadline_s=60)

    results: list[al.Result] = []
    threads = [threading.Thread(target=lambda s=s: results.append(one(s))) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 4 and all(isinstance(r, al.Done) and r.steps == 31 for r in results)


needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="CPU affinity is Linux's, and a pin shows only with two CPUs or more",
)


def _cpus_seen_by_a_quick_sync_tool(steps: int, entry: str = "arun", runs: int = 1) -> list[set[int]]:
    """The CPU set a quick sync tool runs with, at each of ``steps`` calls made alone in each of ``runs`` runs:
    under ``arun()`` (each call handed to a worker), or under ``run()`` (the run's loop handed to a worker, the
    tool run on that loop's thread)."""
    seen: list[set[int]] = []

    @al.tool(mode="read")
    def where(n: int) -> str:
        cpus = os.sched_getaffinity(0)
        child: list[set[int]] = []
        t = threading.Thread(target=lambda: child.append(os.sched_getaffinity(0)))
        t.start()
        t.join()
        seen.extend([cpus, child[0]])  # the tool's thread, and a thread it starts
        return f"call {n}"

    for _ in range(runs):
        script = [reply(None, ("where", {"n": n})) for n in range(steps)] + [reply("done")]
        kw = dict(model=al.ScriptedModel(script), trace=False, max_steps=steps + 1)
        result = al.run("q", [where], **kw) if entry == "run" else asyncio.run(al.arun("q", [where], **kw))
        assert isinstance(result, al.Done)
    return seen


@needs_affinity
@pytest.mark.parametrize("entry", ["arun", "run"])
def test_a_sync_tool_and_the_threads_it_starts_run_on_every_cpu_the_process_may_use(entry):
    """The hand-off may wake a worker on the caller's CPU (a sync call under ``arun()``, the run's loop under
    ``run()``), but the tool never runs pinned there (a subprocess or a thread it starts would inherit the pin
    and be held to one CPU)."""
    mine = os.sched_getaffinity(0)
    steps, runs = (40, 1) if entry == "arun" else (2, 20)
    seen = _cpus_seen_by_a_quick_sync_tool(steps, entry, runs)
    assert len(seen) == 2 * steps * runs and all(cpus == mine for cpus in seen)


@needs_affinity
def test_sync_tools_still_answer_where_cpu_affinity_is_refused(monkeypatch):
    """A sandbox that refuses ``sched_setaffinity``: the hand-off goes on without the pin, every answer arrives."""
    from agentlab._runtime import affinity

    def refused(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(affinity, "_on", True)
    monkeypatch.setattr(os, "sched_setaffinity", refused)
    mine = os.sched_getaffinity(0)
    seen = _cpus_seen_by_a_quick_sync_tool(10)
    assert len(seen) == 20 and all(cpus == mine for cpus in seen)
    assert affinity._on is False  # refused once: not tried again


@needs_affinity
def test_a_lone_sync_call_wakes_its_worker_on_the_callers_cpu_and_calls_of_a_shared_turn_do_not(monkeypatch):
    """The one optimisation of the hand-off the README names: a sync call alone in its turn (the loop's thread
    then blocks for it) pins the idle worker it wakes to the caller's CPU; calls that share a turn run side by
    side, so theirs are left where the kernel puts them."""
    from agentlab._runtime import affinity

    monkeypatch.setattr(affinity, "_on", True)
    pins: list[int] = []
    real = affinity.pin_here
    monkeypatch.setattr(affinity, "pin_here", lambda tid, cpus: pins.append(tid) or real(tid, cpus))

    @al.tool(mode="read")
    def look(n: int) -> str:
        return f"v{n}"

    def runs(script: list[dict]) -> None:
        kw = dict(model=al.ScriptedModel(script), trace=False, max_steps=len(script))
        assert isinstance(asyncio.run(al.arun("q", [look], **kw)), al.Done)

    runs([reply(None, ("look", {"n": n})) for n in range(6)] + [reply("done")])
    assert len(pins) >= 5  # every lone call that found an idle worker (the first may start a new one)
    pins.clear()
    runs([reply(None, ("look", {"n": 1}), ("look", {"n": 2})) for _ in range(3)] + [reply("done")])
    assert pins == []


def test_a_burst_of_200_concurrent_sync_tools_leaves_no_crowd_of_idle_threads(monkeypatch):
    """200 sync reads of one turn run at once (each waits for all the others), then their threads go: at most
    ``MAX_IDLE`` stay idle at once, and those end after ``IDLE_S`` with no call to serve."""
    from agentlab._runtime import isolate, threads

    assert (threads.IDLE_S, threads.MAX_IDLE) == (30.0, 8)  # the README's figures ("after 30 s", "at most 8")
    assert isolate.QUICK_S == 0.0005  # and "waited for up to half a millisecond on its worker"
    monkeypatch.setattr(threads, "IDLE_S", 0.2)
    n = 200
    everyone = threading.Barrier(n, timeout=60)

    @al.tool(mode="read")
    def wait_for_all(i: int) -> str:
        """Wait until every call of the turn has started."""
        everyone.wait()
        return f"call {i}"

    calls = [("wait_for_all", {"i": i}) for i in range(n)]
    model = al.ScriptedModel([reply(None, *calls), reply("done")])
    result = al.run("q", [wait_for_all], model=model, trace=False, max_concurrency=n, deadline_s=None,
                    max_cost=None, max_tokens=64000)  # fmt: skip
    assert isinstance(result, al.Done)  # all 200 ran at once: else the barrier would have broken
    assert _eventually(lambda: threads.alive() <= threads.MAX_IDLE)
    assert _eventually(lambda: threads.alive() == 0)  # no call came within IDLE_S: the idle ones ended too
    again = al.run("q", [wait_for_all], model=al.ScriptedModel([reply("no tools"), reply("x")]), trace=False)
    assert isinstance(again, al.Done)


def _eventually(condition, within: float = 30.0) -> bool:
    """Poll ``condition`` until it holds (generous: the machine may be busy)."""
    end = time.monotonic() + within
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True

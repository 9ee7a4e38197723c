"""Sync tools under run(): every guarantee a user would notice.

A tool may start its own event loop or a sub-run, the caller's context
variables reach the run, calls of one turn overlap, a hanging tool ends the
run at its deadline with a complete trace that nothing writes to afterwards,
and arun() never blocks its caller's loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import signal
import threading
from pathlib import Path

import pytest

import agentlab as al
from agentlab import reply
from agentlab.trace import read_events

from .helpers import Recorder, within

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def events_of(tmp_path: Path) -> list[dict]:
    (file,) = list(tmp_path.glob("**/*.jsonl"))
    return read_events(file)


def test_a_sync_tool_may_run_its_own_event_loop_with_asyncio_run():
    """A sync tool used to run on a thread with no running loop; run on the loop's thread it still has none."""

    async def fetch() -> str:
        await asyncio.sleep(0)
        return "fetched"

    @al.tool
    def get() -> str:
        """Fetch something with an async client."""
        return asyncio.run(fetch())

    result = within(20, lambda: al.run("q", [get], model=al.ScriptedModel([reply(None, ("get", {})), reply("ok")])))
    assert isinstance(result, al.Done)
    (block,) = result.messages[2]["content"]
    assert block["content"] == "fetched" and not block.get("is_error")


def test_a_run_started_inside_a_sync_tool_is_the_sub_run_of_that_call(tmp_path):
    """agentlab.run() inside a sync tool: the sub-run works and its run_started names the parent call."""

    @al.tool
    def ask_helper(question: str) -> str:
        """Ask a helper agent."""
        sub = al.run(question, model=al.ScriptedModel([reply("42")]), trace=tmp_path)
        return sub.text

    model = al.ScriptedModel([reply(None, ("ask_helper", {"question": "6x7?"})), reply("done")])
    result = within(20, lambda: al.run("q", [ask_helper], model=model, trace=tmp_path))
    assert isinstance(result, al.Done)
    assert result.messages[2]["content"][0]["content"] == "42"
    runs = {f.stem: read_events(f) for f in tmp_path.glob("**/*.jsonl")}
    (child,) = [ev for ev in runs.values() if ev[0].get("parent")]
    parent = runs[result.run_id]
    call_id = next(e for e in parent if e["kind"] == "tool_started")["call_id"]
    assert child[0]["parent"]["run_id"] == result.run_id and child[0]["parent"]["tool_use_id"] == call_id
    assert [e["kind"] for e in parent].count("sub_run") == 1


def test_the_callers_context_variables_reach_the_run_its_subscribers_and_its_sync_tools():
    """Context set before run() (a tracing span, a request id) is seen by subscribers and by a sync tool."""
    seen_by_tool: list[str] = []

    @al.tool
    def whoami() -> str:
        """Say who asked."""
        seen_by_tool.append(WHO.get())
        return "ok"

    rec: list[str] = []
    model = al.ScriptedModel([reply(None, ("whoami", {})), reply("done")])

    def go() -> al.Result:  # on the thread run() is called from (within() runs it on one of its own)
        WHO.set("alice")
        return al.run("q", [whoami], model=model, trace=False, subscribers=[lambda e: rec.append(WHO.get())])

    result = within(20, go)
    assert isinstance(result, al.Done)
    assert seen_by_tool == ["alice"] and set(rec) == {"alice"}


def test_three_sync_reads_of_one_turn_still_run_at_the_same_time():
    """Calls of one turn overlap on workers (W2): each waits for the other two, which only overlap can satisfy."""
    met = threading.Barrier(3, timeout=10)

    @al.tool(mode="read")
    def read(part: int) -> str:
        """Read a part."""
        met.wait()  # BrokenBarrierError (a tool error) unless all three run at once
        return f"part {part}"

    calls = [("read", {"part": i}) for i in range(3)]
    result = within(30, lambda: al.run("q", [read], model=al.ScriptedModel([reply(None, *calls), reply("ok")])))
    assert isinstance(result, al.Done)
    assert [b["content"] for b in result.messages[2]["content"]] == ["part 0", "part 1", "part 2"]


def test_a_sync_tool_that_hangs_ends_the_run_at_its_deadline_and_writes_nothing_after(tmp_path, monkeypatch):
    """The deadline passes inside a sync tool: run() returns Stopped("deadline") with the
    call's tool_finished and run_finished written once, the call named abandoned; when the tool returns at last,
    its thread ends without adding a byte to the trace."""
    release, returned = threading.Event(), threading.Event()

    @al.tool
    def stuck() -> str:
        """Hold its thread until released."""
        release.wait(30)
        returned.set()
        return "late"

    model = al.ScriptedModel([reply(None, ("stuck", {})), reply("never")])
    rec = Recorder()
    result = within(20, lambda: al.run("q", [stuck], model=model, trace=tmp_path, deadline_s=1.5, subscribers=[rec]))
    assert isinstance(result, al.Stopped) and result.reason == "deadline"
    assert "still running when the 1.5s deadline passed" in result.detail
    assert len(result.abandoned) == 1 and "tool stuck" in result.abandoned[0]
    before = events_of(tmp_path)
    kinds = [e["kind"] for e in before]
    assert kinds.count("tool_finished") == 1 and kinds.count("run_finished") == 1 and kinds[-1] == "run_finished"
    assert next(e for e in before if e["kind"] == "tool_finished")["outcome"] == "fatal"
    heard = len(rec.events)
    release.set()
    assert returned.wait(20)
    assert events_of(tmp_path) == before and len(rec.events) == heard


def test_a_sync_tool_that_returns_within_the_deadline_keeps_its_step():
    """A deadline on the run that a quick sync tool never reaches changes nothing: the run is Done."""

    @al.tool
    def quick(n: int) -> int:
        """Double."""
        return 2 * n

    model = al.ScriptedModel([reply(None, ("quick", {"n": i})) for i in range(5)] + [reply("done")])
    result = within(20, lambda: al.run("q", [quick], model=model, trace=False, deadline_s=60))
    assert isinstance(result, al.Done) and result.steps == 6 and result.abandoned == ()


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_ctrl_c_while_a_sync_tool_hangs_ends_the_run_cancelled_naming_the_call(tmp_path):
    """Ctrl-C with a sync tool holding the loop's thread: Stopped("cancelled"), the call abandoned and finished
    as cancelled in the trace, run_finished last; the SIGINT handler is put back."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("a SIGINT handler other than Python's default is installed")
    release = threading.Event()

    @al.tool
    def press_ctrl_c() -> str:
        """Send SIGINT to this process, then hang."""
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        release.wait(30)
        return "never"

    model = al.ScriptedModel([reply(None, ("press_ctrl_c", {}))])
    try:
        result = al.run("q", [press_ctrl_c], model=model, trace=tmp_path, deadline_s=20)
    finally:
        release.set()
    assert isinstance(result, al.Stopped) and result.reason == "cancelled"
    assert len(result.abandoned) == 1 and "press_ctrl_c" in result.abandoned[0]
    events = events_of(tmp_path)
    assert [e["outcome"] for e in events if e["kind"] == "tool_finished"] == ["cancelled"]
    assert events[-1]["kind"] == "run_finished" and events[-1]["reason"] == "cancelled"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_run_inside_a_running_loop_runs_a_sync_tool_that_starts_its_own_loop():
    """run() from a notebook cell (a loop is running): a sync tool may still call asyncio.run."""

    @al.tool
    def get() -> str:
        """Fetch with an async client."""
        return asyncio.run(asyncio.sleep(0, result="fetched"))

    async def cell():
        return al.run("q", [get], model=al.ScriptedModel([reply(None, ("get", {})), reply("ok")]), trace=False)

    result = within(20, lambda: asyncio.run(cell()))
    assert isinstance(result, al.Done) and result.messages[2]["content"][0]["content"] == "fetched"


def test_arun_never_blocks_its_callers_loop_with_a_sync_tool():
    """Under arun() a sync tool runs on a worker: here it waits for a task of the caller's loop, which runs."""
    ready = threading.Event()

    @al.tool
    def wait_for_loop() -> str:
        """Wait until the caller's loop has done its part."""
        return "free" if ready.wait(10) else "blocked"

    async def main():
        async def other_work():
            await asyncio.sleep(0)
            ready.set()

        model = al.ScriptedModel([reply(None, ("wait_for_loop", {})), reply("ok")])
        run = asyncio.ensure_future(al.arun("q", [wait_for_loop], model=model, trace=False))
        await other_work()
        return await run

    result = within(30, lambda: asyncio.run(main()))
    assert result.messages[2]["content"][0]["content"] == "free"


def test_a_sync_tool_with_its_own_timeout_is_abandoned_at_it_and_the_run_goes_on():
    """A tool's own timeout is kept on a worker: the call times out (retryable, then given up) and the run
    goes on to its answer."""
    release = threading.Event()

    @al.tool(timeout=0.05, retry=al.Retry(max_attempts=1))
    def slow() -> str:
        """Take too long."""
        release.wait(30)
        return "late"

    try:
        result = within(
            20,
            lambda: al.run("q", [slow], model=al.ScriptedModel([reply(None, ("slow", {})), reply("ok")]), trace=False),
        )
    finally:
        release.set()
    assert isinstance(result, al.Done)
    block = result.messages[2]["content"][0]
    assert block.get("is_error") and "timeout" in block["content"]

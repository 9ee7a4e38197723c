"""Hostile tools, threads and interruptions: nothing escapes run(), nothing hangs, nothing runs twice.

Timing logic runs on a FakeClock. The few tests that need a real blocked
thread or event loop assert only "it returned, and before N seconds", never
how fast.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import agentlab as al
from agentlab import reply
from agentlab.trace import read_events

from .helpers import Recorder, within

pytestmark = pytest.mark.timeout(60)


class BadStr(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for you")


def raiser(exc: BaseException):
    def sync_tool() -> str:
        """Raise."""
        raise exc

    async def async_tool() -> str:
        """Raise."""
        await asyncio.sleep(0)
        raise exc

    return sync_tool, async_tool


HOSTILE = [
    (StopIteration(), "StopIteration"),
    (KeyboardInterrupt(), "KeyboardInterrupt"),
    (SystemExit(3), "SystemExit (exit code 3)"),
    (GeneratorExit(), "GeneratorExit"),
    (asyncio.CancelledError(), "CancelledError"),
    (BadStr(), "BadStr"),
]


def trace_of(tmp_path: Path) -> list[dict]:
    (file,) = list(tmp_path.glob("**/*.jsonl"))
    return read_events(file)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(("exc", "named"), HOSTILE, ids=[n.split()[0] for _, n in HOSTILE])
def test_whatever_a_tool_raises_the_run_ends_fatal_naming_it_and_the_trace_ends(tmp_path, exc, named, is_async):
    """StopIteration, KeyboardInterrupt, SystemExit, GeneratorExit, its own CancelledError or an
    exception whose str() raises: the run returns Stopped("fatal") naming the type, even with no
    deadline, and its trace ends with run_finished."""
    sync_tool, async_tool = raiser(exc)
    tool = al.tool(async_tool if is_async else sync_tool, name="boom")
    model = al.ScriptedModel([reply(None, ("boom", {})), reply("unreachable")])
    result = within(20, lambda: al.run("q", [tool], model=model, trace=tmp_path, deadline_s=None, max_cost=None))
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    assert named in result.detail and "tool boom" in result.detail
    events = trace_of(tmp_path)
    assert events[-1]["kind"] == "run_finished" and events[-1]["reason"] == "fatal"
    (finished,) = [e for e in events if e["kind"] == "tool_finished"]
    # Python itself turns StopIteration leaving a coroutine into RuntimeError (PEP 479), cause kept
    expected = "RuntimeError" if is_async and isinstance(exc, StopIteration) else type(exc).__name__
    assert finished["outcome"] == "fatal" and finished["error"]["type"] == expected


def test_base_exceptions_can_be_made_recoverable_by_policy():
    """Policy(base_exceptions="recoverable") hands a tool's SystemExit to the model, which carries on."""
    sync_tool, _ = raiser(SystemExit(2))
    seen = []

    def model(messages, tools):
        if len(messages) == 1:
            return reply(None, ("quit", {}))
        seen.append(messages[-1]["content"][0])
        return reply("carried on")

    result = al.run(
        "q",
        [al.tool(sync_tool, name="quit")],
        model=al.FunctionModel(model),
        trace=False,
        policy=al.Policy(base_exceptions="recoverable"),
        clock=al.FakeClock(),
    )
    assert isinstance(result, al.Done) and result.text == "carried on"
    assert seen[0]["is_error"] and "tool quit raised SystemExit (exit code 2)" in seen[0]["content"]


def test_a_model_that_raises_keyboard_interrupt_stops_the_run_instead_of_escaping():
    """A model function raising KeyboardInterrupt (not a real Ctrl-C) is a fatal model failure."""

    def model(messages, tools):
        raise KeyboardInterrupt

    result = al.run("q", model=al.FunctionModel(model), trace=False, clock=al.FakeClock(), max_cost=None)
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    assert "the model raised KeyboardInterrupt" in result.detail


def test_sys_exit_in_a_sync_tool_does_not_end_the_caller():
    """sys.exit() on the tool's thread reaches run() as data: the test process goes on."""
    import sys

    @al.tool
    def leave() -> str:
        """Exit."""
        sys.exit(0)

    result = within(20, lambda: al.run("q", [leave], model=al.ScriptedModel([reply(None, ("leave", {}))]), trace=False))
    assert result.reason == "fatal" and "SystemExit (exit code 0)" in result.detail


# ----------------------------------------------------------------- the deadline against tools that fight it
def test_an_async_tool_that_swallows_its_cancellation_is_abandoned_and_named(tmp_path):
    """The run returns at the deadline; the task that ignored its cancellation is named in the result."""
    stop = threading.Event()

    @al.tool
    async def stubborn() -> str:
        """Refuse to be cancelled."""
        while not stop.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass
        return "late"

    t0 = time.monotonic()
    try:
        result = within(
            20,
            lambda: al.run(
                "q", [stubborn], model=al.ScriptedModel([reply(None, ("stubborn", {}))]), trace=tmp_path, deadline_s=0.3
            ),
        )
    finally:
        stop.set()
    assert result.reason == "deadline"
    assert time.monotonic() - t0 < 0.3 + 5.0
    assert result.abandoned == ("tool stubborn (call toolu_0001, still running in its task)",)
    assert trace_of(tmp_path)[-1]["abandoned"] == list(result.abandoned)


def test_work_whose_waiter_is_cancelled_during_its_grace_is_still_abandoned():
    """A second cancel during the grace (a sibling's stop) lets the grace run out, abandons, then goes on."""
    from agentlab._runtime import isolate

    async def main() -> tuple[bool, list[str], bool]:
        stop = asyncio.Event()

        async def stubborn() -> None:
            while not stop.is_set():
                try:
                    await stop.wait()
                except asyncio.CancelledError:
                    pass

        work = asyncio.ensure_future(stubborn())
        await asyncio.sleep(0)
        named: list[str] = []
        waiter = asyncio.ensure_future(isolate.let_go(work, lambda: named.append("work")))
        await asyncio.sleep(0)  # the waiter is inside the grace now
        waiter.cancel()
        await asyncio.wait({waiter})
        abandoned = isolate.is_abandoned(work)
        stop.set()
        await work
        return abandoned, named, waiter.cancelled()

    abandoned, named, cancelled = asyncio.run(main())
    assert abandoned and named == ["work"] and cancelled


def test_a_stubborn_tool_is_abandoned_when_a_sibling_stops_the_turn_during_its_grace():
    """A sibling that honours the deadline's cancel stops the turn while the stubborn call is in its grace: the
    stubborn one is still named abandoned, so closing the loop does not wait for it."""
    stop = threading.Event()

    @al.tool(mode="read")
    async def stubborn() -> str:
        """Refuse to be cancelled."""
        while not stop.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass
        return "late"

    @al.tool(mode="read")
    async def polite() -> str:
        """Wait, and go when cancelled."""
        await asyncio.Event().wait()
        return "never"

    model = al.ScriptedModel([reply(None, ("polite", {}), ("stubborn", {}))])
    try:
        # The deadline must pass while the tools run, not before they start (a busy machine's set-up): generous.
        result = within(20, lambda: al.run("q", [polite, stubborn], model=model, trace=False, deadline_s=1.5))
    finally:
        stop.set()
    assert result.reason == "deadline"
    assert result.abandoned == ("tool stubborn (call toolu_0002, still running in its task)",)


def test_an_async_tool_that_blocks_the_event_loop_is_blamed_by_the_watchdog():
    """time.sleep in an async tool freezes every timer; the result says by how much and in which tool."""

    @al.tool
    async def freezer() -> str:
        """Block the loop."""
        time.sleep(1.5)  # long enough for the watchdog to look even on a loaded machine
        return "thawed"

    result = within(
        20,
        lambda: al.run(
            "q", [freezer], model=al.ScriptedModel([reply(None, ("freezer", {}))]), trace=False, deadline_s=0.3
        ),
    )
    assert result.reason == "deadline" and result.overrun_s > 0
    assert "freezer" in result.overrun_cause and "blocked the event loop" in result.overrun_cause
    # the tool itself is named as the culprit, not a frame of agentlab's between the engine and the tool
    assert result.overrun_cause.startswith("freezer (") and "_subruns" not in result.overrun_cause


def test_a_blocking_subscriber_is_named_as_the_cause_of_the_overrun():
    """A subscriber that blocks is an overrun the watchdog pins on that subscriber."""

    def slow_display(event):
        if event.kind == "tool_started":
            time.sleep(1.5)

    @al.tool
    def quick() -> str:
        """Answer."""
        return "ok"

    result = within(
        20,
        lambda: al.run(
            "q",
            [quick],
            model=al.ScriptedModel([reply(None, ("quick", {}))]),
            trace=False,
            deadline_s=0.3,
            subscribers=[slow_display],
        ),
    )
    assert result.reason == "deadline" and result.overrun_s > 0
    assert "a subscriber, slow_display" in result.overrun_cause


def test_the_deadline_counts_set_up_from_the_moment_the_run_is_asked_for():
    """Seconds spent before Run() finished building count: a run asked for 10 s ago with a 5 s
    deadline stops before its first model call."""
    clock = al.FakeClock(100.0)
    model = al.ScriptedModel([reply("hi")])
    r = al.Run("q", model=model, clock=clock, deadline_s=5, counted_from=90.0)
    assert r.elapsed == pytest.approx(10.0)
    result = asyncio.run(r.run())
    assert result.reason == "deadline" and model.calls == 0
    assert result.overrun_s == pytest.approx(5.0)
    assert result.overrun_cause == "set-up (building the run: imports, tool schemas, prices) took 10.00s of the 5s"


# ----------------------------------------------------------------------------------- threads
def test_cancel_from_another_thread_interrupts_the_step():
    """Run.cancel() from a plain thread (a widget callback, a signal handler) stops a hanging step."""
    release = threading.Event()

    @al.tool
    async def hang() -> str:
        """Wait."""
        await asyncio.Event().wait()
        return "never"

    async def go():
        r = al.Run("q", [hang], model=al.ScriptedModel([reply(None, ("hang", {}))]), deadline_s=None)
        started = threading.Event()
        r.subscribe(lambda e: started.set() if e.kind == "tool_started" else None)
        threading.Thread(target=lambda: (started.wait(10), r.cancel()), daemon=True).start()
        await asyncio.wait_for(r.step(), 10)
        return r

    try:
        r = asyncio.run(go())
    finally:
        release.set()
    assert r.result.reason == "cancelled" and r.result.detail == "cancelled during step 1 (running tools)"


def test_two_concurrent_steps_never_both_call_the_model():
    """A second step() while one is in flight is a clear error; the model is called once."""
    gate = asyncio.Event()
    calls = []

    async def model(messages, tools):
        calls.append(1)
        await gate.wait()
        return reply("done")

    async def go():
        r = al.Run("q", model=al.FunctionModel(model), clock=al.FakeClock())
        first = asyncio.ensure_future(r.step())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="already in a step"):
            await r.step()
        gate.set()
        await first
        return r

    r = asyncio.run(go())
    assert calls == [1] and isinstance(r.result, al.Done)


def test_lab_pause_and_stop_work_from_another_thread():
    """Lab.pause() from a plain thread pauses after the step in flight; Lab.stop() from one ends the run
    Stopped("cancelled"). Neither raises "no running event loop"."""

    calls: list[int] = []
    called = threading.Event()  # set by each model call: "the run is stepping", with no wait on a clock
    answer = threading.Event()  # the model call in flight answers when the test lets it: Pause lands mid-step

    async def model(messages, tools):
        calls.append(1)
        called.set()
        await asyncio.to_thread(answer.wait, 10)
        return reply(None, ("lookup", {"key": str(len(messages))}))

    @al.tool(mode="read")
    def lookup(key: str) -> str:
        """Look up."""
        return key

    def from_thread(fn):
        errors = []
        t = threading.Thread(target=lambda: _catch(fn, errors))
        t.start()
        return t, errors

    async def go():
        lab = al.Lab(
            "q", [lookup], model=al.FunctionModel(model), trace=False, max_steps=10_000, max_cost=None, deadline_s=None
        )
        task = lab.run()
        await asyncio.to_thread(called.wait, 10)  # until the run is under way
        t, errors = from_thread(lab.pause)
        await asyncio.to_thread(t.join, 10)
        answer.set()  # the step in flight ends; then the run pauses
        await asyncio.wait_for(task, 10)
        paused = (lab.engine.finished, lab.state.control, errors, lab.engine.steps)
        called.clear()
        answer.clear()
        task = lab.run()
        await asyncio.to_thread(called.wait, 10)
        t, errors = from_thread(lab.stop)
        await asyncio.to_thread(t.join, 10)
        await asyncio.wait_for(lab.wait(), 10)
        answer.set()  # lets the cancelled call's thread go
        return lab, paused, errors

    lab, paused, errors = asyncio.run(go())
    assert paused == (False, "paused", [], 1)  # paused after the step that was in flight
    assert errors == [] and isinstance(lab.result, al.Stopped) and lab.result.reason == "cancelled"
    lab.close()


def _catch(fn, errors):
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the test reports it
        errors.append(exc)


# ------------------------------------------------------------------------- resume exactly once
def test_resume_after_cancel_does_not_rerun_writes_that_finished():
    """Cancelled during the second write of a turn: the first write's result is kept, only the second
    runs again, and the trace marks the first as reused."""
    charges: list[str] = []
    attempts: list[str] = []
    release, inside = threading.Event(), threading.Event()

    @al.tool(mode="write")
    def charge(card: str) -> str:
        """Charge a card."""
        attempts.append(card)
        if attempts == ["fast", "slow"]:
            inside.set()
            release.wait(30)  # the first "slow" hangs until the test ends (abandoned by the cancel)
            return "too late"
        charges.append(card)
        return f"charged {card}"

    rec = Recorder()
    model = al.ScriptedModel([reply(None, ("charge", {"card": "fast"}), ("charge", {"card": "slow"})), reply("done")])

    async def go():
        r = al.Run("q", [charge], model=model, deadline_s=None, subscribers=[rec])
        stepping = asyncio.ensure_future(r.step())
        assert await asyncio.to_thread(inside.wait, 10)  # the first "slow" is inside the tool
        r.cancel()
        await asyncio.wait_for(stepping, 10)
        assert r.result.reason == "cancelled"
        assert r.abandoned == ["tool charge (call toolu_0002, still running in its thread)"]
        r.resume()
        return await asyncio.wait_for(r.run(), 10)

    try:
        result = asyncio.run(go())
    finally:
        release.set()
    assert isinstance(result, al.Done)
    assert charges == ["fast", "slow"]  # "fast" charged exactly once
    (results,) = rec.of("tool_results")
    assert results.data["reused"] == ["toolu_0001"]
    assert [b["content"] for b in results.data["content"]] == ["charged fast", "charged slow"]


def test_resume_after_a_deadline_mid_turn_keeps_the_finished_calls():
    """A deadline that passes between two writes: resumed with more time, the first is not repeated."""
    clock = al.FakeClock()
    done: list[str] = []

    @al.tool(mode="write")
    async def write(key: str) -> str:
        """Write."""
        done.append(key)
        clock.advance(6)  # this write takes 6 s of the 10 s deadline
        return f"wrote {key}"

    model = al.ScriptedModel(
        [reply(None, ("write", {"key": "a"}), ("write", {"key": "b"}), ("write", {"key": "c"})), reply("ok")]
    )
    r = al.Run("q", [write], model=model, clock=clock, deadline_s=10, max_cost=None)
    asyncio.run(r.step())
    assert r.result.reason == "deadline" and done == ["a", "b"]
    r.resume(deadline_s=100)
    asyncio.run(r.run())
    assert done == ["a", "b", "c"] and isinstance(r.result, al.Done)


# -------------------------------------------------------------------------------- bad replies
def test_two_tool_use_blocks_sharing_an_id_stop_the_run_clearly():
    """Each call needs its own result; a reply that reuses an id is a malformed reply, named."""
    dup = {
        "role": "assistant",
        "stop_reason": "tool_use",
        "content": [
            {"type": "tool_use", "id": "toolu_x", "name": "lookup", "input": {"key": "a"}},
            {"type": "tool_use", "id": "toolu_x", "name": "lookup", "input": {"key": "b"}},
        ],
    }

    @al.tool(mode="read")
    def lookup(key: str) -> str:
        """Look up."""
        return key

    result = al.run("q", [lookup], model=al.ScriptedModel([dup]), trace=False, clock=al.FakeClock())
    assert result.reason == "malformed reply"
    assert "2 tool_use blocks share the id 'toolu_x' at step 1" in result.detail


# ----------------------------------------------------------------------------------- Ctrl-C
def _ctrl_c_tool():
    @al.tool
    def press_ctrl_c() -> str:
        """Send SIGINT to this process, then hang like a slow tool."""
        os.kill(os.getpid(), signal.SIGINT)
        threading.Event().wait(30)
        return "never"

    return press_ctrl_c


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_ctrl_c_ends_the_run_cancelled_with_its_trace_complete(tmp_path):
    """A real SIGINT during run() returns Stopped("cancelled"); the trace ends with run_finished."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("a SIGINT handler other than Python's default is installed")
    model = al.ScriptedModel([reply(None, ("press_ctrl_c", {}))])
    result = al.run("q", [_ctrl_c_tool()], model=model, trace=tmp_path, deadline_s=20)
    assert isinstance(result, al.Stopped) and result.reason == "cancelled"
    events = trace_of(tmp_path)
    assert events[-1]["kind"] == "run_finished" and events[-1]["reason"] == "cancelled"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_ctrl_c_is_reraised_after_the_trace_is_complete_when_asked(tmp_path):
    """reraise_interrupt=True: KeyboardInterrupt reaches the caller, after run_finished is written."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("a SIGINT handler other than Python's default is installed")
    model = al.ScriptedModel([reply(None, ("press_ctrl_c", {}))])
    with pytest.raises(KeyboardInterrupt):
        al.run("q", [_ctrl_c_tool()], model=model, trace=tmp_path, deadline_s=20, reraise_interrupt=True)
    assert trace_of(tmp_path)[-1]["reason"] == "cancelled"


def test_cancelling_arun_records_the_run_then_passes_the_cancellation_on(tmp_path):
    """asyncio cancellation of arun(): the trace is complete (Stopped cancelled), and CancelledError goes on."""

    started = asyncio.Event()

    @al.tool
    async def hang() -> str:
        """Wait."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    async def go():
        task = asyncio.ensure_future(
            al.arun("q", [hang], model=al.ScriptedModel([reply(None, ("hang", {}))]), trace=tmp_path, deadline_s=None)
        )
        await asyncio.wait_for(started.wait(), 10)  # the tool is running: cancel now, mid-step
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    last = trace_of(tmp_path)[-1]
    assert last["kind"] == "run_finished" and last["reason"] == "cancelled"
    assert "interrupted" in last["detail"]


def test_results_are_json_in_the_trace_even_with_overrun_fields(tmp_path):
    """run_finished carries overrun_s, overrun_cause and abandoned as plain JSON values."""
    al.run("q", model=al.ScriptedModel([reply("hi")]), trace=tmp_path)
    (file,) = list(tmp_path.glob("**/*.jsonl"))
    last = json.loads(file.read_text().splitlines()[-1])
    assert last["overrun_s"] == 0.0 and last["overrun_cause"] == "" and last["abandoned"] == []


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_ctrl_c_while_run_waits_inside_a_running_loop_cancels_the_run_on_its_thread(tmp_path):
    """Inside a running event loop (a kernel), run() waits for its own thread; the kernel's interrupt
    (KeyboardInterrupt in the waiting thread) cancels the run there and returns Stopped("cancelled")."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("a SIGINT handler other than Python's default is installed")
    model = al.ScriptedModel([reply(None, ("press_ctrl_c", {}))])

    async def cell():
        return al.run("q", [_ctrl_c_tool()], model=model, trace=tmp_path, deadline_s=20)

    loop = asyncio.new_event_loop()  # like a kernel's loop: no SIGINT handler of its own
    try:
        result = loop.run_until_complete(cell())
    finally:
        loop.close()
    assert isinstance(result, al.Stopped) and result.reason == "cancelled"
    assert trace_of(tmp_path)[-1]["reason"] == "cancelled"


def test_a_keyboard_interrupt_inside_the_engine_ends_the_run_cancelled_with_the_trace_complete(tmp_path):
    """A Ctrl-C that lands in engine code (here: while a subscriber runs) is not a tool failure: the run
    ends Stopped("cancelled"), run_finished is written, and run() returns the result."""
    fired = []

    def interrupted_display(event):
        if event.kind == "model_called" and not fired:
            fired.append(True)
            raise KeyboardInterrupt

    @al.tool
    def quick() -> str:
        """Answer."""
        return "ok"

    result = within(
        20,
        lambda: al.run(
            "q",
            [quick],
            model=al.ScriptedModel([reply(None, ("quick", {}))]),
            trace=tmp_path,
            subscribers=[interrupted_display],
        ),
    )
    assert isinstance(result, al.Stopped) and result.reason == "cancelled"
    assert result.detail == "interrupted by Ctrl-C during step 1 (calling model)"
    assert trace_of(tmp_path)[-1]["kind"] == "run_finished"


def test_a_task_left_by_one_run_is_not_on_the_loop_of_the_next_run():
    """run() may reuse its event loop (issue 27), but only one that nothing of the last run is left on."""
    seen: list[set[str]] = []

    async def leave_a_task() -> str:
        """Start background work that outlives the run."""
        asyncio.get_running_loop().create_task(asyncio.Event().wait(), name="left-behind")
        return "started"

    async def look() -> str:
        """Name the tasks on this loop."""
        seen.append({t.get_name() for t in asyncio.all_tasks()})
        return "looked"

    for tool in (leave_a_task, look):
        calls = [{"type": "tool_use", "id": "c1", "name": tool.__name__, "input": {}}]
        model = al.ScriptedModel(
            [{"content": calls, "stop_reason": "tool_use"}, {"content": [{"type": "text", "text": "ok"}]}]
        )
        assert isinstance(al.run("go", tools=[tool], model=model, trace=False), al.Done)
    assert seen and "left-behind" not in seen[0]


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_ctrl_c_landing_on_another_thread_cancels_a_run_on_a_reused_loop(tmp_path):
    """run() keeps its loop, and the socket pair a signal wakes it through, for the next run (issue 27): a
    Ctrl-C that lands on some other thread during that next run, whose loop then has nothing to do but wait,
    still ends the run cancelled, with its trace complete and Python's handler put back."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("a SIGINT handler other than Python's default is installed")

    @al.tool
    async def answer() -> str:
        """Answer at once."""
        return "ok"

    @al.tool
    async def press_ctrl_c_elsewhere() -> str:
        """Have another thread receive a SIGINT, then wait with nothing else on the loop."""
        helper = threading.Thread(target=lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT))
        helper.start()
        await asyncio.Event().wait()
        return "never"

    first = al.run("q", [answer], model=al.ScriptedModel([reply(None, ("answer", {})), reply("ok")]), trace=False)
    assert isinstance(first, al.Done)  # ended normally: its loop is kept for the next run
    model = al.ScriptedModel([reply(None, ("press_ctrl_c_elsewhere", {}))])
    result = al.run("q", [press_ctrl_c_elsewhere], model=model, trace=tmp_path, deadline_s=30)
    assert isinstance(result, al.Stopped) and result.reason == "cancelled"
    assert trace_of(tmp_path)[-1]["reason"] == "cancelled"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

"""A Hypothesis state machine drives one Run the way notebooks and widgets do, with hostile tools.

Rules step (optionally pausing before tools), cancel from the loop or from
another thread (before, during or after a step), start two steps at once,
and resume with raised budgets. Tools come from a zoo: quiet reads, writes,
tools that raise anything (``SystemExit``, ``KeyboardInterrupt``,
``StopIteration``...), block their thread, block the event loop for a
moment, or ignore their cancellation. A subscriber ahead of the trace may
raise anything (but a Ctrl-C) at one kind of event. After every rule: budgets
hold. At the end: nothing hung (every wait is bounded), nothing escaped, every event the
run emitted is in its trace file, a finished run's trace ends with
``run_finished``, and no call that finished was ever run again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import agentlab as al
from agentlab import reply
from agentlab.trace import TraceWriter, read_events
from agentlab.vocab import RESUMABLE

from .helpers import PRICES, Recorder

WAIT_S = 15.0
"""The longest any rule waits for the engine; reaching it is a hang, and a failure."""

RAISES = {
    "system_exit": SystemExit(1),
    "keyboard_interrupt": KeyboardInterrupt(),
    "stop_iteration": StopIteration(),
    "generator_exit": GeneratorExit(),
    "tool_error": al.ToolError("not found", hint="ask again"),
    "retryable": al.RetryableError("busy"),
    "value_error": ValueError("bug"),
}
ZOO = ["read", "write", "raise", "block_thread", "block_loop", "stubborn"]
SUBSCRIBER_RAISES = {
    "system_exit": SystemExit(2),
    "generator_exit": GeneratorExit(),
    "cancelled": asyncio.CancelledError(),
    "stop_iteration": StopIteration(),
    "value_error": ValueError("exporter bug"),
    "base": BaseException("odd"),
}
"""What a hostile subscriber raises (issue 24). A KeyboardInterrupt is a Ctrl-C, re-raised by step() once
every subscriber heard the event: tests/test_subscribers_contained.py covers it."""
EVENT_KINDS = [
    "run_started",
    "model_request",
    "model_called",
    "tool_started",
    "tool_finished",
    "tool_retry",
    "tool_results",
    "step_finished",
    "run_finished",
    "resumed",
]


class HostileSubscriber:
    def __init__(self, exc: BaseException | None, kind: str) -> None:
        self.exc, self.kind = exc, kind

    def __call__(self, event: al.Event) -> None:
        if self.exc is not None and event.kind == self.kind:
            raise self.exc


def make_tools(done: list[str]):
    @al.tool(mode="read")
    def read(key: str) -> str:
        """Read."""
        return f"value {key}"

    @al.tool(mode="write")
    async def write(key: str) -> str:
        """Write."""
        done.append(key)
        return f"wrote {key}"

    @al.tool
    def raise_(key: str) -> str:
        """Raise something."""
        raise RAISES[key]

    @al.tool(mode="read")
    def block_thread(key: str) -> str:
        """Hold its thread a moment."""
        time.sleep(0.03)
        return "slow"

    @al.tool(mode="read")
    async def block_loop(key: str) -> str:
        """Hold the event loop a moment."""
        time.sleep(0.005)
        return "rude"

    @al.tool(mode="read")
    async def stubborn(key: str) -> str:
        """Ignore cancellation for a little while."""
        end = time.monotonic() + 0.1
        while time.monotonic() < end:
            try:
                await asyncio.sleep(0.005)
            except asyncio.CancelledError:
                pass
        return "finally"

    raise_.name = "raise"  # type: ignore[attr-defined]
    return [read, write, al.tool(raise_.fn, name="raise"), block_thread, block_loop, stubborn]


turns = st.lists(
    st.lists(st.tuples(st.sampled_from(ZOO), st.sampled_from(sorted(RAISES))), min_size=1, max_size=3),
    min_size=1,
    max_size=8,
)


class RunMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.r: al.Run | None = None  # made by start(), the first rule

    @initialize(
        script=turns,
        max_steps=st.integers(1, 6),
        max_cost=st.sampled_from([None, 0.003, 0.05]),
        deadline=st.sampled_from([None, 0.3, 2.0]),
        hostile=st.sampled_from([None, *sorted(SUBSCRIBER_RAISES)]),
        on=st.sampled_from(EVENT_KINDS),
    )
    def start(self, script, max_steps, max_cost, deadline, hostile, on):
        import tempfile

        self.done: list[str] = []
        self.dir = tempfile.mkdtemp(prefix="agentlab-machine-")
        self.rec = Recorder()
        self.writer = TraceWriter(self.dir)
        counter = iter(range(10**6))

        def model(messages, tools):
            turn = len([m for m in messages if m["role"] == "assistant"])
            if turn >= len(script):
                return reply("done")
            calls = []
            for name, arg in script[turn]:
                key = arg if name == "raise" else f"{name}-{next(counter)}"
                calls.append((name, {"key": key}))
            return reply(None, *calls)

        self.r = self.on_loop(
            lambda: al.Run(
                "q",
                make_tools(self.done),
                model=al.FunctionModel(model),
                max_steps=max_steps,
                max_cost=max_cost,
                deadline_s=deadline,
                prices=PRICES,
                subscribers=[HostileSubscriber(SUBSCRIBER_RAISES.get(hostile or ""), on), self.rec, self.writer],
                policy=al.Policy(base_delay=0.001, max_delay=0.002),
            )
        )

    def on_loop(self, make):
        async def build():
            return make()

        return asyncio.run_coroutine_threadsafe(build(), self.loop).result(WAIT_S)

    def cancel(self, where: str) -> None:
        assert self.r is not None
        if where == "thread":
            self.r.cancel()
        else:
            self.loop.call_soon_threadsafe(self.r.cancel)

    @rule(
        pause=st.booleans(),
        cancel_after=st.sampled_from([None, 0.0, 0.005, 0.02]),
        where=st.sampled_from(["loop", "thread"]),
    )
    def step(self, pause, cancel_after, where):
        assert self.r is not None
        was_finished = self.r.finished
        fut = asyncio.run_coroutine_threadsafe(self.r.step(pause_before_tools=pause), self.loop)
        if cancel_after is not None:
            time.sleep(cancel_after)
            self.cancel(where)
        try:
            record = fut.result(WAIT_S)
        except concurrent.futures.TimeoutError:
            pytest.fail(f"step() still running after {WAIT_S} s")
        except RuntimeError as exc:
            assert was_finished and "has finished" in str(exc)
            return
        assert not was_finished and record.finished == self.r.finished

    @rule()
    def two_steps_at_once(self):
        assert self.r is not None
        calls, was_finished = self.r.model_calls, self.r.finished

        async def both():
            return await asyncio.gather(self.r.step(), self.r.step(), return_exceptions=True)

        outs = asyncio.run_coroutine_threadsafe(both(), self.loop).result(WAIT_S)
        errors = [o for o in outs if isinstance(o, BaseException)]
        assert all(isinstance(e, RuntimeError) for e in errors), outs
        if was_finished:
            assert len(errors) == 2 and all("has finished" in str(e) for e in errors)
        else:
            # Usually the second hears "already in a step"; a first step that never suspends (it ends the
            # run, or only hands back kept results) is over before the second starts.
            assert len(errors) <= 1
            assert all("already in a step" in str(e) or "has finished" in str(e) for e in errors)
        assert self.r.model_calls - calls <= 1

    @rule(where=st.sampled_from(["loop", "thread"]))
    def cancel_between_steps(self, where):
        self.cancel(where)

    @rule(more_steps=st.integers(1, 3), more_cost=st.sampled_from([0.0, 0.01]))
    def resume(self, more_steps, more_cost):
        r = self.r
        assert r is not None
        resumable = isinstance(r.result, al.Stopped) and r.result.reason in RESUMABLE
        b = r.budget
        kw = {"max_steps": (b.max_steps or 0) + more_steps}
        if b.max_cost is not None:
            kw["max_cost"] = b.max_cost + more_cost
        try:
            self.on_loop(lambda: r.resume(**kw))
        except RuntimeError as exc:
            assert not resumable and "can be resumed" in str(exc)
            return
        assert resumable and not r.finished

    @invariant()
    def budgets_hold(self):
        r = self.r
        if r is None:
            return
        b = r.budget
        assert b.max_steps is None or r.model_calls <= b.max_steps
        assert b.max_cost is None or r.spent <= b.max_cost + 1e-12

    def teardown(self):
        try:
            if self.r is not None:
                self.check_trace()
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(WAIT_S)
            if getattr(self, "dir", None):  # one folder per example: hundreds a session
                shutil.rmtree(self.dir, ignore_errors=True)

    def check_trace(self):
        r = self.r
        assert r is not None
        self.writer.close()
        files = list(Path(self.dir).glob("**/*.jsonl"))
        written = read_events(files[0]) if files else []
        assert [e["seq"] for e in written] == [e.seq for e in self.rec.events]  # every event, in order
        if r.finished:
            last = written[-1]
            assert last["kind"] == "run_finished" and last["reason"] == r.result.reason
        assert len(r.abandoned) <= len([e for e in written if e["kind"] == "tool_started"]) + r.steps
        # A call whose tool finished is never started again (exactly once across interruptions).
        finished_ok: set[str] = set()
        for e in written:
            if e["kind"] == "tool_started":
                assert e["call_id"] not in finished_ok, f"call {e['call_id']} ran again after it finished"
            if e["kind"] == "tool_finished" and e["outcome"] in ("ok", "retried", "recoverable"):
                finished_ok.add(e["call_id"])
        steps_done = [e for e in written if e["kind"] == "step_finished"]
        assert len(steps_done) <= r.steps


RunMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_a_run_survives_any_sequence_of_steps_cancels_and_resumes_with_hostile_tools = pytest.mark.filterwarnings(
    "ignore:agentlab. subscriber"  # the hostile subscriber's failures are reported as warnings, by design
)(RunMachine.TestCase)

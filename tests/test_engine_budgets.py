"""The three budgets fail independently, each with its own diagnosis and numbers."""

from __future__ import annotations

import asyncio
import threading
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab import reply

from .helpers import PRICES, hang


@al.tool(mode="read")
def big_read(n: int) -> str:
    """Return n characters (a large tool result grows the context)."""
    return "x" * n


def growing_model(result_size: int):
    """Asks for a large read every step: the context, and so the cost, grows each step."""
    return al.FunctionModel(lambda m, t: reply("reading more", ("big_read", {"n": result_size + len(m)})))


def test_hard_cost_guard_stops_before_spending_past_max_cost():
    """With the hard guard, a growing run stops with "budget" and never spends more than max_cost."""
    result = al.run(
        "q", [big_read], model=growing_model(6000), trace=False, max_steps=None, max_cost=0.05, prices=PRICES
    )
    assert result.reason == "budget"
    assert result.spent <= 0.05
    assert result.detail.startswith(f"spent ${result.spent:.4f} of $0.05 after step {result.steps}; the next call")


def test_after_the_fact_guard_overshoots_by_at_most_one_call():
    """The article's check-after-spending lets one call pass the limit: the overshoot is that call."""
    rec = []
    result = al.run(
        "q",
        [big_read],
        model=growing_model(6000),
        trace=False,
        max_steps=None,
        max_cost=0.05,
        cost_guard="after",
        prices=PRICES,
        subscribers=[lambda e: rec.append(e)],
    )
    costs = [e.data["cost"] for e in rec if e.kind == "model_called"]
    assert result.reason == "budget"
    assert result.detail == f"spent ${result.spent:.4f} of $0.05 after step {result.steps}"
    assert result.spent > 0.05
    assert result.spent - costs[-1] <= 0.05  # before the last call it was still within budget


def test_hard_guard_lowers_max_tokens_to_what_the_budget_affords():
    """When a full reply no longer fits, the next call is sent with a smaller max_tokens."""
    seen: list[int] = []

    def model(messages, tools, request):
        seen.append(request.max_tokens)
        return reply(None, ("big_read", {"n": 3000 + len(messages)}))

    result = al.run(
        "q",
        [big_read],
        model=al.FunctionModel(model),
        trace=False,
        max_steps=None,
        max_cost=0.03,
        prices=PRICES,
        max_tokens=1000,
    )
    assert seen[0] == 1000
    assert any(32 <= mt < 1000 for mt in seen), seen
    assert result.reason == "budget" and result.spent <= 0.03


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=20000), min_size=1, max_size=30),
    answer_len=st.integers(min_value=1, max_value=6000),
    max_cost=st.floats(min_value=0.001, max_value=0.2),
    max_tokens=st.integers(min_value=1, max_value=4000),
)
def test_hard_guard_never_spends_more_than_max_cost(sizes, answer_len, max_cost, max_tokens):
    """Over random runs (tool result sizes, answer lengths, budgets), spent <= max_cost always."""
    script = [reply("t" * (i % 7), ("big_read", {"n": n})) for i, n in enumerate(sizes)] + [reply("a" * answer_len)]
    result = al.run(
        "q",
        [big_read],
        model=al.ScriptedModel(script),
        trace=False,
        max_steps=None,
        max_cost=max_cost,
        prices=PRICES,
        max_tokens=max_tokens,
        loop_nudge_at=1000,
    )
    assert result.spent <= max_cost + 1e-12


class SlowModel:
    """Each call "takes" ``seconds`` on a fake clock: a deadline test without real waiting."""

    model = "claude-sonnet-4-5"

    def __init__(self, clock: al.FakeClock, seconds: float) -> None:
        self.clock, self.seconds, self.calls = clock, seconds, 0

    async def complete(self, request):
        self.calls += 1
        self.clock.advance(self.seconds)
        out = reply(None, ("big_read", {"n": self.calls}))
        out["content"][0]["id"] = f"toolu_{self.calls}"
        return out


def test_deadline_on_an_injected_clock_stops_with_the_numbers():
    """Model calls of 10 s against a 25 s deadline stop after step 3 with "deadline"."""
    clock = al.FakeClock()
    model = SlowModel(clock, 10.0)
    result = al.run(
        "q", [big_read], model=model, clock=clock, trace=False, max_steps=None, max_cost=None, deadline_s=25
    )
    assert result.reason == "deadline"
    assert result.detail == "30.00s of 25s used at step 3, before its tools"
    assert model.calls == 3


def test_budgets_are_told_apart_when_steps_would_also_run_out():
    """Within its step limit but over its deadline, the run names the deadline."""
    clock = al.FakeClock()
    result = al.run(
        "q",
        [big_read],
        model=SlowModel(clock, 10.0),
        clock=clock,
        trace=False,
        max_steps=3,
        max_cost=None,
        deadline_s=15,
    )
    assert result.reason == "deadline" and result.steps == 2


def test_a_sync_tool_that_never_returns_is_abandoned_at_the_deadline():
    """A hanging sync tool does not hold the run: it stops with "deadline" close to deadline_s."""
    release = threading.Event()

    @al.tool
    def hang() -> str:
        """Wait forever (until the test ends)."""
        release.wait(60)
        return "late"

    t0 = time.monotonic()
    try:
        result = al.run("q", [hang], model=al.ScriptedModel([reply(None, ("hang", {}))]), trace=False, deadline_s=0.5)
    finally:
        release.set()
    took = time.monotonic() - t0
    assert result.reason == "deadline"
    assert "tool hang at step 1: still running when the 0.5s deadline passed" == result.detail
    assert took < 0.5 + 2.0  # about 0.1 s over in practice; generous for a shared machine


def test_an_async_tool_that_never_returns_is_cancelled_at_the_deadline():
    """A hanging async tool is cancelled at the deadline and the run says so."""
    cancelled = []

    @al.tool
    async def hang_async() -> str:
        """Await forever."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    t0 = time.monotonic()
    result = al.run(
        "q", [hang_async], model=al.ScriptedModel([reply(None, ("hang_async", {}))]), trace=False, deadline_s=0.3
    )
    assert result.reason == "deadline" and cancelled == [True]
    assert time.monotonic() - t0 < 0.3 + 2.0


def test_a_model_call_slower_than_the_deadline_stops_with_deadline():
    """The model call is bounded too: its timeout is the time left."""
    timeouts = []

    async def slow(messages, tools, request):
        timeouts.append(request.timeout)
        await hang()

    result = al.run("q", model=al.FunctionModel(slow), trace=False, deadline_s=1.0)  # set-up counts too: room for it
    assert result.reason == "deadline" and "model call at step 1" in result.detail
    assert 0 < timeouts[0] <= 1.0


def test_paused_time_between_steps_does_not_count_against_the_deadline():
    """The deadline is working time: a run left idle between steps does not age."""
    clock = al.FakeClock()

    async def go():
        r = al.Run("q", [big_read], model=SlowModel(clock, 1.0), clock=clock, max_cost=None, deadline_s=5)
        await r.step()
        clock.advance(1000)  # the notebook user went for coffee
        await r.step()
        return r

    r = asyncio.run(go())
    assert not r.finished and r.snapshot.elapsed == 2.0


def test_resume_with_a_raised_budget_continues_a_stopped_run():
    """A run stopped by its step limit continues after raising max_steps, with history intact."""

    async def go():
        model = al.ScriptedModel([reply(None, ("big_read", {"n": i})) for i in range(3)] + [reply("finally")])
        r = al.Run("q", [big_read], model=model, max_steps=2)
        first = await r.run()
        r.resume(max_steps=5)
        second = await r.run()
        return first, second

    first, second = asyncio.run(go())
    assert first.reason == "step limit" and first.steps == 2
    assert isinstance(second, al.Done) and second.text == "finally" and second.steps == 4


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(st.sampled_from(["call", "pause", "answer"]), min_size=1, max_size=20),
    max_steps=st.integers(min_value=1, max_value=12),
)
def test_no_run_ever_makes_step_n_plus_one_once_n_equals_max_steps(turns, max_steps):
    """Whatever the model does, it is called at most max_steps times, and a run cut short says "step limit"."""
    script = []
    for i, kind in enumerate(turns):
        if kind == "call":
            script.append(reply(None, ("big_read", {"n": i})))
        elif kind == "pause":
            script.append(reply("…", stop_reason="pause_turn"))
        else:
            script.append(reply("done"))
    script.append(reply("done"))
    model = al.ScriptedModel(script)
    result = al.run("q", [big_read], model=model, trace=False, max_steps=max_steps, max_cost=None, loop_nudge_at=1000)
    answer_at = next(i for i, r in enumerate(script) if r["stop_reason"] == "end_turn") + 1
    assert model.calls == min(answer_at, max_steps) == result.steps
    if answer_at > max_steps:
        assert result.reason == "step limit"
    else:
        assert isinstance(result, al.Done)

"""The policy table: recoverable, retryable and fatal failures each behave as their kind."""

from __future__ import annotations

import asyncio
import random

import pytest

import agentlab as al
from agentlab import reply

from .helpers import Recorder, Seen, hang, last_tool_results


def run_with(tools, script, **kw):
    rec = Recorder()
    seen = Seen(lambda m, t: script[len(seen.requests) - 1] if len(seen.requests) <= len(script) else reply("end"))
    model = al.FunctionModel(seen)
    result = al.run("q", tools, model=model, trace=False, subscribers=[rec], **kw)
    return result, rec, seen


def test_tool_error_reaches_the_model_with_its_hint():
    """A recoverable error is a tool_result with is_error and the next step named."""

    @al.tool(mode="read")
    def get_order(order_id: int) -> str:
        raise al.ToolError(f"Order {order_id} not found.", hint="search_orders by customer email to find the number.")

    result, rec, seen = run_with([get_order], [reply(None, ("get_order", {"order_id": 9})), reply("ok")])
    block = last_tool_results(seen.requests[1])[0]
    assert block == {
        "type": "tool_result",
        "tool_use_id": block["tool_use_id"],
        "is_error": True,
        "content": "Order 9 not found. Next step: search_orders by customer email to find the number.",
    }
    assert rec.of("tool_finished")[0].data["outcome"] == "recoverable"
    assert isinstance(result, al.Done)


def test_retryable_errors_are_retried_invisibly_with_exact_backoff():
    """Two 503s then an answer: the model sees only the answer; waits follow the policy."""
    attempts = []

    @al.tool(mode="read")
    def upstream() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise al.RetryableError("503 Service Unavailable")
        return "fresh data"

    clock = al.FakeClock()
    policy = al.Policy(base_delay=1.0, max_delay=10.0, jitter=0.5, max_attempts=5)
    rng = random.Random(7)
    expected_rng = random.Random(7)
    expected = [1.0 * (1 - 0.5 * expected_rng.random()), 2.0 * (1 - 0.5 * expected_rng.random())]
    result, rec, seen = run_with(
        [upstream], [reply(None, ("upstream", {})), reply("ok")], clock=clock, policy=policy, rng=rng
    )
    assert len(attempts) == 3
    assert clock.sleeps == pytest.approx(expected)
    assert last_tool_results(seen.requests[1])[0] == {
        "type": "tool_result",
        "tool_use_id": last_tool_results(seen.requests[1])[0]["tool_use_id"],
        "content": "fresh data",
    }
    finished = rec.of("tool_finished")[0].data
    assert finished["outcome"] == "retried" and finished["attempts"] == 3
    assert [e.data["attempt"] for e in rec.of("tool_retry")] == [1, 2]


def test_retry_after_from_the_upstream_is_honoured():
    """retry_after replaces the computed backoff wait."""
    calls = []

    @al.tool(mode="read")
    def limited() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise al.RetryableError("429 Too Many Requests", retry_after=4.5)
        return "ok"

    clock = al.FakeClock()
    run_with([limited], [reply(None, ("limited", {})), reply("ok")], clock=clock)
    assert clock.sleeps == [4.5]


def test_when_retries_run_out_the_model_hears_it_as_recoverable():
    """After max_attempts the failure goes to the model once, saying how many attempts were made."""

    @al.tool(mode="read")
    def down() -> str:
        raise ConnectionError("connection reset by peer")

    clock = al.FakeClock()
    result, rec, seen = run_with(
        [down], [reply(None, ("down", {})), reply("gave up")], clock=clock, policy=al.Policy(max_attempts=3)
    )
    block = last_tool_results(seen.requests[1])[0]
    assert (
        block["is_error"] and "ConnectionError: connection reset by peer (gave up after 3 attempts)" in block["content"]
    )
    assert len(clock.sleeps) == 2 and isinstance(result, al.Done)


def test_a_retry_wait_that_would_pass_the_deadline_stops_the_run_at_once():
    """A retry_after longer than the time left stops with "deadline" instead of sleeping."""

    @al.tool(mode="read")
    def limited() -> str:
        raise al.RetryableError("429", retry_after=120)

    clock = al.FakeClock()
    result, rec, seen = run_with([limited], [reply(None, ("limited", {}))], clock=clock, deadline_s=60)
    assert result.reason == "deadline"
    assert "retry wait of 120.0s" in result.detail and "would pass the deadline" in result.detail
    assert clock.sleeps == []


def test_a_tools_own_timeout_is_retryable():
    """A call that exceeds its tool's timeout is retried like any transient failure."""
    calls = []

    @al.tool(mode="read", timeout=0.05, retry=al.Retry(max_attempts=2, base_delay=0.0))
    async def sometimes_slow() -> str:
        calls.append(1)
        if len(calls) == 1:
            await hang()  # cut by the tool's own timeout
        return "quick this time"

    result, rec, seen = run_with([sometimes_slow], [reply(None, ("sometimes_slow", {})), reply("ok")])
    assert len(calls) == 2
    assert last_tool_results(seen.requests[1])[0]["content"] == "quick this time"
    assert "own 0.05s timeout" in rec.of("tool_retry")[0].data["error"]


@pytest.mark.parametrize(
    "exc",
    [
        al.PermissionDenied("role 'refunds' required"),
        PermissionError("EACCES /etc/shadow"),
        al.AuthenticationFailed("bad key"),
        al.FatalError("disk gone"),
    ],
)
def test_fatal_errors_stop_the_run_and_the_model_is_never_called_again(exc):
    """A permission denial (and every fatal error) ends the run; zero model calls follow."""

    @al.tool(mode="read")
    def guarded() -> str:
        raise exc

    result, rec, seen = run_with([guarded], [reply(None, ("guarded", {})), reply("let me try another route")])
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    assert len(seen.requests) == 1  # the model never heard of it
    assert result.error is exc
    assert str(exc) in result.detail and "tool guarded, step 1" in result.detail
    assert rec.kinds()[-1] == "run_finished"


def test_treating_denial_as_recoverable_lets_the_model_probe():
    """The classic bug, on purpose: with the denial recoverable the model is told and keeps trying."""

    @al.tool(mode="read")
    def refund(order_id: int) -> str:
        raise al.PermissionDenied("the agent lacks the 'refunds' role")

    script = [reply(None, ("refund", {"order_id": i})) for i in range(3)] + [reply("done")]
    result, rec, seen = run_with([refund], script, policy=al.Policy(permission_denied="recoverable"))
    assert len(seen.requests) == 4 and isinstance(result, al.Done)
    assert "lacks the 'refunds' role" in last_tool_results(seen.requests[1])[0]["content"]


def test_unknown_tool_is_fatal_by_default_and_recoverable_by_setting():
    """A call to an unregistered tool stops the run, unless the policy says to tell the model."""

    @al.tool(mode="read")
    def real() -> str:
        return "ok"

    script = [reply(None, ("imaginary", {})), reply("fine")]
    result, _, seen = run_with([real], script)
    assert result.reason == "fatal" and "'imaginary', which is not registered (tools: real)" in result.detail
    assert len(seen.requests) == 1
    result, _, seen = run_with([real], script, policy=al.Policy(unknown_tool="recoverable"))
    assert isinstance(result, al.Done)
    assert "not registered" in last_tool_results(seen.requests[1])[0]["content"]


def test_an_unclassified_exception_is_a_bug_fatal_with_traceback_in_the_trace():
    """A KeyError from a tool stops the run and the event carries the traceback."""

    @al.tool(mode="read")
    def buggy() -> str:
        return {}["missing"]

    result, rec, _ = run_with([buggy], [reply(None, ("buggy", {}))])
    assert result.reason == "fatal" and isinstance(result.error, KeyError)
    err = rec.of("tool_finished")[0].data["error"]
    assert err["type"] == "KeyError" and 'return {}["missing"]' in err["traceback"]
    result, _, seen = run_with(
        [buggy], [reply(None, ("buggy", {})), reply("ok")], policy=al.Policy(unclassified="recoverable")
    )
    assert isinstance(result, al.Done) and "KeyError" in last_tool_results(seen.requests[1])[0]["content"]


def test_a_fatal_error_cancels_running_siblings_and_starts_no_more_tools():
    """In a parallel turn a fatal error cancels the other reads and later calls never start."""
    started = []

    @al.tool(mode="read")
    async def slow_read(n: int) -> str:
        started.append(n)
        await hang()  # cancelled by its sibling's fatal error
        return "late"

    @al.tool(mode="read")
    async def denied() -> str:
        started.append("denied")
        await asyncio.sleep(0)
        raise al.PermissionDenied("no")

    @al.tool(mode="write")
    def write_after() -> str:
        started.append("write")
        return "written"

    script = [reply(None, ("slow_read", {"n": 1}), ("denied", {}), ("slow_read", {"n": 2}), ("write_after", {}))]
    result, rec, _ = run_with([slow_read, denied, write_after], script, deadline_s=20)
    assert result.reason == "fatal"
    assert "write" not in started
    outcomes = sorted(e.data["outcome"] for e in rec.of("tool_finished"))
    assert outcomes == ["cancelled", "cancelled", "fatal"]


@pytest.mark.parametrize(
    "bad",
    [
        {"max_attempts": True},
        {"max_attempts": 0},
        {"base_delay": float("nan")},
        {"base_delay": True},
        {"max_delay": float("inf")},
        {"max_delay": -1},
        {"jitter": True},
        {"jitter": 1.5},
    ],
)
def test_the_run_policy_refuses_what_a_tools_retry_settings_refuse(bad):
    """One rule for "a positive number, never a bool": Policy says no where Retry does, naming the field."""
    from agentlab.tools import Retry

    (name,) = bad
    with pytest.raises(ValueError, match=f"Policy.{name}"):
        al.Policy(**bad)
    if name != "jitter":
        with pytest.raises(ValueError, match=f"Retry: {name}"):
            Retry(**bad)

"""A reply lost in transit after the request reached the API may have been billed: it is counted at its worst
case before anything else is sent, so no request is sent twice without the budget counting both.

Real ``anthropic`` SDK against the local Messages API server, which reads the request and then closes the
connection without a reply (``dropped()``), or answers too late for the client's timeout (``slow()``).
"""

from __future__ import annotations

import asyncio
import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab._account import NOTHING_HELD, Account, Hold
from agentlab.models.anthropic import AnthropicModel
from agentlab.models.base import capabilities
from agentlab.testing import MessagesServer, dropped, reply, slow, streamed
from agentlab.trace import TraceWriter

from .helpers import PRICES, Recorder


@al.tool(mode="read")
def lookup(order_id: int = 0) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


def go(server: MessagesServer, *, stream: bool = False, timeout: float = 60.0, **limits):
    rec = Recorder()
    result = al.run(
        "Where is order 7?",
        [lookup],
        model=AnthropicModel("claude-sonnet-4-5", client=server.client(), stream=stream, timeout=timeout),
        subscribers=[rec],
        clock=al.FakeClock(),
        trace=False,
        prices=PRICES,
        **limits,
    )
    return result, rec


def messages_posts(server: MessagesServer) -> int:
    return sum(1 for r in server.requests if r.path.startswith("/v1/messages") and "count_tokens" not in r.path)


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_lost_after_the_request_was_read_is_charged_at_its_worst_case_then_retried(stream):
    """The server read the request and hung up: the attempt costs the guard's worst case, in the trace as an
    estimate with the reason, and the retry that answers is charged on top (the bill may hold both)."""
    with MessagesServer([dropped(), reply("It shipped.")]) as server:
        result, rec = go(server, stream=stream, max_cost=1.0, max_tokens=800)
    assert isinstance(result, al.Done) and result.text == "It shipped." and messages_posts(server) == 2
    asked, called = rec.of("model_request"), rec.of("model_called")
    assert len(asked) == len(called) == 2  # each request sent is announced, then charged
    lost, answered = called[0].data, called[1].data
    assert lost["lost"] and lost["estimated"] and "content" not in lost  # nothing joins the history
    assert lost["cost"] == asked[0].data["guard_worst_case"] > answered["cost"] > 0
    assert "may have been billed" in lost["error"] and "charged at its worst case" in lost["error"]
    assert result.spent == pytest.approx(lost["cost"] + answered["cost"]) == answered["spent"]
    assert [e.kind for e in rec.events if e.kind.startswith("model_") and e.kind != "model_delta"] == [
        "model_request",
        "model_called",
        "model_retry",
        "model_request",
        "model_called",
    ]
    assert [m["role"] for m in result.messages] == ["user", "assistant"]


def test_a_reply_that_times_out_after_the_request_was_sent_is_charged_too():
    """The SDK's read timeout (the server took longer than the client waits) loses a reply the API may bill."""
    with MessagesServer([slow(reply("too late"), 30), reply("It shipped.")]) as server:
        result, rec = go(server, timeout=1.0, max_cost=1.0, max_tokens=800, deadline_s=None)  # the model's timeout
    assert isinstance(result, al.Done) and messages_posts(server) == 2
    lost = rec.of("model_called")[0].data
    assert lost["lost"] and lost["cost"] > 0 and "no reply from the Messages API within 1.0s" in lost["error"]


def test_the_hard_guard_counts_the_lost_attempt_before_it_sends_the_retry():
    """A budget with room for one worst case but not two: the lost attempt is charged, the retry is refused
    before it is sent, and the run ends within max_cost saying why."""
    with MessagesServer([dropped(), reply("never sent")]) as server:
        probe, probe_rec = go(server, max_cost=1.0, max_tokens=800)  # what one worst case costs here
    worst = probe_rec.of("model_request")[0].data["guard_worst_case"]
    max_cost = worst * 1.01  # the first call fits at full max_tokens; after its charge, not even a short retry
    with MessagesServer([dropped(), reply("never sent")]) as server:
        result, rec = go(server, max_cost=max_cost, max_tokens=800)
        assert messages_posts(server) == 1 and server.pending == 1
    assert isinstance(result, al.Stopped) and result.reason == "budget"
    assert "the reply of step 1 was lost in transit and charged at its worst case; a retry: spent $" in result.detail
    assert result.spent == pytest.approx(worst) and result.spent <= max_cost
    assert len(rec.of("model_called")) == 1 and rec.of("model_called")[0].data["lost"]


def test_a_connection_refused_before_anything_was_sent_is_retried_without_a_charge():
    """Connecting failed: the API never saw the request, so the retries cost nothing."""
    import anthropic

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = anthropic.AsyncAnthropic(api_key="sk-ant-test-local", base_url=f"http://127.0.0.1:{port}")
    rec = Recorder()
    result = al.run(
        "Q", model=AnthropicModel(client=client, stream=False), subscribers=[rec], clock=al.FakeClock(), trace=False
    )
    assert isinstance(result, al.Stopped) and result.reason == "model error" and "failed 3 times" in result.detail
    assert result.spent == 0 and rec.of("model_called") == [] and len(rec.of("model_retry")) == 2


def test_a_lost_reply_is_charged_the_worst_case_its_check_priced():
    account = Account("r")
    hold = account.reserve(90, (1e-6, 5e-6), 800, worst=0.0123)
    assert isinstance(hold, Hold)
    charge = account.charge(hold, "lost", hold.worst)
    assert charge.cost == 0.0123 and account.spent == 0.0123 and charge.fields()["lost"] is True
    assert account.charge(NOTHING_HELD, "lost", NOTHING_HELD.worst).cost == 0.0


@settings(max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(st.sampled_from(["drop", "tool", "answer"]), min_size=1, max_size=6),
    stream=st.booleans(),
    share=st.floats(0.2, 6.0),
    max_tokens=st.integers(40, 1500),
)
def test_with_drops_anywhere_no_run_passes_max_cost_and_every_request_sent_is_counted(
    script, stream, share, max_tokens
):
    """Random runs with replies lost anywhere, streamed or not, under the hard guard: none ends over
    max_cost, and each request the server received has its model_called (charged, or lost and charged)."""
    items = {
        "drop": dropped(),
        "tool": reply("Looking.", ("lookup", {"order_id": 7})),
        "answer": reply("It shipped."),
    }
    script = [*script, "answer"]  # the run can always end well; a server out of script would be a 500
    queue = [items[k] for k in script]
    if stream:
        queue = [q if k == "drop" else streamed(q) for k, q in zip(script, queue, strict=True)]
    max_cost = 0.012 * max_tokens / 800 * share  # from under one worst case to several
    with MessagesServer(queue) as server:
        result, rec = go(server, stream=stream, max_cost=max_cost, max_tokens=max_tokens, max_steps=None)
        sent = messages_posts(server)
    assert result.spent <= max_cost + 1e-12, (result, max_cost)
    called = rec.of("model_called")
    assert sent == len(called) == len(rec.of("model_request")), (script, result)
    assert result.spent == pytest.approx(sum(e.data["cost"] for e in called))


def test_the_step_view_shows_the_reply_that_came_not_the_lost_attempt(tmp_path):
    with MessagesServer([dropped(), reply("It shipped.")]) as server:
        result = al.run("Q", model=AnthropicModel(client=server.client(), stream=False), trace=tmp_path, prices=PRICES)
    trace = al.load_run(result.run_id, tmp_path)
    assert trace.step(1).reply["content"] == [{"type": "text", "text": "It shipped."}]
    assert trace.runs["cost"].iloc[0] == pytest.approx(result.spent) and len(trace.steps) == 1
    assert [m["role"] for m in trace.messages] == ["user", "assistant"]


def test_the_step_record_costs_the_lost_attempt_and_the_reply():
    with MessagesServer([dropped(), reply("It shipped.")]) as server:
        run = al.Run(
            "Q",
            model=AnthropicModel(client=server.client(), stream=False),
            clock=al.FakeClock(),
            prices=PRICES,
            max_cost=1.0,
        )
        record = asyncio.run(run.step())
    assert record.text == "It shipped." and record.cost == pytest.approx(run.spent)  # the lost attempt and the reply


# ------------------------------------------------ a call abandoned in flight (Stop, the deadline)
def abandoned_run(server_item, tmp_path, *, stream: bool, how: str, model=None):
    """One run whose first call the server holds; Stop is pressed from the server's thread as the request
    arrives (``how="stop"``), or the run's deadline ends the held call (``how="deadline"``: the engine's own
    timer, made to pass as the request arrives by moving the fake clock and the event loop's clock on by the
    deadline, so no real second is waited). Returns the result, its events, the ledger and the server."""
    from agentlab.experiments import TotalLedger

    ledger, rec, box, writer, clock = TotalLedger(1.0), Recorder(), {}, TraceWriter(tmp_path), al.FakeClock()

    def hold(body):  # runs on the server's thread when the request arrived: the API may bill it from here
        if how == "stop":
            box["run"].cancel()  # thread-safe: interrupts the step on its loop
        else:
            box["pass_deadline"]()
        return server_item

    with MessagesServer([hold]) as server:

        async def main():
            loop, shift = asyncio.get_running_loop(), [0.0]
            real_time = loop.time
            loop.time = lambda: real_time() + shift[0]  # the loop's clock, injected

            def pass_deadline() -> None:  # the deadline's second passes at once, on both clocks
                clock.advance(1.0)
                shift[0] += 1.0
                loop.call_soon_threadsafe(lambda: None)  # wake the loop: its timer is now due

            box["pass_deadline"] = pass_deadline
            run = box["run"] = al.Run(
                "Where is order 7?",
                [lookup],
                model=model or AnthropicModel("claude-sonnet-4-5", client=server.client(), stream=stream),
                subscribers=[rec, writer],
                clock=clock,
                prices=PRICES,
                max_cost=0.5,
                max_tokens=800,
                ledger=ledger,
                deadline_s=1.0 if how == "deadline" else 60,
            )
            try:
                return await run.run()
            finally:
                ledger.release(run.run_id)  # what an experiment does as a run ends
                writer.close()

        result = asyncio.run(main())
        posts = messages_posts(server)
    return result, rec, ledger, posts


@pytest.mark.parametrize(
    ("stream", "how"),
    [(False, "stop"), (False, "deadline"), (True, "stop"), (True, "deadline")],
    ids=["non-streamed-stop", "non-streamed-deadline", "stream-before-message_start-stop", "stream-deadline"],
)
def test_a_call_abandoned_in_flight_before_any_reply_is_charged_at_its_worst_case(tmp_path, stream, how):
    """The request reached the API, then Stop or the deadline abandoned it before a byte of the reply came (a
    held non-streamed reply; a stream whose message_start never came): the API may bill it, so it costs the
    worst case reserved for it, within max_cost, and the run, the shared ledger and the trace all say so."""
    held = streamed(reply("It shipped."), hold_after=0, hold=30) if stream else slow(reply("It shipped."), 30)
    result, rec, ledger, posts = abandoned_run(held, tmp_path, stream=stream, how=how)
    assert isinstance(result, al.Stopped) and result.reason == ("cancelled" if how == "stop" else "deadline")
    asked, called = rec.of("model_request"), rec.of("model_called")
    assert len(asked) == len(called) == 1 and posts <= 1  # one request sent, charged once, never retried
    lost = called[0].data
    assert lost["lost"] and lost["estimated"] and "content" not in lost and "usage" not in lost
    assert lost["stop_reason"] == ("cancelled" if how == "stop" else "deadline")
    assert f"abandoned by {'Stop' if how == 'stop' else 'the deadline'}" in lost["error"]
    assert "may have billed it" in lost["error"]
    worst = asked[0].data["guard_worst_case"]
    assert lost["cost"] == worst == result.spent > 0 and result.spent <= 0.5  # "hard": reserved before sending
    assert ledger.spent == pytest.approx(result.spent) and ledger.reserved == pytest.approx(0.0, abs=1e-12)
    trace = al.load_run(result.run_id, tmp_path)
    assert trace.runs["cost"].iloc[0] == pytest.approx(result.spent)
    stored = trace.events[trace.events["kind"] == "model_called"]["data"]
    assert len(stored) == 1 and stored.iloc[0]["lost"] and stored.iloc[0]["cost"] == pytest.approx(worst)
    assert [m["role"] for m in result.messages] == ["user"]  # nothing joins the history


def test_stop_pressed_before_the_call_was_sent_costs_nothing(tmp_path):
    """Stop from a listener of ``model_request`` (inside the step, before the SDK has the request): the
    request is never sent, so nothing is charged."""
    rec, box, writer = Recorder(), {}, TraceWriter(tmp_path)
    with MessagesServer([reply("never sent")]) as server:
        run = box["run"] = al.Run(
            "Q",
            model=AnthropicModel(client=server.client(), stream=False),
            subscribers=[rec, writer, lambda e: box["run"].cancel() if e.kind == "model_request" else None],
            clock=al.FakeClock(),
            prices=PRICES,
            max_cost=0.5,
        )
        result = asyncio.run(run.run())
        writer.close()
        assert messages_posts(server) == 0
    assert isinstance(result, al.Stopped) and result.reason == "cancelled"
    assert result.spent == 0 and rec.of("model_called") == []
    assert al.load_run(result.run_id, tmp_path).runs["cost"].iloc[0] == 0


class _HeldOffline:
    """A model that answers locally and never bills: its call is held until Stop (pressed as it starts)."""

    model = "claude-sonnet-4-5"  # priced like the real one, so only ``bills`` tells them apart

    def __init__(self) -> None:
        self.run: al.Run | None = None

    async def complete(self, request):
        loop = asyncio.get_running_loop()
        assert self.run is not None
        loop.call_soon(self.run.cancel)  # from the loop, outside the step: interrupts the call in flight
        await loop.create_future()  # never answers


def test_an_offline_model_abandoned_in_flight_stays_at_zero():
    """A model that answers locally bills nothing: Stop in the middle of its call costs $0, traced as no call."""
    model = _HeldOffline()
    rec = Recorder()
    run = model.run = al.Run("Q", model=model, subscribers=[rec], clock=al.FakeClock(), prices=PRICES, max_cost=0.5)
    result = asyncio.run(run.run())
    assert isinstance(result, al.Stopped) and result.reason == "cancelled" and "calling model" in result.detail
    assert result.spent == 0 and rec.of("model_called") == [] and len(rec.of("model_request")) == 1
    assert capabilities(model).bills is False and AnthropicModel.bills is True

"""Streaming: replies reach subscribers fragment by fragment, and a stream cut short is handled."""

from __future__ import annotations

import asyncio
import json

import pytest

import agentlab as al
from agentlab.models.anthropic import AnthropicModel
from agentlab.models.streaming import StreamAssembler, chunk_reply
from agentlab.testing import MessagesServer, reply, stream_events, streamed

from .helpers import PRICES

LONG = "The parcel left the depot at nine and reached the sorting centre by noon. " * 6


@al.tool(mode="read")
def lookup(order_id: int = 0) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


def deltas(events):
    return [e for e in events if e.kind == "model_delta"]


def test_a_streamed_reply_reaches_subscribers_in_fragments_then_model_called_holds_it_whole(tmp_path):
    """Each fragment is a model_delta (index, type, text); joined they are the answer; the trace file has none."""
    events: list = []
    with MessagesServer([streamed(reply(LONG), chunk=20)]) as server:
        result = al.run(
            "Where?",
            model=AnthropicModel(client=server.client()),
            subscribers=[events.append],
            clock=al.FakeClock(),
            trace=tmp_path,
            prices=PRICES,
        )
    assert server.requests[0].body["stream"] is True
    got = deltas(events)
    assert len(got) == -(-len(LONG) // 20)
    assert {(e.data["index"], e.data["type"]) for e in got} == {(0, "text")}
    assert "".join(e.data["text"] for e in got) == LONG == result.text
    kinds = [e.kind for e in events]
    assert kinds.index("model_called") > max(i for i, k in enumerate(kinds) if k == "model_delta")
    lines = [json.loads(line) for line in (tmp_path / f"{result.run_id}.jsonl").read_text().splitlines()]
    assert "model_delta" not in {r["kind"] for r in lines} and "model_called" in {r["kind"] for r in lines}


def test_the_trace_writer_keeps_deltas_when_asked(tmp_path):
    from agentlab.trace import TraceWriter

    writer = TraceWriter(tmp_path, deltas=True)
    with MessagesServer([streamed(reply("Short answer here."), chunk=5)]) as server:
        result = al.run(
            "Q",
            model=AnthropicModel(client=server.client()),
            subscribers=[writer],
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
        )
    writer.close()
    kinds = [json.loads(line)["kind"] for line in (tmp_path / f"{result.run_id}.jsonl").read_text().splitlines()]
    assert kinds.count("model_delta") == 4


def test_thinking_and_tool_input_stream_as_their_own_fragment_types():
    """Thinking arrives as thinking fragments, a tool call's arguments as tool_input fragments that parse at the end."""
    first = {
        "role": "assistant",
        "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "Look the order up first.", "signature": "c2lnbmF0dXJl"},
            {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {"order_id": 7}},
        ],
    }
    events: list = []
    with MessagesServer([streamed(first, chunk=4), reply("Shipped.")]) as server:
        result = al.run(
            "Where is 7?",
            [lookup],
            model=AnthropicModel(client=server.client()),
            subscribers=[events.append],
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
        )
    assert isinstance(result, al.Done)
    step1 = [e for e in deltas(events) if e.step == 1]
    assert "".join(e.data["text"] for e in step1 if e.data["type"] == "thinking") == "Look the order up first."
    assert json.loads("".join(e.data["text"] for e in step1 if e.data["type"] == "tool_input")) == {"order_id": 7}
    sent = server.requests[1].body["messages"][1]["content"]
    assert sent[0]["signature"] == "c2lnbmF0dXJl" and sent[1]["input"] == {"order_id": 7}


def _run_and_stop_at_first_delta(server, how: str):
    """Start a run, and on its first fragment press Stop (or let a short real deadline pass)."""
    events: list = []

    async def main():
        run = al.Run(
            "Where?",
            model=AnthropicModel(client=server.client()),
            prices=PRICES,
            deadline_s=0.4 if how == "deadline" else 60,
            subscribers=[events.append],
        )

        def on(event):
            if event.kind == "model_delta" and how == "cancel":
                run.cancel()

        run.subscribe(on)
        return await run.run(), run

    result, run = asyncio.run(main())
    return result, run, events


@pytest.mark.parametrize("how", ["cancel", "deadline"])
def test_stop_mid_stream_keeps_the_partial_text_in_the_trace_and_charges_it_as_estimated(how):
    with MessagesServer([streamed(reply(LONG), chunk=10, hold_after=6, hold=30)]) as server:
        result, run, events = _run_and_stop_at_first_delta(server, how)
    assert isinstance(result, al.Stopped) and result.reason == ("cancelled" if how == "cancel" else "deadline")
    called = [e for e in events if e.kind == "model_called"]
    assert len(called) == 1 and called[0].data["partial"] is True and called[0].data["estimated"] is True
    kept = called[0].data["content"][0]["text"]
    assert kept and LONG.startswith(kept) and len(kept) < len(LONG)
    assert called[0].data["cost"] > 0 and result.spent == pytest.approx(called[0].data["cost"])
    assert [m["role"] for m in result.messages] == ["user"]  # no half reply in the history: resumable
    if how == "cancel":
        run.resume()
        assert not run.finished


def test_a_connection_dropped_before_the_api_began_the_reply_is_retried():
    events: list = []
    with MessagesServer([streamed(reply(LONG), drop_after=0), reply("Recovered.")]) as server:
        result = al.run(
            "Q",
            model=AnthropicModel(client=server.client()),
            subscribers=[events.append],
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
        )
    assert isinstance(result, al.Done) and result.text == "Recovered." and len(server.requests) == 2
    assert [e.kind for e in events].count("model_retry") == 1


def test_a_connection_dropped_after_text_was_shown_stops_clearly_instead_of_retrying():
    events: list = []
    with MessagesServer([streamed(reply(LONG), chunk=10, drop_after=8), reply("never sent")]) as server:
        result = al.run(
            "Q",
            model=AnthropicModel(client=server.client()),
            subscribers=[events.append],
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
        )
    assert isinstance(result, al.Stopped) and result.reason == "model error"
    assert "(5 fragments shown)" in result.detail and len(server.requests) == 1  # 8 events: 3 before the text
    assert deltas(events)


def test_a_reply_lost_in_transit_after_the_api_began_it_is_charged_at_its_worst_case_and_says_so():
    """The API may have billed it: counted at the guard's worst case (never $0), not retried, and said so."""
    events: list = []
    with MessagesServer([streamed(reply(LONG), drop_after=2), reply("never sent")]) as server:
        result = al.run(
            "Q",
            model=AnthropicModel(client=server.client()),
            subscribers=[events.append],
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
            max_cost=0.05,
            max_tokens=1000,
        )
    assert isinstance(result, al.Stopped) and "lost in transit and may have been billed" in result.detail
    asked = next(e for e in events if e.kind == "model_request").data
    lost = next(e for e in events if e.kind == "model_called").data
    assert lost["lost"] and lost["estimated"] and lost["cost"] == asked["guard_worst_case"] == result.spent > 0
    assert result.spent <= 0.05 and len(server.requests) == 1


def test_tool_input_that_does_not_parse_when_its_block_stops_is_a_malformed_reply_with_the_raw_text():
    message = {
        "id": "msg_bad",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {}}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    events = stream_events(message)
    for e in events:
        if e.get("delta", {}).get("type") == "input_json_delta":
            e["delta"]["partial_json"] = '{"order_id": 7,'
    with MessagesServer([streamed(events)]) as server:
        result = al.run(
            "Q",
            [lookup],
            model=AnthropicModel(client=server.client()),
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
        )
    assert isinstance(result, al.Stopped) and result.reason == "malformed reply"
    assert "not valid JSON" in result.detail and '{"order_id": 7,' in result.detail


def test_the_assembler_rebuilds_exactly_what_the_server_would_have_sent_whole():
    """Stream events folded back give the non-streamed message, citations and signatures included."""
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 20},
        "content": [
            {"type": "thinking", "thinking": "hmm " * 9, "signature": "c2ln"},
            {"type": "redacted_thinking", "data": "cmVk"},
            {"type": "text", "text": "cited words", "citations": [{"type": "char_location", "cited_text": "w"}]},
            {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "q"}},
        ],
    }
    acc = StreamAssembler()
    for event in stream_events(message, chunk=3):
        acc.feed(event)
    assert acc.stopped and acc.result() == message


def test_offline_models_stream_at_the_chosen_speed_on_the_injected_clock():
    clock = al.FakeClock()
    model = al.ScriptedModel([reply("abcdefghij")], stream=3, chunk_delay=0.25, clock=clock)
    events: list = []
    result = al.run("Q", model=model, clock=clock, subscribers=[events.append], trace=False)
    assert [e.data["text"] for e in deltas(events)] == ["abc", "def", "ghi", "j"]
    assert clock.sleeps == [0.25] * 4 and result.text == "abcdefghij"
    assert [t for _, _, t in chunk_reply([{"type": "tool_use", "input": {"a": 1}}], 4)] == ['{"a"', ": 1}"]


def test_the_panel_shows_text_growing_thinking_folded_and_tool_arguments_forming():
    from agentlab.lab._html import step_html
    from agentlab.lab._state import PanelState

    first = {
        "role": "assistant",
        "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "private reasoning", "signature": "s"},
            {"type": "text", "text": "Looking it up."},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order_id": 7}},
        ],
    }
    state = PanelState()
    seen: list[str] = []
    model = al.ScriptedModel([first, reply("Done.")], stream=5)

    def watch(event):
        state.apply(event)
        if event.kind == "model_delta" and event.step == 1:
            seen.append(step_html(state.log[1]))

    al.run("Q", [lookup], model=model, subscribers=[watch], clock=al.FakeClock(), trace=False)
    assert any("Looki" in h and "Looking it up." not in h for h in seen)  # the text grew
    assert any("<details class='agentlab-thinking'" in h for h in seen)  # thinking folded
    assert any("tool call forming" in h and "{&quot;orde" in h for h in seen)  # arguments forming
    final = step_html(state.log[1])
    assert "tool call forming" not in final and "Looking it up." in final and "agentlab-cursor" not in final


def test_server_tool_fees_have_their_own_column_in_the_steps_frame(tmp_path):
    """A web search's $0.01 shows in steps.server_tool_cost and is part of the step's cost."""
    searched = {
        "role": "assistant",
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "Found."}],
        "usage": {
            "input_tokens": 100,
            "output_tokens": 10,
            "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 0},
        },
    }
    with MessagesServer([searched]) as server:
        result = al.run(
            "Q",
            model=AnthropicModel(client=server.client()),
            clock=al.FakeClock(),
            trace=tmp_path,
            prices=al.Prices(input=3.0, output=15.0, web_search=0.01),
        )
    from agentlab.trace import load_run

    steps = load_run(result.run_id, tmp_path).steps
    assert steps["server_tool_cost"].tolist() == [pytest.approx(0.02)]
    assert steps["cost"].tolist() == [pytest.approx(0.02 + (100 * 3 + 10 * 15) / 1e6)]


def test_a_stream_cut_at_max_tokens_inside_a_tool_input_is_a_max_tokens_stop_not_a_malformed_reply():
    message = {
        "id": "msg_cut",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [
            {"type": "text", "text": "Writing it."},
            {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {}},
        ],
        "stop_reason": "max_tokens",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 64},
    }
    events = stream_events(message)
    for e in events:
        if e.get("delta", {}).get("type") == "input_json_delta":
            e["delta"]["partial_json"] = '{"order_id": '
    with MessagesServer([streamed(events)]) as server:
        result = al.run(
            "Q",
            [lookup],
            model=AnthropicModel(client=server.client()),
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
        )
    assert isinstance(result, al.Stopped) and result.reason == "max_tokens"
    assert result.spent == pytest.approx((10 * 3 + 64 * 15) / 1e6)


def test_an_event_whose_data_contains_the_text_of_a_ping_is_not_dropped():
    """Pings are skipped by their event name: a tool input given whole whose text holds '"type":"ping"' arrives."""
    message = {
        "id": "msg_p",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
        "content": [{"type": "tool_use", "id": "toolu_p", "name": "lookup", "input": {}}],
    }
    events = [e for e in stream_events(message) if e.get("delta", {}).get("type") != "input_json_delta"]
    for e in events:
        if e["type"] == "content_block_start":
            e["content_block"]["input"] = {"order_id": 7, "note": '{"type":"ping"}'}
    with MessagesServer([streamed(events), reply("Shipped.")]) as server:
        result = al.run(
            "Q",
            [lookup],
            model=AnthropicModel(client=server.client()),
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
        )
    assert isinstance(result, al.Done), result
    sent = server.requests[1].body["messages"][1]["content"][0]
    assert sent["input"] == {"order_id": 7, "note": '{"type":"ping"}'}


def test_fragments_reach_the_watcher_in_order_and_an_error_event_does_not_swallow_what_came_before():
    """Every character in order, before the error event; the error is handled like its HTTP status."""
    message = reply("Hello, world")
    message = {
        "id": "msg_e",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 4},
        "content": message["content"],
    }
    events = stream_events(message, chunk=3)
    cut = next(i for i, e in enumerate(events) if e["type"] == "content_block_stop")
    seen: list = []
    with MessagesServer([streamed(events, error="overloaded_error", after=cut)]) as server:
        result = al.run(
            "Q",
            model=AnthropicModel(client=server.client()),
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
            subscribers=[lambda e: seen.append(e.data["text"]) if e.kind == "model_delta" else None],
        )
    assert "".join(seen) == "Hello, world"
    assert (
        isinstance(result, al.Stopped)
        and "overloaded_error event arrived inside the streamed reply after 4 fragments" in result.detail
    )

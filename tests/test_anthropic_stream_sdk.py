"""Streams through the SDK: the lab's assembled message is the SDK's, on every stream we have (issue 25, items 7-12).

The recorded streams in ``tests/fixtures/sdk_streams/`` are copied byte for
byte from the anthropic SDK repository (github.com/anthropics/anthropic-sdk-python
at 009b0353, ``tests/lib/streaming/fixtures/*.txt`` and
``tests/fixtures/fable-fallback/*.sse``; MIT licence, copied beside them). The
local server serves them as recorded; the lab's streamed reply must equal the
SDK's own ``messages.stream()`` final message over the same bytes.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab.models.anthropic import AnthropicModel
from agentlab.models.base import ModelRequest
from agentlab.testing import MessagesServer, recorded_stream, stream_events, streamed

FIXTURES = Path(__file__).parent / "fixtures" / "sdk_streams"
RECORDED = sorted(FIXTURES.glob("*.sse"))
PRICES = al.Prices(input=3.0, output=15.0)
ASK = [{"role": "user", "content": "Hi"}]


@al.tool(mode="read")
def lookup(order_id: int = 0) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


def same_shape(message: dict[str, Any]) -> dict[str, Any]:
    """A message without what only one side adds (the request id; a stop_details of null)."""
    out = {k: v for k, v in message.items() if k != "request_id"}
    if out.get("stop_details", 0) is None:
        del out["stop_details"]
    return out


class Both:
    """The lab's streamed reply and the SDK's ``messages.stream()`` final message, for the same stream twice:
    one server, one model, one SDK client and one event loop for every stream compared."""

    def __init__(self, server: MessagesServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.model = AnthropicModel("claude-opus-4-8", client=server.client(), cache=False)
        self.client = server.client()

    def __call__(self, item: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        self.server.add(item, item)
        return self.loop.run_until_complete(self._go())

    async def _go(self) -> tuple[dict[str, Any], dict[str, Any]]:
        lab = await self.model.complete(ModelRequest(None, ASK, [], 1024))
        async with self.client.beta.messages.stream(model="claude-opus-4-8", max_tokens=1024, messages=ASK) as stream:
            sdk = (await stream.get_final_message()).to_dict(mode="json")
        return same_shape(lab), same_shape(sdk)

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        pending = asyncio.all_tasks(self.loop)  # the model's pool closer: cancelled, it closes the pool
        for task in pending:
            task.cancel()
        self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()


@pytest.fixture(scope="module")
def both():
    with MessagesServer() as server:
        pair = Both(server)
        yield pair
        pair.close()


def test_the_fixtures_are_the_sdks_own_and_say_so():
    assert len(RECORDED) == 10 and "Permission is hereby granted" in (FIXTURES / "LICENSE").read_text()


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_every_recorded_sdk_stream_assembles_to_the_sdks_own_message(path, both):
    """Compaction, fallback, refusal, partial JSON, tool use: block for block what the SDK builds."""
    lab, sdk = both(recorded_stream(path.read_bytes()))
    assert lab == sdk


# ----------------------------------------------------------------- any stream
BLOCK = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(min_size=0, max_size=60)),
    st.builds(
        lambda t, c: {
            "type": "text",
            "text": t,
            "citations": [
                {
                    "type": "char_location",
                    "cited_text": c,
                    "document_index": 0,
                    "start_char_index": 0,
                    "end_char_index": 1,
                }
            ],
        },
        st.text(min_size=1, max_size=30),
        st.text(min_size=1, max_size=10),
    ),
    st.builds(
        lambda t, s: {"type": "thinking", "thinking": t, "signature": s},
        st.text(max_size=60),
        st.text("abc=", min_size=1, max_size=12),
    ),
    st.builds(lambda d: {"type": "redacted_thinking", "data": d}, st.text("abcdef", min_size=1, max_size=20)),
    st.builds(
        lambda i: {"type": "tool_use", "id": "toolu_h", "name": "lookup", "input": i},
        st.dictionaries(
            st.text("abcxyz", min_size=1, max_size=5),
            st.one_of(st.integers(), st.text(max_size=15), st.booleans()),
            max_size=4,
        ),
    ),
    st.builds(lambda c: {"type": "compaction", "content": c}, st.text(min_size=1, max_size=80)),
    st.builds(
        lambda q: {"type": "server_tool_use", "id": "srvtoolu_h", "name": "web_search", "input": {"query": q}},
        st.text(max_size=20),
    ),
    st.builds(
        lambda u: {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_h",
            "content": [
                {"type": "web_search_result", "url": u, "title": "t", "encrypted_content": "e", "page_age": None}
            ],
        },
        st.text("abc/:.", min_size=1, max_size=20),
    ),
)


def test_any_stream_assembles_to_what_the_sdks_accumulator_builds(both):
    """Random blocks, random delta splits, pings anywhere, event and delta types newer than the SDK:
    the lab's message equals the SDK's accumulator's message over the same bytes."""

    @settings(
        max_examples=100,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        blocks=st.lists(BLOCK, min_size=1, max_size=4),
        chunk=st.integers(1, 25),
        seed=st.integers(0, 10**6),
        stop=st.sampled_from(["end_turn", "max_tokens", "tool_use"]),
    )
    def one(blocks: list[dict[str, Any]], chunk: int, seed: int, stop: str) -> None:
        _one_stream(both, blocks, chunk, seed, stop)

    one()


def _one_stream(both: Both, blocks: list[dict[str, Any]], chunk: int, seed: int, stop: str) -> None:
    message = {
        "id": "msg_h",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-8",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }
    events = stream_events(message, chunk)
    rng = random.Random(seed)
    for _ in range(rng.randint(0, 4)):  # pings and unknown events anywhere after message_start
        events.insert(rng.randint(1, len(events) - 1), rng.choice([{"type": "ping"}, {"type": "future_event", "n": 1}]))
    opened = [i for i, e in enumerate(events) if e["type"] == "content_block_start"]
    for at in sorted(
        rng.sample(opened, k=min(len(opened), rng.randint(0, 2))), reverse=True
    ):  # a delta type newer than the SDK
        index = events[at]["index"]
        events.insert(
            at + 1, {"type": "content_block_delta", "index": index, "delta": {"type": "future_delta", "x": 1}}
        )
    lab, sdk = both(streamed(events))
    assert lab == sdk


# ----------------------------------------------------------------- items 7-12
def test_a_streamed_compaction_keeps_its_summary_and_sends_it_back():
    """Item 7: the compaction_delta's summary is in the block the next request sends back (not null)."""
    first = {
        "content": [
            {"type": "compaction", "content": "Summary: order 7 was asked about.", "signature": "c2ln"},
            {"type": "tool_use", "name": "lookup", "input": {"order_id": 7}},
        ]
    }
    with MessagesServer([streamed(first), al.reply("Shipped.")]) as server:
        result = al.run(
            "Q",
            [lookup],
            model=AnthropicModel(client=server.client()),
            trace=False,
            clock=al.FakeClock(),
            prices=PRICES,
        )
    assert isinstance(result, al.Done), result
    sent = server.requests[1].body["messages"][1]["content"][
        0
    ]  # the SDK's block: encrypted_content null, as the delta said
    assert {k: v for k, v in sent.items() if v is not None} == {
        "type": "compaction",
        "content": "Summary: order 7 was asked about.",
        "signature": "c2ln",
    }


def test_fields_the_api_needs_verbatim_are_not_redacted_in_the_trace(tmp_path):
    """Item 9: a compaction block's signature and a refusal's fallback_credit_token reach the trace as sent."""
    token = "fct_01_opaque_token_value_ABCDEF0123456789"
    refused = {
        "content": [
            {"type": "compaction", "content": "S.", "signature": "sig_opaque_secretish_0123456789"},
            {"type": "text", "text": "I can't help with that."},
        ],
        "stop_reason": "refusal",
        "stop_details": {"type": "refusal", "category": "cyber", "explanation": None, "fallback_credit_token": token},
    }
    with MessagesServer([streamed(refused)]) as server:
        al.run("Q", model=AnthropicModel(client=server.client()), trace=tmp_path, clock=al.FakeClock(), prices=PRICES)
    text = "".join(p.read_text() for p in tmp_path.rglob("*.jsonl"))
    assert token in text and "sig_opaque_secretish_0123456789" in text


def test_a_stream_cut_at_max_tokens_inside_a_tool_input_keeps_what_arrived_and_says_so():
    """Item 10: the partial input is kept as the SDK keeps it, and the stop says the cut was inside the tool's input."""
    path = FIXTURES / "incomplete_partial_json_response.sse"
    with MessagesServer([recorded_stream(path.read_bytes())]) as server:
        events: list[al.Event] = []
        result = al.run(
            "Q",
            model=AnthropicModel(client=server.client()),
            trace=False,
            clock=al.FakeClock(),
            prices=PRICES,
            subscribers=[events.append],
        )
    block = next(e for e in events if e.kind == "model_called").data["content"][1]
    assert block["name"] == "make_file" and block["input"]["filename"] == "taxes.txt"
    assert result.reason == "max_tokens" and "inside the input of make_file" in result.detail


def test_context_management_is_kept_in_the_step_and_the_trace(tmp_path):
    """Item 11: the reply's account of clear_tool_uses edits is on the model_called event, streamed and not."""
    edits = {
        "applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 1200}]
    }
    for stream in (True, False):
        events: list[al.Event] = []
        with MessagesServer([{"content": [{"type": "text", "text": "ok"}], "context_management": edits}]) as server:
            al.run(
                "Q",
                model=AnthropicModel(client=server.client(), stream=stream),
                trace=tmp_path / str(stream),
                clock=al.FakeClock(),
                prices=PRICES,
                subscribers=[events.append],
            )
        assert next(e for e in events if e.kind == "model_called").data["context_management"] == edits
        with MessagesServer([{"content": [{"type": "text", "text": "ok"}], "context_management": edits}]) as server:
            run = al.Run(
                "Q", model=AnthropicModel(client=server.client(), stream=stream), clock=al.FakeClock(), prices=PRICES
            )
            assert asyncio.run(run.step()).context_management == edits
        assert "cleared_tool_uses" in "".join(p.read_text() for p in (tmp_path / str(stream)).rglob("*.jsonl"))


def test_a_request_too_large_event_inside_a_stream_says_what_the_api_said():
    """Item 12: no local byte count passed off as the API's finding."""
    with MessagesServer([streamed(al.reply("x"), error="request_too_large")]) as server:
        result = al.run(
            "Q", model=AnthropicModel(client=server.client()), trace=False, clock=al.FakeClock(), prices=PRICES
        )
    assert result.reason == "request too large"
    assert "the Messages API said" in result.detail and "bytes" not in result.detail.split("said")[0]


def test_a_recorded_fallback_stream_names_the_serving_model():
    """Item 4, streamed half: the fallback block relabels the reply as the SDK does (claude-sonnet-4-5 served it)."""
    path = FIXTURES / "fallback_response.sse"
    with MessagesServer([recorded_stream(path.read_bytes())]) as server:
        events: list[al.Event] = []
        al.run(
            "Q",
            model=AnthropicModel("claude-opus-4-7", client=server.client()),
            trace=False,
            clock=al.FakeClock(),
            subscribers=[events.append],
            max_cost=None,
        )
    step = next(e for e in events if e.kind == "model_called").data
    assert step["model"] == "claude-sonnet-4-5" and step["requested_model"] == "claude-opus-4-7"
    assert json.dumps(step["content"]).count('"fallback"') == 1

"""Conformance: reply payloads in the Messages API's documented shapes, through the real SDK.

Each file in ``tests/conformance/`` holds replies written from the API
reference and the ``anthropic.types`` models (``about`` says what it shows)
and what must follow: the run's outcome, its spend (worked out by hand at
the fixed prices below) and what the next request carries. Every case runs
twice against the local Messages API server: streamed (the adapter's
default) and not, since both must give the same run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentlab as al
from agentlab.models.anthropic import AnthropicModel
from agentlab.testing import Fault, MessagesServer, html_error, reply, streamed, validate_request

HERE = Path(__file__).parent / "conformance"
CASES = sorted(p for p in HERE.glob("*.json") if p.name != "errors.json")
ERRORS = json.loads((HERE / "errors.json").read_text())["cases"]

PRICES = al.Prices(
    input=3.0,
    output=15.0,
    cache_read=0.3,
    cache_write=3.75,
    cache_write_1h=6.0,
    web_search=0.01,
    tier_start=200_000,
    tier_input=6.0,
    tier_output=22.5,
    tier_cache_read=0.6,
    tier_cache_write=7.5,
)
"""Sonnet-4.5-like rates (USD per MTok; web search per request), fixed so the expected spend is hand-checkable."""


@al.tool(mode="read")
def lookup(order_id: int = 0) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


def go(server: MessagesServer, stream: bool, **kw):
    events: list = []
    model = AnthropicModel(client=server.client(), stream=stream)
    options = {"max_steps": 5, "max_cost": None, "prices": PRICES, "clock": al.FakeClock(), "trace": False, **kw}
    result = al.run("Go.", [lookup], model=model, subscribers=[events.append], **options)
    return result, events


KNOWN_EXPECTATIONS = {
    "citations",
    "cost",
    "detail_contains",
    "first_wait_at_least",
    "history_valid",
    "next_request_ends_with_assistant",
    "next_request_has",
    "only_tool_results",
    "outcome",
    "reason",
    "requests",
    "retries",
    "sent_back_unchanged",
    "server_tool_cost",
    "text",
    "tool_result_ids",
    "tools_run",
}
"""Every key a case's ``expect`` may hold: a misspelt key fails the case instead of checking nothing."""


def _check(result, events, server, expect, replies=None):
    unknown = set(expect) - KNOWN_EXPECTATIONS
    assert not unknown, f"the case expects {sorted(unknown)}, which no check reads (a misspelling?)"
    assert result.outcome == expect["outcome"], result
    if "reason" in expect:
        assert result.reason == expect["reason"], result
    if "text" in expect:
        assert result.text == expect["text"]
    for part in expect.get("detail_contains", []):
        assert part in result.detail, result.detail
    if "cost" in expect:
        assert result.spent == pytest.approx(expect["cost"], rel=1e-9, abs=1e-12)
        called = [e for e in events if e.kind == "model_called"]
        assert sum(e.data["cost"] for e in called) == pytest.approx(result.spent)  # every reply is in the spend
        assert not any(e.data.get("estimated") for e in called)  # reported usage, not an estimate
    if "server_tool_cost" in expect:
        assert sum(e.data["server_tool_cost"] for e in events if e.kind == "model_called") == pytest.approx(
            expect["server_tool_cost"]
        )
    if "requests" in expect:
        assert len(server.requests) == expect["requests"]
    if "sent_back_unchanged" in expect:
        i = expect["sent_back_unchanged"]
        sent = [m for m in server.requests[i + 1].body["messages"] if m["role"] == "assistant"][-1]
        assert _no_cache_marks(sent["content"]) == replies[i]["content"]  # byte for byte, bar the cache breakpoint
    if "tool_result_ids" in expect:
        last = server.requests[1].body["messages"][-1]
        assert last["role"] == "user"
        assert [b["tool_use_id"] for b in last["content"] if b["type"] == "tool_result"] == expect["tool_result_ids"]
    if expect.get("only_tool_results"):
        assert all(b["type"] == "tool_result" for b in server.requests[1].body["messages"][-1]["content"])
    for key, value in expect.get("next_request_has", {}).items():
        assert server.requests[1].body.get(key) == value
    if expect.get("next_request_ends_with_assistant"):
        assert server.requests[1].body["messages"][-1]["role"] == "assistant"
    if "tools_run" in expect:
        assert sum(1 for e in events if e.kind == "tool_finished") == expect["tools_run"]
    if "citations" in expect:
        content = next(e.data["content"] for e in events if e.kind == "model_called")
        assert sum(len(b.get("citations") or []) for b in content if b["type"] == "text") == expect["citations"]
    if expect.get("history_valid"):
        # The history can be sent again with a new question: no empty assistant turn, no empty text at an end.
        history = list(result.messages)
        if history[-1]["role"] == "assistant":
            history.append({"role": "user", "content": "And now?"})
        for m in history:
            assert m["content"], m
            if isinstance(m["content"], list):
                assert not (m["content"][-1].get("type") == "text" and not m["content"][-1].get("text")), m
        assert validate_request({"model": "m", "max_tokens": 10, "messages": history}) is None


def _no_cache_marks(content):
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in content]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_each_documented_reply_shape_gives_the_expected_outcome_spend_and_next_request(path, stream):
    case = json.loads(path.read_text())
    with MessagesServer(case["replies"]) as server:
        result, events = go(server, stream)
    _check(result, events, server, case["expect"], case["replies"])


def _fault(case: dict) -> Fault:
    if "html" in case:
        return html_error(case["status"], "Bad Gateway", page=case["html"])
    error = case["body"]["error"]
    return Fault(case["status"], error["message"], error["type"], case.get("headers", {}))


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("case", ERRORS, ids=[str(c["status"]) for c in ERRORS])
def test_every_documented_error_status_is_retried_or_stops_as_documented(case, stream):
    expect = case["expect"]
    with MessagesServer([_fault(case), reply("Recovered.")]) as server:
        result, events = go(server, stream)
    _check(result, events, server, expect)
    retries = [e for e in events if e.kind == "model_retry"]
    assert len(retries) == expect.get("retries", 0)
    if "first_wait_at_least" in expect:
        assert retries[0].data["wait"] >= expect["first_wait_at_least"]
    if expect["outcome"] == "done":
        assert result.text == "Recovered." and len(server.requests) == 2


def test_an_error_event_inside_a_200_stream_is_retried_like_its_status():
    """An overloaded_error sent after the stream began (before any text) is retried as a 529 would be."""
    with MessagesServer(
        [streamed(reply("Too busy"), error="overloaded_error", after=1), reply("Recovered.")]
    ) as server:
        result, events = go(server, True)
    assert isinstance(result, al.Done) and result.text == "Recovered."
    retry = next(e for e in events if e.kind == "model_retry")
    assert "529" in retry.data["error"] and "overloaded_error" in retry.data["error"]


def test_a_413_names_the_request_size_in_bytes_not_the_context_window():
    """The server's byte limit answers 413; the stop says how many bytes the request was."""
    with MessagesServer([reply("unused")], max_request_bytes=2_000) as server:
        result, _ = go(server, True, system="x" * 3_000)
    assert isinstance(result, al.Stopped) and result.reason == "request too large"
    size = len(server.requests[0].body["system"][0]["text"])
    assert "bytes" in result.detail and "context window" in result.detail and size == 3_000
    assert any(ch.isdigit() for ch in result.detail.split("bytes")[0])

"""agentlab.testing.MessagesServer: a faithful local Messages API for the real SDK."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request

import anthropic
import pytest

from agentlab.testing import MessagesServer, PromptCache, fault, reply, slow, validate_request

KEY = "server-test-key-31c4"


def create(server: MessagesServer, **params):
    """One typed SDK call against the server."""
    return create_raw(server, **params)[1]


def create_raw(server: MessagesServer, **params):
    """One SDK call against the server: the HTTP response it came in (headers, request id) and the message."""

    async def call():
        client = server.client(api_key=KEY)
        try:
            raw = await client.messages.with_raw_response.create(**params)
            return raw, await raw.parse()
        finally:
            await client.close()

    return asyncio.run(call())


def msgs(*contents):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(contents)]


def test_replies_parse_as_real_sdk_messages_with_ids_usage_and_request_id():
    """The SDK's own types accept every reply: ids filled in, usage counted, request id in the headers."""
    with MessagesServer([reply("Let me look.", ("lookup", {"id": 7}))]) as server:
        raw, msg = create_raw(server, model="claude-sonnet-4-5", max_tokens=100, messages=msgs("Where is 7?"))
    assert isinstance(msg, anthropic.types.Message)
    assert msg.id.startswith("msg_") and msg.model == "claude-sonnet-4-5" and msg.stop_reason == "tool_use"
    assert msg.content[0].text == "Let me look."
    assert (
        msg.content[1].type == "tool_use"
        and msg.content[1].id.startswith("toolu_")
        and msg.content[1].input == {"id": 7}
    )
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    assert raw.request_id.startswith("req_") and raw.headers["request-id"] == raw.request_id


def test_a_scripted_function_sees_the_request_body():
    """A reply may be computed from what was sent."""
    with MessagesServer([lambda body: reply(f"You said {body['messages'][0]['content']!r}.")]) as server:
        msg = create(server, model="claude-sonnet-4-5", max_tokens=50, messages=msgs("hello"))
    assert msg.content[0].text == "You said 'hello'."


def test_the_server_refuses_a_tool_use_without_its_tool_result_as_the_api_does():
    """An adapter that loses a tool_result gets the API's 400, not a silent pass."""
    history = msgs("Go", [{"type": "tool_use", "id": "toolu_1", "name": "a", "input": {}}], "no results here")
    with MessagesServer([reply("never")]) as server, pytest.raises(anthropic.BadRequestError, match="toolu_1"):
        create(server, model="claude-sonnet-4-5", max_tokens=50, messages=history)
    assert server.pending == 1  # the scripted reply was not used up


def test_request_validation_catches_what_the_api_would_refuse():
    """Results out of order with other content, unknown result ids, and a fifth cache breakpoint are refused."""
    use = {"type": "tool_use", "id": "t1", "name": "a", "input": {}}
    ok = {
        "model": "m",
        "max_tokens": 5,
        "messages": msgs("Go", [use], [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]),
    }
    assert validate_request(ok) is None
    late = {
        **ok,
        "messages": msgs("Go", [use], [{"type": "text", "text": "hi"}, {"type": "tool_result", "tool_use_id": "t1"}]),
    }
    assert "before any other content" in validate_request(late)
    stray = {
        **ok,
        "messages": msgs(
            "Go", [use], [{"type": "tool_result", "tool_use_id": "t1"}, {"type": "tool_result", "tool_use_id": "t9"}]
        ),
    }
    assert "t9" in validate_request(stray)
    cc = {"type": "ephemeral"}
    five = {
        **ok,
        "cache_control": cc,
        "tools": [{"name": f"t{i}", "input_schema": {}, "cache_control": cc} for i in range(4)],
    }
    assert "maximum of 4" in validate_request(five)
    assert "max_tokens" in validate_request({**ok, "max_tokens": 0})


def test_a_request_without_credentials_is_refused_with_401():
    """No key, no answer: the server behaves like the API."""
    with MessagesServer([reply("never")]) as server:
        req = urllib.request.Request(
            server.url + "/v1/messages",
            data=json.dumps({"model": "m"}).encode(),
            method="POST",
            headers={"content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=10)
    assert info.value.code == 401
    assert json.loads(info.value.read())["error"]["type"] == "authentication_error"


def test_faults_carry_the_api_error_shape_and_retry_headers():
    """A scripted 429 reaches the SDK as a RateLimitError with the retry-after header and the error body."""
    with MessagesServer([fault(429, "Too many requests", retry_after=7)]) as server:
        with pytest.raises(anthropic.RateLimitError) as info:
            create(server, model="claude-sonnet-4-5", max_tokens=50, messages=msgs("hi"))
    err = info.value
    assert err.response.headers["retry-after"] == "7"
    assert err.body["error"] == {"type": "rate_limit_error", "message": "Too many requests"}


def test_the_prompt_cache_writes_at_breakpoints_and_reads_matching_prefixes():
    """Step 1 writes its prefix; step 2, extending the history, reads it and writes only what is new."""
    cache = PromptCache()
    cc = {"type": "ephemeral"}
    system = [{"type": "text", "text": "Manual. " * 300, "cache_control": cc}]
    first = {
        "system": system,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Q1", "cache_control": cc}]}],
    }
    u1 = cache.usage(first)
    assert u1["cache_read_input_tokens"] == 0 and u1["cache_creation_input_tokens"] > 800 and u1["input_tokens"] == 0
    second = {
        "system": system,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Q1"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "A1"}]},
            {"role": "user", "content": [{"type": "text", "text": "Q2", "cache_control": cc}]},
        ],
    }
    u2 = cache.usage(second)
    assert u2["cache_read_input_tokens"] == u1["cache_creation_input_tokens"]
    assert 0 < u2["cache_creation_input_tokens"] < 40  # only A1 and Q2 are new
    no_marks = {"system": "Manual. " * 300, "messages": second["messages"][:1]}
    assert cache.usage(no_marks)["cache_read_input_tokens"] == 0


def test_prefixes_below_the_minimum_are_not_cached():
    """Like the API, a short prefix is neither written nor read."""
    cache = PromptCache(min_tokens=1024)
    req = {
        "system": [{"type": "text", "text": "short", "cache_control": {"type": "ephemeral"}}],
        "messages": msgs("hi"),
    }
    assert cache.usage(req)["cache_creation_input_tokens"] == 0
    assert cache.usage(req)["cache_read_input_tokens"] == 0


def test_closing_the_server_cuts_a_slow_reply_short():
    """A reply scripted to take 30 s does not hold up close(); the waiting client sees the connection end."""
    arrived = threading.Event()

    def late(body):
        arrived.set()  # the request is in; its reply is the slow one
        return slow(reply("late"), 30)

    server = MessagesServer([late]).start()
    outcome: dict[str, object] = {}

    def call():
        req = urllib.request.Request(
            server.url + "/v1/messages",
            method="POST",
            headers={"x-api-key": KEY, "content-type": "application/json"},
            data=json.dumps({"model": "m", "max_tokens": 5, "messages": msgs("hi")}).encode(),
        )
        try:
            urllib.request.urlopen(req, timeout=20)
        except Exception as exc:  # the connection is dropped
            outcome["error"] = type(exc).__name__

    t = threading.Thread(target=call)
    t.start()
    assert arrived.wait(20), "the request never reached the server"
    t0 = time.monotonic()
    server.close()
    t.join(timeout=10)
    assert time.monotonic() - t0 < 5 and not t.is_alive() and "error" in outcome


def test_records_show_headers_but_their_repr_hides_credentials():
    """Tests can read every header sent, while a printed record never shows the key."""
    with MessagesServer([reply("hi")]) as server:
        create(server, model="claude-sonnet-4-5", max_tokens=50, messages=msgs("hi"))
    (received,) = server.requests
    assert KEY in received.headers.get("authorization", "") + received.headers.get("x-api-key", "")
    assert received.headers["anthropic-version"]
    assert KEY not in repr(received) and KEY not in repr(server)
    assert received.messages == msgs("hi")


def test_a_compaction_block_sent_back_makes_the_server_count_and_cache_from_the_summary_on():
    """As the API does, every message block before a compaction block is ignored: the count drops to the summary
    and what follows, and the cached history is no longer a prefix the next request can read."""
    server = MessagesServer()
    old = "the depot held the parcel for inspection; " * 50
    history = [
        {"role": "user", "content": old},
        {"role": "assistant", "content": [{"type": "text", "text": old}]},
        {"role": "user", "content": [{"type": "text", "text": "Go on.", "cache_control": {"type": "ephemeral"}}]},
    ]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": history}
    server.add(reply("A."), reply("B."))
    assert server.respond(body)["usage"]["cache_creation_input_tokens"] > 400  # the history is written
    summary = {"role": "assistant", "content": [{"type": "compaction", "content": "They talked about a parcel."}]}
    after = {**body, "messages": [*history[:2], summary, history[2]]}
    usage = server.respond(after)["usage"]
    counted = [server.count({k: v for k, v in b.items() if k != "max_tokens"}) for b in (after, body)]
    assert usage["cache_read_input_tokens"] == 0 and counted[0] < 50 < counted[1]

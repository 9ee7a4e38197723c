"""The real SDK, through the real adapter and engine, against a local Messages API server."""

from __future__ import annotations

import asyncio
import json

import pytest

import agentlab as al
from agentlab.messages import Usage
from agentlab.models.anthropic import AnthropicModel
from agentlab.testing import MessagesServer, reply
from tests.helpers import PRICES, Recorder

KEY = "sk-ant-test-adapter-0123456789"


@pytest.fixture
def server():
    with MessagesServer() as s:
        yield s


@al.tool(mode="read")
def lookup(order_id: int) -> str:
    """Look up one order by its number."""
    return f"order {order_id}: shipped on 3 May"


@al.tool(mode="write")
def refund(order_id: int, reason: str) -> str:
    """Refund an order."""
    return f"refunded order {order_id}"


def model_for(server: MessagesServer, **options) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", client=server.client(api_key=KEY), **options)


def sent_key(received) -> str | None:
    """The credential a request carried (this SDK sends the key as a bearer token)."""
    auth = received.headers.get("authorization", "")
    return received.headers.get("x-api-key") or (auth[7:] if auth.startswith("Bearer ") else None)


def cache_marks(obj) -> list[str]:
    """Where each cache_control marker sits inside ``obj`` (the path of the block that has it)."""
    found: list[str] = []

    def walk(x, path):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "cache_control":
                    found.append(path or "<top level>")
                walk(v, f"{path}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")

    walk(obj, "")
    return found


def test_tool_round_trip_sends_definitions_and_results_in_request_order(server):
    """Two reads in one turn come back to the API as tool_result blocks in request order, ids matching."""
    server.add(
        reply("Checking both.", ("lookup", {"order_id": 7}), ("lookup", {"order_id": 8})), reply("Both shipped.")
    )
    rec = Recorder()
    result = al.run(
        "Where are orders 7 and 8?",
        [lookup, refund],
        model=model_for(server),
        system="You are a shop assistant.",
        clock=al.FakeClock(),
        subscribers=[rec],
    )
    assert isinstance(result, al.Done) and result.text == "Both shipped."
    assert result.steps == 2 and len(server.requests) == 2
    first, second = (r.body for r in server.requests)
    assert [t["name"] for t in first["tools"]] == ["lookup", "refund"]
    assert first["tools"][0]["description"] == "Look up one order by its number."
    assert first["tools"][0]["input_schema"]["properties"] == {"order_id": {"type": "integer"}}
    assert first["system"][0]["text"] == "You are a shop assistant."
    assert first["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Where are orders 7 and 8?", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    asked = [b for b in second["messages"][1]["content"] if b["type"] == "tool_use"]
    answered = second["messages"][2]["content"]
    assert [b["tool_use_id"] for b in answered] == [b["id"] for b in asked]
    assert [b["content"] for b in answered] == ["order 7: shipped on 3 May", "order 8: shipped on 3 May"]
    called = rec.of("model_called")
    assert all(not e.data["estimated"] for e in called)  # usage came from the server, not an estimate
    assert all(e.data["request_id"].startswith("req_") for e in called)
    assert called[0].data["usage"]["input_tokens"] + called[0].data["usage"]["cache_creation_input_tokens"] > 0


def test_cache_breakpoints_go_on_the_prefix_and_latest_message_never_into_the_history(server):
    """With caching on, each request marks the system prompt and the latest message, and the run's history stays
    clean.
    """
    server.add(reply(None, ("lookup", {"order_id": 7})), reply(None, ("lookup", {"order_id": 9})), reply("Done."))
    result = al.run("Find 7 then 9.", [lookup], model=model_for(server), system="Be brief.", clock=al.FakeClock())
    assert isinstance(result, al.Done)
    for r in server.requests:
        n = len(r.body["messages"])
        assert sorted(cache_marks(r.body)) == sorted([".system[0]", f".messages[{n - 1}].content[0]"])
    assert cache_marks(result.messages) == []


def test_cache_breakpoint_falls_back_to_the_last_tool_without_a_system_prompt(server):
    """With no system prompt, the tool definitions are the cached prefix."""
    server.add(reply("Hi."))
    al.run("Hello", [lookup, refund], model=model_for(server), clock=al.FakeClock())
    assert sorted(cache_marks(server.requests[0].body)) == [".messages[0].content[0]", ".tools[1]"]


def test_caching_off_sends_no_breakpoints_and_automatic_uses_the_top_level_option(server):
    """cache=False sends no cache_control at all; cache='automatic' sends only the API's top-level option."""
    server.add(reply("One."), reply("Two."))
    al.run("Hello", [lookup], model=model_for(server, cache=False), system="S", clock=al.FakeClock())
    al.run("Hello", [lookup], model=model_for(server, cache="automatic"), system="S", clock=al.FakeClock())
    off, auto = (r.body for r in server.requests)
    assert cache_marks(off) == []
    assert cache_marks(auto) == ["<top level>"] and auto["cache_control"] == {"type": "ephemeral"}
    assert model_for(server, cache=False).caches is False and model_for(server).caches is True


def test_cache_diagnostics_name_each_calls_previous_reply_and_are_sent_only_when_asked_for(server):
    """cache_diagnostics=True: the first call opts in with no earlier reply, each later one names the reply its
    history ends with (two runs on one model each start afresh); off (the default) sends no diagnostics."""
    server.add(reply(None, ("lookup", {"order_id": 1})), reply(None, ("lookup", {"order_id": 2})), reply("Done."))
    server.add(reply("Hi."), reply("Plain."))
    model = model_for(server, cache_diagnostics=True)
    first = al.run("Find 1 and 2", [lookup], model=model, system="S", clock=al.FakeClock())
    al.run("Hello", [lookup], model=model, system="S", clock=al.FakeClock())
    al.run("Hello", [lookup], model=model_for(server), system="S", clock=al.FakeClock())
    sent = [r.body.get("diagnostics") for r in server.requests]
    assert sent[0] == {"previous_message_id": None} and sent[3] == {"previous_message_id": None}
    named = [d["previous_message_id"] for d in sent[1:3]]
    assert all(str(n).startswith("msg_") for n in named) and named[0] != named[1]
    called = [e for e in first.trace.records if e.get("kind") == "model_called"]
    # the server found each named reply and the prompt only grew: no divergence, no diagnostics kept
    assert len(called) == 3 and not any("diagnostics" in e for e in called)
    assert "diagnostics" not in server.requests[4].body
    with pytest.raises(ValueError, match="cache_diagnostics"):
        model_for(server, cache_diagnostics="yes")


def _long_run(server: MessagesServer, cache: bool) -> al.Done:
    steps = [reply(None, ("lookup", {"order_id": i})) for i in range(1, 6)] + [reply("All found.")]
    server.add(*steps)
    manual = "Shop policy. " + "Refunds need a reason and an order number. " * 400
    return al.run(
        "Find orders 1 to 5.",
        [lookup],
        model=model_for(server, cache=cache),
        system=manual,
        clock=al.FakeClock(),
        max_cost=None,
        max_steps=10,
    )


def test_caching_makes_a_long_run_cheaper_by_reading_the_prefix_from_cache():
    """Six steps over a long system prompt cost less with caching, and every step after the first reads the cache."""
    with MessagesServer() as cached_server, MessagesServer() as plain_server:
        cached = _long_run(cached_server, cache=True)
        plain = _long_run(plain_server, cache=False)
    assert isinstance(cached, al.Done) and isinstance(plain, al.Done)
    assert cached.steps == plain.steps == 6
    reads = [r.body for r in cached_server.requests]
    assert len(reads) == 6
    # The server saw the same conversation both times; only the caching differs.
    assert [len(b["messages"]) for b in reads] == [len(r.body["messages"]) for r in plain_server.requests]
    assert cached.spent < 0.5 * plain.spent, (cached.spent, plain.spent)


def test_cost_prices_cache_reads_and_writes_at_their_own_rates(server):
    """The run's cost is the reported usage priced with the cache read and write rates."""
    usage = {
        "input_tokens": 100,
        "output_tokens": 50,
        "cache_creation_input_tokens": 2000,
        "cache_read_input_tokens": 10000,
    }
    server.add({**reply("Cached."), "usage": usage})
    prices = al.Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    result = al.run("Hi", model=model_for(server), prices=prices, clock=al.FakeClock())
    expected = (100 * 3.0 + 50 * 15.0 + 2000 * 3.75 + 10000 * 0.3) / 1e6
    assert result.spent == pytest.approx(expected)


def test_thinking_and_server_tool_blocks_are_sent_back_exactly_as_they_came(server):
    """Blocks the engine does not interpret travel back to the API unchanged, so thinking models can use tools."""
    first = {
        "role": "assistant",
        "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "I should look the order up.", "signature": "EqQBCkgIARABGAIiQL+sig=="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_01",
                "name": "web_search",
                "input": {"query": "carrier status"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_01",
                "content": [
                    {
                        "type": "web_search_result",
                        "url": "https://example.com/c",
                        "title": "Carrier",
                        "encrypted_content": "Zm9v",
                        "page_age": None,
                    }
                ],
            },
            {"type": "text", "text": "Let me check.", "citations": None},
            {"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {"order_id": 7}},
        ],
    }
    server.add(first, reply("Shipped."))
    result = al.run(
        "Where is 7?",
        [lookup],
        model=model_for(server, thinking={"type": "enabled", "budget_tokens": 2048}),
        max_tokens=4096,
        clock=al.FakeClock(),
    )
    assert isinstance(result, al.Done)
    sent_back = server.requests[1].body["messages"][1]
    assert sent_back == {"role": "assistant", "content": first["content"]}
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_every_call_passes_the_time_left_before_the_deadline_as_its_timeout(server):
    """The SDK gets the seconds left in the run as its timeout (it says so in x-stainless-timeout)."""
    clock = al.FakeClock()

    def slow_tool(order_id: int) -> str:
        """Look up slowly."""
        clock.advance(12.5)  # this tool "takes" 12.5 s of the run's time
        return "found"

    server.add(reply(None, ("slow_tool", {"order_id": 1})), reply("Done."))
    al.run("Go", [al.tool(slow_tool)], model=model_for(server), deadline_s=30, clock=clock)
    timeouts = [float(r.headers["x-stainless-timeout"]) for r in server.requests]
    assert timeouts == [30.0, pytest.approx(17.5)]


def test_a_run_without_deadline_uses_the_adapter_timeout(server):
    """No deadline: the call still carries an explicit timeout (the adapter's), never the SDK's implicit one."""
    server.add(reply("Hi."))
    al.run("Hello", model=model_for(server, timeout=90), deadline_s=None, clock=al.FakeClock())
    assert float(server.requests[0].headers["x-stainless-timeout"]) == 90.0


def test_a_large_max_tokens_is_accepted_because_a_timeout_is_always_given(server):
    """64k output tokens without streaming would make the SDK refuse the call; with a timeout it goes through."""
    server.add(reply("Long answer."))
    result = al.run("Write a lot", model=model_for(server), max_tokens=64000, max_cost=None, clock=al.FakeClock())
    assert isinstance(result, al.Done)
    assert server.requests[0].body["max_tokens"] == 64000


def test_adapter_max_tokens_caps_what_the_run_asks_for(server):
    """An adapter-level max_tokens is an upper bound on each call."""
    server.add(reply("Short."))
    al.run("Hi", model=model_for(server, max_tokens=300), max_tokens=2000, clock=al.FakeClock())
    assert server.requests[0].body["max_tokens"] == 300


def test_the_sdk_never_retries_on_its_own(server):
    """Even a client built with SDK retries on is copied with max_retries=0 (with a warning that says so):
    every attempt is the engine's."""
    from agentlab.testing import fault

    server.add(fault(503), fault(503), reply("Back."))
    client = server.client(api_key=KEY, max_retries=5)
    rec = Recorder()
    with pytest.warns(UserWarning, match=r"turns the SDK's own retries off \(the client set max_retries=5\)"):
        model = AnthropicModel(client=client)
    assert model.client.max_retries == 0
    result = al.run("Hi", model=model, clock=al.FakeClock(), rng=__import__("random").Random(1), subscribers=[rec])
    assert isinstance(result, al.Done)
    assert len(server.requests) == 3
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "0", "0"]
    assert [e.data["attempt"] for e in rec.of("model_retry")] == [1, 2]


def test_the_key_is_sent_but_appears_in_no_trace_file_repr_or_log(server, tmp_path, caplog):
    """The server received the key; the traces, the model's repr and the SDK's debug log never show it."""
    import logging

    secret = "local-test-key-5f3a9c7e21"  # not 'sk-' shaped: only the adapter's care keeps it out
    caplog.set_level(logging.DEBUG)
    server.add(reply(None, ("lookup", {"order_id": 7})), reply("Shipped."))
    model = AnthropicModel(client=server.client(api_key=secret))
    result = al.run("Where is 7?", [lookup], model=model, clock=al.FakeClock(), trace=tmp_path / "runs")
    assert isinstance(result, al.Done)
    assert all(sent_key(r) == secret for r in server.requests)
    files = list((tmp_path / "runs").rglob("*"))
    assert any(f.is_file() for f in files)
    for f in files:
        if f.is_file():
            assert secret not in f.read_text(encoding="utf-8", errors="replace")
    assert secret not in repr(model) and secret not in repr(server.requests[0]) and secret not in repr(result)
    assert secret not in caplog.text


def test_the_adapter_works_with_prices_from_the_maintained_table(server):
    """A model id the price table knows is charged without passing prices."""
    server.add({**reply("Hi."), "usage": {"input_tokens": 1000, "output_tokens": 1000}})
    result = al.run("Hi", model=model_for(server), clock=al.FakeClock())
    assert result.spent == pytest.approx(PRICES.cost(Usage(input_tokens=1000, output_tokens=1000)))


def test_bad_adapter_settings_fail_with_a_message_naming_the_parameter(server):
    """Each bad setting is refused at construction, naming what is wrong."""
    client = server.client(api_key=KEY)
    for kwargs, word in [
        ({"cache": "yes"}, "cache"),
        ({"timeout": 0}, "timeout"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"params": {"messages": []}}, "params"),
    ]:
        with pytest.raises(ValueError, match=word):
            AnthropicModel(client=client, **kwargs)
    with pytest.raises(ValueError, match="model"):
        AnthropicModel("", client=client)
    with pytest.raises(TypeError, match="client"):
        AnthropicModel(client=object())


def test_without_a_key_or_client_the_adapter_says_how_to_get_one(monkeypatch, tmp_path):
    """No ANTHROPIC_API_KEY and no client: a clear error at construction, not a failure at the first call."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    for name in ("ANTHROPIC_CONFIG_DIR", "ANTHROPIC_PROFILE", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no profile on disk either
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-5")


def test_request_records_are_plain_json(server):
    """What the server recorded is the JSON the SDK sent (a test can dump and diff it)."""
    server.add(reply("Hi."))
    al.run("Hello", model=model_for(server), clock=al.FakeClock())
    assert json.loads(json.dumps(server.requests[0].body))["model"] == "claude-sonnet-4-5"


def test_one_model_serves_run_after_run_each_on_its_own_event_loop(server, caplog):
    """run() starts a new event loop each time; the adapter keeps working and leaves no loop errors behind."""
    import gc
    import logging

    caplog.set_level(logging.ERROR, logger="asyncio")
    model = model_for(server)
    for i in range(3):
        server.add(reply(None, ("lookup", {"order_id": i})), reply(f"Run {i} done."))
        result = al.run(f"Find {i}", [lookup], model=model, clock=al.FakeClock())
        assert isinstance(result, al.Done) and result.text == f"Run {i} done."
    gc.collect()
    assert len(server.requests) == 6
    assert [r for r in caplog.records if r.name == "asyncio"] == []


def test_a_model_dropped_while_its_loop_goes_on_closes_its_pool_on_that_loop(server, monkeypatch):
    """A model used on a loop that outlives it (a notebook's, an experiment's cells, each with its own model) and
    then let go closes its connection pool on that loop. Left to the garbage collector, the pool's closer would
    be collected unfinished: its connections never closed, and ``coroutine ignored GeneratorExit`` with ``no
    running event loop`` reported from a close that had no loop to run on."""
    import gc
    import sys

    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    async def main():
        server.add(reply("one"))
        model = model_for(server)
        run = al.Run("Hi", model=model, clock=al.FakeClock())  # a Run leaves its pool open
        assert isinstance(await run.run(), al.Done)
        pool = model._clients[asyncio.get_running_loop()][0]._client
        del model, run
        gc.collect()  # the model and its closer are let go while the loop goes on
        for _ in range(20):  # the closer's cancel, then its close of the pool, each a turn of the loop
            await asyncio.sleep(0)
        return pool

    pool = asyncio.run(main())
    gc.collect()
    assert pool.is_closed
    assert [f"{u.exc_type.__name__}: {u.exc_value} in {u.object!r}" for u in unraisable] == []


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_client_with_a_custom_http_client_works_on_every_run_and_never_sends_a_call_twice(stream):
    """Proxies and CA bundles come as http_client=: each run, on its own event loop, sends its call once."""
    import anthropic
    import httpx2

    with MessagesServer([reply("one"), reply("two"), reply("three")]) as server:
        http = httpx2.AsyncClient(timeout=30, headers={"x-company-proxy": "yes"})
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key=KEY, max_retries=0, http_client=http)
        model = AnthropicModel(client=client, stream=stream)
        texts = []
        for n in range(3):
            result = al.run("Hi", model=model, trace=False, prices=al.Prices(3.0, 15.0))
            texts.append(result.text)
            assert len(server.requests) == n + 1, result  # no call sent again after a dead connection
        assert texts == ["one", "two", "three"]
        assert all(r.headers["x-company-proxy"] == "yes" for r in server.requests)  # the caller's client, as given


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_vertex_client_runs_through_the_adapter_priced_from_googles_table(stream):
    """AsyncAnthropicVertex (its own routes, the model in the path) works as the client; prices follow the
    platform, and the hard guard's exact count goes through Vertex's count-tokens route too."""
    import anthropic
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    with MessagesServer([reply("x" * 3000), reply("Done.")], tokenizer="dense") as server:
        client = anthropic.AsyncAnthropicVertex(
            region="us-east5", project_id="proj", access_token="tok", base_url=server.url
        )
        model = AnthropicModel("claude-sonnet-4-5", client=client, stream=stream, cache=False)
        assert model.platform == "google"
        events: list = []
        result = al.run("Hi", model=model, trace=False, max_cost=0.004, max_tokens=1000, subscribers=[events.append])
    paths = [r.path for r in server.requests]
    assert any(":streamRawPredict" in p or ":rawPredict" in p for p in paths if "count-tokens" not in p)
    assert any("count-tokens:rawPredict" in p for p in paths)  # near the limit: one exact count, on Vertex's route
    usage = next(e.data["usage"] for e in events if e.kind == "model_called")
    google = calc_price(
        GUsage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"]),
        model_ref="claude-sonnet-4-5",
        provider_id="google",
    )
    assert result.spent == pytest.approx(float(google.total_price), rel=1e-9) and result.spent <= 0.004


def test_runs_on_fresh_event_loops_load_the_ca_bundle_once_a_process(monkeypatch):
    """Each run opens a fresh pool; its SSL context (loading the CA bundle, ~20 ms) is built once, and again
    only when SSL_CERT_FILE names another bundle."""
    import certifi
    import httpcore2

    import agentlab.models.anthropic as adapter

    built: list[str | None] = []
    real = httpcore2.default_ssl_context

    def counting(**kw):
        built.append(__import__("os").environ.get("SSL_CERT_FILE"))
        return real(**kw)

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with MessagesServer([reply("one"), reply("two"), reply("three"), reply("four")]) as server:
        model = AnthropicModel(client=server.client(), stream=False)  # the user's client builds its own
        monkeypatch.setattr(httpcore2, "default_ssl_context", counting)
        monkeypatch.setattr(adapter, "_SSL_CONTEXTS", {})
        texts = [al.run("q", model=model, trace=False, max_cost=None).text for _ in range(3)]
        monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
        texts.append(al.run("q", model=model, trace=False, max_cost=None).text)
    assert texts == ["one", "two", "three", "four"]
    assert built == [None, certifi.where()]

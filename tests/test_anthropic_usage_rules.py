"""Every cent, round 3: the Messages API as SDK 2.17 speaks it (API version 2026-10-21).

Each reply is served by the local Messages API server to the real ``anthropic``
SDK, streamed and whole. Payload shapes come from the SDK 2.17 types:
``types/usage.py`` (``inference_geo``, ``service_tier``, ``output_tokens_details``),
``types/beta/beta_usage.py`` and ``beta_iterations_usage.py`` (``message`` and
``compaction`` iterations: "Calculate the context window size from the last
``message`` entry"), ``output_tokens_details.py`` (``thinking_tokens``), and the
``max_tokens`` docstring of ``types/message_create_params.py`` ("A request that
uses server tools can call the model more than once"). Expected costs come
from genai-prices' ``calc_price`` with its price context (``processing: batch``)
or the project's rule tables (``pricing.GEO_MULTIPLIERS``, ``pricing.pass_rates``).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab.models.anthropic import AnthropicModel
from agentlab.testing import MessagesServer
from tests.test_anthropic_money import STREAMS, answer, called, genai, run

HAIKU = "claude-haiku-4-5"
TOP = {"input_tokens": 2_000, "output_tokens": 300, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


@STREAMS
def test_a_reply_without_data_residency_is_billed_at_standard_rates_without_a_warning(stream):
    """Item 1: usage.inference_geo "not_available" (what the SDK repository's recorded replies carry) costs what
    genai-prices says, not 1.1x; a web-search reply of Haiku 4.5 costs its tokens plus $0.01 per search."""
    usage = {**TOP, "inference_geo": "not_available", "server_tool_use": {"web_search_requests": 1}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "no price rule" warning
        result, _ = run(answer(usage), stream=stream, model=HAIKU)
    assert result.spent == pytest.approx(genai(HAIKU, TOP) + 0.01, rel=1e-9)
    us, _ = run(answer({**TOP, "inference_geo": "us"}), stream=stream, model=HAIKU, adapter={"inference_geo": "us"})
    assert us.spent == pytest.approx(genai(HAIKU, TOP) * 1.1, rel=1e-9)  # only a region that costs more costs more


def test_an_unseen_region_is_named_but_not_surcharged():
    from agentlab.pricing import geo_multiplier

    with pytest.warns(UserWarning, match="'mars-1'"):
        assert geo_multiplier("mars-1") == 1.0
    assert geo_multiplier("global") == geo_multiplier("not_available") == 1.0 and geo_multiplier("us") == 1.1


@STREAMS
def test_a_batch_reply_is_billed_at_half_price(stream):
    """Item 4: service_tier "batch" is genai-prices' batch variant (price context processing=batch)."""
    usage = {**TOP, "cache_read_input_tokens": 800, "service_tier": "batch"}
    result, events = run(answer(usage), stream=stream, model=HAIKU)
    assert result.spent == pytest.approx(genai(HAIKU, usage, {"processing": "batch"}), rel=1e-9)
    assert result.spent == pytest.approx(genai(HAIKU, usage) / 2, rel=1e-9)
    assert called(events)["usage"]["service_tier"] == "batch"


def _pass(kind: str, inp: int, out: int) -> dict[str, Any]:
    return {
        "type": kind,
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


@STREAMS
def test_the_context_size_of_a_server_tool_loop_is_its_last_message_pass(stream):
    """Item 3: the top level rolls two passes up to 17,000 input tokens; the context was 11,000 (the last
    message pass), and a compaction entry after it is not the context's size."""
    passes = [_pass("message", 6_000, 200), _pass("message", 11_000, 300), _pass("compaction", 900, 150)]
    usage = {**TOP, "input_tokens": 17_000, "output_tokens": 500, "iterations": passes}
    result, events = run(answer(usage), stream=stream, model=HAIKU)
    assert called(events)["context_tokens"] == 11_000
    # the run's input total is what was billed: both sampling passes (the top level) and the compaction pass
    assert result.input_tokens == 17_000 + TOP["cache_read_input_tokens"] + TOP["cache_creation_input_tokens"] + 900
    assert result.spent == pytest.approx(
        genai(HAIKU, {**TOP, "input_tokens": 17_000, "output_tokens": 500}) + genai(HAIKU, passes[2]), rel=1e-9
    )


@STREAMS
def test_thinking_tokens_are_kept_with_the_step(stream):
    """Item 5: usage.output_tokens_details.thinking_tokens reaches the model_called event (and so the trace)."""
    usage = {**TOP, "output_tokens_details": {"thinking_tokens": 240}}
    result, events = run(answer(usage), stream=stream, model=HAIKU)
    assert called(events)["usage"]["thinking_tokens"] == 240
    assert result.spent == pytest.approx(genai(HAIKU, TOP), rel=1e-9)  # already in output_tokens: not billed twice


HOSTILE = [-10_000_000, 2.5, 10**30, "12abc", True, None]


@STREAMS
@pytest.mark.parametrize("bad", HOSTILE[:-1], ids=["negative", "fractional", "huge", "string", "bool"])
def test_a_usage_that_cannot_be_believed_is_charged_at_the_worst_case_and_never_lowers_spent(stream, bad, recwarn):
    """Item 6: a hostile count (from a proxy or a record) makes the reply malformed: charged at the request's
    worst case, within max_cost under "hard", never negative; the user reads the run's diagnosis, not a
    serializer warning about the SDK's model."""
    if stream and bad is True:
        pytest.skip("the SDK's stream parser reads true as 1 before the lab sees it")
    usage = {**TOP, "input_tokens": bad}
    events: list[al.Event] = []
    with MessagesServer([answer(usage)] * 3) as server:
        adapter = AnthropicModel(HAIKU, client=server.client(), stream=stream, cache=False)
        result = al.run(
            "Go.", model=adapter, trace=False, clock=al.FakeClock(), max_cost=0.05, subscribers=[events.append]
        )
    assert isinstance(result, al.Stopped) and result.reason == "malformed reply"
    assert "input_tokens" in result.detail
    charged = called(events)
    assert 0 < result.spent <= 0.05 and charged["cost"] == result.spent and charged.get("lost")
    assert len([r for r in server.requests if r.path.startswith("/v1/messages")]) == 1  # not retried
    assert [str(w.message) for w in recwarn] == []


def test_check_usage_names_each_field_that_fails():
    from agentlab.usage_fields import Caps, check_usage

    assert check_usage(TOP) == []
    found = check_usage(
        {
            **TOP,
            "input_tokens": -1,
            "output_tokens": "12abc",
            "output_tokens_details": {"thinking_tokens": 900},
            "server_tool_use": {"web_search_requests": 1.5},
            "iterations": [_pass("message", 10**30, 1)],
        },
        Caps(output=500),
    )
    said = "\n".join(found)
    assert "usage.input_tokens is -1" in said and "usage.output_tokens is '12abc'" in said
    assert "web_search_requests is 1.5" in said and "usage.iterations[0].input_tokens" in said
    assert check_usage({**TOP, "output_tokens": 600}, Caps(output=500)) != []  # more than the request allows
    assert check_usage({**TOP, "output_tokens_details": {"thinking_tokens": 301}}) != []  # more than output


def test_temperature_is_refused_when_the_model_is_made():
    """Item 7: SDK 2.x has no sampling parameters; API 2026-10-21 answers 400 to them even at 1.0."""
    with MessagesServer([]) as server:
        with pytest.raises(ValueError, match="sampling parameters"):
            AnthropicModel(client=server.client(), temperature=0.2)
        for name in ("temperature", "top_p", "top_k"):
            with pytest.raises(ValueError, match=name):
                AnthropicModel(client=server.client(), params={name: 1.0})


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"model": "claude-opus-4-8", "speed": "fast"}, "fast mode on claude-opus-4-8 ended on 2026-11-30"),
        ({"model": "claude-haiku-4-5", "thinking": {"type": "adaptive"}}, "thinking type 'adaptive'"),
        ({"model": "claude-sonnet-4-5", "max_tokens": 100_000}, "max_tokens=100000 is more than"),
        (
            {
                "model": "claude-sonnet-4-5",
                "thinking": {"type": "enabled", "budget_tokens": 2048},
                "max_tokens": 4096,
                "tool_choice": {"type": "any"},
            },
            "refused while thinking is on",
        ),
    ],
    ids=["fast-retired", "thinking-type", "max-tokens", "tool-choice"],
)
def test_a_model_the_api_would_refuse_is_refused_when_it_is_made(options, said):
    """Item 8: per-model rules (models overview, adaptive-thinking page, extended-thinking page, fast mode)."""
    with MessagesServer([]) as server, pytest.raises(ValueError, match=said):
        AnthropicModel(client=server.client(), **options)


@STREAMS
@pytest.mark.parametrize(
    "history",
    [
        [
            {"role": "user", "content": "Read this."},
            {
                "role": "assistant",
                "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}],
            },
        ],
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "As the doc says.",
                        "citations": [
                            {
                                "type": "char_location",
                                "cited_text": "x",
                                "document_index": 0,
                                "start_char_index": 0,
                                "end_char_index": 1,
                            }
                        ],
                    }
                ],
            }
        ],
    ],
    ids=["document-in-assistant", "citations-in-user-text"],
)
def test_a_history_the_api_version_refuses_is_stopped_before_anything_is_sent(stream, history):
    """Item 8: a replayed, forked or imported history with blocks 2026-10-21 refuses: a clear error at $0."""
    with MessagesServer([al.reply("unused")]) as server:
        adapter = AnthropicModel(HAIKU, client=server.client(), stream=stream, cache=False)
        messages = [*history, {"role": "user", "content": "Go on."}] if history[-1]["role"] == "assistant" else history
        result = al.run(messages, model=adapter, trace=False, clock=al.FakeClock(), max_cost=0.05)
    assert isinstance(result, al.Stopped) and result.spent == 0
    assert "2026-10-21" in result.detail and "messages[" in result.detail
    assert [r for r in server.requests if r.path.startswith("/v1/messages")] == []


def test_an_experiment_grid_is_checked_before_its_first_cell(tmp_path):
    """Item 8: one config the API would refuse stops the experiment before any cell spends."""
    with MessagesServer([]) as server:
        good = AnthropicModel(HAIKU, client=server.client())
        with pytest.raises(ValueError, match="config 'big'.*max_tokens=200000"):
            al.Experiment(
                ["task"],
                {"ok": {"model": good}, "big": {"model": good, "max_tokens": 200_000}},
                folder=tmp_path,
                max_total_cost=1.0,
                progress=False,
            )
        assert server.requests == []


# ---------------------------------------------------------------- item 2: every pass a server tool can trigger
FETCH = {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 3, "max_content_tokens": 2_000}


def tool_loop(server: MessagesServer, uses: int, added: int) -> Any:
    """A reply that runs every pass the request allows: 1 + ``uses`` passes, each writing max_tokens and
    reading the request, every earlier pass's output and ``added`` tokens of tool result per earlier use."""

    def make(body: dict[str, Any]) -> dict[str, Any]:
        n, m = (
            server.count({k: v for k, v in body.items() if k in ("model", "messages", "system", "tools")}),
            body["max_tokens"],
        )
        its = [_pass("message", n + k * (m + added), m) for k in range(uses + 1)]
        usage = {
            "input_tokens": sum(i["input_tokens"] for i in its),
            "output_tokens": m * (uses + 1),
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": uses},
            "iterations": its,
        }
        return answer(usage)

    return make


@STREAMS
def test_the_hard_guard_covers_every_pass_of_a_server_tool_loop(stream):
    """Item 2: four passes of max_tokens each (web_fetch, max_uses 3) stay within a hard max_cost."""
    with MessagesServer() as server:
        server.add(tool_loop(server, 3, 2_000))
        adapter = AnthropicModel(HAIKU, client=server.client(), stream=stream, cache=False, server_tools=[FETCH])
        result = al.run("Fetch.", model=adapter, trace=False, clock=al.FakeClock(), max_cost=0.05, max_tokens=4_000)
    assert isinstance(result, al.Done), result
    assert 0.02 < result.spent <= 0.05  # one pass of 4,000 output tokens alone is $0.02: the guard lowered it
    sent = next(r.body for r in server.requests if r.path.split("?")[0] == "/v1/messages")
    assert sent["max_tokens"] < 4_000


def test_the_pass_rates_price_every_pass_of_the_loop():
    from agentlab.pricing import RequestTerms, lookup_prices

    p = lookup_prices(HAIKU)
    n, m, passes, added = 10_000, 1_000, 4, 6_000
    inp, out = p.worst_rates(n, False, RequestTerms(passes=passes, pass_input=added))
    every_pass = sum(n + k * m + k * added / (passes - 1) * 1 for k in range(passes))  # inputs, results spread
    worst = (passes * n + m * passes * (passes - 1) / 2 + (passes - 1) * added) * 1e-6 + passes * m * 5e-6
    assert n * inp + m * out == pytest.approx(worst, rel=1e-9) and worst * 1e6 >= every_pass


@STREAMS
def test_a_server_tool_with_no_cap_is_refused_under_hard_before_anything_is_sent(stream):
    """Item 2: web search results have no documented cap, so "hard" cannot hold: refused at $0, the tool named."""
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    with MessagesServer([al.reply("unused")]) as server:
        adapter = AnthropicModel(HAIKU, client=server.client(), stream=stream, server_tools=[search])
        result = al.run("Search.", model=adapter, trace=False, clock=al.FakeClock(), max_cost=0.10)
        estimated = al.run(
            "Search.", model=adapter, trace=False, clock=al.FakeClock(), max_cost=0.10, cost_guard="estimate"
        )
    assert isinstance(result, al.Stopped) and result.reason == "budget" and result.spent == 0
    assert "'web_search'" in result.detail and 'cost_guard="estimate"' in result.detail
    assert isinstance(estimated, al.Done)  # the way out the message names works
    assert len([r for r in server.requests if r.path.split("?")[0] == "/v1/messages"]) == 1


# ------------------------------------------------- the hard-guard property, extended to this round's replies
def scripted(server: MessagesServer, kind: str, value: Any, uses: int) -> Any:
    """A reply of ``kind``: a full server-tool loop, a batch result, or a usage with one hostile count."""
    if kind == "loop":
        return tool_loop(server, uses, FETCH["max_content_tokens"])

    def make(body: dict[str, Any]) -> dict[str, Any]:
        m = body["max_tokens"]
        usage = {**TOP, "output_tokens": min(300, m)}
        if kind == "batch":
            usage["service_tier"] = "batch"
        else:
            usage["input_tokens"] = value
        return answer(usage)

    return make


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(
    kind=st.sampled_from(["loop", "batch", "hostile"]),
    value=st.sampled_from(HOSTILE[:-1] + [-1, 10**9, 1.0]),
    uses=st.integers(1, 4),
    max_cost=st.floats(0.002, 0.08),
    max_tokens=st.integers(64, 8_000),
    stream=st.booleans(),
)
def test_no_run_ends_over_max_cost_with_tool_loops_batch_or_hostile_usage(
    kind, value, uses, max_cost, max_tokens, stream
):
    """0 runs over a hard max_cost, and spent never decreases, whatever the replies say."""
    events: list[al.Event] = []
    fetch = {**FETCH, "max_uses": uses}
    with MessagesServer() as server:
        server.add(*[scripted(server, kind, value, uses)] * 3)
        adapter = AnthropicModel(HAIKU, client=server.client(), stream=stream, cache=False, server_tools=[fetch])
        result = al.run(
            "Go.",
            model=adapter,
            trace=False,
            clock=al.FakeClock(),
            max_cost=max_cost,
            max_tokens=max_tokens,
            max_steps=3,
            subscribers=[events.append],
        )
    spent = [e.data["spent"] for e in events if e.kind == "model_called" and "spent" in e.data]
    assert result.spent <= max_cost, (result, max_cost)
    assert all(a <= b for a, b in zip([0.0, *spent], spent, strict=False)), spent  # never decreases
    assert all(e.data.get("cost", 0) >= 0 for e in events if e.kind == "model_called")


def test_no_experiment_ends_over_max_total_cost_with_hostile_usage(tmp_path):
    """An experiment whose every reply claims -10,000,000 input tokens: each charged at its worst case, and the
    experiment's total stays within max_total_cost (the ledger never settles a negative amount)."""
    hostile = answer({**TOP, "input_tokens": -10_000_000})
    with MessagesServer([hostile] * 40) as server:
        model = AnthropicModel(HAIKU, client=server.client(), cache=False)
        exp = al.Experiment(
            ["a", "b", "c", "d"],
            {"hostile": {"model": model, "max_tokens": 2_000}},
            repeats=2,
            max_total_cost=0.05,
            folder=tmp_path,
            progress=False,
        )
        result = exp.run()
    rows = result.rows if hasattr(result, "rows") else None
    assert exp._spent() <= 0.05 + 1e-12
    assert exp._spent() > 0  # the malformed replies were charged, not free
    assert rows is None or all(r.get("cost", 0) >= 0 for r in getattr(rows, "to_dict", lambda _: [])("records"))

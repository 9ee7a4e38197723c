"""Every cent, on every reply Claude can send (issue 25, money items 1-6).

Each reply is served by the local Messages API server to the real ``anthropic``
SDK, streamed and not. The usage shapes are the SDK's own types (anthropic
2.16: ``types.beta.BetaUsage``, ``BetaCompactionIterationUsage``,
``BetaAdvisorMessageIterationUsage``, ``BetaFallbackMessageIterationUsage``,
``types.Usage.speed`` / ``inference_geo``) and the fallback block of its
recorded ``tests/lib/streaming/fixtures/fallback_response.txt``. Expected
costs come from genai-prices' ``calc_price`` (with its price context for fast
mode) or, for geography, the project's rule table (``pricing.GEO_MULTIPLIERS``).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from genai_prices import Usage as GUsage
from genai_prices import calc_price

import agentlab as al
from agentlab.models.anthropic import AnthropicModel
from agentlab.pricing import GEO_MULTIPLIERS
from agentlab.testing import MessagesServer

OPUS = "claude-opus-5"  # genai-prices lists a fast-mode variant for it (Opus 4.8's fast mode ended 2026-11-30)
STREAMS = pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])


def genai(model: str, usage: dict[str, Any], context: dict[str, str] | None = None) -> float:
    """genai-prices' price of one Anthropic-shaped usage (its input counts cache tokens too)."""
    read, write = usage.get("cache_read_input_tokens", 0), usage.get("cache_creation_input_tokens", 0)
    counted = GUsage(
        input_tokens=usage["input_tokens"] + read + write,
        output_tokens=usage["output_tokens"],
        cache_read_tokens=read,
        cache_write_tokens=write,
    )
    return float(calc_price(counted, model_ref=model, provider_id="anthropic", price_context=context).total_price)


def answer(usage: dict[str, Any], content: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "content": content or [{"type": "text", "text": "Done."}],
        "stop_reason": "end_turn",
        "usage": usage,
        **extra,
    }


def run(item: dict[str, Any], *, stream: bool, model: str = OPUS, **options: Any) -> tuple[al.Result, list[al.Event]]:
    events: list[al.Event] = []
    with MessagesServer([item]) as server:
        adapter = AnthropicModel(
            model, client=server.client(), stream=stream, cache=False, **options.pop("adapter", {})
        )
        result = al.run(
            "Go.",
            model=adapter,
            trace=False,
            clock=al.FakeClock(),
            max_cost=None,
            subscribers=[events.append],
            **options,
        )
    return result, events


def called(events: list[al.Event]) -> dict[str, Any]:
    return next(e.data for e in events if e.kind == "model_called")


TOP = {"input_tokens": 2_000, "output_tokens": 300, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


@STREAMS
def test_a_compaction_pass_is_charged_on_top_of_the_top_level_usage(stream):
    """Item 1: usage.iterations' compaction entry (not in the top-level counts, per BetaIterationsUsage) is billed."""
    compaction = {
        "type": "compaction",
        "input_tokens": 180_000,
        "output_tokens": 3_000,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    usage = {**TOP, "iterations": [compaction, {"type": "message", **TOP}]}
    content = [{"type": "compaction", "content": "Earlier conversation summarized."}, {"type": "text", "text": "Done."}]
    result, events = run(answer(usage, content), stream=stream)
    expected = genai(OPUS, TOP) + genai(OPUS, compaction)
    assert result.spent == pytest.approx(expected, rel=1e-9)
    assert result.spent > 8 * genai(OPUS, TOP)  # the top-level usage alone is about an eighth of the bill
    assert called(events)["usage"]["iterations"][0]["type"] == "compaction"


@STREAMS
def test_fast_mode_is_billed_at_the_fast_variant(stream):
    """Item 2: usage.speed == "fast" is priced at genai-prices' speed=fast variant, not standard rates."""
    usage = {**TOP, "speed": "fast"}
    result, _ = run(answer(usage), stream=stream, adapter={"speed": "fast"})
    assert result.spent == pytest.approx(genai(OPUS, TOP, {"speed": "fast"}), rel=1e-9)
    assert result.spent > genai(OPUS, TOP) * 1.9


@STREAMS
def test_an_advisor_pass_is_billed_at_the_advisor_models_rates(stream):
    """Item 3: an advisor_message iteration is charged at its own model's prices."""
    advisor = {
        "type": "advisor_message",
        "model": "claude-haiku-4-5",
        "input_tokens": 12_000,
        "output_tokens": 900,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    usage = {**TOP, "iterations": [{"type": "message", **TOP}, advisor]}
    result, _ = run(answer(usage), stream=stream)
    assert result.spent == pytest.approx(genai(OPUS, TOP) + genai("claude-haiku-4-5", advisor), rel=1e-9)


@STREAMS
def test_a_reply_served_by_a_fallback_model_is_priced_at_that_model_and_shows_both(stream):
    """Item 4: priced at the model that served it; the step shows the serving model and the requested one."""
    hop = {
        "type": "fallback",
        "from": {"model": OPUS},
        "to": {"model": "claude-sonnet-4-5"},
        "trigger": {"type": "refusal", "category": None},
    }
    usage = {**TOP, "iterations": [{"type": "fallback_message", "model": "claude-sonnet-4-5", **TOP}]}
    item = answer(usage, [hop, {"type": "text", "text": "Done."}], model="claude-sonnet-4-5")
    result, events = run(item, stream=stream)
    assert result.spent == pytest.approx(genai("claude-sonnet-4-5", TOP), rel=1e-9)
    step = called(events)
    assert step["model"] == "claude-sonnet-4-5" and step["requested_model"] == OPUS


@STREAMS
def test_us_only_inference_carries_the_geography_multiplier(stream):
    """Item 5: inference_geo "us" is 1.1x on tokens (the project's rule table, which names its source)."""
    result, _ = run(answer({**TOP, "inference_geo": "us"}), stream=stream, adapter={"inference_geo": "us"})
    assert GEO_MULTIPLIERS["us"] == 1.1
    assert result.spent == pytest.approx(genai(OPUS, TOP) * 1.1, rel=1e-9)
    plain, _ = run(answer({**TOP, "inference_geo": "global"}), stream=stream)
    assert plain.spent == pytest.approx(genai(OPUS, TOP), rel=1e-9)


@STREAMS
def test_a_reply_refused_as_malformed_is_still_charged(stream):
    """Item 6: the API billed it; the lab refusing it does not make it free."""
    broken = [{"type": "tool_use", "id": "toolu_x", "input": {}}]  # no name: the reply gate refuses it
    result, events = run({"content": broken, "stop_reason": "tool_use", "usage": TOP}, stream=stream)
    assert isinstance(result, al.Stopped) and result.reason == "malformed reply"
    assert result.spent == pytest.approx(genai(OPUS, TOP), rel=1e-9) and called(events)["cost"] == result.spent


def test_a_usage_field_the_lab_does_not_understand_is_a_warning_that_names_it():
    """Never silent: a new field (or iteration type) in usage is named, so a missing price is seen."""
    usage = {**TOP, "quantum_tokens": 5, "iterations": [{"type": "dream", **TOP}]}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run(answer(usage), stream=False)
    said = " ".join(str(w.message) for w in seen)
    assert "'quantum_tokens'" in said and "'dream'" in said


def test_the_guard_worst_case_includes_fast_mode_geography_and_compaction():
    """The same rules before the call: a $0.16 fast call cannot pass a $0.10 max_cost under "hard"."""
    from agentlab.pricing import RequestTerms, lookup_prices

    p = lookup_prices(OPUS)
    base = p.worst_rates(10_000, False)
    fast = p.worst_rates(10_000, False, RequestTerms(speed="fast"))
    assert fast == pytest.approx((10e-6, 50e-6)) and base == pytest.approx((5e-6, 25e-6))
    assert p.worst_rates(10_000, False, RequestTerms(inference_geo="us")) == pytest.approx((5.5e-6, 27.5e-6))
    assert p.worst_rates(10_000, False, RequestTerms(compaction_at=5_000)) == pytest.approx((10e-6, 50e-6))
    assert p.worst_rates(1_000, False, RequestTerms(compaction_at=5_000)) == pytest.approx(base)  # below the trigger
    # A fast reply of up to 2,800 output tokens costs up to $0.14 in output alone: more than $0.10.
    with MessagesServer([al.reply("x" * 30_000)]) as server:
        adapter = AnthropicModel(OPUS, client=server.client(), speed="fast", cache=False)
        result = al.run("Go.", model=adapter, trace=False, clock=al.FakeClock(), max_cost=0.10, max_tokens=2_800)
    sent = next(r.body for r in server.requests if r.path.split("?")[0] == "/v1/messages")
    assert sent["speed"] == "fast" and sent["max_tokens"] < 2_000  # lowered at fast rates ($50/MTok output)
    assert result.reason == "max_tokens" and 0.09 < result.spent <= 0.10


def test_the_guard_bounds_advisor_passes_and_fallback_models_or_says_it_cannot():
    """An advisor tool with max_uses and max_tokens is reserved at its model's rates; without caps, unbounded;
    fallback models are guarded at the dearest of them."""
    from agentlab._engine.input_tracker import tool_fees
    from agentlab.pricing import RequestTerms, lookup_prices

    haiku = lookup_prices("claude-haiku-4-5")
    advisor = {
        "type": "advisor_20260301",
        "name": "advisor",
        "model": "claude-haiku-4-5",
        "max_uses": 2,
        "max_tokens": 500,
    }
    fees = tool_fees([advisor], lookup_prices(OPUS), bound=10_000, caching=False)
    assert fees == pytest.approx(2 * (10_000 * haiku.input + 500 * haiku.output) / 1e6)
    assert tool_fees([{**advisor, "max_uses": None}], lookup_prices(OPUS), bound=10_000, caching=False) is None
    sonnet = lookup_prices("claude-sonnet-4-5")
    terms = RequestTerms(models=(OPUS,))
    assert sonnet.worst_rates(1_000, False, terms) == pytest.approx(lookup_prices(OPUS).worst_rates(1_000, False))


def test_an_unknown_cache_write_split_is_named_too():
    with pytest.warns(UserWarning, match="'ephemeral_24h_input_tokens'"):
        from agentlab.messages import normalize_reply

        normalize_reply(
            {
                "content": [{"type": "text", "text": "x"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1, "cache_creation": {"ephemeral_24h_input_tokens": 9}},
            }
        )

"""Dollars from usage: our resolved prices agree with genai-prices' own calculation."""

from __future__ import annotations

import pytest
from genai_prices import Usage as GUsage
from genai_prices import calc_price

import agentlab as al
from agentlab.messages import Usage, normalize_reply
from agentlab.pricing import lookup_prices


@pytest.mark.parametrize("model_id", ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"])
@pytest.mark.parametrize(
    "usage",
    [
        Usage(2000, 300),
        Usage(1000, 100, cache_creation_input_tokens=1500, cache_read_input_tokens=20000),
        Usage(150_000, 2000, cache_read_input_tokens=100_000),  # past the long-context tier
    ],
)
def test_cost_matches_genai_prices_with_cache_tokens_counted(model_id, usage):
    """Anthropic's input excludes cache tokens; the cost still matches genai-prices exactly."""
    expected = calc_price(
        GUsage(
            input_tokens=usage.context_tokens, output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_input_tokens, cache_write_tokens=usage.cache_creation_input_tokens,
        ),
        model_ref=model_id, provider_id="anthropic",
    ).total_price
    assert lookup_prices(model_id).cost(usage) == pytest.approx(float(expected), rel=1e-9)


def test_unknown_model_has_no_price():
    """An unknown id gives None (and Run refuses max_cost for it), never a silent $0."""
    assert lookup_prices("definitely-not-a-model") is None


def test_user_prices_override_the_table():
    """prices= charges the run at the caller's rates."""
    result = al.run("q", model=al.ScriptedModel([al.reply("x" * 300, usage={"input_tokens": 1_000_000, "output_tokens": 0})]),
                    prices=al.Prices(input=2.0, output=10.0), max_cost=None, trace=False)
    assert result.cost == pytest.approx(2.0)


def test_anthropic_message_objects_travel_the_same_path():
    """A real SDK Message is accepted as a reply, usage and all."""
    from anthropic.types import Message

    msg = Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "hi"}, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 7},
    })
    r = normalize_reply(msg)
    assert r.stop_reason == "tool_use" and r.text == "hi"
    assert r.tool_calls == [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]
    assert r.usage == Usage(10, 5, 0, 7)

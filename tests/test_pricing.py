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
            input_tokens=usage.context_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_input_tokens,
            cache_write_tokens=usage.cache_creation_input_tokens,
        ),
        model_ref=model_id,
        provider_id="anthropic",
    ).total_price
    assert lookup_prices(model_id).cost(usage) == pytest.approx(float(expected), rel=1e-9)


def test_unknown_model_has_no_price():
    """An unknown id gives None (and Run refuses max_cost for it), never a silent $0."""
    assert lookup_prices("definitely-not-a-model") is None


def test_user_prices_override_the_table():
    """prices= charges the run at the caller's rates."""
    result = al.run(
        "q",
        model=al.ScriptedModel([al.reply("x" * 300, usage={"input_tokens": 1_000_000, "output_tokens": 0})]),
        prices=al.Prices(input=2.0, output=10.0),
        max_cost=None,
        trace=False,
    )
    assert result.spent == pytest.approx(2.0)


def test_anthropic_message_objects_travel_the_same_path():
    """A real SDK Message is accepted as a reply, usage and all."""
    from anthropic.types import Message

    msg = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 7},
        }
    )
    r = normalize_reply(msg)
    assert r.stop_reason == "tool_use" and r.text == "hi"
    assert r.tool_calls == [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]
    assert r.usage == Usage(10, 5, 0, 7)


@pytest.mark.parametrize("model_id", ["claude-sonnet-4-5", "claude-opus-4-6", "claude-haiku-4-5"])
def test_one_hour_cache_writes_and_web_searches_cost_what_genai_prices_says(model_id):
    """1h writes at their own (2x input) rate, 5m writes at 1.25x, and $10 per 1,000 web searches."""
    usage = Usage(
        10_000, 300, cache_creation_input_tokens=3000, cache_creation_1h_input_tokens=2000, web_search_requests=3
    )
    expected = calc_price(
        GUsage(
            input_tokens=13_000, output_tokens=300, cache_write_tokens=3000, cache_write_1h_tokens=2000, web_searches=3
        ),
        model_ref=model_id,
        provider_id="anthropic",
    ).total_price
    prices = lookup_prices(model_id)
    assert prices.cost(usage) == pytest.approx(float(expected), rel=1e-9)
    assert prices.server_tool_cost(usage) == pytest.approx(0.03)
    five_minute_only = Usage(10_000, 300, cache_creation_input_tokens=3000)
    assert prices.cost(usage) - prices.cost(five_minute_only) == pytest.approx(
        2000 * (2 * prices.input - prices.cache_write) / 1e6 + 0.03
    )


def test_every_model_id_the_sdk_lists_has_a_price():
    """A new Claude id in anthropic.types.Model without a price fails here, not in a user's run."""
    import typing

    from anthropic.types import Model

    literal = next(a for a in typing.get_args(Model) if typing.get_origin(a) is typing.Literal)
    missing = [m for m in typing.get_args(literal) if lookup_prices(m) is None]
    assert not missing, (
        f"no price for {missing}: add them to pricing.FALLBACK_ALIASES (with the source) or upgrade genai-prices"
    )
    for m in typing.get_args(literal):
        p = lookup_prices(m)
        assert p.input > 0 and p.output > p.input and p.cache_read is not None and p.write_1h_rate() >= p.input


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": 5, "output_tokens": 2},
        {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 3},
        {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": None},
        {"input_tokens": 5, "output_tokens": 2, "service_tier": "standard", "cache_creation_input_tokens": 0},
    ],
)
def test_usage_counts_read_the_same_in_every_shape_the_api_and_adapters_send(usage):
    """The usual shape (four int counts) has a quick path; it must read as the full checks read it."""
    reply = normalize_reply({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": usage})
    wanted = {k: int(usage.get(k) or 0) for k in ("input_tokens", "output_tokens", "cache_read_input_tokens")}
    assert reply.usage is not None and {k: getattr(reply.usage, k) for k in wanted} == wanted
    assert reply.usage.cache_creation_input_tokens == int(usage.get("cache_creation_input_tokens") or 0)
    assert type(reply.usage.input_tokens) is int and type(reply.usage.output_tokens) is int


def test_usage_reads_the_ttl_split_and_server_tool_requests_from_the_api_shape():
    reply = normalize_reply(
        {
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 5,
                "output_tokens": 2,
                "cache_creation_input_tokens": 300,
                "cache_read_input_tokens": 0,
                "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
                "server_tool_use": {"web_search_requests": 4, "web_fetch_requests": 1},
            },
        }
    )
    assert reply.usage == Usage(
        5, 2, 300, 0, cache_creation_1h_input_tokens=200, web_search_requests=4, web_fetch_requests=1
    )
    assert reply.usage.as_dict()["web_search_requests"] == 4


def test_the_guard_reserves_web_search_fees_bounded_by_max_uses():
    """Offering web search with max_uses=5 reserves 5 x $0.01 before the call: a run that can afford the
    tokens but not the searches stops before spending anything (under "estimate": "hard" refuses web search,
    whose results no documented cap bounds)."""
    from agentlab.models.anthropic import AnthropicModel
    from agentlab.testing import MessagesServer, reply

    prices = al.Prices(input=3.0, output=15.0, web_search=0.01)
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
    options = {"prices": prices, "max_tokens": 256, "clock": al.FakeClock(), "trace": False, "cost_guard": "estimate"}
    with MessagesServer([reply("unused")]) as server:
        model = AnthropicModel(client=server.client(), server_tools=[search])
        result = al.run("Search.", model=model, max_cost=0.04, **options)
        assert isinstance(result, al.Stopped) and result.reason == "budget"
        assert [
            r for r in server.requests if r.path == "/v1/messages"
        ] == [] and result.spent == 0  # a token count at most
    with MessagesServer([reply("Found.")]) as server:
        model = AnthropicModel(client=server.client(), server_tools=[search])
        result = al.run("Search.", model=model, max_cost=0.50, **options)
        assert isinstance(result, al.Done)
        sent = next(r for r in server.requests if r.path == "/v1/messages")
        assert sent.body["tools"][-1]["name"] == "web_search"


def test_cache_1h_marks_the_breakpoints_with_the_one_hour_ttl_and_those_writes_cost_twice_the_input_rate():
    """cache="1h": the prefix and the latest message carry ttl=1h; the server reports them as 1h writes;
    the call costs them at 2x base input, and the hard guard reserves input at that rate."""
    from agentlab.models.anthropic import AnthropicModel
    from agentlab.testing import MessagesServer, reply

    prices = al.Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75, cache_write_1h=6.0)
    events: list = []
    with MessagesServer([reply("Done.")]) as server:
        model = AnthropicModel(client=server.client(), cache="1h")
        result = al.run(
            "Summarise.",
            model=model,
            system="You are terse. " * 50,
            prices=prices,
            clock=al.FakeClock(),
            trace=False,
            subscribers=[events.append],
        )
    body = server.requests[0].body
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    usage = next(e.data["usage"] for e in events if e.kind == "model_called")
    assert usage["cache_creation_1h_input_tokens"] == usage["cache_creation_input_tokens"] > 0
    expected = (
        usage["input_tokens"] * 3 + usage["output_tokens"] * 15 + usage["cache_creation_input_tokens"] * 6
    ) / 1e6
    assert result.spent == pytest.approx(expected)
    assert model.caches == "1h" and prices.worst_rates(1000, "1h")[0] == pytest.approx(6.0 / 1e6)
    with pytest.raises(ValueError, match="'5m', '1h'"):
        AnthropicModel(client=model.client, cache="2h")


def test_a_model_of_another_provider_is_priced_from_its_providers_table():
    """FunctionModel(fn, model="gpt-4o") is priced at OpenAI's rates (genai-prices), not refused."""
    expected = calc_price(GUsage(input_tokens=1_000, output_tokens=10), model_ref="gpt-4o").total_price
    model = al.FunctionModel(
        lambda m, t: al.reply("Paris.", usage={"input_tokens": 1_000, "output_tokens": 10}), model="gpt-4o"
    )
    result = al.run("Capital of France?", model=model, trace=False)
    assert result.spent == pytest.approx(float(expected), rel=1e-9) and result.spent > 0
    assert lookup_prices("claude-opus-4-8").input == 5.0  # Anthropic's own table still comes first


def test_the_docs_recipe_for_another_providers_model_runs_as_written():
    """docs/claude.md's recipe (the Model protocol over an OpenAI-style API) runs, evaluated by Sybil."""
    from pathlib import Path

    from sybil import Sybil
    from sybil.parsers.markdown import PythonCodeBlockParser

    doc = Sybil(parsers=[PythonCodeBlockParser()]).parse(Path(__file__).parent.parent / "docs" / "claude.md")
    recipe = [ex for ex in doc if "class OpenAIChat" in ex.parsed]
    assert len(recipe) == 1
    recipe[0].evaluate()


def test_prices_follow_the_platform_the_client_reaches_claude_through():
    """A Bedrock client's model id is priced from genai-prices' AWS table (the platform's own ids and rates)."""
    import anthropic

    from agentlab.models.anthropic import AnthropicModel

    bedrock = anthropic.AsyncAnthropicBedrock(
        aws_region="us-east-1", aws_access_key="AKIAEXAMPLE", aws_secret_key="secret"
    )
    model = AnthropicModel("global.anthropic.claude-opus-4-8-v1:0", client=bedrock)
    assert model.platform == "aws"
    run = al.Run("q", model=model, max_cost=1.0)  # built, never sent: the prices are resolved up front
    aws = calc_price(
        GUsage(input_tokens=1_000_000, output_tokens=1_000_000),
        model_ref="global.anthropic.claude-opus-4-8-v1:0",
        provider_id="aws",
    ).total_price
    assert run.prices.cost(Usage(1_000_000, 1_000_000)) == pytest.approx(float(aws), rel=1e-9)


def test_each_reply_of_a_run_is_charged_at_the_prices_of_the_model_that_served_it():
    """A fallback may serve some replies of a run and not others: each is priced by the model it names."""
    served = ["claude-sonnet-4-5", "claude-opus-4-1", "claude-sonnet-4-5"]
    usage = {"input_tokens": 1000, "output_tokens": 100}
    replies = [
        {"content": [{"type": "tool_use", "id": f"c{i}", "name": "echo", "input": {"i": i}}], "stop_reason": "tool_use"}
        for i in range(2)
    ] + [{"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}]
    model = al.ScriptedModel([{**r, "model": m, "usage": usage} for r, m in zip(replies, served, strict=True)])
    model.model = "claude-opus-4-1"

    def echo(i: int) -> str:
        """Echo."""
        return str(i)

    result = al.run("go", [echo], model=model, trace=False, max_cost=None)
    u = Usage(1000, 100)
    assert result.spent == pytest.approx(sum(lookup_prices(m).cost(u) for m in served), rel=1e-9)


@pytest.mark.parametrize("caching", [False, True, "1h"])
def test_the_guard_s_rates_by_size_are_worst_rates_at_every_size_on_both_sides_of_the_tier(caching):
    """The cost guard's rates, worked out once per side of the long-context tier, are worst_rates' at every size
    (growing past the tier's threshold and coming back below it); with request terms, at every call."""
    from agentlab.pricing import RequestTerms

    p = lookup_prices("claude-sonnet-4-5")
    assert p is not None and p.tier_start is not None
    rates = p.rates_by_size(caching)
    edge = int(0.9 * p.tier_start)
    for n in (0, 1_000, edge - 1, edge, edge + 1, p.tier_start, 2 * p.tier_start, 5_000):
        assert rates(n) == p.worst_rates(n, caching), n
    flat = al.Prices(input=1.0, output=2.0)  # no tier: one side only
    assert flat.rates_by_size(caching)(10**9) == flat.worst_rates(10**9, caching)
    terms = RequestTerms(compaction_at=2_000)  # a threshold of the request's own: asked at every call
    by_size = p.rates_by_size(caching, terms)
    for n in (1_000, 2_000, edge + 1, 1_000):
        assert by_size(n) == p.worst_rates(n, caching, terms), n


def test_the_guard_prices_each_check_at_the_prices_and_caching_it_is_given():
    """The tracker keeps the rates it made for one set of prices (and caching, and terms) only while they are the
    ones asked for: a check at other prices or caching is priced at those."""
    import asyncio

    from agentlab._engine.input_tracker import InputTracker
    from agentlab.budget import Budget

    messages = [{"role": "user", "content": "go " * 400}]
    tracker = InputTracker(None, [], messages, can_count=False)
    cheap, dear = al.Prices(input=1.0, output=5.0), al.Prices(input=10.0, output=50.0, cache_write=40.0)
    budget = Budget(max_cost=100.0)

    async def worst(prices: al.Prices, caching: bool) -> float:
        await tracker.check(
            budget,
            steps=0,
            spent=0.0,
            prices=prices,
            caching=caching,
            tools=[],
            max_tokens=1000,
            count=lambda: None,  # type: ignore[arg-type,return-value]  # never asked: can_count=False
            retryable=lambda e: False,
            now=lambda: 0.0,
        )
        assert tracker.last is not None
        return tracker.last.worst_case

    def expected(prices: al.Prices, caching: bool) -> float:
        inp, out = prices.worst_rates(tracker.bound, caching)
        return tracker.bound * inp + 1000 * out

    for prices, caching in ((cheap, False), (dear, False), (dear, True), (cheap, False)):
        assert asyncio.run(worst(prices, caching)) == expected(prices, caching)


def _models_priced_by_the_hour() -> list[tuple[str, str]]:
    from genai_prices.data_snapshot import get_snapshot

    return [
        (p.id, m.id)
        for p in get_snapshot().providers
        for m in p.models
        if isinstance(m.prices, list) and any(hasattr(c.constraint, "start_time") for c in m.prices)
    ]


def test_a_price_the_table_varies_by_the_hour_reads_the_same_at_any_hour_and_is_the_days_dearest(monkeypatch):
    """DeepSeek's table halves its prices from 16:30 to 00:30 UTC: a lookup read the hour it ran at, so one recorded
    run cost twice as much at noon as in the evening (and the memo on disk kept the first). Every such model in the
    table, looked up at six hours of the day, reads one price: the dearest the day holds."""
    import datetime as dt

    import genai_prices.data_snapshot as gsnapshot
    import genai_prices.types as gtypes

    from agentlab import pricing

    real = dt.datetime

    def at(hour: int) -> dt.datetime:
        return real(2026, 12, 7, hour, 0, tzinfo=dt.UTC)

    class Clock(real):
        hour = 0

        @classmethod
        def now(cls, tz=None):  # genai-prices' "now", which a lookup without a time reads
            return at(cls.hour)

    for module in (gsnapshot, gtypes):
        monkeypatch.setattr(module, "datetime", Clock)
    one = GUsage(input_tokens=1, output_tokens=1)
    by_the_hour = _models_priced_by_the_hour()
    if not by_the_hour:  # genai-prices 0.2.5 lists five (DeepSeek's); a later table may list none
        pytest.skip("the installed genai-prices prices no model by the hour of the day")
    for provider, model in by_the_hour:
        seen = set()
        for Clock.hour in (1, 5, 12, 17, 20, 23):
            seen.add(pricing._provider_prices.__wrapped__(model, provider, "2026-12-07"))
        dearest = max(  # every minute of the day
            calc_price(
                one, model_ref=model, provider_id=provider, genai_request_timestamp=at(0) + dt.timedelta(minutes=m)
            ).total_price
            for m in range(24 * 60)
        )
        assert len(seen) == 1, f"{provider}:{model} reads {len(seen)} prices through the day: {seen}"
        (prices,) = seen
        assert prices.input + prices.output == pytest.approx(float(dearest) * 1e6), f"{provider}:{model}"
    provider, model = by_the_hour[0]
    engine = set()
    for Clock.hour in (3, 18):
        engine.add(pricing._lookup_prices.__wrapped__(model, provider, "2026-12-07"))  # the engine's own lookup
    assert len(engine) == 1


def test_a_price_memoized_before_a_change_the_table_dates_is_looked_up_again_on_that_day(tmp_path, monkeypatch):
    """genai-prices dates price changes ahead of time (o3's price fell to a fifth on 2025-06-10). The memo on
    disk says until when each price holds: the day the change comes, the price is looked up again, in a running
    process and in a fresh one alike, and the new price is memoized with its own days."""
    from agentlab import _price_cache as memo
    from agentlab.pricing import resolve_prices

    monkeypatch.setenv("AGENTLAB_CACHE", str(tmp_path))

    def a_fresh_process_on(day: str) -> None:
        monkeypatch.setattr(memo, "_memo", None)
        monkeypatch.setattr(memo, "_built", [None, {}])
        monkeypatch.setattr(memo, "_day", [day, float("inf")])

    a_fresh_process_on("2025-06-09")
    assert resolve_prices("o3", None).input == 10.0
    memo._day[0] = "2025-06-10"  # the same process, the next day
    assert resolve_prices("o3", None).input == 2.0
    a_fresh_process_on("2025-05-01")  # the file holds the new price now: an earlier day looks up again
    assert resolve_prices("o3", None).input == 10.0
    a_fresh_process_on("2026-01-01")
    assert resolve_prices("o3", None).input == 2.0
    (entry,) = memo._memos(tmp_path / memo.FILE).values()
    assert entry["o3"]["from"] == "2025-06-10" and entry["o3"]["until"] is None
    assert resolve_prices("o3", None, on="2025-06-09").input == 10.0  # a call made that day, as billed then

"""The money rules one at a time, at the unit level: what a call is billed, what the cost guard prices before
it, and what a shared total holds for it.

Each test guards a rule a changed line of ``pricing.py``, ``budget.py`` or ``_account.py`` would break
(``make mutate``). Expected bills come from genai-prices' own ``calc_price`` where it has the rule, else from
the figure the rule's source states (named at the test)."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace

import pytest
from genai_prices import Usage as GUsage
from genai_prices import calc_price
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlab._account import Account, Charge, Hold, Refusal, partial_usage
from agentlab.budget import (
    DEFAULT_SERVER_TOOL_FEES,
    MIN_REPLY_TOKENS,
    Budget,
    BudgetSnapshot,
    GuardReport,
    Stop,
    affordable_max_tokens,
    bound_and_estimate,
    check_after_step,
    check_before_call,
    check_call,
    guard_call,
    input_bound,
    needs_exact_count,
    request_input_bound,
    server_tool_fees,
    worst_case_cost,
)
from agentlab.experiments import TotalLedger
from agentlab.messages import Iteration, Usage, estimate_tokens
from agentlab.pricing import (
    Prices,
    RequestTerms,
    hard_guard_refusal,
    lookup_prices,
    provider_prices,
    served_prices,
    server_tool_passes,
)
from agentlab.vocab import StopReason

MODELS = ("claude-sonnet-4-5", "claude-opus-4-6", "claude-haiku-4-5")
"""A model with a long-context tier (Sonnet 4.5: past 200k input tokens), and two without."""


def _genai_bill(model: str, usage: Usage, batch: bool) -> float:
    """genai-prices' bill for ``usage`` (its input counts cache tokens in; Anthropic's does not)."""
    return float(
        calc_price(
            GUsage(
                input_tokens=usage.context_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_input_tokens,
                cache_write_tokens=usage.cache_creation_input_tokens,
                cache_write_1h_tokens=usage.cache_creation_1h_input_tokens,
                web_searches=usage.web_search_requests,
            ),
            model_ref=model,
            provider_id="anthropic",
            price_context={"processing": "batch"} if batch else None,
        ).total_price
    )


# ------------------------------------------------------------------ the bill


@settings(max_examples=80, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    uncached=st.integers(0, 300_000),
    output=st.integers(0, 64_000),
    read=st.integers(0, 200_000),
    write=st.integers(0, 60_000),
    one_hour=st.floats(0, 1),
    searches=st.integers(0, 5),
    batch=st.booleans(),
)
@example("claude-sonnet-4-5", 200_000, 10, 0, 0, 0.0, 0, False)  # at the tier's start: base rates
@example("claude-sonnet-4-5", 199_999, 10, 0, 2, 0.0, 0, False)  # one past it, through a cache write
@example("claude-sonnet-4-5", 190_000, 10, 0, 10_000, 1.0, 0, False)  # at the start, one-hour writes: base rates
@example("claude-sonnet-4-5", 150_000, 10, 40_000, 20_000, 1.0, 0, True)  # past it, batch, 1h writes
def test_a_call_is_billed_what_genai_prices_charges_for_it(
    model, uncached, output, read, write, one_hour, searches, batch
):
    """Every token kind, the long-context tier, one-hour writes, web searches and batch results, on the table's
    prices, against genai-prices' own calculation. (Under batch, web search keeps its $10 per 1,000: genai-prices'
    batch variant lists no search fee, so the fee is added to its token bill.)"""
    usage = Usage(
        uncached,
        output,
        cache_creation_input_tokens=write,
        cache_read_input_tokens=read,
        cache_creation_1h_input_tokens=math.floor(write * one_hour),
        web_search_requests=searches,
        service_tier="batch" if batch else None,
    )
    if batch:
        expected = _genai_bill(model, replace(usage, web_search_requests=0), batch) + searches * 10 / 1000
    else:
        expected = _genai_bill(model, usage, batch)
    assert lookup_prices(model).cost(usage) == pytest.approx(expected, rel=1e-9, abs=1e-12)


RATES = Prices(
    input=3.0,
    output=15.0,
    cache_read=0.3,
    cache_write=3.75,
    tier_start=1000,
    tier_input=6.0,
    tier_output=22.5,
    tier_cache_read=0.6,
    tier_cache_write=7.5,
    cache_write_1h=6.0,
    variants={"speed=fast": {"input": 18.0, "output": 90.0}},
)
"""A price table written by hand (USD per million tokens), with a tier from 1,000 input tokens and fast mode."""
M = 1_000_000


@pytest.mark.parametrize("uncached", [100, 5000], ids=["below the tier", "past the tier"])
def test_a_batch_result_costs_half_of_every_token_where_the_table_lists_no_batch_rates(uncached):
    """Anthropic's batch pricing: 50 % of the standard rates on every token kind; web search keeps its fee."""
    usage = Usage(uncached, 300, cache_creation_input_tokens=400, cache_read_input_tokens=200)
    usage_1h = replace(usage, cache_creation_1h_input_tokens=100)
    for u in (usage, usage_1h):
        standard = RATES.cost(u)
        batch = RATES.cost(replace(u, service_tier="batch", web_search_requests=2))
        assert batch == pytest.approx(standard / 2 + 2 * 10 / 1000, rel=1e-12)


def test_a_one_hour_cache_write_costs_twice_the_base_input_where_the_table_lists_no_rate():
    """Anthropic's pricing page: a one-hour write is 2x the base input rate (a five-minute one 1.25x); past a
    long-context tier, 2x the tier's input rate even where the table lists a one-hour rate below it."""
    plain = Prices(input=3.0, output=15.0, cache_write=3.75)
    assert plain.cost(Usage(0, 0, cache_creation_input_tokens=M, cache_creation_1h_input_tokens=M)) == pytest.approx(
        6.0
    )
    below = Usage(100, 0, cache_creation_input_tokens=500, cache_creation_1h_input_tokens=500)
    assert RATES.cost(below) == pytest.approx((100 * 3.0 + 500 * 6.0) / M)
    past = Usage(100, 0, cache_creation_input_tokens=1000, cache_creation_1h_input_tokens=1000)
    assert RATES.cost(past) == pytest.approx((100 * 6.0 + 1000 * 12.0) / M)


def test_server_tool_requests_are_billed_per_request_at_each_tool_s_fee():
    """Web search $10 per 1,000 (the default fee); a web fetch fee, when a table sets one, on top."""
    prices = Prices(input=3.0, output=15.0, web_fetch=0.002)
    usage = Usage(0, 0, web_search_requests=2, web_fetch_requests=3)
    assert prices.cost(usage) == pytest.approx(2 * 10 / 1000 + 3 * 0.002)
    assert Prices(input=1.0, output=1.0).web_search == 10 / 1000
    # web fetch has no fee beyond the tokens of what it fetched (Anthropic's web fetch tool page)
    assert lookup_prices("claude-sonnet-4-5").cost(Usage(0, 0, web_fetch_requests=5)) == 0.0


def test_us_only_inference_costs_1_1x_on_tokens_and_standard_regions_cost_1x_without_a_warning():
    """Anthropic's data-residency pricing: ``inference_geo: "us"`` is 1.1x on tokens, not on server-tool fees;
    global routing and a model without data residency are standard, and no warning is given for them."""
    prices = Prices(input=3.0, output=15.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert prices.cost(Usage(M, 0, inference_geo="us", web_search_requests=1)) == pytest.approx(3.3 + 0.01)
        for geo in ("global", "not_available", None):
            assert prices.cost(Usage(M, 0, inference_geo=geo)) == pytest.approx(3.0)
            assert prices.worst_rates(10, False, RequestTerms(inference_geo=geo)) == (3.0 / M, 15.0 / M)
    with pytest.warns(UserWarning, match="'mars'"):
        assert prices.cost(Usage(M, 0, inference_geo="mars")) == pytest.approx(3.0)


def test_a_fast_mode_reply_is_billed_at_the_fast_rates_and_a_standard_one_at_the_standard_rates():
    assert RATES.cost(Usage(500, 100, speed="fast")) == pytest.approx((500 * 18.0 + 100 * 90.0) / M)
    assert RATES.cost(Usage(500, 100, speed="standard")) == pytest.approx((500 * 3.0 + 100 * 15.0) / M)
    assert RATES.cost(Usage(500, 100)) == pytest.approx((500 * 3.0 + 100 * 15.0) / M)


def test_an_advisor_pass_is_billed_at_the_advisor_model_s_rates_and_a_compaction_pass_at_the_call_s():
    """Passes in ``usage.iterations`` are billed on top of the top-level counts: an advisor's at its own model's
    table prices (claude-haiku-4-5: $1 / $5 per million), a compaction pass at the call's own prices."""
    haiku = lookup_prices("claude-haiku-4-5")
    advisor = Iteration("advisor_message", Usage(M, M), model="claude-haiku-4-5")
    compaction = Iteration("compaction", Usage(100, 100))
    usage = Usage(100, 100, iterations=(advisor, compaction))
    assert RATES.cost(usage) == pytest.approx(2 * (100 * 3.0 + 100 * 15.0) / M + haiku.input + haiku.output)
    assert (haiku.input, haiku.output) == (1.0, 5.0)


def test_a_free_model_has_prices_and_a_negative_or_missing_rate_is_refused():
    assert Prices(input=0, output=0).cost(Usage(M, M)) == 0.0
    for bad in (-1.0, float("nan"), None):
        with pytest.raises(ValueError, match="Prices.input"):
            Prices(input=bad, output=1.0)  # type: ignore[arg-type]


def test_a_reply_that_names_no_model_or_the_requested_one_is_billed_at_the_run_s_prices():
    table = lookup_prices("claude-sonnet-4-5")
    assert served_prices(table, "claude-sonnet-4-5", None) is table
    assert served_prices(table, "claude-sonnet-4-5", "claude-sonnet-4-5") is table
    assert served_prices(table, "claude-sonnet-4-5", "claude-haiku-4-5") == lookup_prices("claude-haiku-4-5")
    assert served_prices(RATES, "claude-sonnet-4-5", "claude-haiku-4-5") is RATES  # the caller's prices stay
    assert served_prices(None, "claude-sonnet-4-5", "claude-haiku-4-5") is None


# ------------------------------------------------------------------ the guard's worst case


def test_the_guard_prices_a_call_within_10_percent_of_the_long_context_tier_at_the_tier():
    """An input estimate can be short by 10 %: from 90 % of the tier's start, the worst case is the tier's."""
    assert RATES.worst_rates(900, False) == (3.0 / M, 15.0 / M)
    assert RATES.worst_rates(901, False) == (6.0 / M, 22.5 / M)
    assert RATES.rates_by_size(False)(900) == (3.0 / M, 15.0 / M)
    assert RATES.rates_by_size(False)(901) == (6.0 / M, 22.5 / M)
    assert RATES.worst_rates(900, False, RequestTerms()) == (3.0 / M, 15.0 / M)  # terms asking nothing change nothing


def test_the_guard_prices_the_input_at_the_cache_write_rate_when_the_call_may_write_to_the_cache():
    assert RATES.worst_rates(100, True) == (3.75 / M, 15.0 / M)
    assert RATES.worst_rates(100, "1h") == (6.0 / M, 15.0 / M)
    assert RATES.worst_rates(5000, "1h") == (12.0 / M, 22.5 / M)  # past the tier: 2x the tier's input
    no_1h = Prices(input=3.0, output=15.0, cache_write=3.75)
    assert no_1h.worst_rates(100, "1h") == (6.0 / M, 15.0 / M)
    dear_5m = Prices(input=3.0, output=15.0, cache_write=8.0, cache_write_1h=6.0)
    assert dear_5m.worst_rates(100, "1h") == (8.0 / M, 15.0 / M)  # the dearer of the two writes


def test_the_guard_doubles_the_worst_case_of_a_call_large_enough_to_compact_and_adds_the_region():
    plain = Prices(input=3.0, output=15.0)
    at = RequestTerms(compaction_at=1000)
    assert plain.worst_rates(999, False, at) == (3.0 / M, 15.0 / M)
    assert plain.worst_rates(1000, False, at) == pytest.approx((6.0 / M, 30.0 / M))
    us = RequestTerms(compaction_at=1000, inference_geo="us")
    assert plain.worst_rates(1000, False, us) == pytest.approx((6.6 / M, 33.0 / M))


def test_the_guard_prices_a_server_tool_loop_s_every_pass():
    """One web fetch (max_uses 1, results capped at 5,000 tokens) makes two passes: over a 10,000-token request
    the input rate covers 2 x 10,000 + 5,000 tokens (2.5x), the output rate two replies and the first one read
    again by the second pass (2x output + 1x input)."""
    fetch = {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 1, "max_content_tokens": 5000}
    passes, added, unbounded = server_tool_passes([fetch])
    assert (passes, added, unbounded) == (2, 5000, None)
    plain = Prices(input=3.0, output=15.0)
    terms = RequestTerms(passes=passes, pass_input=added)
    assert plain.worst_rates(10_000, False, terms) == pytest.approx((7.5 / M, 33.0 / M))


def test_the_guard_prices_a_call_that_a_fallback_model_may_serve_at_the_dearer_of_the_two():
    haiku = lookup_prices("claude-haiku-4-5")
    opus = lookup_prices("claude-opus-4-6")
    terms = RequestTerms(models=("claude-opus-4-6",))
    assert haiku.worst_rates(100, False, terms) == (opus.input / M, opus.output / M)
    assert opus.worst_rates(100, False, RequestTerms(models=("claude-haiku-4-5",))) == (opus.input / M, opus.output / M)
    with pytest.raises(ValueError, match="no price is known for the fallback model"):
        haiku.worst_rates(100, False, RequestTerms(models=("no-such-model",)))


TOOL_TYPES = {
    "web_fetch_20250910": "max_content_tokens",
    "advisor_20260301": "max_tokens",
    "tool_search_tool_regex_20251119": None,
}


@settings(max_examples=60, deadline=None)
@given(
    tools=st.lists(
        st.tuples(st.sampled_from(sorted(TOOL_TYPES)), st.integers(0, 5), st.integers(0, 20_000)), max_size=4
    ),
    client=st.integers(0, 2),
)
def test_a_request_s_passes_are_one_plus_every_server_tool_s_uses_and_their_results_are_capped(tools, client):
    """Client tools run no pass inside the call; each capped server tool use may start one more pass and add at
    most its cap (tool search adds nothing: it loads definitions the request carries)."""
    defs: list[dict] = [{"name": f"c{i}", "input_schema": {"type": "object"}} for i in range(client)]
    defs += [{"type": "bash_20250124", "name": "bash"}] * min(client, 1)
    for kind, uses, cap in tools:
        field = TOOL_TYPES[kind]
        defs.append({"type": kind, "name": kind, "max_uses": uses, **({field: cap} if field else {})})
    expected_added = sum(uses * (cap if TOOL_TYPES[kind] else 0) for kind, uses, cap in tools)
    assert server_tool_passes(defs) == (1 + sum(uses for _, uses, _ in tools), expected_added, None)


def test_a_server_tool_nothing_caps_makes_the_request_unbounded_and_the_hard_guard_refuses_it():
    assert server_tool_passes(None) == (1, 0, None)
    for tool, why in [
        ({"type": "web_search_20250305", "name": "search", "max_uses": 2}, "no documented cap"),
        ({"type": "web_fetch_20250910", "name": "fetch"}, "no max_uses"),
        ({"type": "web_fetch_20250910", "name": "fetch", "max_uses": 1}, "without max_content_tokens"),
        ({"type": "brand_new_tool_20270101", "name": "new"}, "cannot bound"),
    ]:
        _, _, unbounded = server_tool_passes([tool])
        assert unbounded is not None and why in unbounded
        sentence = hard_guard_refusal(RequestTerms(unbounded=unbounded))
        assert sentence is not None and unbounded in sentence and "Nothing was sent" in sentence
    assert hard_guard_refusal(None) is None and hard_guard_refusal(RequestTerms()) is None


def test_web_search_fees_are_reserved_at_10_dollars_per_1000_uses_up_to_max_uses():
    """Anthropic's pricing page: web search is $10 per 1,000 searches."""
    assert DEFAULT_SERVER_TOOL_FEES == {"web_search": 10 / 1000}
    tools = [{"type": "web_search_20250305", "max_uses": 3}, {"type": "custom"}]
    assert server_tool_fees(tools, DEFAULT_SERVER_TOOL_FEES) == pytest.approx(0.03)


# ------------------------------------------------------------------ what a shared total holds


@settings(max_examples=150, deadline=None)
@given(
    limit=st.floats(1e-4, 2.0),
    spent_share=st.floats(0.0, 1.0),
    input_tokens=st.integers(0, 300_000),
    max_tokens=st.integers(1, 64_000),
    in_rate=st.floats(0.0, 2e-5),
    out_rate=st.floats(1e-7, 1e-4),
    fees=st.sampled_from([0.0, 0.01, 0.05]),
)
def test_a_reservation_never_exceeds_what_is_left_and_the_call_it_allows_fits_it(
    limit, spent_share, input_tokens, max_tokens, in_rate, out_rate, fees
):
    """Against an experiment's total: a call is refused only when not even the smallest reply fits what is left
    (and then nothing stays held); otherwise the hold is within what was left, the ``max_tokens`` it allows fit
    it, a lost reply is charged no more than was held, and a call that fits whole keeps its ``max_tokens``."""
    spent = limit * spent_share
    left = limit - spent
    ledger = TotalLedger(limit, spent=spent)
    want = worst_case_cost(input_tokens, in_rate, out_rate, max_tokens)
    smallest = min(MIN_REPLY_TOKENS, max_tokens)
    least = worst_case_cost(input_tokens, in_rate, out_rate, smallest)
    got = Account("r", ledger).reserve(input_tokens, (in_rate, out_rate), max_tokens, worst=want + fees)
    if isinstance(got, Refusal):
        assert least > left * (1 - 1e-12) and ledger.reserved == 0.0
        assert got.needed == pytest.approx(least) and got.left == pytest.approx(left)
        return
    assert isinstance(got, Hold) and ledger.reserved == got.reserved <= left * (1 + 1e-12)
    assert smallest <= got.max_tokens <= max_tokens
    assert input_tokens * in_rate + got.max_tokens * out_rate <= got.reserved * (1 + 1e-9)
    at_allowed = worst_case_cost(input_tokens, in_rate, out_rate, got.max_tokens, fees)
    assert got.worst == pytest.approx(min(at_allowed, got.reserved), rel=1e-9, abs=1e-15)
    if want <= left:
        assert (got.max_tokens, got.reserved) == (max_tokens, want)
    else:
        assert got.max_tokens == max(
            smallest, affordable_max_tokens(got.reserved, input_tokens, in_rate, out_rate, max_tokens)
        )


IN_RATE, OUT_RATE = 2.0**-20, 2.0**-18  # exact in binary, so the boundaries below are exact too
LEAST = 1024 * IN_RATE + MIN_REPLY_TOKENS * OUT_RATE  # 1,024 input tokens and the smallest reply
WHOLE = 1024 * IN_RATE + 64 * OUT_RATE  # ... and the 64 output tokens asked for


def test_a_total_with_exactly_the_call_s_worst_case_left_grants_it_whole():
    hold = Account("r", TotalLedger(WHOLE)).reserve(1024, (IN_RATE, OUT_RATE), 64, worst=WHOLE)
    assert hold == Hold(64, WHOLE, WHOLE)


def test_a_total_with_exactly_the_smallest_reply_left_grants_that_reply():
    hold = Account("r", TotalLedger(LEAST)).reserve(1024, (IN_RATE, OUT_RATE), 64, worst=WHOLE)
    assert hold == Hold(MIN_REPLY_TOKENS, LEAST, LEAST)


class _Grants:
    """A shared total that grants what it is told to (a remote one may grant less than the minimum asked)."""

    def __init__(self, grant: float) -> None:
        self.grant = grant
        self.settled: list[tuple[float, float]] = []

    def reserve(self, run_id: str, amount: float, minimum: float) -> float:
        return self.grant

    def settle(self, run_id: str, reserved: float, actual: float) -> None:
        self.settled.append((reserved, actual))


@pytest.mark.parametrize("grant", [LEAST / 2, LEAST * 0.999, 0.0])
def test_a_grant_short_of_the_smallest_reply_is_a_refusal_and_what_was_granted_is_given_back(grant):
    ledger = _Grants(grant)
    got = Account("r", ledger).reserve(1024, (IN_RATE, OUT_RATE), 64, worst=WHOLE)
    assert isinstance(got, Refusal) and got.who == "experiment" and got.needed == LEAST
    assert ledger.settled == ([(grant, 0.0)] if grant else [])  # given back, at no cost; nothing to give back


def test_a_sub_run_s_cost_and_tokens_add_to_its_parent_s_totals():
    account = Account("parent")
    account.add_sub_run(0.25)
    account.add_sub_run(0.5)
    account.add_tokens(100, 20)
    account.add_tokens(30, 4)
    assert (account.spent, account.input_tokens, account.output_tokens) == (0.75, 130, 24)


def test_the_default_budget_is_8_steps_50_cents_60_seconds_under_the_hard_guard():
    """The limits a run gets when it names none (``Budget``'s documented defaults)."""
    assert Budget() == Budget(max_steps=8, max_cost=0.50, deadline_s=60.0, cost_guard="hard")
    assert (Budget().max_steps, Budget().max_cost, Budget().deadline_s) == (8, 0.5, 60.0)


# ------------------------------------------------------------------ the pre-call guard


@settings(max_examples=150, deadline=None)
@given(
    max_cost=st.floats(1e-3, 5.0),
    spent_share=st.floats(0.0, 1.2),
    input_tokens=st.integers(0, 300_000),
    in_rate=st.floats(0.0, 2e-5),
    out_rate=st.floats(1e-7, 1e-4),
    max_tokens=st.integers(1, 64_000),
    fees=st.sampled_from([0.0, 0.01, 0.05]),
)
def test_the_hard_guard_lets_a_call_through_only_with_a_worst_case_that_fits_what_is_left(
    max_cost, spent_share, input_tokens, in_rate, out_rate, max_tokens, fees
):
    """The ``max_tokens`` it allows keep the call's worst case (server-tool fees in) within what is left, and no
    more than asked; it stops the run only when not even the smallest reply would fit."""
    spent = max_cost * spent_share
    budget = Budget(max_steps=None, max_cost=max_cost, deadline_s=None)
    decided = guard_call(
        budget,
        steps=3,
        spent=spent,
        est_input_tokens=input_tokens,
        input_rate=in_rate,
        output_rate=out_rate,
        max_tokens=max_tokens,
        fees=fees,
    )
    left = max_cost - spent
    smallest = min(MIN_REPLY_TOKENS, max_tokens)
    if isinstance(decided, Stop):
        assert decided.reason == StopReason.BUDGET and "after step 3" in decided.detail
        assert worst_case_cost(input_tokens, in_rate, out_rate, smallest, fees) > left * (1 - 1e-9)
        return
    assert smallest <= decided <= max_tokens
    assert worst_case_cost(input_tokens, in_rate, out_rate, decided, fees) <= left * (1 + 1e-9) + 1e-15
    if worst_case_cost(input_tokens, in_rate, out_rate, max_tokens, fees) <= left * (1 - 1e-6):
        assert decided == max_tokens  # it fits whole: nothing taken off
    for unguarded in (Budget(max_cost=None), Budget(max_cost=max_cost, cost_guard="after")):
        assert guard_call(unguarded, steps=3, spent=spent, est_input_tokens=input_tokens, input_rate=in_rate,
                          output_rate=out_rate, max_tokens=max_tokens, fees=fees) == max_tokens  # fmt: skip


def test_a_call_whose_smallest_reply_just_fits_is_made_with_that_reply():
    """What is left covers the input and 32.5 output tokens: the call is made, lowered to 32 (the smallest reply)."""
    budget = Budget(max_cost=1024 * IN_RATE + 32.5 * OUT_RATE, cost_guard="hard")
    kwargs = {"steps": 1, "spent": 0.0, "est_input_tokens": 1024, "input_rate": IN_RATE, "output_rate": OUT_RATE}
    assert guard_call(budget, max_tokens=64, **kwargs) == MIN_REPLY_TOKENS
    assert guard_call(budget, max_tokens=10, **kwargs) == 10  # asking for fewer than 32: the smallest is the ask
    assert isinstance(guard_call(budget, max_tokens=64, fees=OUT_RATE, **kwargs), Stop)  # a fee takes its share


def _rates(n: int) -> tuple[float, float]:
    return (IN_RATE, OUT_RATE) if n < 10_000 else (2 * IN_RATE, 2 * OUT_RATE)


def _check(budget: Budget, **kw):
    args = {"steps": 2, "spent": 0.0, "estimate": 900, "bound": 1024, "billed_by_estimate": False, "fees": 0.0}
    args |= {"rates": _rates, "max_tokens": 64}
    return check_call(budget, **(args | kw))


def test_an_unguarded_call_says_why_and_is_still_priced_at_its_worst_on_the_bound():
    for budget, why in [
        (Budget(max_cost=None), "not guarded: no max_cost"),
        (Budget(max_cost=1.0, cost_guard="after"), 'not guarded: cost_guard="after"'),
    ]:
        check = _check(budget, fees=0.5)
        assert (check.basis, check.why, check.max_tokens, check.stop) == (None, why, 64, None)
        assert check.worst_case == worst_case_cost(1024, IN_RATE, OUT_RATE, 64, 0.5)
        assert check.input_bound == 1024 and check.input_tokens == 900
        assert not check.wants_count and not check.counted  # nothing to decide: no count is asked for
        assert check.event_fields() == {"input_bound": 1024, "can_count": True}
    uncapped = _check(Budget(max_cost=None), fees=None)  # (uncapped fees: the worst case on what is known)
    assert uncapped.worst_case == WHOLE and uncapped.fees is None
    check = _check(Budget(max_cost=1.0), rates=None)
    assert (check.basis, check.why, check.worst_case) == (None, "not guarded: no prices", 0.0)


def test_the_hard_guard_rests_on_the_bound_far_from_the_limit_and_asks_for_a_count_near_it():
    far = _check(Budget(max_cost=1.0))
    assert (far.basis, far.input_tokens, far.wants_count, far.max_tokens, far.counted) == (
        "bounded",
        1024,
        False,
        64,
        False,
    )
    assert far.worst_case == WHOLE and far.why.startswith("at most 1024 input tokens: worst case $")
    exact_fit = _check(Budget(max_cost=WHOLE))  # the worst case on the bound is exactly what is left: it fits
    assert (exact_fit.basis, exact_fit.wants_count) == ("bounded", False)
    near = _check(Budget(max_cost=WHOLE), spent=OUT_RATE)
    assert near.wants_count and near.basis == "bounded"
    counted = _check(Budget(max_cost=WHOLE), spent=OUT_RATE, counted=1000)
    assert (counted.basis, counted.input_tokens, counted.counted, counted.wants_count) == ("exact", 1000, True, False)
    assert counted.why.startswith("counted 1000 input tokens")


def test_the_guard_takes_the_estimate_where_nothing_better_holds():
    """``cost_guard="estimate"``, and uncapped server-tool fees, leave the estimate; a model billed by the
    estimate (no usage reported) makes the estimate exact."""
    for check in (_check(Budget(max_cost=1.0, cost_guard="estimate")), _check(Budget(max_cost=1.0), fees=None)):
        assert (check.basis, check.input_tokens, check.wants_count) == ("estimated", 900, False)
        assert check.why.startswith("about 900 input tokens")
    billed = _check(Budget(max_cost=1.0), billed_by_estimate=True)
    assert (billed.basis, billed.input_tokens, billed.counted, billed.wants_count) == ("exact", 900, False, False)


def test_a_stopped_check_is_priced_at_the_smallest_reply_and_a_lowered_one_at_what_it_allows():
    stopped = _check(Budget(max_cost=LEAST / 2))
    assert isinstance(stopped.outcome, Stop) and stopped.max_tokens == MIN_REPLY_TOKENS
    assert stopped.worst_case == LEAST and stopped.why == stopped.stop.detail
    lowered = _check(Budget(max_cost=1024 * IN_RATE + 40.5 * OUT_RATE))
    assert lowered.outcome == lowered.max_tokens == 40 and "max_tokens lowered to 40" in lowered.why
    assert lowered.worst_case == 1024 * IN_RATE + 40 * OUT_RATE
    big = _check(Budget(max_cost=1.0), bound=20_000)  # past 10,000 tokens the rates double
    assert big.worst_case == 20_000 * 2 * IN_RATE + 64 * 2 * OUT_RATE


def test_a_run_stops_after_a_step_that_spent_past_max_cost_at_its_deadline_or_at_its_step_limit():
    budget = Budget(max_steps=3, max_cost=1.0, deadline_s=10.0)
    assert check_after_step(budget, 2, 1.0, 9.99) is None  # exactly max_cost spent is within it
    assert check_after_step(budget, 2, 1.0 + 1e-9, 0.0).reason == StopReason.BUDGET
    assert check_after_step(budget, 2, 0.5, 10.0).reason == StopReason.DEADLINE
    assert check_after_step(budget, 3, 0.5, 0.0).reason == StopReason.STEP_LIMIT
    assert check_before_call(budget, 2, 9.99) is None
    assert check_before_call(budget, 3, 0.0).reason == StopReason.STEP_LIMIT
    assert check_before_call(budget, 2, 10.0).detail == "10.00s of 10s used before step 3"
    assert check_after_step(Budget(max_steps=None, max_cost=None, deadline_s=None), 10**6, 10.0, 10.0**6) is None


def test_a_budget_s_share_used_is_used_over_its_limit_and_none_without_one():
    snap = BudgetSnapshot(steps=2, max_steps=8, spent=0.1, max_cost=0.4, elapsed=15.0, deadline_s=None)
    assert (snap.fraction("steps"), snap.fraction("cost"), snap.fraction("time")) == (0.25, 0.25, None)
    assert str(snap) == "steps 2/8 · $0.1000/$0.40 · 15.0s/∞s"


# ------------------------------------------------------------------ the input bound


TEXT = st.text(max_size=200)
BLOCKS = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}), min_size=1, max_size=4)
MESSAGES = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": TEXT | BLOCKS})


def _json_bytes(obj) -> int:
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


@settings(max_examples=80, deadline=None)
@given(messages=st.lists(MESSAGES, max_size=4), system=TEXT, tools=st.integers(0, 2))
def test_the_input_bound_is_every_byte_of_the_request_plus_its_framing(messages, system, tools):
    """No tokenizer makes a token shorter than a byte: the bound is the request's UTF-8 JSON bytes, plus 16 tokens a
    message and 8 a block (a string content is one block), plus 1,024 for the hidden tool prompt when tools are
    offered; the engine's one-pass measure (:func:`bound_and_estimate`) agrees with the two rules it stands for."""
    defs = [{"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(tools)]
    framing = sum(16 + 8 * (len(m["content"]) if isinstance(m["content"], list) else 1) for m in messages)
    expected = sum(_json_bytes(m) for m in messages) + framing
    expected += (len(system.encode("utf-8", "surrogatepass")) + 8 if system else 0) + (
        sum(_json_bytes(t) + 8 for t in defs) + 1024 if defs else 0
    )
    assert request_input_bound(system or None, defs, messages) == expected
    for m in messages:
        assert bound_and_estimate(m) == (input_bound(m), estimate_tokens(m))
    assert bound_and_estimate(messages) == (input_bound(messages), estimate_tokens(messages))
    assert bound_and_estimate(system) == (input_bound(system), estimate_tokens(system))
    assert input_bound(10**30) == len(str(10**30)) + 8  # a value orjson cannot write is measured all the same


def test_a_fee_charging_server_tool_is_reserved_up_to_its_max_uses_and_a_free_one_costs_nothing():
    per_use = {"web_search": 0.01, "free_tool": 0.0}
    tools = [{"type": "web_search_20250305", "max_uses": 4}, {"type": "free_tool_1"}, {"type": "custom"}, {}]
    assert server_tool_fees(tools, per_use) == pytest.approx(0.04)
    assert server_tool_fees([{"type": "web_search_20250305"}], per_use) is None
    assert server_tool_fees([{"type": "web_search_20250305", "max_uses": 0}], per_use) == 0.0


def test_server_tool_fees_count_in_the_guard_s_worst_case_and_its_sentences_say_what_was_left():
    fee = 8 * OUT_RATE
    limit = WHOLE + fee + OUT_RATE / 2  # the call, its fee, and half a token to spare
    fits = _check(Budget(max_cost=limit), fees=fee)
    assert (fits.max_tokens, fits.worst_case, fits.fees) == (64, WHOLE + fee, fee)
    assert fits.why.endswith(f"worst case ${WHOLE + fee:.4f} of ${limit:.4f} left")
    lowered = _check(Budget(max_cost=limit), fees=fee, spent=16 * OUT_RATE)
    assert (lowered.max_tokens, lowered.worst_case) == (48, WHOLE + fee - 16 * OUT_RATE)
    assert lowered.why.endswith(f"of ${limit - 16 * OUT_RATE:.4f} left, max_tokens lowered to 48")
    stopped = _check(Budget(max_cost=0.01), spent=0.01 - LEAST, fees=OUT_RATE)  # the fee takes the last share
    assert stopped.stop is not None and stopped.worst_case == LEAST + OUT_RATE
    advice = "FunctionModel(count_tokens=...), or cost_guard='estimate'"
    assert stopped.why.endswith(f"more than the ${LEAST:.4f} left. For an exact check use a model that counts "
                                f"tokens (AnthropicModel), {advice}")  # fmt: skip
    counted = _check(Budget(max_cost=0.01), spent=0.01 - LEAST, fees=OUT_RATE, counted=1024)
    assert counted.why == (
        f"spent ${0.01 - LEAST:.4f} of $0.01 after step 2; the next call would cost at least "
        f"${LEAST + OUT_RATE:.4f} (counted 1024 input tokens), more than the ${LEAST:.4f} left"
    )
    fields = counted.event_fields()
    assert (fields["guard_basis"], fields["guard_input_tokens"], fields["guard_fees"]) == ("exact", 1024, OUT_RATE)
    assert "count_error" not in fields and "count_latency" not in fields
    asked = replace(counted, count_error="timeout", count_latency=0.25).event_fields()
    assert (asked["count_error"], asked["count_latency"]) == ("timeout", 0.25)


def test_only_the_hard_guard_with_a_cost_limit_asks_for_an_exact_count_and_only_when_the_bound_does_not_fit():
    kw = {"spent": 0.0, "bound_tokens": 1024, "input_rate": IN_RATE, "output_rate": OUT_RATE, "max_tokens": 64}
    assert not needs_exact_count(Budget(max_cost=WHOLE), **kw)  # the worst case on the bound is what is left
    assert needs_exact_count(Budget(max_cost=WHOLE), **(kw | {"fees": OUT_RATE}))
    assert not needs_exact_count(Budget(max_cost=None), **(kw | {"fees": 1.0}))
    assert not needs_exact_count(Budget(max_cost=WHOLE, cost_guard="estimate"), **(kw | {"fees": 1.0}))


def test_the_run_s_guard_note_says_when_the_guard_was_only_an_estimate_and_by_how_much_it_overspent():
    mixed = GuardReport("estimate", {"exact": 3, "estimated": 1}, estimate_short=0.002, over=0.0125)
    assert mixed.guarantee == "estimated"
    assert mixed.note() == (
        "cost guard was an estimate: input estimates fell $0.0020 short of the bill; spent $0.0125 past max_cost"
    )
    assert GuardReport("estimate", {"estimated": 1}).note().endswith("; spend stayed within max_cost")
    assert GuardReport("hard", {"exact": 2, "bounded": 1}).guarantee == "bounded"
    assert GuardReport("hard", {"exact": 2, "bounded": 1}).note() == ""
    assert GuardReport("after", {"estimated": 1}).note() == ""
    assert GuardReport("after", {}).guarantee is None


@pytest.mark.parametrize(
    "value",
    [
        Budget(),
        BudgetSnapshot(1, 8, 0.1, 0.5, 1.0, 60.0),
        Stop(StopReason.BUDGET, "x"),
        GuardReport("hard", {}),
        Prices(input=1.0, output=2.0),
        RequestTerms(),
        Hold(1, 0.0, 0.0),
        Refusal("experiment", 0.1),
        Charge("usage", 0.1, 0.1, None, 0.0),
        _check(Budget(max_cost=1.0)),
    ],
    ids=lambda v: type(v).__name__,
)
def test_a_budget_and_what_the_guard_decided_cannot_be_changed_after_the_checks(value):
    """A limit is checked once, when the budget is made: assigning past the check would slip an unchecked limit in."""
    import dataclasses

    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, getattr(value, field))


def test_a_table_s_batch_rates_ride_along_with_its_prices_tiers_and_all():
    """genai-prices 0.2.3 lists each Claude model's Message Batches rates as a price variant (half the standard
    rates, tier included; a one-hour write has no tier of its own): the variant is kept as listed."""
    sonnet = lookup_prices("claude-sonnet-4-5").variants
    assert sonnet == {
        "processing=batch": {
            "input": 1.5,
            "tier_input": 3.0,
            "tier_start": 200_000,
            "output": 7.5,
            "tier_output": 11.25,
            "cache_read": 0.15,
            "tier_cache_read": 0.3,
            "cache_write": 1.875,
            "tier_cache_write": 3.75,
            "cache_write_1h": 3.0,
        }
    }
    haiku = lookup_prices("claude-haiku-4-5").variants
    assert haiku == {
        "processing=batch": {
            "input": 0.5,
            "output": 2.5,
            "cache_read": 0.05,
            "cache_write": 0.625,
            "cache_write_1h": 1.0,
        }
    }


def test_a_model_the_table_prices_on_input_only_has_no_chat_prices():
    """An embedding model has an input rate and no output rate: not a model a run can be charged for (``None``)."""
    assert provider_prices("text-embedding-3-small", "openai") is None


def test_a_stream_cut_short_is_charged_for_the_tokens_its_last_event_counted_and_no_more():
    """A count the event leaves out is 0, not a guess."""
    assert partial_usage({"output_tokens": 7}) == Usage(0, 7)
    assert partial_usage({"input_tokens": 5, "cache_read_input_tokens": 3}) == Usage(5, 0, cache_read_input_tokens=3)
    assert partial_usage({"cache_creation_input_tokens": 2}) == Usage(0, 0, cache_creation_input_tokens=2)

"""The hard cost guard stays hard when real tokenization is denser than agentlab's estimate.

Everything here runs the real ``anthropic`` SDK against the local Messages
API server in its dense mode (~1.7 bytes per token, as code, JSON and base64
tokenize): agentlab's estimate (~3 characters per token) is then about half
the truth, which is what let runs end over ``max_cost`` before exact counts.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab.budget import (
    Budget,
    GuardReport,
    input_bound,
    request_input_bound,
    server_tool_fees,
)
from agentlab.lab._state import PanelState
from agentlab.models.anthropic import AnthropicModel
from agentlab.models.base import ModelRequest
from agentlab.models.counting import count_params
from agentlab.testing import MessagesServer

from .helpers import hang

PRICES = al.Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
SYSTEM = "You read files and summarise them."


def dense_payload(n: int, seed: int = 0) -> str:
    """``n`` characters of base64: one byte per character, ~1.7 characters per dense token."""
    raw = random.Random(seed).randbytes(n)
    return base64.b64encode(raw).decode()[:n]


@al.tool(mode="read")
def fetch(n: int, seed: int = 0) -> str:
    """Return n characters of a file."""
    return dense_payload(n, seed)


class Script:
    """The replies of the current run, served by one long-lived server (one dispatcher per request)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def set(self, items: list[dict[str, Any]]) -> None:
        self.items = list(items)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.items.pop(0) if self.items else al.reply("nothing more to read")


def plan(sizes: list[int], outputs: list[int]) -> list[dict[str, Any]]:
    """One fetch per size (with a text of the given length first), then a final answer."""
    items = [
        al.reply(dense_payload(out, 1000 + i) or None, ("fetch", {"n": size, "seed": i}))
        for i, (size, out) in enumerate(zip(sizes, outputs, strict=True))
    ]
    return [*items, al.reply("Summary: " + dense_payload(outputs[-1] if outputs else 10, 99))]


@pytest.fixture(scope="module")
def dense() -> Iterator[tuple[MessagesServer, Script, asyncio.AbstractEventLoop, AnthropicModel]]:
    script = Script()
    loop = asyncio.new_event_loop()
    with MessagesServer(tokenizer="dense") as server:
        server.add(*[script] * 20000)
        model = AnthropicModel("claude-sonnet-4-5", client=server.client())
        yield server, script, loop, model
        assert not asyncio.all_tasks(loop)  # arun closed the model's pool on this loop as each run ended
    loop.close()


def run_on(loop: asyncio.AbstractEventLoop, model: Any, **options: Any) -> tuple[al.Result, list[al.Event]]:
    events: list[al.Event] = []
    options.setdefault("max_steps", None)
    options.setdefault("deadline_s", None)
    options.setdefault("prices", PRICES)
    result = loop.run_until_complete(
        al.arun(
            "Read the files.", [fetch], model=model, trace=False, system=SYSTEM, subscribers=[events.append], **options
        )
    )
    return result, events


def counts_asked(server: MessagesServer, since: int = 0) -> int:
    return sum(1 for r in server.requests[since:] if r.path.startswith("/v1/messages/count_tokens"))


# ------------------------------------------------------------- the endpoint
def test_count_tokens_returns_exactly_the_input_the_call_is_billed_for(dense):
    """The count of a request equals the input (uncached + cache write + read) its call reports."""
    server, script, loop, model = dense
    msgs = [{"role": "user", "content": "Read this: " + dense_payload(5000)}]
    req = ModelRequest(SYSTEM, msgs, [fetch.definition()], 256)
    counted = loop.run_until_complete(model.count_tokens(req))
    script.set([al.reply("ok")])
    reply = loop.run_until_complete(model.complete(req))
    u = reply["usage"]
    assert counted == u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
    assert counted > 1.5 * (5000 / 3)  # dense: far more than the ~3 characters per token estimate


def test_a_reply_longer_than_max_tokens_is_cut_off_there(dense):
    """The local server, like the API, never bills more output than max_tokens."""
    server, script, loop, model = dense
    script.set([al.reply(dense_payload(3000))])
    reply = loop.run_until_complete(model.complete(ModelRequest(None, [{"role": "user", "content": "hi"}], [], 100)))
    assert reply["stop_reason"] == "max_tokens" and reply["usage"]["output_tokens"] == 100


# ------------------------------------------------------ the guard in a run
def test_estimate_guard_overspends_on_dense_content_and_says_so(dense):
    """With cost_guard="estimate" dense tool results push spend past max_cost; the result and panel say by how much."""
    server, script, loop, model = dense
    script.set(plan([40000, 40000, 40000], [200, 200, 200]))
    result, events = run_on(loop, model, max_cost=0.09, cost_guard="estimate")
    assert result.spent > 0.09
    assert result.cost_check is not None and result.cost_check.guarantee == "estimated"
    assert result.cost_check.estimate_short > 0
    note = result.cost_check.note()
    assert note.startswith("cost guard was an estimate: input estimates fell $") and "past max_cost" in note
    panel = PanelState()
    for e in events:
        panel.apply(e)
    assert note in panel.status_line()


def test_hard_guard_stops_the_same_run_within_budget_using_an_exact_count(dense):
    """The run the estimate lets overspend stops under max_cost with the hard guard, after counting."""
    server, script, loop, model = dense
    before = len(server.requests)
    script.set(plan([40000, 40000, 40000], [200, 200, 200]))
    result, events = run_on(loop, model, max_cost=0.09)
    assert result.reason == "budget" and result.spent <= 0.09
    assert "counted" in result.detail
    asked = counts_asked(server, before)
    requests = [e.data for e in events if e.kind == "model_request"]
    assert asked >= 1 and result.cost_check is not None and result.cost_check.input_counts == asked
    assert all(d["count_latency"] >= 0 for d in requests if d.get("guard_basis") == "exact")


def test_far_from_the_limit_no_count_is_asked(dense):
    """A budget the run never approaches costs no extra requests: the bound clears every call."""
    server, script, loop, model = dense
    before = len(server.requests)
    script.set(plan([2000, 2000, 2000], [100, 100, 100]))
    result, events = run_on(loop, model, max_cost=5.0)
    assert result.outcome == "done"
    assert counts_asked(server, before) == 0
    assert {e.data["guard_basis"] for e in events if e.kind == "model_request"} == {"bounded"}


def test_without_the_endpoint_the_guard_falls_back_to_the_byte_bound_and_stays_hard():
    """A proxy that answers 404 for count_tokens: asked once, then the bound decides, and spend stays under."""
    with MessagesServer(
        plan([40000, 40000, 40000], [200, 200, 200]), tokenizer="dense", count_endpoint=False
    ) as server:
        model = AnthropicModel("claude-sonnet-4-5", client=server.client())
        events: list[al.Event] = []
        result = al.run(
            "Read the files.",
            [fetch],
            model=model,
            trace=False,
            prices=PRICES,
            system=SYSTEM,
            max_steps=None,
            max_cost=0.09,
            subscribers=[events.append],
        )
    assert result.spent <= 0.09 and result.reason in ("budget", "max_tokens")
    assert counts_asked(server) == 1
    checks = [e.data for e in events if e.kind == "model_request"] + [
        e.data["last_guard_check"] for e in events if e.kind == "run_finished"
    ]
    failed = [d for d in checks if "count_error" in d]
    assert len(failed) == 1 and "404" in failed[0]["count_error"]
    assert result.cost_check is not None and result.cost_check.guarantee == "bounded"


def test_a_failed_count_is_retried_like_a_model_call():
    """A 529 from count_tokens is retried (and recorded as a retry) before the guard decides on the count."""

    class Flaky(AnthropicModel):
        fails = 1

        async def count_tokens(self, request: ModelRequest) -> int:
            if self.fails:
                self.fails -= 1
                raise al.RetryableError("529 overloaded_error: Overloaded")
            return await super().count_tokens(request)

    with MessagesServer(plan([40000, 40000], [200, 200]), tokenizer="dense") as server:
        events: list[al.Event] = []
        result = al.run(
            "Read the files.",
            [fetch],
            model=Flaky(client=server.client()),
            trace=False,
            prices=PRICES,
            max_steps=None,
            max_cost=0.06,
            policy=al.Policy(base_delay=0.001, jitter=0),
            subscribers=[events.append],
        )
    retries = [e.data for e in events if e.kind == "model_retry"]
    assert [r.get("request") for r in retries] == ["count_tokens"]
    assert result.spent <= 0.06 and result.cost_check is not None and result.cost_check.input_counts >= 1


def test_a_deadline_passing_while_counting_stops_the_run_with_deadline():
    """The count is bounded by the deadline like any call: a count that hangs ends the run with "deadline"."""

    class Hanging(AnthropicModel):
        async def count_tokens(self, request: ModelRequest) -> int:
            await hang()
            return 0

    with MessagesServer(plan([40000], [10]), tokenizer="dense") as server:
        result = al.run(
            "Read.",
            [fetch],
            model=Hanging(client=server.client()),
            trace=False,
            prices=PRICES,
            max_steps=None,
            max_cost=0.002,
            deadline_s=1.0,
        )  # room for set-up, which the deadline counts
    assert result.reason == "deadline" and "counting the input of step 1" in result.detail


# ------------------------------------------------------------------ the proof
class InProcess:
    """The dense server's own answers without HTTP: the same request bodies, tokenizer, cache and guard.

    ``AnthropicModel.build_params`` builds each body (cache breakpoints
    included) exactly as for the SDK; the server answers it in process.
    """

    def __init__(self, server: MessagesServer, **adapter: Any) -> None:
        self.server = server
        import anthropic  # the adapter only builds bodies: its client never sends

        client = anthropic.AsyncAnthropic(base_url="http://127.0.0.1:9", api_key="sk-ant-unused", max_retries=0)
        self.adapter = AnthropicModel("claude-sonnet-4-5", client=client, **adapter)
        self.model, self.caches = self.adapter.model, self.adapter.caches
        self.request_terms = self.adapter.request_terms

    async def complete(self, request: ModelRequest) -> dict[str, Any]:
        return self.server.respond(self.adapter.build_params(request))

    async def count_tokens(self, request: ModelRequest) -> int:
        return self.server.count(count_params(self.adapter.build_params(request)))


def prove(
    server: MessagesServer,
    script: Script,
    loop: asyncio.AbstractEventLoop,
    model: Any,
    runs: int,
    prices: al.Prices = PRICES,
) -> Counter[str]:
    """``runs`` runs with random budgets, tool-result sizes and reply lengths; fails on any run over max_cost."""
    stats: Counter[str] = Counter()

    @settings(
        max_examples=runs,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        sizes=st.lists(st.integers(0, 30000), min_size=0, max_size=3),
        out=st.integers(0, 1500),
        share=st.one_of(st.floats(0.0005, 0.05), st.floats(0.05, 1.6)),
    )
    def one(sizes: list[int], out: int, share: float) -> None:
        outputs = [out] * len(sizes)
        # About the run's full cost: every request's dense input at the cache-write rate, plus its output.
        ctx, full = 1200, 0.0
        for size, o in zip([*sizes, 0], [*outputs, out], strict=True):
            full += ctx / 1.7 * 3.75e-6 + min(o / 1.7, 1024) * 15e-6
            ctx += size + o + 200
        max_cost = max(1e-6, full * share)
        script.set(plan(sizes, outputs))
        result, events = run_on(loop, model, max_cost=max_cost, prices=prices)
        guard = result.cost_check
        assert guard is not None
        stats["runs"] += 1
        stats["pre-call checks"] += sum(guard.calls.values())
        stats["counted"] += guard.input_counts
        stats["stopped by budget"] += result.reason == "budget"
        stats["over"] += result.spent > max_cost
        stats["compacted"] += any(
            "iterations" in (e.data.get("usage") or {}) for e in events if e.kind == "model_called"
        )
        assert result.spent <= max_cost, (result, max_cost)

    one()
    return stats


def test_no_run_ends_over_max_cost_in_1000_runs_on_the_dense_tokenizer():
    """1,000 runs (random budgets from tiny to above the full cost, random tool-result sizes and reply
    lengths) on the dense server's tokenizer, cache and counts, in process: none ends over max_cost."""
    script = Script()
    server = MessagesServer(tokenizer="dense").add(*[script] * 20000)
    loop = asyncio.new_event_loop()
    try:
        stats = prove(server, script, loop, InProcess(server), 1000)
    finally:
        loop.close()
    print(f"\ndense tokenizer, in process: {dict(stats)}")
    assert stats["runs"] >= 1000 and stats["over"] == 0
    assert 0 < stats["counted"] < stats["pre-call checks"]  # at most one count per check, none far from the limit
    assert stats["stopped by budget"] > 100  # the budgets did bite


FAST = al.Prices(
    input=3.0,
    output=15.0,
    cache_read=0.3,
    cache_write=3.75,
    variants={"speed=fast": {"input": 6.0, "output": 30.0, "cache_read": 0.6, "cache_write": 7.5}},
)
TERMS = {
    "fast mode": {"speed": "fast"},
    "US-only inference": {"inference_geo": "us"},
    "compaction": {
        "params": {
            "context_management": {
                "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 3000}}]
            }
        }
    },
}


@pytest.mark.parametrize("terms", list(TERMS), ids=list(TERMS))
def test_no_run_ends_over_max_cost_under_fast_mode_geography_or_compaction(terms):
    """The hard guard's worst case follows the same rules as the bill: 300 random runs each billed at fast rates,
    at the US-only multiplier, or with compaction passes (the server bills what the request asked): none over."""
    script = Script()
    server = MessagesServer(tokenizer="dense").add(*[script] * 20000)
    loop = asyncio.new_event_loop()
    try:
        stats = prove(server, script, loop, InProcess(server, **TERMS[terms]), 300, prices=FAST)
    finally:
        loop.close()
    print(f"\n{terms}: {dict(stats)}")
    assert stats["runs"] >= 300 and stats["over"] == 0 and stats["stopped by budget"] > 30
    if terms == "compaction":
        assert stats["compacted"] > 10  # the compaction passes did happen, and were billed


def test_no_run_ends_over_max_cost_through_the_sdk_and_the_dense_server(dense):
    """The same property through the real SDK over HTTP (fewer runs: each costs real round trips)."""
    server, script, loop, model = dense
    before = len(server.requests)
    stats = prove(server, script, loop, model, 120)
    print(f"\ndense server, real SDK: {dict(stats)}")
    assert stats["over"] == 0 and stats["counted"] == counts_asked(server, before) > 0


class Searching(al.FunctionModel):
    """An offline model whose requests allow the API's web search (a fee per use)."""

    def __init__(self, server_tools: list[dict[str, Any]]) -> None:
        super().__init__(lambda m, t: al.reply("found it"))
        self.server_tools = server_tools


def test_the_guard_reserves_the_fees_web_search_may_charge():
    """Three allowed searches ($0.03) do not fit a $0.02 budget: the run stops before its first call."""
    capped = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    result = al.run("Search.", model=Searching(capped), trace=False, prices=PRICES, max_cost=0.02)
    assert result.reason == "budget" and result.steps == 0 and result.spent == 0
    assert al.run("Search.", model=Searching(capped[:0]), trace=False, prices=PRICES, max_cost=0.02).outcome == "done"


def test_an_uncapped_server_tool_leaves_only_an_estimated_guard():
    """Web search without max_uses has no upper bound on fees: the result says the guard was an estimate."""
    uncapped = [{"type": "web_search_20250305", "name": "web_search"}]
    result = al.run("Search.", model=Searching(uncapped), trace=False, prices=PRICES, max_cost=0.02)
    assert result.cost_check is not None and result.cost_check.guarantee == "estimated"


# ---------------------------------------------------------- the pure rules
@given(st.text(max_size=400))
def test_the_input_bound_is_never_below_the_dense_count(text):
    """A message's bound covers what the dense tokenizer (the server's) makes of it, framing included."""
    msg = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": text}]}
    counted = MessagesServer(tokenizer="dense").count({"model": "m", "messages": [msg]})
    assert input_bound(msg) >= counted
    assert request_input_bound(None, [], [msg]) == input_bound(msg)


def test_server_tool_fees_count_max_uses_and_refuse_an_uncapped_tool():
    """Web search with max_uses=5 may cost 5 fees; without max_uses nothing caps it."""
    fees = {"web_search": 0.01}
    assert server_tool_fees(
        [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}], fees
    ) == pytest.approx(0.05)
    assert server_tool_fees([{"type": "web_search_20250305", "name": "web_search"}], fees) is None
    assert server_tool_fees([fetch.definition()], fees) == 0.0


def test_cost_guard_names_its_three_modes():
    """A wrong cost_guard is refused with the modes it could be."""
    with pytest.raises(ValueError, match="cost_guard must be 'hard', 'estimate' or 'after', got 'exact'"):
        Budget(cost_guard="exact")  # type: ignore[arg-type]
    assert GuardReport("hard", {"exact": 2, "bounded": 5}).guarantee == "bounded"
    assert GuardReport("hard", {"exact": 2, "bounded": 5}).note() == ""


def test_each_call_says_what_its_guard_rested_on_its_worst_case_and_why(dense):
    """The model_request event carries the typed check: basis, bound, tokens priced, worst case within what was left."""
    server, script, loop, model = dense
    script.set(plan([20000, 20000], [200, 200]))
    result, events = run_on(loop, model, max_cost=0.05)
    spent_before = 0.0
    checks = []
    for e in events:
        if e.kind == "model_request":
            checks.append(e.data)
            assert e.data["guard_worst_case"] <= 0.05 - spent_before + 1e-12
            assert e.data["input_bound"] >= e.data["guard_input_tokens"] or e.data["guard_basis"] == "exact"
        if e.kind == "model_called":
            spent_before = e.data["spent"]
    assert {c["guard_basis"] for c in checks} == {"bounded", "exact"}
    exact = next(c for c in checks if c["guard_basis"] == "exact")
    assert exact["guard_why"].startswith(f"counted {exact['guard_input_tokens']} input tokens: worst case $")
    assert result.spent <= 0.05


def test_the_check_is_one_pure_function_with_a_typed_answer():
    """check_call: the same inputs give the same GuardCheck; a count replaces the bound; a stop says why."""
    from agentlab.budget import GuardCheck, check_call

    budget = Budget(max_cost=0.01)
    args = dict(
        steps=2,
        spent=0.0,
        estimate=500,
        bound=1500,
        billed_by_estimate=False,
        fees=0.0,
        rates=lambda n: (3e-6, 15e-6),
        max_tokens=1000,
    )
    first = check_call(budget, **args)
    assert isinstance(first, GuardCheck) and first.basis == "bounded" and first.wants_count
    assert first.max_tokens < 1000 and first.worst_case <= 0.01 + 1e-12
    counted = check_call(budget, **args, counted=400)
    assert (counted.basis, counted.counted, counted.input_tokens, counted.max_tokens) == ("exact", True, 400, 586)
    broke = check_call(budget, **{**args, "spent": 0.0099})
    assert broke.stop is not None and broke.stop.reason == "budget" and broke.why == broke.stop.detail
    assert check_call(Budget(max_cost=None), **args).basis is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.one_of(
        st.text(),
        st.builds(lambda c: {"role": "user", "content": c}, st.text() | st.lists(_json, max_size=3)),
        _json,
        st.just({"role": "user", "content": [{"type": "text", "text": "x", "n": 2**70}]}),  # past orjson's ints
        st.just({"role": "user", "content": "a lone surrogate \ud800"}),  # orjson refuses it: the slow way
    )
)
def test_a_message_grows_the_guard_s_bound_and_estimate_as_the_two_rules_measure_it(message):
    """The tracker measures each appended message once for both (bound_and_estimate): the same numbers as
    input_bound and estimate_tokens, whatever the message holds."""
    from agentlab.budget import bound_and_estimate
    from agentlab.messages import estimate_tokens

    assert bound_and_estimate(message) == (input_bound(message), estimate_tokens(message))

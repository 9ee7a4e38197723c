"""Offline scenarios: each lesson ends the way the article says, reproducibly, through the real engine."""

from __future__ import annotations

import json

import pytest

import agentlab as al
from agentlab import scenarios

from .helpers import Recorder

FAST = {"clock": al.FakeClock()}
"""Retry waits pass instantly; the deadline of the hanging tool is still real (1.5 s)."""


def run_scenario(name: str, **options):
    rec = Recorder()
    setup = scenarios.get(name).setup(**options)
    result = setup.run(subscribers=[rec], trace=False)
    return result, rec, setup


def finished_calls(rec: Recorder) -> list[dict]:
    return [e.data for e in rec.of("tool_finished")]


@pytest.mark.parametrize("name", scenarios.names())
def test_every_scenario_ends_with_its_expected_reason(name):
    """Each lesson's run stops (or finishes) for exactly the reason the scenario teaches."""
    result, _, _ = run_scenario(name, clock=al.FakeClock())
    assert result.reason == scenarios.get(name).expected, repr(result)


def test_the_registry_covers_the_ten_lessons_in_order():
    """Fourteen scenarios (lessons with a contrasting variant), in the article's order."""
    assert scenarios.names() == [
        "parallel-lookups",
        "ping-pong",
        "growing-context",
        "hanging-tool",
        "repeat-recovers",
        "repeat-forever",
        "permission-denied",
        "permission-probing",
        "hidden-denial",
        "approval-denied",
        "flaky-upstream",
        "not-found-hint",
        "parallel-writes",
        "truncated",
    ]
    for s in scenarios.all():
        assert s.lesson.endswith(".") and s.title and s.task


def test_same_seed_gives_the_same_run_and_another_seed_another_wording():
    """A seed reproduces every message exactly; a different seed changes the model's choices."""
    a, _, _ = run_scenario("ping-pong", seed=3)
    b, _, _ = run_scenario("ping-pong", seed=3)
    c, _, _ = run_scenario("ping-pong", seed=4)
    assert a.messages == b.messages
    assert a.messages != c.messages and c.reason == "step limit"


def test_unknown_scenario_name_lists_the_real_ones():
    """A typo gets a KeyError that names every scenario."""
    with pytest.raises(KeyError, match="no scenario named 'hang'; choose one of: parallel-lookups, ping-pong"):
        scenarios.get("hang")


def test_seed_must_be_an_int():
    """seed='1' is refused with a message naming the parameter."""
    with pytest.raises(TypeError, match="seed must be an int"):
        scenarios.get("truncated").setup(seed="1")


def test_parallel_lookups_overlap_and_come_back_in_request_order():
    """The three 0.4 s reads of one turn run at the same time, and the results keep the requested order."""
    result, rec, _ = run_scenario("parallel-lookups")
    calls = finished_calls(rec)
    assert [c["tool"] for c in calls if c["outcome"] == "ok"] != [] and len(calls) == 3
    latest_start = max(c["start"] for c in calls)
    earliest_end = min(c["end"] for c in calls)
    assert latest_start < earliest_end, "every read was running at one moment"
    results = rec.of("tool_results")[0].data["content"]
    asked = [b["id"] for b in result.messages[1]["content"] if b["type"] == "tool_use"]
    assert [b["tool_use_id"] for b in results] == asked
    assert "5 days late" in result.text and "Dana Whitfield" in result.text


def test_ping_pong_makes_only_new_calls_until_the_step_limit():
    """No call repeats, so no nudge: eight steps, alternating two tools, then "step limit"."""
    result, rec, _ = run_scenario("ping-pong", **FAST)
    tools = [c["tool"] for c in finished_calls(rec)]
    assert result.steps == 8 and not rec.of("nudged")
    assert tools == ["search_orders", "get_customer"] * 4
    keys = [json.dumps([c["tool"], c["args"]], sort_keys=True) for c in finished_calls(rec)]
    assert len(set(keys)) == len(keys)


def test_growing_context_grows_every_step_and_the_hard_guard_never_overspends():
    """Context rises each step; the hard guard stops under $0.10, the after-the-fact check ends over it."""
    hard, rec, _ = run_scenario("growing-context", **FAST)
    contexts = [e.data["context_tokens"] for e in rec.of("model_called")]
    assert all(b > a for a, b in zip(contexts, contexts[1:], strict=False))
    assert hard.reason == "budget" and hard.spent <= 0.10
    after, _, _ = run_scenario("growing-context", cost_guard="after", **FAST)
    assert after.reason == "budget" and after.spent > 0.10 and after.steps > hard.steps


def test_growing_context_cost_is_quadratic_in_steps():
    """With no cost limit the per-step cost rises linearly, so the cumulative cost bends upward."""
    result, rec, _ = run_scenario("growing-context", max_cost=None, **FAST)
    costs = [e.data["cost"] for e in rec.of("model_called")]
    assert result.reason == "done" and len(costs) == 9
    diffs = [b - a for a, b in zip(costs, costs[1:], strict=False)]
    assert min(diffs[:-1]) > 0 and costs[-2] > 5 * costs[0]


def test_hanging_tool_stops_at_the_deadline_not_when_the_tool_returns():
    """The carrier never answers; the run stops with "deadline" within a generous margin of 1.5 s."""
    import time

    t0 = time.monotonic()
    result, rec, setup = run_scenario("hanging-tool")
    took = time.monotonic() - t0
    assert result.reason == "deadline" and "carrier_status" in result.detail
    assert took < 10, f"the run took {took:.1f}s: the deadline did not bound the tool"
    assert finished_calls(rec)[-1]["outcome"] == "fatal"


def test_repeat_is_nudged_once_then_recovers():
    """The third identical call is answered with a nudge, not run; the model then answers."""
    result, rec, setup = run_scenario("repeat-recovers", **FAST)
    assert len(rec.of("nudged")) == 1 and rec.of("nudged")[0].data["count"] == 3
    assert setup.shop.carrier.calls == 2, "the nudged call did not reach the carrier"
    assert result.reason == "done" and "in transit" in result.text


def test_repeat_that_ignores_the_nudge_is_stopped_as_a_loop():
    """Asked a fourth time after the nudge, the run stops with "loop detected" and its count."""
    result, rec, _ = run_scenario("repeat-forever", **FAST)
    assert len(rec.of("nudged")) == 1
    assert result.reason == "loop detected" and "4 times" in result.detail


def test_permission_denial_is_fatal_and_the_model_is_never_told():
    """The refund call stops the run: two model calls, no tool after the denial, nothing refunded."""
    result, rec, setup = run_scenario("permission-denied", **FAST)
    assert result.reason == "fatal" and "PermissionDenied" in result.detail
    assert result.model_calls == 2 and [c["tool"] for c in finished_calls(rec)] == ["get_order", "refund_order"]
    assert all(
        b.get("type") != "tool_result" or "denied" not in str(b)
        for m in result.messages
        for b in m["content"]
        if isinstance(m["content"], list)
    )
    assert setup.shop.get_order(1042)["notes"] == []


def test_recoverable_denial_pays_for_probing_and_leaves_a_misleading_note():
    """Handed back as recoverable, the same denial costs several more steps and ends in a note asking for the refund."""
    fatal, _, _ = run_scenario("permission-denied", **FAST)
    probing, rec, setup = run_scenario("permission-probing", **FAST)
    denied = [c for c in finished_calls(rec) if c["is_error"] and "PermissionDenied" in c["result"]]
    assert len(denied) >= 3
    assert probing.steps >= fatal.steps + 4 and probing.spent > 3 * fatal.spent
    assert any("approved" in n for n in setup.shop.get_order(1042)["notes"])


def test_a_hidden_denial_ends_done_with_a_reassuring_answer_and_only_the_trace_shows_the_refusal(tmp_path):
    """The last message says the customer was refunded; the refund call at step four was denied and nothing was
    refunded; with the default (fatal) policy the same model stops there with a diagnosis naming the role."""
    setup = scenarios.get("hidden-denial").setup(**FAST)
    result = setup.run(trace=tmp_path)
    assert isinstance(result, al.Done) and "refunded" in result.text and "denied" not in result.text.lower()
    assert setup.shop.query("SELECT * FROM refunds WHERE order_id = 1042") == []
    calls = al.load_run(result.run_id, tmp_path).calls
    refused = calls[calls["is_error"]]
    assert refused[["step", "tool"]].values.tolist() == [[4, "refund_order"]]
    assert "PermissionDenied" in refused["result_preview"].iloc[0]
    assert calls["step"].max() == 5 and result.steps == 6  # it went on to write a note, then answered
    fatal = scenarios.get("hidden-denial").setup(policy=al.Policy(), **FAST).run(trace=False)
    assert fatal.reason == "fatal" and fatal.steps == 4 and "billing" in fatal.detail


def test_flaky_upstream_is_retried_and_the_model_sees_only_the_answer():
    """Two 503s, then an answer: one call with three attempts, and no 503 in the history."""
    result, rec, setup = run_scenario("flaky-upstream", **FAST)
    carrier = [c for c in finished_calls(rec) if c["tool"] == "carrier_status"]
    assert carrier[0]["outcome"] == "retried" and carrier[0]["attempts"] == 3
    assert len(rec.of("tool_retry")) == 2
    assert "503" not in json.dumps(result.messages)
    assert result.reason == "done" and "delivered" in result.text


def test_not_found_hint_leads_to_the_right_order():
    """ "No order 1402" with its hint leads to search_orders(customer_id=7), then get_order(1042)."""
    result, rec, _ = run_scenario("not-found-hint", **FAST)
    calls = [(c["tool"], c["args"]) for c in finished_calls(rec)]
    assert calls == [
        ("get_order", {"order_id": 1402}),
        ("search_orders", {"customer_id": 7}),
        ("get_order", {"order_id": 1042}),
    ]
    assert finished_calls(rec)[0]["outcome"] == "recoverable"
    assert "meant order 1042" in result.text


def test_parallel_writes_run_one_after_the_other_and_lose_nothing():
    """Two notes asked for in one turn do not overlap in time, and both are in the database."""
    result, rec, setup = run_scenario("parallel-writes")
    first, second = [c for c in finished_calls(rec) if c["tool"] == "add_note"]
    assert first["end"] <= second["start"]
    assert setup.shop.get_order(1042)["notes"] == list(scenarios.get("parallel-writes").behaviour(None).NOTES)
    assert result.text.startswith("Both notes are on order 1042")


def test_truncated_reply_is_not_treated_as_an_answer():
    """The long report is cut at max_tokens=200 and the run says so, rather than returning Done."""
    result, rec, _ = run_scenario("truncated", **FAST)
    assert isinstance(result, al.Stopped) and result.reason == "max_tokens"
    assert "max_tokens=200" in result.detail
    assert rec.of("model_called")[-1].data["stop_reason"] == "max_tokens"


def test_scenario_runs_in_a_lab_driven_from_a_script():
    """The same setup drives agentlab.Lab: lab.run() from a script returns the scenario's result."""
    lab = scenarios.get("not-found-hint").setup(clock=al.FakeClock()).lab(trace=False)
    result = lab.run()
    assert result.reason == "done" and result.steps == 4


def test_scenario_run_writes_a_trace_to_the_runs_folder(tmp_path):
    """scenarios.run writes the run's events as JSONL named by its run id."""
    result = scenarios.run("truncated", clock=al.FakeClock())
    trace = tmp_path / "runs" / f"{result.run_id}.jsonl"
    kinds = [json.loads(line)["kind"] for line in trace.read_text().splitlines()]
    assert result.run_id.startswith("truncated-") and kinds[0] == "run_started" and kinds[-1] == "run_finished"


def test_a_write_the_manager_denies_is_never_run_and_never_told_to_the_model():
    """approval-denied: the refund is asked about, denied, and the run stops before it touches the shop."""
    result, _, setup = run_scenario("approval-denied", clock=al.FakeClock())
    assert result.reason == "fatal" and "need a manager's sign-off" in result.detail
    assert setup.model.calls == 2  # read the order, asked to refund; never called again
    assert setup.shop.query("SELECT COUNT(*) AS n FROM refunds WHERE order_id = 1042")[0]["n"] == 0

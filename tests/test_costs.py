"""Carried cost and cache busts over the trace frames: the identity, the attribution, no bust on a steady cache."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab.costs import cache_busts, cache_waste, carried_cost, input_cost, top_carriers
from agentlab.datasets import claude_code_session
from agentlab.recorded import load_recorded
from agentlab.recorded.build import RecordedRun, RecordedStep, build_run
from agentlab.trace import Trace

from .costs_runs import CAUSES, busting_run

FIXTURES = Path(__file__).parent / "fixtures" / "recorded"
RECORDS = sorted(
    p
    for d in FIXTURES.iterdir()
    if d.is_dir()
    for p in d.iterdir()
    if p.suffix in (".jsonl", ".json", ".eval", ".traj") or p.is_dir()
)


def _identity(runs: object) -> None:
    df = carried_cost(runs)
    total = input_cost(runs)
    assert not math.isnan(total)
    assert abs(df.carried_cost.sum() - total) <= 1e-9, (df.carried_cost.sum(), total)
    assert (df.carried_cost >= 0).all()


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_items_carried_costs_add_up_to_the_input_side_cost_of_every_imported_fixture(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            runs = load_recorded(path)
        except Exception as exc:  # a fixture some other test uses to check a refusal
            pytest.skip(f"not importable on its own: {exc}")
    priced = [t for t in (runs.traces if hasattr(runs, "traces") else [runs]) if not math.isnan(t.summary["cost"])]
    _identity(priced)


@pytest.mark.parametrize("which", ["multi-turn", "subagent"])
def test_the_shipped_claude_code_sessions_identity_and_the_unrecorded_prefix_carried(which: str) -> None:
    runs = load_recorded(claude_code_session(which))
    _identity(runs)
    df = carried_cost(runs)
    # Claude Code's transcripts keep no system prompt: the part of the input they do not hold is one item of its own
    assert df.iloc[0]["label"].startswith("not in the record")
    assert df.loc[df.carried_cost.idxmax(), "label"].startswith("not in the record")


def test_a_native_cached_run_itemised_and_steady_reports_no_bust(tmp_path: Path) -> None:
    trace, _, _ = busting_run("steady", tmp=tmp_path)
    _identity(trace)
    df = carried_cost(trace)
    assert set(df.kind) >= {"system prompt", "tool definition", "user turn", "assistant reply", "tool result"}
    first = df[df.kind == "system prompt"].iloc[0]
    assert first.calls == len(trace)  # the system prompt rode along with every call
    assert first.read_tokens > 0 and first.write_tokens > 0  # written once, then read
    busts = cache_busts(trace)
    assert not busts.bust.any() and cache_waste(trace).sum() == 0.0
    assert "cost" in top_carriers(df)[0]


API_REASON = {
    "model changed": "model_changed",
    "system prompt changed": "system_changed",
    "tools changed": "tools_changed",
    "messages changed": "messages_changed",
    "TTL ran out": None,  # the API compares the requests' structure; a lapse of time is not a divergence
    "compaction": None,  # the history only grew: the API dropped what came before the summary, as it does
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("cause", [c for c in CAUSES if c != "steady"])
def test_a_bust_built_for_a_reason_is_attributed_to_it_and_agrees_with_the_apis_reason_kept_in_the_trace(
    cause: str, stream: bool, tmp_path: Path
) -> None:
    trace, _, server = busting_run(cause, tmp=tmp_path, stream=stream)
    assert all("diagnostics" in r.body for r in server.requests)  # AnthropicModel(cache_diagnostics=True) asked
    kept = [e.get("diagnostics") for e in trace.records if e.get("kind") == "model_called"]
    assert [i for i, d in enumerate(kept) if d] == ([] if API_REASON[cause] is None else [3]), kept
    df = cache_busts(trace, requests=[r.body for r in server.requests])  # the API's reason read from the trace
    busts = df[df.bust]
    assert list(busts.step) == [4], df
    row = busts.iloc[0]
    assert row.cause == cause
    assert row.api_reason == API_REASON[cause]
    assert row.agrees is (None if API_REASON[cause] is None else True)
    assert row.waste > 0 and row.rebilled > row.waste
    assert cache_waste(trace).iloc[0] == pytest.approx(row.waste)
    assert df[~df.bust].api_reason.isna().all()  # no reason given where the requests did not part


def test_a_bust_the_trace_alone_cannot_explain_says_what_would(tmp_path: Path) -> None:
    trace, _, _ = busting_run("system prompt changed", tmp=tmp_path)
    for e in trace.records:  # as a run that did not ask for the API's cache diagnostics records it
        e.pop("diagnostics", None)
    row = cache_busts(trace).query("bust").iloc[0]
    assert row.cause == "unknown" and "requests=" in row.detail


def test_the_apis_reason_names_a_bust_the_trace_alone_cannot_explain(tmp_path: Path) -> None:
    busting_run("system prompt changed", tmp=tmp_path, stream=True)
    row = cache_busts(al.load_runs(tmp_path)).query("bust").iloc[0]  # read back from the trace file
    assert row.cause == "system prompt changed" and row.api_reason == "system_changed"
    assert row.agrees is None and "cache_miss_reason is system_changed" in row.detail


def test_the_shipped_session_bust_is_the_new_turn_dropping_thinking() -> None:
    df = cache_busts(load_recorded(claude_code_session("multi-turn")))
    busts = df[df.bust]
    assert len(busts) == 1 and busts.iloc[0].cause == "messages changed"
    assert "thinking" in busts.iloc[0].detail and busts.iloc[0].waste > 0.1


# ------------------------------------------------------------ generated runs
_block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(min_size=0, max_size=300)),
    st.builds(lambda n: {"type": "tool_use", "id": f"toolu_{n}", "name": "read", "input": {"n": n}}, st.integers(0, 9)),
)
_usage = st.fixed_dictionaries(
    {
        "input_tokens": st.integers(0, 50_000),
        "output_tokens": st.integers(0, 4_000),
        "cache_creation_input_tokens": st.integers(0, 50_000),
        "cache_read_input_tokens": st.integers(0, 300_000),
    }
)
_step = st.tuples(
    st.lists(_block, min_size=1, max_size=3), _usage, st.text(max_size=2_000), st.sampled_from([None, 300, 3_600])
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_step, min_size=1, max_size=12),
    st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"]),
    st.text(max_size=500),
)
def test_the_identity_holds_on_generated_runs(steps: list, model: str, system: str) -> None:
    recorded = []
    t = 0.0
    for content, usage, result, gap in steps:
        uses = [b for b in content if b["type"] == "tool_use"]
        ids = list(dict.fromkeys(b["id"] for b in uses))
        content = [b for b in content if b["type"] != "tool_use"] + [next(b for b in uses if b["id"] == i) for i in ids]
        after = [{"type": "tool_result", "tool_use_id": i, "content": result} for i in ids] or [
            {"type": "text", "text": result or "go on"}
        ]
        t += gap or 1.0
        recorded.append(RecordedStep(content, usage, model, requested_at=t, replied_at=t + 1, after=after))
    run = RecordedRun(
        "gen",
        "generated",
        "test",
        [{"role": "user", "content": "Go."}],
        recorded,
        task="Go.",
        system=system or None,
        model=model,
    )
    trace = Trace(build_run(run))
    _identity(trace)
    df = cache_busts(trace)
    assert (df.waste >= 0).all() and (df.missed <= df.expected_read).all()


def test_an_offline_scripted_run_is_itemised_with_each_tool_result_charged_to_its_tool(tmp_path: Path) -> None:
    model = al.ScriptedModel([al.reply(None, ("get", {"n": 1})), al.reply(None, ("get", {"n": 2})), al.reply("ok")])

    @al.tool(mode="read")
    def get(n: int) -> str:
        """Get n."""
        return "x" * 3000 * n

    trace = al.run("Go.", [get], model=model, trace=tmp_path).trace
    _identity(trace)
    df = carried_cost(trace)
    results = df[df.kind == "tool result"]
    assert list(results.tool) == ["get", "get"] and list(results.calls) == [2, 1]
    assert df.groupby("tool").carried_cost.sum()["get"] > 0

"""Cost analysis on real offline runs: per-step tokens, the quadratic, caching, repricing, what-ifs."""

from __future__ import annotations

import asyncio
import math
import tempfile
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab import analysis as an
from agentlab import reply

from .analysis_runs import SCRIPTS, fetch, growing_script, load_traces, quadratic_steps, record
from .helpers import PRICES


# ------------------------------------------------------------------ fixtures
@pytest.fixture
def growing(tmp_path):
    """A recorded 10-step run whose context grows by ~1,000 tokens a step."""
    result = record(tmp_path / "runs", growing_script(10))
    return result, load_traces(tmp_path / "runs")


# ------------------------------------------------------------------ per step
def test_step_costs_show_the_context_growing_every_step(growing):
    """Each step of a reading run sends more tokens than the last, and cumulative cost adds up to the run's cost."""
    result, tr = growing
    per = an.step_costs(tr.steps)
    assert list(per["step"]) == list(range(1, 11))
    assert (per["context_growth"].iloc[1:] > 900).all()  # ~3,000 chars of tool result ≈ 1,000 tokens
    assert per["context_growth"].iloc[0] == per["context_tokens"].iloc[0]
    assert per["cumulative_cost"].iloc[-1] == pytest.approx(result.spent)
    assert per["cost"].is_monotonic_increasing


def test_missing_columns_are_named_in_the_error():
    """A frame without the spec's columns fails with the frame's name and the missing columns, not a KeyError."""
    with pytest.raises(ValueError, match=r"steps is missing column\(s\) 'cost'.*docs/traces.md"):
        an.step_costs(
            pd.DataFrame(
                {
                    "run_id": ["a"],
                    "step": [1],
                    "input_tokens": [1],
                    "output_tokens": [1],
                    "cache_write_tokens": [0],
                    "cache_read_tokens": [0],
                }
            )
        )
    with pytest.raises(TypeError, match="steps must be a pandas DataFrame"):
        an.step_costs([{"step": 1}])


# ------------------------------------------------------------ the quadratic
def test_fit_recovers_a_known_quadratic():
    """Fitting an exactly quadratic cost curve returns its coefficients and a perfect R²."""
    fit = an.fit_cost_curve(quadratic_steps(0.002, 0.01, 0.003, 12))
    assert (fit.a, fit.b, fit.c) == pytest.approx((0.002, 0.01, 0.003), rel=1e-6, abs=1e-9)
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.linear_r_squared < 0.99
    assert fit.predict(20) == pytest.approx(0.002 * 400 + 0.01 * 20 + 0.003)


def test_a_real_growing_run_is_quadratic_not_linear(growing):
    """A run whose context grows each step has a cumulative cost that a parabola fits far better than a line."""
    _, tr = growing
    fit = an.fit_cost_curve(tr.steps)
    assert fit.a > 0
    assert fit.r_squared > 0.9999
    assert fit.linear_r_squared < fit.r_squared - 0.005
    # the curvature is the per-step growth priced at the input rate: 2a ≈ tokens added per step × $3/M
    growth = an.step_costs(tr.steps)["context_growth"].iloc[1:].mean()
    assert 2 * fit.a == pytest.approx(growth * 3.0 / 1e6, rel=0.02)


def test_forecast_shows_a_step_limit_does_not_bound_cost(growing):
    """The forecast passes the cost budget well inside a generous step limit, and says so in numbers."""
    _, tr = growing
    fit = an.fit_cost_curve(tr.steps)
    hit = fit.steps_until(0.50)
    assert hit is not None and fit.predict(hit) > 0.50 >= fit.predict(hit - 1)
    assert hit < 200
    note = fit.budget_note(max_steps=200, max_cost=0.50)
    assert f"the $0.50 budget is passed at step {hit}" in note
    assert note.startswith(f"a step limit of 200 allows ${fit.predict(200):.2f}")
    fc = fit.forecast(30)
    assert list(fc["step"]) == list(range(1, 31))
    assert fc["cost"].is_monotonic_increasing  # each later step costs more than the one before


def test_fit_refuses_too_few_steps_and_unpriced_runs():
    """Fewer than three steps, an empty frame, or a run with no recorded cost give clear messages."""
    with pytest.raises(ValueError, match="at least 3 steps; run 'q' has 2"):
        an.fit_cost_curve(quadratic_steps(1, 1, 1, 2))
    with pytest.raises(ValueError, match="steps is empty"):
        an.fit_cost_curve(quadratic_steps(1, 1, 1, 3).iloc[0:0])
    with pytest.raises(ValueError, match="no recorded cost .*reprice"):
        an.fit_cost_curve(quadratic_steps(0, 0, 0, 5))
    two = pd.concat([quadratic_steps(1, 1, 1, 3, "a"), quadratic_steps(1, 1, 1, 3, "b")])
    with pytest.raises(ValueError, match="holds 2 runs: pass run_id="):
        an.fit_cost_curve(two)
    assert an.fit_cost_curve(two, "b").run_id == "b"


# ---------------------------------------------------------- the projection
def test_projection_reproduces_the_articles_shape():
    """2,000 tokens at step one grow to about 25,000 by step eight, and the run's cost is quadratic in its length."""
    p = an.CostProjection.growing()  # the seed's numbers, priced as Claude Sonnet 4.5
    assert p.context(1) == 2000
    assert abs(p.context(8) - 25_000) < 10
    totals = [p.total_cost(n) for n in range(1, 21)]
    second = [totals[i + 2] - 2 * totals[i + 1] + totals[i] for i in range(len(totals) - 2)]
    assert second == pytest.approx([p.added_per_step * 3.0 / 1e6] * len(second))  # constant: a parabola
    assert p.total_cost(16) > 3.3 * p.total_cost(8)  # twice the steps, more than three times the cost
    frame = p.frame(8)
    assert frame["cumulative_cost"].iloc[-1] == pytest.approx(p.total_cost(8))
    assert frame["context_tokens"].iloc[-1] == p.context(8)


def test_caching_cuts_the_cost_but_the_curve_stays_quadratic():
    """With prompt caching each step rereads the last request cheaply: far cheaper, still growing with the square."""
    plain, cached = an.CostProjection.growing(), an.CostProjection.growing(caching=True)
    u = cached.usage(3)
    assert (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens) == (
        0,
        cached.context(2),
        cached.added_per_step,
    )
    assert cached.total_cost(8) < 0.5 * plain.total_cost(8)
    t = [cached.total_cost(n) for n in (10, 11, 12)]
    assert t[2] - 2 * t[1] + t[0] == pytest.approx(cached.added_per_step * 0.3 / 1e6)  # the cache-read rate


def test_projection_rejects_bad_parameters_by_name():
    """Negative sizes, replies larger than what a step adds, and unknown models are named in the error."""
    with pytest.raises(ValueError, match="first_input must be an int >= 0"):
        an.CostProjection(first_input=-1)
    with pytest.raises(ValueError, match="output_per_step .* cannot exceed added_per_step"):
        an.CostProjection(added_per_step=10, output_per_step=50)
    with pytest.raises(ValueError, match="prices: no price is known for model 'no-such-model'"):
        an.CostProjection(prices="no-such-model")
    with pytest.raises(ValueError, match="step must be an int >= 1"):
        an.CostProjection().step_cost(0)


# ---------------------------------------------------------------- repricing
def test_reprice_under_another_model_scales_by_its_prices(growing):
    """Repricing a recorded run at Haiku 4.5's prices gives exactly a third of Sonnet's cost (same tokens)."""
    result, tr = growing
    haiku = an.reprice(tr.steps, "claude-haiku-4-5")
    assert haiku["cost"].sum() == pytest.approx(result.spent / 3)
    assert list(haiku["input_tokens"]) == list(tr.steps.sort_values("step")["input_tokens"])


def test_reprice_with_caching_turns_the_resent_history_into_cache_reads(growing):
    """An ideal cache reads each previous request back and writes only the new part, for a much smaller bill."""
    _, tr = growing
    cached = an.reprice(tr.steps, "claude-sonnet-4-5", caching=True)
    plain = an.reprice(tr.steps, "claude-sonnet-4-5", caching=False)
    ctx = list(plain["context_tokens"])
    assert list(cached["cache_read_tokens"]) == [0, *ctx[:-1]]
    assert list(cached["cache_write_tokens"]) == [ctx[0]] + [b - a for a, b in zip(ctx, ctx[1:], strict=False)]
    assert (cached["input_tokens"] == 0).all()
    assert cached["cumulative_cost"].iloc[-1] < 0.6 * plain["cumulative_cost"].iloc[-1]
    back = an.reprice(cached, "claude-sonnet-4-5", caching=False)
    assert back["cost"].tolist() == pytest.approx(plain["cost"].tolist())


def test_reprice_names_an_unknown_model():
    """Repricing at a model with no known prices says so and how to pass prices."""
    with pytest.raises(
        ValueError, match=r"prices: no price is known for model 'gpt-nonexistent'; pass agentlab.Prices"
    ):
        an.reprice(quadratic_steps(1, 1, 1, 3), "gpt-nonexistent")


# ------------------------------------------------------------------ what-if
GRID = {"max_steps": [None, 2, 4, 6], "max_cost": [None, 0.004, 0.02, 0.03, 0.05]}


@pytest.mark.parametrize("guard", ["hard", "after"])
def test_budget_whatif_matches_actually_rerunning_with_those_budgets(tmp_path, guard):
    """For every run and every budget in a grid, the what-if read from traces agrees with a real re-run."""
    for name, script in SCRIPTS.items():
        record(tmp_path / "runs", script, run_id=name)
    grid = an.budget_whatif(load_traces(tmp_path / "runs"), cost_guard=guard, **GRID)
    assert len(grid) == len(SCRIPTS) * 4 * 5
    checked = set()
    for row in grid.itertuples():
        ms = None if math.isnan(row.max_steps) else int(row.max_steps)
        mc = None if math.isnan(row.max_cost) else row.max_cost
        real = al.run(
            "read everything",
            [fetch],
            model=al.ScriptedModel(SCRIPTS[row.run_id]),
            trace=False,
            max_steps=ms,
            max_cost=mc,
            deadline_s=None,
            cost_guard=guard,
            prices=PRICES,
            loop_nudge_at=1000,
        )
        assert (row.outcome, row.reason, row.steps) == (real.outcome, real.reason, real.steps), row
        if real.reason == "max_tokens":
            assert real.spent <= row.spent + 1e-12  # the what-if charges the cut-off reply in full
        else:
            assert row.spent == pytest.approx(real.spent), row
        checked.add(row.reason)
    assert {"done", "budget", "step limit"} <= checked
    if guard == "hard":  # only the hard guard lowers max_tokens, which can cut a long answer off
        assert "max_tokens" in checked


@pytest.mark.parametrize("kind", [Decimal, Fraction, np.float64, float])
def test_whatif_and_engine_agree_on_budgets_of_every_number_type(tmp_path, kind):
    """budget_whatif(max_cost=Decimal("0.02")) works like run(max_cost=Decimal("0.02")): one rule checks both."""
    record(tmp_path / "runs", SCRIPTS["long"], run_id="long")
    traces = load_traces(tmp_path / "runs")
    for cost, steps in [("0.004", 3), ("0.02", None), ("0.05", 6)]:
        max_cost = kind(cost) if kind is not Fraction else Fraction(cost)
        max_steps = None if steps is None else (np.int64(steps) if kind is np.float64 else steps)
        row = an.budget_whatif(traces, max_cost=max_cost, max_steps=max_steps).iloc[0]
        real = al.run(
            "read everything",
            [fetch],
            model=al.ScriptedModel(SCRIPTS["long"]),
            trace=False,
            max_steps=max_steps,
            max_cost=max_cost,
            deadline_s=None,
            prices=PRICES,
            loop_nudge_at=1000,
        )
        assert (row.outcome, row.reason, row.steps) == (real.outcome, real.reason, real.steps)
        assert row.max_cost == float(max_cost) and row.spent == pytest.approx(real.spent)
    with pytest.raises(ValueError, match="max_cost must be finite"):
        an.budget_whatif(traces, max_cost=Decimal("Infinity"))


def test_after_the_fact_guard_overspends_where_the_hard_guard_does_not(tmp_path):
    """Under the sketch's after-check the what-if shows spending past max_cost; under the hard guard never."""
    record(tmp_path / "runs", SCRIPTS["long"], run_id="long")
    tr = load_traces(tmp_path / "runs")
    hard = an.budget_whatif(tr, max_cost=[0.01, 0.02, 0.04], cost_guard="hard")
    after = an.budget_whatif(tr, max_cost=[0.01, 0.02, 0.04], cost_guard="after")
    assert (hard["spent"] <= hard["max_cost"]).all()
    assert (after["spent"] > after["max_cost"]).all()
    assert (after["reason"] == "budget").all()


def test_deadline_whatif_replays_working_time(tmp_path):
    """On a fake clock (model calls 2 s, each tool 1 s), deadlines stop the run at the step where time ran out."""
    clock = al.FakeClock()

    @al.tool(mode="read")
    async def slow_fetch(n: int) -> str:
        """Takes one second."""
        await clock.sleep(1.0)
        return "y" * n

    script = [reply("reading", ("slow_fetch", {"n": 900 + i})) for i in range(4)] + [reply("done")]

    async def model_fn(messages, tools):
        await clock.sleep(2.0)
        return script[len([m for m in messages if m["role"] == "assistant"])]

    al.run(
        "q",
        [slow_fetch],
        model=al.FunctionModel(model_fn),
        clock=clock,
        trace=tmp_path / "runs",
        max_steps=None,
        max_cost=None,
        deadline_s=None,
        prices=PRICES,
        run_id="timed",
    )
    tr = load_traces(tmp_path / "runs")
    # step k's call runs [3k-3, 3k-1], its tools [3k-1, 3k]; the run ends at t=14
    assert list(tr.steps["t"]) == [2, 5, 8, 11, 14]
    grid = an.budget_whatif(tr, deadline_s=[1.5, 2.5, 7.5, 9.0, 14.0, 20.0]).set_index("deadline_s")
    cost = tr.steps["cost"].tolist()
    assert grid.loc[1.5, ["reason", "steps"]].tolist() == ["deadline", 1]  # cut during the first call
    assert grid.loc[1.5, "spent"] == 0
    assert grid.loc[2.5, ["reason", "steps"]].tolist() == ["deadline", 1]  # during step 1's tool
    assert grid.loc[2.5, "spent"] == pytest.approx(cost[0])
    assert grid.loc[7.5, ["reason", "steps"]].tolist() == ["deadline", 3]
    assert grid.loc[7.5, "spent"] == pytest.approx(sum(cost[:2]))
    assert grid.loc[9.0, ["reason", "steps"]].tolist() == ["deadline", 3]  # exactly when step 3's tools end
    assert grid.loc[14.0, "outcome"] == "done" and grid.loc[20.0, "outcome"] == "done"


def test_whatif_cannot_see_past_a_recording_that_a_budget_cut_short(tmp_path):
    """A run the step limit stopped is 'unknown' under a looser limit, and stopped again under the same one."""
    record(tmp_path / "runs", SCRIPTS["long"], run_id="cut", max_steps=4)
    grid = an.budget_whatif(load_traces(tmp_path / "runs"), max_steps=[3, 4, 10]).set_index("max_steps")
    assert grid.loc[3.0, ["outcome", "reason", "steps"]].tolist() == ["stopped", "step limit", 3]
    assert grid.loc[4.0, ["outcome", "reason", "steps"]].tolist() == ["stopped", "step limit", 4]
    assert grid.loc[10.0, "outcome"] == "unknown"
    assert "ran past the recording (which ended: step limit)" == grid.loc[10.0, "reason"]
    summary = an.whatif_summary(an.budget_whatif(load_traces(tmp_path / "runs"), max_steps=[3, 10]))
    assert summary[["max_steps", "runs", "stopped", "unknown"]].values.tolist() == [[3.0, 1, 1, 0], [10.0, 1, 0, 1]]


def test_whatif_rejects_bad_budgets_by_name(growing):
    """A negative or non-numeric budget is named in the error before any replay, worded as run() words it."""
    _, tr = growing
    with pytest.raises(ValueError, match="max_cost must be > 0"):
        an.budget_whatif(tr, max_cost=[0.1, -1])
    with pytest.raises(TypeError, match="max_steps must be a whole number"):
        an.budget_whatif(tr, max_steps=[2.5])
    with pytest.raises(TypeError, match="traces must be what agentlab.load_runs returns"):
        an.budget_whatif(42)


# ---------------------------------------------------- the other vital signs
def test_loop_recovery_counts_nudged_runs_that_finished(tmp_path):
    """One run recovers after its nudge and one repeats itself into 'loop detected': a 50% recovery rate."""
    same = reply(None, ("fetch", {"n": 5}))
    record(tmp_path / "runs", [same, same, same, reply("ok, answering")], run_id="recovers", loop_nudge_at=3)
    record(tmp_path / "runs", [same, same, same, same], run_id="stuck", loop_nudge_at=3)
    record(tmp_path / "runs", [reply("hi")], run_id="plain", loop_nudge_at=3)
    tr = load_traces(tmp_path / "runs")
    rec = an.loop_recovery(tr.runs)
    assert (rec.nudged, rec.recovered, rec.rate, rec.run_ids) == (2, 1, 0.5, ("recovers",))
    assert str(rec) == "1 of 2 nudged runs finished (50%)"
    assert an.loop_recovery(tr.runs[tr.runs["run_id"] == "plain"]).rate is None


def test_retry_counts_add_up_tool_attempts(tmp_path):
    """A tool that fails twice with a retryable error shows two retries for its run."""
    fails = {"left": 2}

    @al.tool(mode="read", retry=al.Retry(base_delay=0.001, max_delay=0.002))
    def flaky() -> str:
        """Fails twice, then works."""
        if fails["left"]:
            fails["left"] -= 1
            raise al.RetryableError("503")
        return "ok"

    al.run(
        "q",
        [flaky],
        model=al.ScriptedModel([reply(None, ("flaky", {})), reply("done")]),
        trace=tmp_path / "runs",
        run_id="r",
        max_cost=None,
        prices=PRICES,
    )
    tr = load_traces(tmp_path / "runs")
    counts = an.retry_counts(tr.calls, tr.events).set_index("run_id")
    assert counts.loc["r", ["tool_calls", "retried_calls", "tool_retries", "model_retries"]].tolist() == [1, 1, 2, 0]


def hand_calls() -> pd.DataFrame:
    """Turn 1: three 0.4 s reads together; turn 2: two 0.5 s writes one after the other."""
    rows = [
        ("r", 1, "lookup", "read", 0.0, 0.4),
        ("r", 1, "lookup", "read", 0.0, 0.4),
        ("r", 1, "lookup", "read", 0.01, 0.41),
        ("r", 2, "save", "write", 1.0, 1.5),
        ("r", 2, "save", "write", 1.5, 2.0),
    ]
    return pd.DataFrame(rows, columns=["run_id", "step", "tool", "mode", "start", "end"]).assign(
        outcome="ok", attempts=1
    )


def test_parallel_speedup_is_busy_time_over_wall_time():
    """Three overlapping 0.4 s reads give a speed-up near 3; serialized writes give exactly 1."""
    sp = an.parallel_speedup(hand_calls()).set_index("step")
    assert sp.loc[1, "busy"] == pytest.approx(1.2) and sp.loc[1, "wall"] == pytest.approx(0.41)
    assert sp.loc[1, "speedup"] == pytest.approx(1.2 / 0.41)
    assert sp.loc[2, "speedup"] == pytest.approx(1.0)


def test_tool_latency_percentiles_per_tool():
    """Percentiles and maxima of call durations are reported per tool, in seconds."""
    lat = an.tool_latency(hand_calls(), percentiles=(50, 90)).set_index("tool")
    assert lat.loc["lookup", ["calls", "p50", "max"]].tolist() == pytest.approx([3, 0.4, 0.4])
    assert lat.loc["save", "p90"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="percentiles must be numbers in 0..100"):
        an.tool_latency(hand_calls(), percentiles=(150,))


def test_parallel_reads_overlap_in_a_real_run(tmp_path):
    """Three reads requested in one turn run at once: each waits until all three have started, then
    0.2 s pass on the injected clock for all of them together, so the speed-up is exactly 3."""
    clock = al.FakeClock()
    started = asyncio.Event()
    finished = asyncio.Event()
    running = []

    @al.tool(mode="read")
    async def lookup(key: str) -> str:
        """Takes 0.2 s of (fake) time, overlapping with the others."""
        running.append(key)
        if len(running) == 3:
            started.set()
        await asyncio.wait_for(started.wait(), 5)  # sequential reads would never all start: a timeout fails the test
        if not finished.is_set():
            clock.advance(0.2)
            finished.set()
        return key

    turn = reply(None, ("lookup", {"key": "a"}), ("lookup", {"key": "b"}), ("lookup", {"key": "c"}))
    al.run(
        "q",
        [lookup],
        model=al.ScriptedModel([turn, reply("done")]),
        trace=tmp_path / "runs",
        max_cost=None,
        prices=PRICES,
        clock=clock,
    )
    sp = an.parallel_speedup(load_traces(tmp_path / "runs").calls)
    assert sp["calls"].tolist() == [3]
    assert sp["speedup"].iloc[0] == pytest.approx(3.0)


def test_a_run_with_unknown_prices_is_explained_not_crashed(tmp_path):
    """A run on a model with no known prices costs $0: the fit says why, repricing fixes it, the what-if says
    max_cost cannot apply.
    """
    al.run(
        "q",
        [fetch],
        model=al.ScriptedModel(growing_script(5), model="house-model-7"),
        trace=tmp_path / "runs",
        max_cost=None,
        run_id="unpriced",
    )
    tr = load_traces(tmp_path / "runs")
    assert an.step_costs(tr.steps)["cost"].sum() == 0
    with pytest.raises(ValueError, match="run 'unpriced' has no recorded cost \\(were its prices unknown\\?\\)"):
        an.fit_cost_curve(tr.steps)
    fit = an.fit_cost_curve(an.reprice(tr.steps, al.Prices(input=1.0, output=5.0)))
    assert fit.a > 0
    grid = an.budget_whatif(tr, max_cost=[None, 0.01]).set_index("max_cost")
    assert grid.loc[0.01, "outcome"] == "unknown" and "max_cost cannot be checked" in grid.loc[0.01, "reason"]
    assert grid[grid.index.isna()]["outcome"].tolist() == ["done"]  # no cost budget: as recorded


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=12_000), min_size=0, max_size=10),
    answer=st.integers(min_value=1, max_value=5000),
    budgets=st.lists(
        st.tuples(st.one_of(st.none(), st.integers(1, 10)), st.one_of(st.none(), st.floats(0.0005, 0.2))),
        min_size=1,
        max_size=4,
    ),
    guard=st.sampled_from(["hard", "after"]),
)
def test_whatif_agrees_with_a_real_rerun_for_any_script_and_budget(sizes, answer, budgets, guard):
    """Over random runs and budgets, the what-if from the trace predicts the real re-run's outcome, reason and step."""
    script = [reply("r", ("fetch", {"n": n})) for n in sizes] + [reply("a" * answer)]
    with tempfile.TemporaryDirectory() as folder:
        record(Path(folder), script, run_id="r", max_tokens=2000)
        traces = load_traces(Path(folder))
        for max_steps, max_cost in budgets:
            row = an.budget_whatif(traces, max_steps=max_steps, max_cost=max_cost, cost_guard=guard).iloc[0]
            real = al.run(
                "read everything",
                [fetch],
                model=al.ScriptedModel(script),
                trace=False,
                max_steps=max_steps,
                max_cost=max_cost,
                deadline_s=None,
                cost_guard=guard,
                prices=PRICES,
                loop_nudge_at=1000,
                max_tokens=2000,
            )
            assert (row.outcome, row.reason, row.steps) == (real.outcome, real.reason, real.steps)
            assert real.spent <= row.spent + 1e-12 and (
                real.reason == "max_tokens" or row.spent == pytest.approx(real.spent)
            )

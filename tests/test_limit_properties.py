"""Properties of the limits, over many scripts: each invariant a user relies on, checked on any input."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab import analysis as an
from agentlab._account import Account, Hold
from agentlab.experiments import TotalLedger

from .analysis_runs import load_traces
from .helpers import PRICES

FAST = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip


@al.tool(mode="read")
def lookup(key: str) -> str:
    """Look a key up."""
    return "v:" + key


def looping_model(calls: list[int], words: int = 5) -> al.FunctionModel:
    """A model that always asks for one more lookup (never answers), counting its calls."""

    def fn(messages, tools):
        calls.append(1)
        return al.reply("thinking " * words, ("lookup", {"key": f"k{len(calls)}"}))

    return al.FunctionModel(fn, name="looper")


@FAST
@given(max_steps=st.integers(1, 6), resumes=st.integers(0, 3))
def test_no_model_call_is_made_once_the_step_limit_is_used_resumed_or_not(max_steps, resumes):
    calls: list[int] = []
    run = al.Run("go", [lookup], model=looping_model(calls), max_steps=max_steps, max_cost=None, deadline_s=None)
    result = asyncio.run(run.run())
    assert result.reason == "step limit" and len(calls) == max_steps == result.steps
    for _ in range(resumes):  # resumed with the same limits (what Lab.run() does): not one call more
        run.resume()
        again = asyncio.run(run.run())
        assert again.reason == "step limit" and len(calls) == max_steps == again.steps


@FAST
@given(max_cost=st.floats(0.0005, 0.05), words=st.integers(1, 400))
def test_spent_never_passes_max_cost_under_the_hard_guard(max_cost, words):
    calls: list[int] = []
    result = al.run("go", [lookup], model=looping_model(calls, words), prices=PRICES, max_cost=max_cost,
                    max_steps=None, deadline_s=None, cost_guard="hard", trace=False)  # fmt: skip
    assert isinstance(result, al.Stopped) and result.reason in ("budget", "max_tokens")  # refused, or cut short
    assert result.spent <= max_cost


@FAST
@given(limit=st.floats(0.001, 1.0), spent=st.floats(0.0, 1.0), tokens=st.integers(0, 50_000),
       max_tokens=st.integers(1, 8000))  # fmt: skip
def test_a_reservation_never_exceeds_what_the_shared_total_has_left(limit, spent, tokens, max_tokens):
    ledger = TotalLedger(limit, spent=min(spent, limit))
    left = ledger.left
    account = Account("r", ledger)
    hold = account.reserve(tokens, (3e-6, 15e-6), max_tokens, worst=0.0)
    if isinstance(hold, Hold):
        assert 0 < hold.reserved <= left and hold.max_tokens <= max_tokens
        assert tokens * 3e-6 + hold.max_tokens * 15e-6 <= hold.reserved * (1 + 1e-9)  # the call fits its hold
    else:
        assert ledger.reserved == 0 and hold.left == left and hold.needed > left  # who refused, what was left


@FAST
@given(steps=st.integers(1, 6), max_steps=st.integers(1, 8), max_cost=st.sampled_from([None, 0.002, 0.004, 0.01]))
def test_the_what_if_replay_stops_where_the_engine_stops(tmp_path_factory, steps, max_steps, max_cost):
    """A run recorded with no limits, replayed under others, stops at the step the engine stops at."""
    folder = tmp_path_factory.mktemp("runs")
    script = [al.reply("x " * 40, ("lookup", {"key": f"k{i}"})) for i in range(steps)] + [al.reply("done")]

    def go(**limits):
        return al.run("go", [lookup], model=al.ScriptedModel(list(script)), prices=PRICES, deadline_s=None,
                      clock=al.FakeClock(), **limits)  # fmt: skip

    go(max_steps=None, max_cost=None, trace=folder, run_id="free")
    engine = go(max_steps=max_steps, max_cost=max_cost, trace=False)
    grid = an.budget_whatif(load_traces(folder), max_steps=max_steps, max_cost=max_cost)
    (row,) = grid.to_dict("records")
    assert (row["outcome"], row["steps"]) == (engine.outcome, engine.steps)
    if engine.outcome == "stopped":
        assert row["reason"] == engine.reason

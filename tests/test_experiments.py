"""Experiments: a grid of offline runs under one total budget, saved, resumable, reproducible."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap

import matplotlib
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab
from agentlab import FunctionModel, reply, tool
from agentlab.experiments import (
    ExperimentEvent,
    ProgressState,
    Task,
    TotalLedger,
    exact_match,
    includes,
    load_tasks,
    model_graded,
)
from agentlab.scenarios.shop_study import shop_experiment

from .helpers import PRICES, within

matplotlib.use("Agg")


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def answering(steps: int = 2, words: int = 20, counter: list[int] | None = None, turns: int = 0):
    """A model factory: ``steps - 1`` lookups, then the task's target as the answer.

    ``turns``: a call gives the event loop up to that many turns (by seed) before it answers, so
    concurrent runs interleave differently, with no real time spent."""

    def factory(task, seed):
        async def fn(messages, tools):
            if counter is not None:
                counter.append(1)
            for _ in range(turns * (seed % 3)):
                await asyncio.sleep(0)
            n = sum(1 for m in messages if m["role"] == "assistant")
            if n < steps - 1:
                return reply("looking " * words, ("lookup", {"key": f"k{n}"}))
            return reply(f"{task.target or 'ok'} " + "because " * words)

        return FunctionModel(fn, name="answering")

    return factory


def tasks(n: int) -> list[dict]:
    return [{"id": f"t{i}", "input": f"question {i}", "target": f"answer{i}"} for i in range(n)]


def make(tmp_path, n=4, configs=None, **kw):
    kw.setdefault("model", answering())
    kw.setdefault("progress", False)
    return agentlab.Experiment(tasks(n), configs or {"a": {"prices": PRICES}}, tools=[lookup], folder=tmp_path, **kw)


# ------------------------------------------------------------ the total budget
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.integers(1, 400), min_size=1, max_size=4),
    concurrency=st.integers(1, 16),
    total=st.floats(0.001, 0.05),
    turns=st.integers(0, 3),
)
def test_total_budget_is_never_exceeded(tmp_path_factory, words, concurrency, total, turns):
    """Whatever the call sizes, concurrency and interleavings, the rows never cost more than max_total_cost."""
    folder = tmp_path_factory.mktemp("exp")

    def factory(task, seed):
        async def fn(messages, tools):
            for _ in range(turns * (seed % 4)):  # interleavings vary by seed, without real time
                await asyncio.sleep(0)
            n = sum(1 for m in messages if m["role"] == "assistant")
            w = words[(seed + n) % len(words)]
            if n < 3:
                return reply("x " * w, ("lookup", {"key": str(n)}))
            return reply("done " * w)

        return FunctionModel(fn)

    exp = agentlab.Experiment(
        tasks(12),
        {"a": {"prices": PRICES, "max_cost": None}, "b": {"prices": PRICES, "max_tokens": 256}},
        tools=[lookup],
        model=factory,
        folder=folder,
        concurrency=concurrency,
        max_total_cost=total,
        progress=False,
    )
    result = exp.run()
    runs = result.runs
    assert len(runs) == 24
    assert runs["cost"].sum() <= total + 1e-12
    assert exp.ledger is not None and exp.ledger.reserved == pytest.approx(0.0, abs=1e-12)
    assert set(runs["outcome"]) <= {"done", "stopped", "not run"}


def test_cells_that_never_start_are_not_run_rows_with_the_reason(tmp_path):
    """A total that covers a few runs: the rest are 'not run' / 'experiment budget', and nothing passes it."""
    result = make(tmp_path, n=10, concurrency=1, max_total_cost=0.01).run()
    runs = result.runs
    assert (runs["outcome"] == "done").sum() >= 1
    assert (runs["outcome"] == "not run").any()
    assert set(runs.loc[runs["outcome"] == "not run", "reason"]) == {"experiment budget"}
    assert runs["cost"].sum() <= 0.01


def test_a_run_refused_mid_way_stops_with_experiment_budget(tmp_path):
    """In flight when the total runs out: the run stops with Stopped('experiment budget') and keeps its spend."""
    result = make(tmp_path, n=6, concurrency=6, max_total_cost=0.006, model=answering(steps=4, words=60)).run()
    stopped = result.runs[result.runs["reason"] == "experiment budget"]
    assert len(stopped) >= 1
    assert result.runs["cost"].sum() <= 0.006


def test_ledger_grants_part_of_a_reservation_and_refuses_below_the_minimum():
    ledger = TotalLedger(1.0)
    assert ledger.reserve("a", 0.7, 0.1) == 0.7
    assert ledger.reserve("b", 0.7, 0.1) == pytest.approx(0.3)
    assert ledger.reserve("c", 0.2, 0.1) == 0.0
    ledger.settle("a", 0.7, 0.5)
    ledger.release("b")
    assert ledger.spent == 0.5 and ledger.reserved == pytest.approx(0.0)
    assert ledger.left == pytest.approx(0.5)


def test_with_no_total_every_reservation_is_granted_whole_and_settling_counts_the_cost():
    ledger = TotalLedger(None)
    assert ledger.reserve("a", 0.7, 0.1) == 0.7
    assert ledger.reserve("b", 1e6, 1e5) == 1e6  # no total to hold against: nothing is refused or held back
    assert ledger.reserved == 0.0 and ledger.left is None and ledger.refused == 0
    ledger.settle("a", 0.7, 0.5)
    ledger.release("b")  # a call that failed: nothing was held for it
    assert ledger.spent == 0.5 and ledger.reserved == 0.0


def test_with_no_total_each_call_s_worst_case_is_in_its_trace_before_it_is_sent(tmp_path):
    """What a resumed experiment counts for a call in flight at a crash: its reservation, written first."""
    result = make(tmp_path, n=2, model=answering(steps=3)).run()
    assert (result.runs["outcome"] == "done").all()
    for run_id in result.runs["run_id"]:
        (trace,) = tmp_path.rglob(f"traces/{run_id}.jsonl")
        events = [json.loads(line) for line in trace.read_bytes().splitlines()]
        requests = [e for e in events if e["kind"] == "model_request"]
        called = [e for e in events if e["kind"] == "model_called"]
        assert len(requests) == len(called) == 3
        for req, done in zip(requests, called, strict=True):
            assert req["reserved"] > done["cost"] > 0  # the worst case, above what the call then cost


def test_a_row_s_token_columns_sum_the_usage_its_run_was_billed_for(tmp_path):
    usage = [
        {"input_tokens": 120, "output_tokens": 9, "cache_read_input_tokens": 0},
        {"input_tokens": 15, "output_tokens": 30, "cache_read_input_tokens": 140},
        {"input_tokens": 7, "output_tokens": 11, "cache_read_input_tokens": 180, "cache_creation_input_tokens": 5},
    ]

    def factory(task, seed):
        def fn(messages, tools):
            n = sum(1 for m in messages if m["role"] == "assistant")
            if n < 2:
                return reply("looking", ("lookup", {"key": f"k{n}"}), usage=usage[n])
            return reply("done", usage=usage[n])

        return FunctionModel(fn)

    row = make(tmp_path, n=1, model=factory).run().runs.iloc[0]
    assert row["steps"] == 3
    assert row["input_tokens"] == 142 and row["output_tokens"] == 50 and row["cache_read_tokens"] == 320


def test_a_stream_cut_short_by_stop_counts_in_its_row_s_tokens(tmp_path):
    """The part of a streamed reply that arrived before Stop was billed: the row's tokens count it too."""
    from agentlab.experiments.cells import CellRunner
    from agentlab.models.anthropic import AnthropicModel
    from agentlab.testing import MessagesServer, streamed

    with MessagesServer([streamed(reply("word " * 400), chunk=10, hold_after=6, hold=30)]) as server:
        model = AnthropicModel(client=server.client())
        cell = make(tmp_path, n=1, configs={"a": {"prices": PRICES, "model": model}}).schedule[0]
        traces = tmp_path / "traces"
        traces.mkdir(parents=True)

        def stop_at_first_delta(run):
            run.subscribe(lambda e: run.cancel() if e.kind == "model_delta" else None)

        row = asyncio.run(CellRunner([lookup], None, None, traces).run(cell, before=stop_at_first_delta))
    events = [json.loads(line) for line in (traces / f"{row['run_id']}.jsonl").read_bytes().splitlines()]
    (called,) = [e for e in events if e["kind"] == "model_called"]
    assert row["reason"] == "cancelled" and row["cost"] > 0
    assert row["output_tokens"] == called["usage"]["output_tokens"] > 0
    assert row["input_tokens"] == called["usage"]["input_tokens"] > 0


# ---------------------------------------------------------------- failures
def test_a_failing_cell_does_not_stop_the_others(tmp_path):
    """A tool factory that raises and a model that raises are rows with reasons; every other run finishes."""

    def tools(task):
        if task.id == "t1":
            raise RuntimeError("no database for t1")
        return [lookup]

    def factory(task, seed):
        def fn(messages, tools):
            if task.id == "t2":
                raise ValueError("the model broke")
            n = sum(1 for m in messages if m["role"] == "assistant")
            return reply(None, ("lookup", {"key": "a"})) if n == 0 else reply(task.target)

        return FunctionModel(fn)

    exp = agentlab.Experiment(
        tasks(5), {"a": {"prices": PRICES}}, tools=tools, model=factory, folder=tmp_path, progress=False
    )
    runs = exp.run().runs.set_index("task_id")
    assert runs.loc["t1", "outcome"] == "error" and "no database for t1" in runs.loc["t1", "error"]
    assert runs.loc["t2", "outcome"] == "stopped" and "the model broke" in runs.loc["t2", "error"]
    assert list(runs.loc[["t0", "t3", "t4"], "outcome"]) == ["done"] * 3


# ------------------------------------------------------------ reproducibility
def test_a_rerun_of_an_offline_experiment_gives_identical_rows(tmp_path):
    first = shop_experiment(folder=tmp_path / "one", tasks=6, repeats=2, max_total_cost=2.0, progress=False).run().runs
    second = shop_experiment(folder=tmp_path / "two", tasks=6, repeats=2, max_total_cost=2.0, progress=False).run().runs
    cols = [c for c in first.columns if c != "seconds"]
    pd.testing.assert_frame_equal(first[cols], second[cols])
    # repeats differ (a seed per cell), configs differ in how they end
    assert first.groupby("config")["reason"].agg(lambda s: tuple(sorted(set(s)))).nunique() > 1


def test_the_shop_studys_copy_of_the_shop_is_removed_with_its_experiment(tmp_path):
    experiment = shop_experiment(folder=tmp_path / "study", tasks=2, progress=False)
    shop_folder = experiment.tools.path.parent
    assert shop_folder.is_dir() and shop_folder.parent != tmp_path  # a temporary folder of its own
    experiment.run()
    del experiment
    gc.collect()
    assert not shop_folder.exists()


def test_shop_study_configs_teach_their_lessons(tmp_path):
    runs = shop_experiment(folder=tmp_path, max_total_cost=5.0, progress=False).run().runs
    by = runs.groupby("config")
    assert len(runs["task_id"].unique()) >= 12
    assert (by.get_group("baseline")["outcome"] == "done").all()
    assert by.get_group("cached")["cost"].mean() < by.get_group("baseline")["cost"].mean()
    short = by.get_group("short replies")
    assert (short["reason"] == "max_tokens").any() and short["score"].mean() < 1.0
    tight, after = by.get_group("tight budget"), by.get_group("tight budget, check after")
    assert (tight["reason"] == "budget").any() and (tight["cost"] <= 0.022).all()
    assert (after["cost"] > 0.022).any()  # the check after the step lets a run overshoot


# ---------------------------------------------------------- stop and resume
EXPERIMENT_SRC = textwrap.dedent('''
    import asyncio, os, sys, agentlab
    from agentlab import FunctionModel, Prices, reply, tool

    CALLS = []
    HOLD_FROM = int(os.environ.get("HOLD_FROM", "99"))  # tasks from this index on never answer (the killed process)

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return "v"

    def factory(task, seed):
        async def fn(messages, tools):
            CALLS.append(task.id)
            if int(task.id[1:]) >= HOLD_FROM:
                print("holding", task.id, flush=True)  # the test kills the process once both workers hold
                await asyncio.Event().wait()
            n = sum(1 for m in messages if m["role"] == "assistant")
            return reply(None, ("lookup", {"key": "a"})) if n == 0 else reply("done")
        return FunctionModel(fn)

    def build(folder):
        tasks = [{"id": f"t{i}", "input": f"q{i}"} for i in range(12)]
        return agentlab.Experiment(tasks, {"a": {"prices": Prices(input=3, output=15)}}, tools=[lookup], model=factory,
                                   folder=folder, concurrency=2, progress=False)

    if __name__ == "__main__":
        build(sys.argv[1]).run()
''')


def test_resume_after_sigkill_reruns_only_unfinished_cells(tmp_path):
    """Kill the process mid-experiment: no finished run is lost, and a rerun makes model calls only for the rest."""
    script = tmp_path / "expdef.py"
    script.write_text(EXPERIMENT_SRC)
    folder = tmp_path / "exp"
    env = {**os.environ, "HOLD_FROM": "3"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(folder)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
    )
    rows = folder / "experiment" / "rows.jsonl"
    try:
        # t0..t2 finish and are saved; then each of the two workers holds in a model call (t3, t4)
        held = within(60, lambda: [proc.stdout.readline() for _ in range(2)], "the experiment never reached t3, t4")
        assert sorted(held) == ["holding t3\n", "holding t4\n"]
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    kept = [json.loads(line) for line in rows.read_bytes().splitlines() if line.strip()]
    finished = {r["task_id"] for r in kept if r["outcome"] == "done"}
    assert finished == {"t0", "t1", "t2"}  # every cell that finished before the kill was saved

    spec = importlib.util.spec_from_file_location("expdef", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    result = mod.build(folder).run()
    assert len(result.runs) == 12 and (result.runs["outcome"] == "done").all()
    assert set(mod.CALLS) == {f"t{i}" for i in range(12)} - finished  # nothing finished ran again
    assert len(mod.CALLS) == 2 * (12 - len(finished))
    again = mod.build(folder).run()  # a third run has nothing left to do
    assert len(mod.CALLS) == 2 * (12 - len(finished)) and len(again.runs) == 12


def test_adding_an_axis_value_runs_only_the_new_cells(tmp_path):
    calls: list[int] = []
    model = answering(counter=calls)
    make(tmp_path, n=3, configs=agentlab.grid(max_steps=[4], prices=[PRICES]), model=model).run()
    assert len(calls) == 6
    result = make(tmp_path, n=3, configs=agentlab.grid(max_steps=[4, 8], prices=[PRICES]), model=model).run()
    assert len(calls) == 12 and len(result.runs) == 6
    assert list(result.runs["max_steps"].unique()) == [4, 8]


def test_a_folder_made_by_a_different_spec_is_a_clear_error_unless_a_new_name_is_given(tmp_path):
    make(tmp_path, n=2, configs={"a": {"prices": PRICES, "max_steps": 4}}).run()
    with pytest.raises(ValueError, match=r"different spec: config 'a' changed.*new name="):
        make(tmp_path, n=2, configs={"a": {"prices": PRICES, "max_steps": 5}}).run()
    result = make(tmp_path, n=2, configs={"a": {"prices": PRICES, "max_steps": 5}}, name="second").run()
    assert len(result.runs) == 2 and (tmp_path / "second" / "manifest.json").exists()


def test_stop_keeps_finished_runs_and_a_rerun_finishes_the_rest(tmp_path):
    exp = make(tmp_path, n=8, concurrency=2, model=answering(turns=2))
    seen: list[str] = []

    def stop_after_two(e: ExperimentEvent) -> None:
        if e.kind == "cell_finished":
            seen.append(e.cell)
            if len(seen) == 2:
                exp.stop()

    exp.subscribe(stop_after_two)
    runs = exp.run().runs
    assert (runs["outcome"] == "done").sum() >= 2
    assert set(runs["reason"]) - {"done"} <= {"cancelled"}
    assert (runs["reason"] == "cancelled").any()
    rest = make(tmp_path, n=8, concurrency=2).run().runs
    assert (rest["outcome"] == "done").all()


# ----------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tasks": []}, "no tasks"),
        ({"tasks": [{"id": "x", "input": "a"}, {"id": "x", "input": "b"}]}, "duplicate task id 'x'"),
        ({"configs": {"a": {"max_stepz": 3}}}, "unknown option 'max_stepz'"),
        (
            {
                "configs": {"a": {}},
                "model": FunctionModel(lambda m, t: reply("x"), model="no-such-model"),
                "max_total_cost": 1.0,
            },
            "no known price",
        ),
        ({"concurrency": 0}, "concurrency must be an int >= 1"),
    ],
)
def test_bad_input_is_named_before_any_model_call(tmp_path, kwargs, message):
    calls: list[int] = []
    args = {"tasks": tasks(2), "configs": {"a": {"prices": PRICES}}, "model": answering(counter=calls)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        agentlab.Experiment(args.pop("tasks"), args.pop("configs"), tools=[lookup], folder=tmp_path, **args).run()
    assert calls == []


# ------------------------------------------------------------ tasks, grid
def test_tasks_from_strings_dataframe_and_jsonl_get_stable_ids(tmp_path):
    a = load_tasks(["What is 2+2?", "Name a colour"])
    b = load_tasks(pd.DataFrame({"input": ["What is 2+2?", "Name a colour"], "level": [1, 2]}))
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps({"input": t.input, "target": "4"}) for t in a))
    c = load_tasks(path)
    assert [t.id for t in a] == [t.id for t in b] == [t.id for t in c]
    assert b[1].meta == {"level": 2} and c[0].target == "4"


def test_grid_names_configs_by_the_axes_that_vary():
    configs = agentlab.grid(model=["claude-haiku-4-5"], max_steps=[8, 20], cost_guard=["hard", "after"])
    assert [c.name for c in configs] == [
        "max_steps=8 cost_guard=hard",
        "max_steps=8 cost_guard=after",
        "max_steps=20 cost_guard=hard",
        "max_steps=20 cost_guard=after",
    ]
    assert all(c.params["model"] == "claude-haiku-4-5" for c in configs)


# ----------------------------------------------------------------- scorers
def test_exact_match_and_includes_compare_with_the_target():
    task = Task("t", "q", "Glasgow")
    done = type("R", (), {"text": "The customer lives in glasgow."})()
    assert includes(done, task) is True and exact_match(done, task) is False
    assert exact_match(type("R", (), {"text": " glasgow. "})(), task) is True
    assert includes(done, Task("u", "q")) is None


def test_model_graded_spending_counts_against_the_total(tmp_path):
    grader = FunctionModel(lambda m, t: reply("PASS"), name="grader")
    exp = make(tmp_path, n=3, scorer=model_graded("Is it right?", model=grader, prices=PRICES), max_total_cost=1.0)
    result = exp.run()
    runs = result.runs
    assert (runs["score"] == 1.0).all() and (runs["score_cost"] > 0).all()
    assert exp.ledger.spent == pytest.approx(runs["cost"].sum() + runs["score_cost"].sum())


def test_a_cell_run_again_keeps_its_unfinished_run_and_grading_run_aside_and_counts_their_spending(tmp_path):
    """A cell whose row was never written (the process died after its runs) runs again; the traces of its
    first try, the run's and the grading run's, go to attempts/ and still count against the total."""
    grader = FunctionModel(lambda m, t: reply("PASS"), name="grader")
    scorer = model_graded("Is it right?", model=grader, prices=PRICES)
    first = make(tmp_path, n=2, scorer=scorer, max_total_cost=1.0).run().runs.set_index("task_id")
    folder = tmp_path / "experiment"
    kept = [line for line in (folder / "rows.jsonl").read_bytes().splitlines() if b'"t0"' in line]
    (folder / "rows.jsonl").write_bytes(b"".join(line + b"\n" for line in kept))  # t1's row never written

    again = make(tmp_path, n=2, scorer=scorer, max_total_cost=1.0)
    runs = again.run().runs.set_index("task_id")
    rid = first.loc["t1", "run_id"]
    assert sorted(p.name for p in (folder / "attempts").iterdir()) == [f"{rid}-grade.1.jsonl", f"{rid}.1.jsonl"]
    assert (folder / "traces" / f"{rid}.jsonl").exists() and (folder / "traces" / f"{rid}-grade.jsonl").exists()
    assert again.spent_before == pytest.approx(first["cost"].sum() + first["score_cost"].sum())
    assert runs.loc["t1", "outcome"] == "done" and runs.loc["t1", "score"] == 1.0


# ---------------------------------------------------- frames, summary, plots
def test_result_frames_summary_and_plots(tmp_path):
    result = make(
        tmp_path, n=5, configs=agentlab.grid(max_steps=[1, 4], prices=[PRICES]), scorer="includes", repeats=2
    ).run()
    runs = result.runs
    assert list(runs.columns[:4]) == ["task_id", "config", "max_steps", "prices"]
    assert runs["prices"].iloc[0].startswith("Prices(input=3.0")
    for col in (
        "repeat",
        "outcome",
        "reason",
        "steps",
        "cost",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "seconds",
        "score",
        "run_id",
        "error",
    ):
        assert col in runs.columns
    assert len(runs) == 20
    assert set(result.steps["config"]) == {"max_steps=1", "max_steps=4"} and "task_id" in result.calls.columns
    s = result.summary()
    assert s.loc["max_steps=4", "success"] == 1.0 and s.loc["max_steps=1", "success"] == 0.0
    assert s.loc["max_steps=4", "cost_lo"] <= s.loc["max_steps=4", "cost_mean"] <= s.loc["max_steps=4", "cost_hi"]
    assert "step limit 10" in s.loc["max_steps=1", "stop_reasons"]
    for plot in (
        result.plot_cost_vs_success,
        result.plot_cost_distribution,
        result.plot_stop_reasons,
        result.plot_context_growth,
    ):
        ax = plot()
        assert isinstance(ax, matplotlib.axes.Axes) and ax.get_title()
    import matplotlib.pyplot as plt

    plt.close("all")


def test_progress_counts_dollars_and_eta():
    now = [0.0]
    state = ProgressState(now=lambda: now[0])
    state.update(ExperimentEvent("experiment_started", data={"cells": 4, "skipped": 0, "max_total_cost": 1.0}))
    state.update(ExperimentEvent("cell_started", cell="a"))
    now[0] = 10.0
    state.update(ExperimentEvent("cell_finished", cell="a", row={"outcome": "done"}, spent=0.25))
    state.update(ExperimentEvent("cell_finished", cell="b", row={"outcome": "not run"}, spent=0.25))
    assert (state.done, state.not_run, state.running, state.spent) == (1, 1, 0, 0.25)
    assert state.eta == pytest.approx(20.0)  # one run took 10 s; two are left
    assert "$0.2500 of $1.00" in state.line()


def test_experiment_cli_runs_a_spec_and_resume_is_required_to_continue(tmp_path, capsys):
    from agentlab.cli import main

    (tmp_path / "tasks.jsonl").write_text("\n".join(json.dumps(t) for t in tasks(3)))
    (tmp_path / "mymodels.py").write_text(
        textwrap.dedent("""
        from agentlab import FunctionModel, reply
        def factory(task, seed):
            return FunctionModel(lambda m, t: reply(task.target))
    """)
    )
    spec = tmp_path / "exp.toml"
    spec.write_text(
        textwrap.dedent("""
        name = "cli"
        tasks = "tasks.jsonl"
        model = "mymodels:factory"
        scorer = "exact_match"
        max_total_cost = 1.0
        [axes]
        max_steps = [2, 4]
    """)
    )
    assert main(["experiment", str(spec), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "max_steps=2" in out and "success" in out
    assert main(["experiment", str(spec), "--quiet"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["experiment", str(spec), "--quiet", "--resume"]) == 0


def test_terminal_progress_bar_and_plain_line_are_subscribers(tmp_path):
    import io

    from agentlab.experiments.progress import LineProgress, TqdmProgress

    bar_out, line_out = io.StringIO(), io.StringIO()
    make(tmp_path, n=3, subscribers=[TqdmProgress(file=bar_out), LineProgress(line_out, every=0)]).run()
    assert "3/3" in bar_out.getvalue()
    assert "3 done · 0 running" in line_out.getvalue().splitlines()[-1]


# ------------------------------------------------ comparing configs fairly
def test_a_grid_cut_short_by_the_total_leaves_every_config_the_same_tasks(tmp_path):
    """Cells run round-robin over configs: when the total runs out, each config ran about as many, on the same tasks."""
    configs = {
        "a": {"prices": PRICES},
        "b": {"prices": PRICES, "max_tokens": 512},
        "c": {"prices": PRICES, "max_steps": 6},
    }
    runs = make(tmp_path, n=8, configs=configs, concurrency=1, max_total_cost=0.012).run().runs
    ran = runs[runs["outcome"] != "not run"]
    counts = ran.groupby("config").size().reindex(["a", "b", "c"], fill_value=0)
    assert 1 <= counts.min() and counts.max() - counts.min() <= 1 and (runs["outcome"] == "not run").any()
    tasks = [set(ran.loc[ran["config"] == c, "task_id"]) for c in ("a", "b", "c")]
    assert tasks[1] <= tasks[0] and tasks[2] <= tasks[1]  # the same tasks, in the same order
    assert list(runs["config"]) == ["a"] * 8 + ["b"] * 8 + ["c"] * 8  # the rows keep their order


def rows_for(spec: list[tuple[str, str, int, str, str, float, float | None]]) -> list[dict]:
    """(task, config, repeat, outcome, reason, cost, score) -> full rows."""
    out = []
    for task, config, repeat, outcome, reason, cost, score in spec:
        out.append(
            {
                "task_id": task,
                "config": config,
                "repeat": repeat,
                "outcome": outcome,
                "reason": reason,
                "steps": 1,
                "cost": cost,
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_read_tokens": 0,
                "seconds": 0.0,
                "score": score,
                "score_cost": 0.0,
                "run_id": f"{task}{config}{repeat}",
                "error": "",
            }
        )
    return out


def result_of(spec, configs=("a", "b")) -> agentlab.experiments.ExperimentResult:
    from pathlib import Path

    from agentlab.experiments.grid import load_configs

    return agentlab.experiments.ExperimentResult(
        rows_for(spec), load_configs({c: {} for c in configs}), Path("unused"), None
    )


def test_success_means_done_and_scored_a_stopped_run_fails_and_a_cut_run_is_no_sample():
    from agentlab.experiments import success_of

    r = result_of(
        [
            ("t0", "a", 0, "done", "done", 0.01, 1.0),
            ("t1", "a", 0, "done", "done", 0.01, 0.0),
            ("t2", "a", 0, "stopped", "max_tokens", 0.01, 1.0),  # the scorer liked its partial text: still a failure
            ("t3", "a", 0, "stopped", "experiment budget", 0.01, None),  # cut by the experiment: no sample
            ("t4", "a", 0, "not run", "experiment budget", 0.0, None),
            ("t5", "a", 0, "done", "done", 0.01, None),  # the scorer gave no verdict: no sample
            ("t0", "b", 0, "done", "done", 0.02, None),  # no scorer in b: done is a success
            ("t1", "b", 0, "error", "fatal", 0.0, None),
        ]
    )
    assert list(success_of(r.runs).fillna(-1)) == [1.0, 0.0, 0.0, -1, -1, -1, 1.0, 0.0]
    with pytest.warns(agentlab.experiments.UnequalSamples, match=r"unequal samples \(a 3, b 2\).*compare"):
        s = r.summary()
    assert s.loc["a", "success"] == pytest.approx(1 / 3) and s.loc["a", "samples"] == 3
    assert s.loc["a", "cost_per_success"] == pytest.approx(0.05)  # every dollar a spent, over its one success
    assert s.loc["b", "cost_per_success"] == pytest.approx(0.02)
    assert 0.0 <= s.loc["a", "success_lo"] <= s.loc["a", "success"] <= s.loc["a", "success_hi"] <= 1.0


def test_equal_samples_give_no_warning_and_a_config_without_successes_costs_infinity_per_success():
    import warnings

    r = result_of([("t0", "a", 0, "done", "done", 0.01, 1.0), ("t0", "b", 0, "stopped", "budget", 0.03, None)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = r.summary()
    assert s.loc["b", "cost_per_success"] == float("inf")


def test_compare_pairs_configs_by_task_and_averages_repeats_first():
    spec = []
    for i in range(8):
        for rep in range(2):
            spec.append(
                (
                    f"t{i}",
                    "a",
                    rep,
                    "done" if i % 2 else "stopped",
                    "done" if i % 2 else "budget",
                    0.01 + i / 1000,
                    None,
                )
            )
            spec.append((f"t{i}", "b", rep, "done", "done", 0.02 + i / 1000, None))
    spec.append(("t9", "b", 0, "done", "done", 5.0, None))  # a task only b ran: not in the comparison
    c = result_of(spec).compare("a", "b")
    assert c.loc["success", "tasks"] == 8 and c.loc["cost", "tasks"] == 8
    assert c.loc["success", "a"] == 0.5 and c.loc["success", "b"] == 1.0 and c.loc["success", "difference"] == 0.5
    assert 0 < c.loc["success", "lo"] <= 0.5 <= c.loc["success", "hi"]
    assert c.loc["cost", "difference"] == pytest.approx(0.01)  # paired: the task mix cancels out
    assert c.loc["cost", "lo"] == pytest.approx(0.01) and c.loc["cost", "hi"] == pytest.approx(0.01)
    with pytest.raises(ValueError, match="no config named 'z'"):
        result_of(spec).compare("a", "z")


def test_repeat_spread_separates_repeats_of_a_task_from_differences_between_tasks():
    spec = [(f"t{i}", "a", rep, "done", "done", i * 0.1 + rep * 0.001, None) for i in range(4) for rep in range(3)]
    spread = result_of(spec, configs=("a",)).repeat_spread()
    assert spread.loc["a", "tasks"] == 4
    assert spread.loc["a", "cost_sd_within"] == pytest.approx(0.001)
    assert spread.loc["a", "cost_sd_between"] > 50 * spread.loc["a", "cost_sd_within"]
    assert spread.loc["a", "success_sd_within"] == 0.0


def test_a_stream_cut_short_by_stop_is_charged_to_the_shared_total():
    """The part of a streamed reply that arrived before Stop was paid for: the experiment's ledger counts it."""
    from agentlab.models.anthropic import AnthropicModel
    from agentlab.testing import MessagesServer, streamed

    ledger = TotalLedger(1.0)
    with MessagesServer([streamed(reply("word " * 400), chunk=10, hold_after=6, hold=30)]) as server:

        async def main():
            run = agentlab.Run("Where?", model=AnthropicModel(client=server.client()), prices=PRICES, ledger=ledger)
            run.subscribe(lambda e: run.cancel() if e.kind == "model_delta" else None)
            try:
                return await run.run()
            finally:
                ledger.release(run.run_id)  # what an experiment does as a run ends

        result = asyncio.run(main())
    assert result.reason == "cancelled" and result.spent > 0
    assert ledger.spent == pytest.approx(result.spent) and ledger.reserved == pytest.approx(0.0, abs=1e-12)

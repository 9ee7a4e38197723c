"""Traces as DataFrames: documented columns and dtypes, numbers that match the run, readable reprs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import agentlab as al
from agentlab import reply

from .helpers import PRICES, lookup

DOCS = Path(__file__).resolve().parent.parent / "docs" / "traces.md"


@al.tool(mode="write")
def refund(order_id: int) -> str:
    """Refund an order."""
    raise al.PermissionDenied("refunds need a supervisor")


def flaky_tool():
    tries = []

    @al.tool(mode="read", retry=al.Retry(max_attempts=4))
    def flaky() -> str:
        """Fails twice, then answers."""
        tries.append(1)
        if len(tries) < 3:
            raise al.RetryableError("503 Service Unavailable")
        return "finally"

    return flaky


def a_run(folder: Path, script, tools=(lookup,), **kw):
    options = {"max_cost": 1.0, "prices": PRICES, "clock": al.FakeClock(), "trace": folder, **kw}
    return al.run("look things up", list(tools), model=al.ScriptedModel(script), **options)


def documented_columns(section: str) -> list[str]:
    """The column names listed in docs/traces.md under **section**, in order."""
    text = DOCS.read_text(encoding="utf-8")
    table = text.split(f"**{section}**", 1)[1].split("\n\n", 2)[1]
    return [m for m in re.findall(r"^\| `([a-z_]+)` \| (?!—)", table, flags=re.M)]  # "—": a store-only column


def test_frames_have_exactly_the_documented_columns_and_dtypes(tmp_path):
    """runs/steps/calls/events carry the columns docs/traces.md lists, with numeric, bool and datetime dtypes."""
    a_run(tmp_path, [reply(None, ("lookup", {"key": "a"})), reply("done")])
    t = al.load_runs(tmp_path)
    for name in ("runs", "steps", "calls", "events"):
        assert list(getattr(t, name).columns) == documented_columns(name), name
    assert str(t.runs["started_at"].dtype) == "datetime64[ns, UTC]"
    for col in ("steps", "model_calls", "input_tokens", "output_tokens", "nudges"):
        assert t.runs[col].dtype == "int64", col
    for col in ("cost", "seconds", "max_steps", "max_cost", "deadline_s"):
        assert t.runs[col].dtype == "float64", col
    for col in ("step", "input_tokens", "context_tokens", "tool_calls"):
        assert t.steps[col].dtype == "int64", col
    assert t.steps["estimated"].dtype == bool and t.steps["cumulative_cost"].dtype == "float64"
    assert t.calls["attempts"].dtype == "int64" and t.calls["duration"].dtype == "float64"
    assert t.calls["is_error"].dtype == bool and isinstance(t.calls["args"].iloc[0], dict)
    assert t.events["seq"].dtype == "int64" and isinstance(t.events["data"].iloc[0], dict)


def test_an_empty_runs_folder_gives_empty_frames_with_the_same_columns(tmp_path):
    """No runs yet: four empty frames that still have every column, so analysis code runs unchanged."""
    (tmp_path / "runs").mkdir()
    t = al.load_runs(tmp_path / "runs")
    assert len(t) == 0
    for name in ("runs", "steps", "calls", "events"):
        frame = getattr(t, name)
        assert frame.empty and list(frame.columns) == documented_columns(name)
    assert t.steps["cost"].dtype == "float64" and str(t.runs["started_at"].dtype) == "datetime64[ns, UTC]"


def test_a_missing_runs_folder_is_a_clear_error_naming_it(tmp_path):
    """Loading from a folder that does not exist says which folder and how to point elsewhere."""
    with pytest.raises(FileNotFoundError, match=r"no runs folder at .*nowhere.*AGENTLAB_RUNS"):
        al.load_runs(tmp_path / "nowhere")


def test_runs_and_steps_rows_match_the_result_the_run_returned(tmp_path):
    """Cost, steps, tokens and outcome in the frames equal what Done reported; cumulative cost ends at the total."""
    script = [reply(None, ("lookup", {"key": f"k{i}"})) for i in range(3)] + [reply("four steps")]
    done = a_run(tmp_path, script)
    t = al.load_run(done.run_id, tmp_path)
    row = t.runs.iloc[0]
    assert (row["run_id"], row["outcome"], row["reason"], row["steps"], row["model_calls"]) == (
        done.run_id,
        "done",
        "done",
        4,
        4,
    )
    assert row["cost"] == pytest.approx(done.spent)
    assert row["task"] == "look things up" and row["model"] == "claude-sonnet-4-5"
    assert (row["max_steps"], row["max_cost"], row["deadline_s"]) == (8.0, 1.0, 60.0)
    steps = t.steps
    assert list(steps["step"]) == [1, 2, 3, 4]
    assert list(steps["tool_calls"]) == [1, 1, 1, 0]
    assert steps["cumulative_cost"].iloc[-1] == pytest.approx(done.spent)
    assert steps["cost"].sum() == pytest.approx(done.spent)
    assert steps["cumulative_cost"].is_monotonic_increasing
    assert steps["context_tokens"].is_monotonic_increasing  # the history grows every step
    assert row["input_tokens"] == steps["input_tokens"].sum()
    assert list(steps["stop_reason"]) == ["tool_use"] * 3 + ["end_turn"]


def test_reported_usage_with_cache_tokens_lands_in_its_own_columns(tmp_path):
    """A reply that reports cache writes and reads fills the cache columns and the context size."""
    usage = {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_creation_input_tokens": 400,
        "cache_read_input_tokens": 900,
    }
    a_run(tmp_path, [reply("cached", usage=usage)])
    t = al.load_runs(tmp_path)
    s = t.steps.iloc[0]
    assert (s["input_tokens"], s["output_tokens"], s["cache_write_tokens"], s["cache_read_tokens"]) == (
        100,
        20,
        400,
        900,
    )
    assert s["context_tokens"] == 1400 and not s["estimated"]
    r = t.runs.iloc[0]
    assert (r["cache_write_tokens"], r["cache_read_tokens"]) == (400, 900)


def test_calls_frame_records_each_outcome_kind_with_attempts_and_times(tmp_path):
    """ok, retried (with its attempts), nudged and fatal calls each get a row with args, mode and duration."""
    script = [
        reply(None, ("lookup", {"key": "a"}), ("flaky", {})),
        reply(None, ("lookup", {"key": "a"})),
        reply(None, ("lookup", {"key": "a"})),
        reply(None, ("refund", {"order_id": 7})),
    ]
    stopped = a_run(tmp_path, script, tools=(lookup, flaky_tool(), refund), loop_nudge_at=3)
    assert stopped.reason == "fatal"
    calls = al.load_run(stopped.run_id, tmp_path).calls
    got = list(zip(calls["step"], calls["tool"], calls["outcome"], calls["attempts"], strict=True))
    assert got == [
        (1, "lookup", "ok", 1),
        (1, "flaky", "retried", 3),
        (2, "lookup", "ok", 1),
        (3, "lookup", "nudged", 0),
        (4, "refund", "fatal", 1),
    ]
    assert list(calls["mode"]) == ["read", "read", "read", "read", "write"]
    assert calls["args"].iloc[4] == {"order_id": 7}
    assert list(calls["is_error"]) == [False, False, False, False, True]  # a nudge repeats an ok result
    assert (calls["duration"] == calls["end"] - calls["start"]).all()
    assert calls["duration"].iloc[1] > 0  # the retried call waited out its backoff on the fake clock
    assert "PermissionDenied" in calls["result_preview"].iloc[4]
    runs = al.load_runs(tmp_path).runs
    assert (runs["nudges"].iloc[0], runs["reason"].iloc[0]) == (1, "fatal")


def test_result_previews_are_capped_at_200_characters(tmp_path):
    """A huge tool result is previewed in 200 characters; the full text stays in the events."""
    big = al.tool(mode="read", name="big")(lambda: "y" * 5000)
    done = a_run(tmp_path, [reply(None, ("big", {})), reply("ok")], tools=(big,))
    t = al.load_run(done.run_id, tmp_path)
    assert len(t.calls["result_preview"].iloc[0]) == 200
    finished = t.events[t.events["kind"] == "tool_finished"]["data"].iloc[0]
    assert finished["result"] == "y" * 5000


def test_load_runs_gathers_many_runs_and_one_run_is_found_by_id_or_prefix(tmp_path):
    """Several runs land in one frame each keyed by run id; load_run accepts a unique prefix and names unknown ids."""
    ids = []
    for i in range(3):
        r = a_run(tmp_path, [reply(None, ("lookup", {"key": "x"})), reply(f"answer {i}")], run_id=f"run{i}-abc")
        ids.append(r.run_id)
    t = al.load_runs(tmp_path)
    assert sorted(t.runs["run_id"]) == ids
    assert t.steps.groupby("run_id").size().to_dict() == {i: 2 for i in ids}
    assert t.run("run1-abc").finished["text"] == "answer 1"
    assert al.load_run("run2", tmp_path).run_id == "run2-abc"
    with pytest.raises(ValueError, match="matches 3 runs"):
        al.load_run("run", tmp_path)
    with pytest.raises(FileNotFoundError, match="no trace for run 'zzz'.*run0-abc"):
        al.load_run("zzz", tmp_path)
    with pytest.raises(ValueError, match="run_id must be a non-empty string"):
        al.load_run("", tmp_path)


def test_trace_repr_reads_as_a_per_step_summary(tmp_path):
    """repr(trace) gives the ending, budgets, tools and one line per step; step(k) shows args and results."""
    script = [reply("first", ("lookup", {"key": "alpha"})), reply(None, ("refund", {"order_id": 42}))]
    stopped = a_run(tmp_path, script, tools=(lookup, refund))
    trace = al.load_run(stopped.run_id, tmp_path)
    text = repr(trace)
    assert f"Run {stopped.run_id} · stopped: fatal" in text
    assert "tools: lookup (read), refund (write)" in text
    assert re.search(r"^\s+1\s+\$\d\.\d{4}\s+\$\d\.\d{4}\s+\d+/\d+\s+[\d.]+s\s+lookup ok$", text, re.M)
    assert re.search(r"^\s+2 .* refund fatal$", text, re.M)
    step2 = repr(trace.step(2))
    assert 'refund [write]({"order_id": 42}) → fatal' in step2
    assert "user: ← toolu_0001: value of alpha" in step2
    assert "sent 3 messages, 1 new since the last reply" in step2 and "assistant: first" not in step2.split("reply:")[0]
    assert "user: look things up" in repr(trace.step(1))
    assert "run stopped: fatal" in step2
    html = trace._repr_html_()
    assert "<table>" in html and "refund fatal" in html
    assert "refund" in trace.step(2)._repr_html_()


def test_done_and_stopped_render_in_a_notebook_and_a_terminal(tmp_path):
    """Results have a one-line repr and an HTML table naming outcome, reason and run id."""
    done = a_run(tmp_path, [reply("the answer")])
    assert repr(done).startswith("Done('the answer', steps=1")
    assert "the answer" in done._repr_html_() and done.run_id in done._repr_html_()
    stopped = a_run(tmp_path, [reply(None, ("refund", {"order_id": 1}))], tools=(refund,))
    assert repr(stopped).startswith("Stopped('fatal',")
    assert "fatal" in stopped._repr_html_() and "<table" in stopped._repr_html_()


def test_the_args_column_turns_into_text_like_any_column(tmp_path):
    """``calls["args"].astype(str)`` (a notebook's way to key calls) gives each call's arguments as text,
    whatever pandas' string dtype is."""
    r = al.run(
        "q",
        [lookup],
        model=al.ScriptedModel([al.reply(None, ("lookup", {"key": "k1"})), al.reply("done")]),
        trace=tmp_path,
    )
    args = al.load_run(r.run_id, tmp_path).calls["args"]
    assert list(args.astype(str)) == [str({"key": "k1"})]
    assert args.astype(object).iloc[0] == {"key": "k1"}

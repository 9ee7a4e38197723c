"""Importing real agents' records: Claude Code sessions, mini-swe-agent / SWE-agent
trajectories and Messages API logs become native traces.

The fixtures under ``tests/fixtures/recorded`` are real files from public
MIT-licensed repositories (see the README there); the expectations below are
computed from those files by a plain reading, independent of the importer.
"""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import pytest

import agentlab
from agentlab.recorded import UnrecognizedFormat, import_recorded, load_recorded
from agentlab.trace import Trace, Traces, TruncatedTraceWarning, load_run

FIX = Path(__file__).parent / "fixtures" / "recorded"
CC = FIX / "claude_code"
SESSION = CC / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
TOOL_HEAVY = CC / "tool_heavy.jsonl"
MINI = FIX / "mini_swe_agent" / "django__django-16255.traj.json"
MINI_OLD = FIX / "mini_swe_agent" / "github_issue.traj.json"
SWE = FIX / "swe_agent" / "6e44b9__sweagenttestrepo-1c2844.traj"


def plain_claude_code_calls(path: Path) -> list[dict]:
    """Each API call of a Claude Code file as a plain reading sees it: the last line of each
    message id (its final usage), skipping <synthetic> and sidechain lines."""
    calls: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        d = json.loads(line)
        if d.get("type") != "assistant" or d.get("isSidechain"):
            continue
        m = d["message"]
        if m.get("model") == "<synthetic>":
            continue
        calls[m["id"]] = {"model": m["model"], "usage": m["usage"]}  # later lines overwrite: the final usage wins
    return list(calls.values())


def steps_of(traces: Traces | Trace, prefix: str) -> list[dict]:
    runs = [traces] if isinstance(traces, Trace) else [t for t in traces if t.run_id.startswith(prefix) and "agent-" not in t.run_id]
    rows = []
    for t in runs:
        rows += t.steps.to_dict("records")
    return rows


# ------------------------------------------------------------ Claude Code
def test_claude_code_step_tokens_equal_a_plain_reading_of_the_file():
    traces = load_recorded(SESSION)
    expected = plain_claude_code_calls(SESSION)
    got = steps_of(traces, SESSION.stem)
    assert len(got) == len(expected) > 20
    for row, call in zip(got, expected, strict=True):
        u = call["usage"]
        assert row["input_tokens"] == u["input_tokens"]
        assert row["output_tokens"] == u["output_tokens"]
        assert row["cache_read_tokens"] == u["cache_read_input_tokens"]
        assert row["cache_write_tokens"] == u["cache_creation_input_tokens"]


def test_a_call_written_over_several_lines_is_one_step_with_all_its_blocks_and_final_usage():
    trace = load_recorded(TOOL_HEAVY)
    assert isinstance(trace, Trace)
    lines = [json.loads(x) for x in TOOL_HEAVY.read_text().splitlines()]
    assistant_lines = [d for d in lines if d.get("type") == "assistant"]
    ids = list(dict.fromkeys(d["message"]["id"] for d in assistant_lines))
    assert len(assistant_lines) > len(ids)  # the real file spreads calls over lines
    assert len(trace) == len(ids) == 4
    # step 3 is message msg_01Lbyj...: text, thinking and two tool calls on four lines
    step3 = trace.step(3)
    assert [b["type"] for b in step3.reply["content"]] == ["text", "thinking", "tool_use", "tool_use"]
    assert [c["tool"] for c in step3.calls] == ["WebSearch", "Glob"]
    # the last line's usage counts (output 173 there; the earlier lines said 11)
    last = [d for d in assistant_lines if d["message"]["id"] == ids[3]][-1]["message"]["usage"]["output_tokens"]
    assert trace.steps["output_tokens"].iloc[3] == last == 173
    assert trace.summary["output_tokens"] == sum(
        [d for d in assistant_lines if d["message"]["id"] == i][-1]["message"]["usage"]["output_tokens"] for i in ids
    )


def test_tool_results_that_arrive_between_lines_of_one_call_are_matched_by_id():
    trace = load_recorded(TOOL_HEAVY)
    calls = trace.calls
    assert (calls["outcome"] == "ok").all()
    glob = calls[calls["tool"] == "Glob"].iloc[0]
    assert "app.js" in glob["result_preview"]
    assert glob["duration"] >= 0  # from the tool_use line's timestamp to the result's


def test_compaction_and_a_model_switch_start_new_segments_of_the_same_session():
    traces = load_recorded(SESSION)
    main = [t for t in traces if "agent-" not in t.run_id]
    assert [t.started["recorded"]["boundary"] for t in main] == [None, "model switch", "compact"]
    assert [t.started["model"] for t in main] == ["claude-opus-4-6", "claude-haiku-4-5-20251001", "claude-opus-4-6"]
    assert {t.started["recorded"]["session"] for t in main} == {"ae4a77f8-aedd-4bc1-888f-c94edc91af04"}
    assert main[2].started["recorded"]["previous"] == main[1].run_id
    # the context drops at the compaction boundary (the file records the size it had before)
    before = main[2].started["recorded"]["pre_tokens"]
    after = main[2].steps["context_tokens"].iloc[0]
    assert after < before / 2
    # the compacted segment starts from the summary, not the old history
    assert "continued from a previous conversation" in main[2].messages_at(1)[0]["content"][0]["text"]


@pytest.mark.parametrize("path", [CC, SESSION], ids=["folder", "session-file"])
def test_a_subagent_is_its_own_run_linked_to_the_call_that_started_it(path):
    traces = load_recorded(path)  # a session file brings the subagents/ beside it
    sub = traces[f"{SESSION.stem}-agent-aac57f5"]
    parent = sub.started["parent"]
    assert parent["run_id"] == SESSION.stem
    spawned = traces[parent["run_id"]].step(parent["step"])
    assert parent["tool_use_id"] in [b["id"] for b in spawned.tool_uses]
    assert sub.started["model"] == "claude-sonnet-4-5-20250929"


def test_sidechain_lines_inside_a_session_file_become_their_own_linked_run(tmp_path):
    sub = FIX / "claude_code" / SESSION.stem / "subagents" / "agent-aac57f5.jsonl"
    f = tmp_path / "mixed.jsonl"
    f.write_text(TOOL_HEAVY.read_text() + sub.read_text())
    traces = load_recorded(f)
    assert [t.run_id for t in traces] == ["mixed", "mixed-aac57f5"]
    side = traces["mixed-aac57f5"]
    assert side.started["parent"]["run_id"] == "mixed"
    assert len(side) == len(load_recorded(sub)) and len(traces["mixed"]) == 4


def test_synthetic_lines_are_not_calls_and_unknown_line_types_are_counted(tmp_path):
    lines = TOOL_HEAVY.read_text().splitlines()
    first_call = json.loads(next(x for x in lines if '"type":"assistant"' in x))
    synthetic = dict(first_call, uuid="synthetic-1", message={
        **first_call["message"], "id": "msg_synthetic", "model": "<synthetic>",
        "content": [{"type": "text", "text": "No response requested."}], "usage": {"input_tokens": 0, "output_tokens": 0},
    })
    odd = {"type": "brand-new-kind", "sessionId": first_call["sessionId"], "uuid": "odd-1"}
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join([*lines, json.dumps(synthetic), json.dumps(odd), json.dumps(odd | {"uuid": "odd-2"})]) + "\n")
    trace = load_recorded(f)
    assert len(trace) == 4  # the synthetic line added no step
    rec = trace.started["recorded"]
    assert rec["skipped_lines"] == {"brand-new-kind": 2}
    assert rec["synthetic_lines"] == 1


def test_a_truncated_last_line_warns_and_keeps_everything_before_it(tmp_path):
    text = TOOL_HEAVY.read_text()
    f = tmp_path / "cut.jsonl"
    f.write_text(text + '{"type":"assistant","message":{"id":"msg_cut","usa')
    with pytest.warns(TruncatedTraceWarning, match="last line"):
        trace = load_recorded(f)
    assert len(trace) == 4


def test_an_unrecognised_file_names_the_formats_tried_and_its_first_line(tmp_path):
    f = tmp_path / "notes.jsonl"
    f.write_text('{"hello": "world", "n": 1}\n')
    with pytest.raises(UnrecognizedFormat) as err:
        load_recorded(f)
    msg = str(err.value)
    for name in ("claude-code", "mini-swe-agent", "swe-agent", "messages-log"):
        assert name in msg
    assert '{"hello": "world", "n": 1}' in msg


def test_imported_content_is_redacted_like_a_native_trace(tmp_path):
    lines = TOOL_HEAVY.read_text().splitlines()
    i = next(n for n, x in enumerate(lines) if '"tool_result"' in x)
    d = json.loads(lines[i])
    d["message"]["content"][0]["content"] = "export ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
    lines[i] = json.dumps(d)
    f = tmp_path / "secret.jsonl"
    f.write_text("\n".join(lines) + "\n")
    trace = load_recorded(f)
    dumped = json.dumps(trace.records)
    assert "sk-ant-api03-abcdefghij" not in dumped
    assert "[redacted]" in dumped


# ------------------------------------------------------------ trajectories
def test_mini_swe_agent_usage_maps_openai_fields_and_keeps_the_recorded_cost():
    doc = json.loads(MINI.read_text())
    calls = [m for m in doc["messages"] if m["role"] == "assistant"]
    trace = load_recorded(MINI)
    steps = trace.steps
    assert len(steps) == len(calls) == doc["info"]["model_stats"]["api_calls"]
    for (_, row), m in zip(steps.iterrows(), calls, strict=True):
        u = m["extra"]["response"]["usage"]
        cached = u["prompt_tokens_details"]["cached_tokens"]
        assert row["input_tokens"] + row["cache_read_tokens"] == u["prompt_tokens"]
        assert row["cache_read_tokens"] == cached
        assert row["output_tokens"] == u["completion_tokens"]
    rec = trace.started["recorded"]
    assert rec["recorded_cost"] == pytest.approx(doc["info"]["model_stats"]["instance_cost"])
    assert rec["exit_status"] == "Submitted"
    recorded = [e["recorded_cost"] for e in trace.records if e["kind"] == "model_called"]
    assert recorded == [m["extra"]["response"]["usage"]["cost"] for m in calls]
    # each bash command became a tool call whose result is the next observation
    assert (trace.calls["tool"] == "bash").sum() == len(calls)
    assert trace.step(1).calls[0]["result"].startswith("<returncode>")


def test_a_run_whose_model_has_no_known_price_costs_nan_everywhere_not_zero_and_says_so():
    trace = load_recorded(MINI_OLD)  # an early trajectory: no model name, no usage
    assert trace.steps["cost"].isna().all()
    assert trace.steps["cumulative_cost"].isna().all()
    assert math.isnan(trace.summary["cost"])
    assert math.isnan(Traces([trace], FIX).runs["cost"].iloc[0])
    assert trace.finished["spent"] is None  # unknown, not $0
    notes = " ".join(trace.started["recorded"]["notes"])
    assert "no price for model" in notes and "NaN" in notes
    assert "estimated" in notes
    assert trace.steps["estimated"].all()


def test_swe_agent_trajectory_imports_with_its_tool_calls_and_run_totals():
    trace = load_recorded(SWE)
    doc = json.loads(SWE.read_text())
    assert trace.started["model"] == "gpt-4o"
    recorded = [c["function"]["name"] for m in doc["history"] for c in m.get("tool_calls") or []]
    assert list(trace.calls["tool"]) == recorded == ["find_file", "open", "edit", "bash", "submit"][: len(recorded)]
    rec = trace.started["recorded"]
    assert rec["recorded_tokens_sent"] == doc["info"]["model_stats"]["tokens_sent"]
    assert rec["recorded_cost"] == pytest.approx(doc["info"]["model_stats"]["instance_cost"])
    assert trace.steps["estimated"].all()  # SWE-agent records no per-call usage


# ------------------------------------------------------------ Messages API logs
def _log_lines() -> list[dict]:
    sys_msgs = [{"role": "user", "content": "What is 2+2? Use the calculator."}]
    r1 = {"id": "msg_1", "model": "claude-sonnet-4-5", "content": [{"type": "tool_use", "id": "tu_1", "name": "calc", "input": {"expr": "2+2"}}],
          "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 50}}
    m2 = [*sys_msgs, {"role": "assistant", "content": r1["content"]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "4"}]}]
    r2 = {"id": "msg_2", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "4"}], "stop_reason": "end_turn",
          "usage": {"input_tokens": 130, "output_tokens": 5}}
    other = {"id": "msg_3", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
             "usage": {"input_tokens": 10, "output_tokens": 2}}
    return [
        {"timestamp": "2026-01-01T00:00:00Z", "latency_ms": 800, "request": {"model": "claude-sonnet-4-5", "messages": sys_msgs}, "response": r1},
        {"timestamp": "2026-01-01T00:00:02Z", "latency_ms": 500, "request": {"model": "claude-sonnet-4-5", "messages": m2}, "response": r2},
        {"timestamp": "2026-01-01T00:05:00Z", "request": {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hello"}]}, "response": other},
    ]


def test_a_messages_api_log_becomes_one_run_per_conversation(tmp_path):
    f = tmp_path / "proxy.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in _log_lines()) + "\n")
    traces = load_recorded(f)
    assert isinstance(traces, Traces) and len(traces) == 2
    first = traces.traces[0]
    assert len(first) == 2
    assert first.calls.iloc[0]["tool"] == "calc" and first.calls.iloc[0]["result_preview"] == "4"
    assert list(first.steps["input_tokens"]) == [100, 130]
    assert first.steps["latency"].iloc[0] == pytest.approx(0.8)
    assert first.messages_at(2) == _log_lines()[1]["request"]["messages"]


# ------------------------------------------------------------ folders, CLI, native files
def test_import_writes_native_trace_files_that_load_run_reads_back(tmp_path):
    files = import_recorded(CC, tmp_path / "runs")
    assert len(files) == 7  # the session (3 segments, 2 subagents), tool_heavy, multi_turn
    native = load_run("tool_heavy", tmp_path / "runs")
    imported = load_recorded(TOOL_HEAVY)
    assert native.records == json.loads(json.dumps(imported.records))
    assert native.summary["cost"] == pytest.approx(imported.summary["cost"])


def test_agentlab_import_command_writes_runs_and_rejects_unknown_files(tmp_path, capsys):
    from agentlab.cli import main

    assert main(["import", str(MINI), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "django__django-16255.jsonl").is_file()
    bad = tmp_path / "x.jsonl"
    bad.write_text("not json at all\n")
    assert main(["import", str(bad), "--out", str(tmp_path)]) == 2
    assert "tried claude-code" in capsys.readouterr().err


# ------------------------------------------------------------ every helper on an imported trace
def test_every_analysis_helper_and_plot_runs_on_imported_traces(tmp_path):
    pytest.importorskip("matplotlib")
    from agentlab import analysis as an
    from agentlab import plots, report

    traces = load_recorded(SESSION)
    t = traces[SESSION.stem + "-seg2"]
    steps, calls = t.steps, t.calls
    fit = an.fit_cost_curve(steps)
    assert fit.r_squared > 0.5
    assert not an.step_costs(steps).empty and not an.run_totals(traces.steps).empty
    repriced = an.reprice(steps, "claude-opus-4-6", caching=False)
    assert repriced["cost"].sum() > steps["cost"].sum()  # without the cache the same run costs more
    grid = an.budget_whatif(traces, max_cost=[0.05, None])
    assert set(grid["max_cost"].dropna()) == {0.05}
    assert not an.tool_latency(calls).empty
    for ax in (
        plots.token_growth(steps), plots.cost_curve(steps, max_cost=0.5), plots.caching_comparison(steps, "claude-opus-4-6"),
        plots.compare_runs(traces.steps), plots.tool_timeline(calls, steps=steps), plots.whatif_grid(grid),
    ):
        assert ax.has_data()
    shutil.rmtree(tmp_path / "runs", ignore_errors=True)
    import_recorded(SESSION, tmp_path / "runs")
    text = report.report_text(t.run_id, runs=tmp_path / "runs")
    assert "claude-opus-4-6" in text and "compact" not in text.split("\n")[0]
    nb = report.export_notebook(t.run_id, tmp_path / "r.ipynb", runs=tmp_path / "runs")
    assert nb.is_file()
    assert repr(t).startswith("Run ") and "<" in t._repr_html_()


def test_top_level_names_reach_the_importer_replay_and_fork():
    assert agentlab.load_recorded is load_recorded
    assert callable(agentlab.fork) and callable(agentlab.replay)
    assert agentlab.ReplayModel.__name__ == "ReplayModel"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not math.isnan(load_recorded(MINI).summary["cost"])

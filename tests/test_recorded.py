"""Importing real agents' records: Claude Code sessions, mini-swe-agent / SWE-agent
trajectories and Messages API logs become native traces.

The fixtures under ``tests/fixtures/recorded`` are real files from public
MIT-licensed repositories (see the README there); the expectations below are
computed from those files by a plain reading, independent of the importer.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
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
    runs = (
        [traces]
        if isinstance(traces, Trace)
        else [t for t in traces if t.run_id.startswith(prefix) and "agent-" not in t.run_id]
    )
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
        # Claude Code 2.1.39 writes the output count the stream started with, never the final one: the
        # step says so (estimated) and its output is never below what the file recorded
        assert row["estimated"] and row["output_tokens"] >= u["output_tokens"]
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
    # the largest count of the call's lines counts (output 173 on the last; the earlier lines said 11)
    last = [d for d in assistant_lines if d["message"]["id"] == ids[3]][-1]["message"]["usage"]["output_tokens"]
    assert trace.steps["output_tokens"].iloc[3] == last == 173
    # 2.1.38 never writes a stop reason: no count can be vouched for as final, each step says so, and
    # no step's output is below the largest count its lines recorded
    recorded = [
        max(d["message"]["usage"]["output_tokens"] for d in assistant_lines if d["message"]["id"] == i) for i in ids
    ]
    assert trace.steps["estimated"].all()
    assert (trace.steps["output_tokens"] >= recorded).all()


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
    synthetic = dict(
        first_call,
        uuid="synthetic-1",
        message={
            **first_call["message"],
            "id": "msg_synthetic",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": "No response requested."}],
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
    )
    odd = {"type": "brand-new-kind", "sessionId": first_call["sessionId"], "uuid": "odd-1"}
    f = tmp_path / "s.jsonl"
    f.write_text(
        "\n".join([*lines, json.dumps(synthetic), json.dumps(odd), json.dumps(odd | {"uuid": "odd-2"})]) + "\n"
    )
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
    r1 = {
        "id": "msg_1",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "tool_use", "id": "tu_1", "name": "calc", "input": {"expr": "2+2"}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 50},
    }
    m2 = [
        *sys_msgs,
        {"role": "assistant", "content": r1["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "4"}]},
    ]
    r2 = {
        "id": "msg_2",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "4"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 130, "output_tokens": 5},
    }
    other = {
        "id": "msg_3",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    return [
        {
            "timestamp": "2026-01-01T00:00:00Z",
            "latency_ms": 800,
            "request": {"model": "claude-sonnet-4-5", "messages": sys_msgs},
            "response": r1,
        },
        {
            "timestamp": "2026-01-01T00:00:02Z",
            "latency_ms": 500,
            "request": {"model": "claude-sonnet-4-5", "messages": m2},
            "response": r2,
        },
        {
            "timestamp": "2026-01-01T00:05:00Z",
            "request": {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hello"}]},
            "response": other,
        },
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
        plots.token_growth(steps),
        plots.cost_curve(steps, max_cost=0.5),
        plots.caching_comparison(steps, "claude-opus-4-6"),
        plots.compare_runs(traces.steps),
        plots.tool_timeline(calls, steps=steps),
        plots.whatif_grid(grid),
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


# ------------------------------------------------------------ counted once
SUB = CC / SESSION.stem / "subagents" / "agent-aac57f5.jsonl"


def _session_folder(tmp_path: Path) -> Path:
    """A project folder holding the real session, its real subagent, and a compaction helper
    written the way Claude Code 2.1.8x writes one: copies of the parent's lines (same uuid,
    same message.id), then the helper's own call."""
    root = tmp_path / "project"
    subs = root / SESSION.stem / "subagents"
    subs.mkdir(parents=True)
    shutil.copy(SESSION, root / SESSION.name)
    shutil.copy(SUB, subs / SUB.name)
    parent = [json.loads(x) for x in SESSION.read_text().splitlines()]
    own = [
        json.loads(x)
        for x in (CC / SESSION.stem / "subagents" / "agent-acompact-946d2b.jsonl").read_text().splitlines()
    ]
    copies = [dict(d, isSidechain=True, agentId="acompact-946d2b") for d in parent[:120]]
    (subs / "agent-acompact-946d2b.jsonl").write_text("\n".join(json.dumps(d) for d in copies + own) + "\n")
    return root


def test_a_compaction_helper_that_copies_its_parent_counts_each_call_once(tmp_path):
    root = _session_folder(tmp_path)
    traces = load_recorded(root)
    helper = traces[f"{SESSION.stem}-agent-acompact-946d2b"]
    own_calls = {
        json.loads(x)["message"]["id"]
        for x in (CC / SESSION.stem / "subagents" / "agent-acompact-946d2b.jsonl").read_text().splitlines()
        if '"assistant"' in x
    }
    assert len(helper) == len(own_calls) == 1  # only the helper's own call is its run's
    copies = [x for x in SESSION.read_text().splitlines()[:120] if '"uuid"' in x]
    assert helper.started["recorded"]["copied_lines"] == len(copies) > 100
    # every API call of the session is counted once across all its files
    ids = [e["request_id"] for t in traces for e in t.records if e["kind"] == "model_called"]
    assert len(ids) == len(set(ids))
    main_calls = plain_claude_code_calls(SESSION)
    assert sum(len(t) for t in traces if "agent-" not in t.run_id) == len(main_calls)


def test_claude_code_2_0_subagents_beside_the_session_are_linked_in_both_layouts(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    shutil.copy(SESSION, root / SESSION.name)
    shutil.copy(SUB, root / "agent-aac57f5.jsonl")  # 2.0.x: beside the session, same sessionId
    for path in (root, root / SESSION.name):  # the folder, and the session file alone
        traces = load_recorded(path)
        sub = traces[f"{SESSION.stem}-agent-aac57f5"]
        assert sub.started["parent"]["run_id"] == SESSION.stem
        assert sub.started["parent"]["tool_use_id"] in [
            b["id"] for b in traces[SESSION.stem].step(sub.started["parent"]["step"]).tool_uses
        ]
        assert len(sub) == len(load_recorded(SUB))


def _sse(message: dict) -> str:
    """The event stream the Messages API sends for ``message`` (the shapes of the SDK's stream events)."""
    u = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**u, "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": start})]
    for i, b in enumerate(message["content"]):
        if b["type"] == "text":
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}},
                ),
            ]
        elif b["type"] == "tool_use":
            events += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": {**b, "input": {}}},
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])},
                    },
                ),
            ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message.get("stop_reason") or "end_turn"},
                "usage": {"output_tokens": u["output_tokens"]},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {k}\ndata: {json.dumps(v)}\n\n" for k, v in events)


@pytest.mark.parametrize("form", ["string", "spread"])
def test_a_line_holding_an_sse_stream_as_a_string_gives_the_streams_real_usage(tmp_path, form):
    lines = [json.loads(x) for x in TOOL_HEAVY.read_text().splitlines()]
    expected = plain_claude_code_calls(TOOL_HEAVY)
    out = []
    for d in lines:
        if d.get("type") == "assistant":
            text = _sse(d["message"])
            d = dict(d, message=text if form == "string" else {str(i): c for i, c in enumerate(text)})
        out.append(d)
    f = tmp_path / "proxied.jsonl"
    f.write_text("\n".join(json.dumps(d) for d in out) + "\n")
    trace = load_recorded(f)
    assert len(trace) == len(expected)
    assert list(trace.steps["output_tokens"]) == [c["usage"]["output_tokens"] for c in expected]
    assert list(trace.steps["cache_read_tokens"]) == [c["usage"]["cache_read_input_tokens"] for c in expected]
    assert not trace.steps["estimated"].any()
    assert [c["tool"] for c in trace.step(3).calls] == ["WebSearch", "Glob"]


def test_swe_agents_synthetic_exit_message_is_not_a_model_call(tmp_path):
    doc = json.loads(SWE.read_text())
    doc["history"].append(
        {
            "role": "assistant",
            "content": "Exit due to context window",
            "thought": "Exit due to context window",
            "action": "",
            "agent": "main",
            "message_type": "action",
        }
    )
    doc["info"]["exit_status"] = "exit_context"
    calls = [m for m in json.loads(SWE.read_text())["history"] if m["role"] == "assistant"]
    f = tmp_path / "ctx.traj"
    f.write_text(json.dumps(doc))
    trace = load_recorded(f)
    assert len(trace) == len(calls)  # the record's own exit message added no step
    assert trace.started["recorded"]["synthetic_messages"] == 1


def test_a_record_whose_counters_disagree_with_the_calls_found_says_so_and_uses_its_totals(tmp_path):
    doc = json.loads(MINI.read_text())  # api_calls 17; drop five replies the way 2.x drops replies without a tool call
    stats = doc["info"]["model_stats"]
    kept, dropped = [], 0
    for m in doc["messages"]:
        if m["role"] == "assistant" and dropped < 5 and len(kept) > 4:
            dropped += 1
            continue
        kept.append(m)
    doc["messages"] = kept
    f = tmp_path / "mini2.traj.json"
    f.write_text(json.dumps(doc))
    trace = load_recorded(f)
    assert len(trace) == stats["api_calls"] - 5
    notes = " ".join(trace.started["recorded"]["notes"])
    assert f"counts {stats['api_calls']} API calls but holds {stats['api_calls'] - 5} replies" in notes
    assert trace.summary["model_calls"] == stats["api_calls"]
    assert trace.summary["cost"] == pytest.approx(stats["instance_cost"])


# ------------------------------------------------------------ never a crash, never a silent guess
def test_a_folder_of_good_files_stubs_empty_and_unknown_files_imports_every_good_run(tmp_path):
    root = tmp_path / "mix"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    shutil.copy(TOOL_HEAVY, root / "a" / "tool_heavy.jsonl")
    shutil.copy(MINI, root / "b" / MINI.name)
    (root / "empty.jsonl").write_text("")
    (root / "teleported.jsonl").write_text('{"type":"teleported-from"}\n')
    (root / "notes.json").write_text('{"hello": "world"}')
    (root / "broken.traj.json").write_text('{"messages": [')
    # a real session whose first line is longer than 64 KiB (a big queue-operation)
    first = json.loads(TOOL_HEAVY.read_text().splitlines()[0])
    big = {
        "type": "queue-operation",
        "operation": "enqueue",
        "content": "x" * 80_000,
        "sessionId": first.get("sessionId"),
    }
    other = (
        TOOL_HEAVY.read_text()
        .replace('"uuid":"', '"uuid":"other-')
        .replace('"id":"msg_', '"id":"msg_other')
        .replace('"requestId":"req_', '"requestId":"req_other')
    )  # another session (other requests)
    (root / "long_first.jsonl").write_text(json.dumps(big) + "\n" + other)
    from agentlab.recorded import ImportReport, SkippedFileWarning

    report = ImportReport()
    with pytest.warns(SkippedFileWarning) as caught:
        traces = load_recorded(root, report=report)
    assert sorted(t.run_id for t in traces) == ["django__django-16255", "long_first", "tool_heavy"]
    assert len(traces["long_first"]) == len(traces["tool_heavy"]) == 4
    skipped = {p.name: why for p, why in report.skipped}
    assert set(skipped) == {"empty.jsonl", "teleported.jsonl", "notes.json", "broken.traj.json"}
    assert "empty" in skipped["empty.jsonl"] and "not a recorded run" in skipped["teleported.jsonl"]
    assert len(caught) == 4 and all(str(root) in str(w.message) for w in caught)
    assert (report.files_read, report.runs) == (7, 3)


def test_agentlab_import_reports_files_read_runs_made_and_files_skipped(tmp_path, capsys):
    from agentlab.cli import main

    root = tmp_path / "in"
    root.mkdir()
    shutil.copy(TOOL_HEAVY, root / "s.jsonl")
    (root / "x.jsonl").write_text('{"type":"teleported-from"}\n')
    assert main(["import", str(root), "--out", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "2 file(s) read, 1 run(s) made, 1 skipped" in out
    assert f"skipped {root / 'x.jsonl'}: not a recorded run" in out


def test_the_report_of_an_unpriced_imported_run_says_no_price_instead_of_crashing(tmp_path, capsys):
    from agentlab.cli import main

    assert main(["import", str(MINI_OLD), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["report", MINI_OLD.name.removesuffix(".traj.json"), "--runs", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "no price for model" in text and "$0.0000" not in text


def test_the_recorded_cost_stays_beside_the_repriced_one_in_steps_and_runs():
    trace = load_recorded(MINI)
    doc = json.loads(MINI.read_text())
    recorded = [m["extra"]["response"]["usage"]["cost"] for m in doc["messages"] if m["role"] == "assistant"]
    assert list(trace.steps["recorded_cost"]) == pytest.approx(recorded)
    runs = Traces([trace], FIX).runs
    assert runs["recorded_cost"].iloc[0] == pytest.approx(doc["info"]["model_stats"]["instance_cost"])
    assert runs["cost"].iloc[0] == pytest.approx(trace.steps["cost"].sum())  # repriced, beside it


@pytest.mark.parametrize("model", ["openrouter/x-ai/grok-4-fast", "qwen/qwen3-coder"])
def test_models_routed_through_openrouter_get_openrouters_prices(tmp_path, model):
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    doc = json.loads(MINI.read_text())
    doc["info"]["config"]["model"]["model_name"] = model
    for m in doc["messages"]:
        if m["role"] == "assistant":
            m["extra"]["response"]["model"] = model
    f = tmp_path / "routed.traj.json"
    f.write_text(json.dumps(doc))
    trace = load_recorded(f)
    assert not trace.steps["cost"].isna().any()
    ref = model.removeprefix("openrouter/")
    for _, row in trace.steps.iterrows():  # genai-prices counts cache reads inside input_tokens
        expected = calc_price(
            GUsage(
                input_tokens=int(row["input_tokens"] + row["cache_read_tokens"]),
                output_tokens=int(row["output_tokens"]),
                cache_read_tokens=int(row["cache_read_tokens"]),
            ),
            model_ref=ref,
            provider_id="openrouter",
        )
        assert row["cost"] == pytest.approx(float(expected.total_price))


def test_a_fork_of_a_record_without_usage_uses_the_run_default_max_tokens_not_one_derived_from_the_record():
    from agentlab.forking import fork

    trace = load_recorded(MINI_OLD)  # no usage recorded at all
    branch = fork(trace, at_step=2, model=agentlab.ScriptedModel([agentlab.reply("done")]))
    import inspect

    assert branch.max_tokens == inspect.signature(agentlab.Run).parameters["max_tokens"].default
    assert (
        fork(trace, at_step=2, max_tokens=321, model=agentlab.ScriptedModel([agentlab.reply("ok")])).max_tokens == 321
    )


def test_a_one_line_subagent_file_replays_its_reply(tmp_path):
    import asyncio

    line = next(x for x in SUB.read_text().splitlines() if '"type":"assistant"' in x)
    f = tmp_path / "agent-one.jsonl"
    f.write_text(line + "\n")
    trace = load_recorded(f)
    run = agentlab.replay(trace)
    result = asyncio.run(run.run())
    assert type(result).__name__ == "Done" and run.steps == len(trace) == 1
    assert run.spent == pytest.approx(trace.summary["cost"])


def test_two_trajectories_with_the_same_stem_get_unique_ids_and_an_existing_run_is_never_overwritten(tmp_path):
    root = tmp_path / "swebench"
    for config in ("cfg_a", "cfg_b"):  # two runs of one instance (other requests: a copy's calls count once)
        (root / config / "django__django-16255").mkdir(parents=True)
        text = MINI.read_text().replace('"id": "gen-', f'"id": "{config}-gen-')
        (root / config / "django__django-16255" / MINI.name).write_text(text)
    out = tmp_path / "runs"
    written = import_recorded(root, out)
    assert len(written) == 2 and len({p.name for p in written}) == 2
    before = {p: p.read_bytes() for p in written}
    again = import_recorded(root, out)
    assert list(again) == [] and len(again.skipped) == 2 and "--force" in again.skipped[0][1]
    assert {p: p.read_bytes() for p in written} == before
    assert len(import_recorded(root, out, force=True)) == 2


def test_a_session_with_only_synthetic_replies_fails_the_same_way_in_the_api_and_the_cli(tmp_path, capsys):
    from agentlab.cli import main
    from agentlab.recorded import NoCalls

    first = json.loads(next(x for x in TOOL_HEAVY.read_text().splitlines() if '"type":"assistant"' in x))
    user = json.loads(next(x for x in TOOL_HEAVY.read_text().splitlines() if '"type":"user"' in x))
    synthetic = dict(
        first,
        message={
            **first["message"],
            "id": "msg_s",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": "No response requested."}],
        },
    )
    f = tmp_path / "synthetic.jsonl"
    f.write_text(json.dumps(user) + "\n" + json.dumps(synthetic) + "\n")
    with pytest.raises(NoCalls, match="no API calls"):
        load_recorded(f)
    assert main(["import", str(f), "--out", str(tmp_path / "runs")]) == 2
    assert "no API calls" in capsys.readouterr().err


# ------------------------------------------------------------ more agents
CODEX = FIX / "codex" / "rollout-2025-11-02T10-00-00-0199a0a0-0000-7000-8000-000000000001.jsonl"
GEMINI = FIX / "gemini_cli" / "session-2025-10-20T09-00-5f0c2a1e.json"
CLINE = FIX / "cline" / "task-1714000000000" / "api_conversation_history.json"
STREAM = FIX / "stream_json" / "claude-p-run.jsonl"


def _steps_equal(trace: Trace, expected: list[dict]) -> None:
    got = trace.steps[["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]].to_dict("records")
    assert got == expected
    assert not trace.steps["estimated"].any()
    for col in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        assert trace.summary[col] == sum(e[col] for e in expected)


def test_codex_rollout_steps_are_its_distinct_token_events_with_openai_usage_mapped():
    lines = [json.loads(x) for x in CODEX.read_text().splitlines()]
    expected, last = [], None
    for d in lines:  # a plain reading: each token_count whose running total moved is one call
        info = d["payload"].get("info") if d["payload"].get("type") == "token_count" else None
        if info and info["total_token_usage"] != last:
            last = info["total_token_usage"]
            u = info["last_token_usage"]
            expected.append(
                {
                    "input_tokens": u["input_tokens"] - u["cached_input_tokens"],
                    "output_tokens": u["output_tokens"],
                    "cache_read_tokens": u["cached_input_tokens"],
                    "cache_write_tokens": 0,
                }
            )
    assert load_recorded.__module__ == "agentlab.recorded"
    trace = load_recorded(CODEX)
    assert isinstance(trace, Trace) and trace.started["recorded"]["format"] == "codex"
    _steps_equal(trace, expected)
    assert trace.started["recorded"]["repeated_usage_events"] == 4
    calls = [d["payload"] for d in lines if d["payload"].get("type") in ("function_call", "custom_tool_call")]
    assert list(trace.calls["tool"]) == [c["name"] for c in calls]
    assert (trace.calls["outcome"] == "ok").all()  # every call matched to its output by call_id
    assert trace.steps["latency"].iloc[0] == pytest.approx(7.5 - 5.002, abs=1e-3)  # turn context -> token event
    assert {"type": "text", "text": "and the test?"} in trace.messages_at(4)[-1][
        "content"
    ]  # the user spoke after step 3
    assert not math.isnan(trace.summary["cost"])  # gpt-5-codex is in genai-prices' OpenAI table


def test_gemini_cli_session_maps_tokens_as_google_bills_them():
    doc = json.loads(GEMINI.read_text())
    calls = [m for m in doc["messages"] if m["type"] == "gemini"]
    expected = [
        {
            "input_tokens": m["tokens"]["input"] - m["tokens"]["cached"] + m["tokens"]["tool"],
            "output_tokens": m["tokens"]["output"] + m["tokens"]["thoughts"],
            "cache_read_tokens": m["tokens"]["cached"],
            "cache_write_tokens": 0,
        }
        for m in calls
    ]
    traces = load_recorded(GEMINI)  # the CLI fell back to flash: one model, one price list per run
    pro, flash = traces.traces
    assert [pro.started["model"], flash.started["model"]] == ["gemini-2.5-pro", "gemini-2.5-flash"]
    assert (
        flash.started["recorded"]["boundary"] == "model switch" and flash.started["recorded"]["previous"] == pro.run_id
    )
    _steps_equal(pro, expected[:2])
    _steps_equal(flash, expected[2:])
    assert flash.messages_at(1)[: len(pro.messages_at(2))] == pro.messages_at(2)  # the history goes on
    assert pro.started["recorded"]["ignored_lines"] == {"info": 1, "error": 1}
    calls = traces.calls
    assert list(calls["tool"]) == ["read_file", "run_shell_command", "replace"]
    assert list(calls["is_error"]) == [False, False, True]
    assert calls.iloc[1]["args"] == {"command": "python -m pytest -q tests/test_parse.py"}  # a Python-repr args string
    assert not traces.steps["cost"].isna().any()
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    row = pro.steps.iloc[0]  # priced from genai-prices' Google table
    google = calc_price(
        GUsage(
            input_tokens=int(row["input_tokens"] + row["cache_read_tokens"]),
            cache_read_tokens=int(row["cache_read_tokens"]),
            output_tokens=int(row["output_tokens"]),
        ),
        model_ref="gemini-2.5-pro",
        provider_id="google",
    )
    assert row["cost"] == pytest.approx(float(google.total_price))


def test_cline_task_reads_usage_from_ui_messages_or_the_messages_metrics_and_is_never_misread_as_mini_swe_agent():
    from agentlab.recorded.detect import detect

    assert detect(CLINE) == "cline"
    hist = json.loads(CLINE.read_text())
    ui = [
        json.loads(m["text"])
        for m in json.loads((CLINE.parent / "ui_messages.json").read_text())
        if m.get("say") == "api_req_started"
    ]
    expected = []
    for i, m in enumerate(x for x in hist if x["role"] == "assistant"):
        if "metrics" in m:
            t = m["metrics"]["tokens"]
            expected.append(
                {
                    "input_tokens": t["prompt"] - t["cached"],
                    "output_tokens": t["completion"],
                    "cache_read_tokens": t["cached"],
                    "cache_write_tokens": 0,
                }
            )
        else:
            expected.append(
                {
                    "input_tokens": ui[i]["tokensIn"],
                    "output_tokens": ui[i]["tokensOut"],
                    "cache_read_tokens": ui[i]["cacheReads"],
                    "cache_write_tokens": ui[i]["cacheWrites"],
                }
            )
    trace = load_recorded(CLINE)
    _steps_equal(trace, expected)
    assert trace.run_id == "task-1714000000000"
    assert list(trace.calls["tool"]) == ["read_file", "replace_in_file", "attempt_completion"][: len(trace.calls)]
    assert trace.started["recorded"]["recorded_cost"] == pytest.approx(
        ui[0]["cost"] + ui[1]["cost"] + hist[-1]["metrics"]["cost"]
    )
    # the task folder is one run: its ui_messages.json is not reported as a skipped file
    from agentlab.recorded import ImportReport

    report = ImportReport()
    load_recorded(CLINE.parent, report=report)
    assert report.skipped == [] and report.runs == 1


def test_claude_code_stream_json_output_is_read_like_a_session_with_its_subagent_linked():
    lines = [json.loads(x) for x in STREAM.read_text().splitlines()]
    per_call: dict[tuple, dict] = {}
    for d in lines:
        if d["type"] == "assistant":
            per_call[(d["parent_tool_use_id"], d["message"]["id"])] = d["message"][
                "usage"
            ]  # the last line's usage wins
    traces = load_recorded(STREAM)
    main, sub = traces["claude-p-run"], traces["claude-p-run-agent-toolu_T1"]
    for trace, parent in ((main, None), (sub, "toolu_T1")):
        expected = [
            {
                "input_tokens": u["input_tokens"],
                "output_tokens": u["output_tokens"],
                "cache_read_tokens": u["cache_read_input_tokens"],
                "cache_write_tokens": u["cache_creation_input_tokens"],
            }
            for (p, _), u in per_call.items()
            if p == parent
        ]
        _steps_equal(trace, expected)
    assert sub.started["parent"] == {"run_id": "claude-p-run", "step": 2, "tool_use_id": "toolu_T1"}
    result = lines[-1]
    assert main.started["recorded"]["recorded_cost"] == result["total_cost_usd"]
    assert main.started["recorded"]["num_turns"] == result["num_turns"] == len(main) + len(sub)


@pytest.mark.parametrize(
    "path",
    [
        CODEX,
        GEMINI,
        CLINE,
        STREAM,
        FIX / "inspect" / "add_tool.eval",
        FIX / "openhands" / "output.jsonl",
        MINI,
        SWE,
        TOOL_HEAVY,
        CC / "multi_turn.jsonl",
    ],
    ids=lambda p: p.parent.name,
)
def test_every_imported_fixture_replays_to_the_end_the_record_reached(path):
    import asyncio

    loaded = load_recorded(path)
    traces = [loaded] if isinstance(loaded, Trace) else list(loaded)
    for trace in traces:
        run = agentlab.replay(trace)
        result = asyncio.run(run.run())
        if not math.isnan(trace.summary["cost"]) and trace.summary["model_calls"] == len(trace):
            assert run.spent == pytest.approx(trace.summary["cost"]), trace.run_id  # every recorded call, once
        if trace.step(len(trace)).reply.get("stop_reason") == "end_turn":
            assert type(result).__name__ == "Done" and run.steps == len(trace), (trace.run_id, result)
        else:  # the record stops after a tool call: the replay says it holds no further reply
            assert result.reason == "model error", (trace.run_id, result)
            assert f"has {len(trace)} replies" in result.detail


def test_a_gemini_cli_session_written_as_jsonl_reads_like_the_json_one(tmp_path):
    doc = json.loads(GEMINI.read_text())
    meta = {k: v for k, v in doc.items() if k != "messages"}
    f = tmp_path / "session-2025-10-20T09-00-5f0c2a1e.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in [meta, *doc["messages"]]) + "\n")
    as_jsonl, as_json = load_recorded(f), load_recorded(GEMINI)
    assert [t.run_id for t in as_jsonl] == [t.run_id for t in as_json]
    assert as_jsonl.steps.drop(columns=["run_id"]).equals(as_json.steps.drop(columns=["run_id"]))


def test_mini_swe_agent_2_tool_calling_trajectory_matches_tool_results_and_reads_the_exit_message(tmp_path):
    import re

    doc = json.loads(MINI.read_text())  # the real 1.x run, rewritten the way 2.x stores a tool-calling run
    msgs, last_id = [], None
    for i, m in enumerate(doc["messages"]):
        if m["role"] == "assistant":
            cmd = re.findall(r"```bash\s*\n(.*?)\n```", m["content"], re.DOTALL)[0]
            last_id = f"call_{i}"
            m = {
                **m,
                "tool_calls": [
                    {
                        "id": last_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": cmd})},
                    }
                ],
                "extra": {**m["extra"], "actions": [{"command": cmd, "tool_call_id": last_id}]},
            }
        elif m["role"] == "user" and last_id:
            m = {"role": "tool", "tool_call_id": last_id, "content": m["content"]}
        msgs.append(m)
    msgs.append(
        {"role": "exit", "content": "Submitted", "extra": {"exit_status": "Submitted", "submission": "diff --git …"}}
    )
    doc["messages"] = msgs
    doc["trajectory_format"] = "mini-swe-agent-1.1"
    f = tmp_path / "v2.traj.json"
    f.write_text(json.dumps(doc))
    trace = load_recorded(f)
    assert len(trace) == doc["info"]["model_stats"]["api_calls"]
    calls = trace.calls
    assert list(calls["call_id"]) == [
        f"call_{i}" for i, m in enumerate(json.loads(MINI.read_text())["messages"]) if m["role"] == "assistant"
    ]
    assert (calls["outcome"] == "ok").all()
    answers = [b for e in trace.records if e["kind"] == "tool_results" for b in e["content"]]
    assert {"type": "text", "text": "Submitted"} not in answers  # the exit message is no answer to the model
    assert trace.started["recorded"]["exit_status"] == "Submitted" and trace.summary["outcome"] == "done"


INSPECT = FIX / "inspect" / "add_tool.eval"


def test_an_inspect_eval_log_gives_one_run_per_sample_with_each_model_events_usage():
    import zipfile

    zstandard = pytest.importorskip(
        "zstandard"
    )  # the log's entries are zstd-compressed, as inspect 0.3.285 writes them
    with zipfile.ZipFile(INSPECT) as z:
        info = z.getinfo("samples/1_epoch_1.json")
        with open(INSPECT, "rb") as f:  # a plain reading of the zip entry
            f.seek(info.header_offset + 26)
            n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
            f.seek(info.header_offset + 30 + n + m)
            sample = json.loads(zstandard.ZstdDecompressor().decompressobj().decompress(f.read(info.compress_size)))
    expected = []
    for e in sample["events"]:
        if e["event"] == "model":
            u = e["output"]["usage"]
            read, write = u.get("input_tokens_cache_read", 0), u.get("input_tokens_cache_write", 0)
            inside = (read or write) and u["total_tokens"] == u["input_tokens"] + u[
                "output_tokens"
            ]  # cached counted in the input
            expected.append(
                {
                    "input_tokens": u["input_tokens"] - (read + write if inside else 0),
                    "output_tokens": u["output_tokens"],
                    "cache_read_tokens": read,
                    "cache_write_tokens": write,
                }
            )
    trace = load_recorded(INSPECT)
    _steps_equal(trace, expected)
    tools = [e for e in sample["events"] if e["event"] == "tool"]
    assert list(trace.calls["call_id"]) == [e["id"] for e in tools]
    assert list(trace.calls["result_preview"]) == [str(e["result"]) for e in tools]
    assert trace.summary["task"] == sample["input"]
    assert trace.started["recorded"]["sample"] == sample["id"]


OPENHANDS = FIX / "openhands" / "output.jsonl"


def test_openhands_output_gives_a_step_per_llm_response_with_its_token_usage_and_results():
    line = json.loads(OPENHANDS.read_text().splitlines()[0])
    usages = line["metrics"]["token_usages"]
    expected = [
        {
            "input_tokens": u["prompt_tokens"] - u["cache_read_tokens"] - u["cache_write_tokens"],
            "output_tokens": u["completion_tokens"],
            "cache_read_tokens": u["cache_read_tokens"],
            "cache_write_tokens": u["cache_write_tokens"],
        }
        for u in usages
    ]
    trace = load_recorded(OPENHANDS)
    assert trace.run_id == line["instance_id"]
    _steps_equal(trace, expected)  # two actions of one response are one step
    assert list(trace.steps["latency"]) == pytest.approx([x["latency"] for x in line["metrics"]["response_latencies"]])
    assert list(trace.steps["recorded_cost"]) == pytest.approx([c["cost"] for c in line["metrics"]["costs"]])
    assert trace.started["recorded"]["recorded_cost"] == pytest.approx(line["metrics"]["accumulated_cost"])
    observed = {e["tool_call_metadata"]["tool_call_id"]: e["content"] for e in line["history"] if "observation" in e}
    done = trace.calls[trace.calls["outcome"] == "ok"]
    assert dict(zip(done["call_id"], done["result_preview"], strict=True)) == observed
    assert trace.started["system"].startswith("You are OpenHands agent")


def test_a_multi_agent_trajectory_is_a_run_per_agent_each_with_the_history_it_saw_linked_to_one_parent(tmp_path):
    doc = json.loads(SWE.read_text())  # the real trajectory, its history split the CodeR way between two agents
    hist = doc["history"]
    manager = [dict(m, agent="Manager") for m in hist[:4]]
    programmer = [
        {
            "role": "system",
            "content": "You are the Programmer.",
            "agent": "Programmer",
            "message_type": "system_prompt",
        },
        {
            "role": "user",
            "content": "Manager: fix the missing colon.",
            "agent": "Programmer",
            "message_type": "observation",
        },
        *[dict(m, agent="Programmer") for m in hist[4:]],
    ]
    doc["history"] = manager + programmer
    f = tmp_path / "coder.traj"
    f.write_text(json.dumps(doc))
    traces = load_recorded(f)
    boss, worker = traces["coder-Manager"], traces["coder-Programmer"]
    assert [len(boss), len(worker)] == [sum(m["role"] == "assistant" for m in part) for part in (manager, programmer)]
    assert worker.started["parent"]["run_id"] == boss.run_id
    assert worker.started["system"] == "You are the Programmer." and boss.started["system"] == hist[0]["content"]
    assert worker.messages_at(1) == [
        {"role": "user", "content": [{"type": "text", "text": "Manager: fix the missing colon."}]}
    ]
    assert boss.started["recorded"]["agents"] == ["Manager", "Programmer"]
    assert boss.started["recorded"]["calls_found_all_agents"] == len(boss) + len(worker)


def test_an_import_in_a_terminal_shows_a_progress_bar_once_it_takes_long_enough(tmp_path, monkeypatch):
    import io
    import sys

    import agentlab.recorded as rec

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    root = tmp_path / "sessions"
    root.mkdir()
    for name in ("a", "b"):  # two sessions: every id fresh in each (one session's copies would be skipped)
        text = TOOL_HEAVY.read_text()
        for key in ('"uuid":"', '"sessionId":"', '"requestId":"', '"id":"msg_'):
            text = text.replace(key, f"{key}{name}-")
        (root / f"{name}.jsonl").write_text(text)
    shown = Terminal()
    monkeypatch.setattr(sys, "stderr", shown)
    monkeypatch.setattr(rec, "PROGRESS_AFTER_S", 0.0)  # "long enough" is now: no waiting in a test
    assert len(load_recorded(root)) == 2
    assert "importing" in shown.getvalue()
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    monkeypatch.setattr(rec, "PROGRESS_AFTER_S", 3600.0)
    load_recorded(root)
    assert "importing" not in quiet.getvalue()  # a quick import shows no bar


def test_agentlab_import_never_overwrites_a_run_without_force(tmp_path, capsys):
    from agentlab.cli import main

    out = tmp_path / "runs"
    assert main(["import", str(TOOL_HEAVY), "--out", str(out)]) == 0
    (out / "tool_heavy.jsonl").write_text("my own edits\n")
    assert main(["import", str(TOOL_HEAVY), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "already in" in said and "--force" in said and "0 run(s) written" in said
    assert (out / "tool_heavy.jsonl").read_text() == "my own edits\n"
    assert main(["import", str(TOOL_HEAVY), "--out", str(out), "--force"]) == 0
    assert load_run("tool_heavy", out).summary["steps"] == 4


def test_the_whole_fixtures_folder_imports_every_format_at_once_with_unique_ids_and_nothing_skipped():
    from agentlab.recorded import FORMATS, ImportReport

    report = ImportReport()
    traces = load_recorded(FIX, report=report)
    assert report.skipped == []
    assert {t.started["recorded"]["format"] for t in traces} == set(FORMATS) - {
        "messages-log"
    }  # no proxy log is shipped
    assert len({t.run_id for t in traces}) == len(traces) == report.runs


def test_a_codex_compaction_starts_a_new_segment_from_its_summary_and_old_rollouts_without_last_usage_still_count(
    tmp_path,
):
    lines = [json.loads(x) for x in CODEX.read_text().splitlines()]
    at = next(i for i, d in enumerate(lines) if d["payload"].get("message") == "and the test?")
    summary = {
        "timestamp": lines[at]["timestamp"],
        "type": "compacted",
        "payload": {"message": "Summary: --verbose was added to cli.py."},
    }
    f = tmp_path / "rollout-compacted.jsonl"
    f.write_text("\n".join(json.dumps(d) for d in [*lines[: at + 1], summary, *lines[at + 1 :]]) + "\n")
    before, after = load_recorded(f).traces
    whole = load_recorded(CODEX)
    assert (len(before), len(after)) == (3, 2) and len(before) + len(after) == len(whole)
    assert after.started["recorded"]["boundary"] == "compact" and after.started["recorded"]["previous"] == before.run_id
    assert after.messages_at(1)[0]["content"][0]["text"].startswith("Summary:")
    assert list(before.steps["output_tokens"]) + list(after.steps["output_tokens"]) == list(
        whole.steps["output_tokens"]
    )
    # an older rollout writes only the running total: each call is what the total grew by
    for d in lines:
        info = d["payload"].get("info") if d["payload"].get("type") == "token_count" else None
        if info:
            info.pop("last_token_usage")
    g = tmp_path / "rollout-old.jsonl"
    g.write_text("\n".join(json.dumps(d) for d in lines) + "\n")
    assert (
        load_recorded(g)
        .steps[["input_tokens", "output_tokens", "cache_read_tokens"]]
        .equals(whole.steps[["input_tokens", "output_tokens", "cache_read_tokens"]])
    )


def test_estimates_are_scaled_to_the_records_own_totals_and_labelled_estimated():
    pytest.importorskip("matplotlib")
    from agentlab import plots

    doc = json.loads(SWE.read_text())
    stats = doc["info"]["model_stats"]
    trace = load_recorded(SWE)
    steps = trace.steps
    assert steps["estimated"].all()
    # the record's tokens_sent counts every prompt sent; the estimated steps now add up to it
    assert (steps["input_tokens"] + steps["cache_read_tokens"] + steps["cache_write_tokens"]).sum() == pytest.approx(
        stats["tokens_sent"], abs=len(steps)
    )
    assert steps["output_tokens"].sum() == pytest.approx(stats["tokens_received"], abs=len(steps))
    notes = " ".join(trace.started["recorded"]["notes"])
    assert "scaled x" in notes and f"({stats['tokens_sent']:,})" in notes
    ax = plots.cost_curve(steps)
    assert any("estimated" in t.get_text() for t in ax.get_legend().get_texts())


def test_a_resumed_session_that_copies_the_lines_it_resumed_counts_each_call_once_in_the_session_that_made_it(tmp_path):
    lines = TOOL_HEAVY.read_text().splitlines()
    expected = plain_claude_code_calls(TOOL_HEAVY)
    root = tmp_path / "project"
    root.mkdir()
    (root / "zz-first.jsonl").write_text("\n".join(lines[:25]) + "\n")  # the older session (named to sort last)
    (root / "aa-resumed.jsonl").write_text("\n".join(lines) + "\n")  # resumed later: a copy of it, then more
    traces = load_recorded(root)
    ids = [e["request_id"] for t in traces for e in t.records if e["kind"] == "model_called"]
    assert len(ids) == len(set(ids)) == len(expected)
    first = traces["zz-first"]
    assert len(first) == len(
        plain_claude_code_calls(root / "zz-first.jsonl")
    )  # its calls stay with the session that made them
    assert traces["aa-resumed"].started["recorded"]["copied_lines"] > 0


def test_a_budget_whatif_of_a_record_without_usage_is_not_cut_off_at_a_max_tokens_derived_from_nothing():
    from agentlab import analysis as an

    trace = load_recorded(MINI_OLD)  # no usage recorded: every step estimated
    grid = an.budget_whatif(Traces([trace], FIX), max_steps=[None])
    assert list(grid["outcome"]) == ["done"] and list(grid["steps"]) == [len(trace)]
    assert trace.started["max_tokens"] == trace.steps["output_tokens"].max() > 1


def test_a_folder_summary_adds_up_the_priced_runs_and_counts_the_unpriced_ones():
    traces = load_recorded(FIX / "mini_swe_agent")  # one priced run, one with no model named
    priced = load_recorded(MINI).summary["cost"]
    assert f"${priced:.4f} + 1 run(s) with no price" in repr(traces)


def test_a_folder_of_every_fixture_cut_in_half_beside_the_whole_ones_still_imports_every_whole_run(tmp_path):
    """Files cut short anywhere (a copy interrupted, a session still being written) never stop a folder import."""
    root = tmp_path / "mixed"
    shutil.copytree(FIX, root / "whole")
    whole = load_recorded(root / "whole")
    cut = root / "cut"
    for f in (root / "whole").rglob("*"):
        if f.is_file() and f.suffix in (".jsonl", ".json", ".traj", ".eval"):
            data = f.read_bytes()
            for frac in (0.5, 0.97):
                dest = cut / f"{frac}" / f.relative_to(root / "whole")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data[: int(len(data) * frac)])
    from agentlab.recorded import ImportReport

    report = ImportReport()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skipped and truncated files warn; that they do is tested above
        traces = load_recorded(root, report=report)

    def calls(ts, fmt):
        return [  # a call without a request id (Bedrock-served sessions write none) is known by what it said
            e["request_id"] or json.dumps([e["content"], e["usage"]], sort_keys=True)
            for t in ts
            if t.started["recorded"]["format"] == fmt
            for e in t.records
            if e["kind"] == "model_called"
        ]

    # Claude Code: a call is counted once across all the copies, and none is lost
    mixed = calls(traces, "claude-code")
    assert len(mixed) == len(set(mixed)) and set(calls(whole, "claude-code")) <= set(mixed)
    # every other format: each whole run is there, under its own id
    assert {t.run_id for t in whole if t.started["recorded"]["format"] != "claude-code"} <= {t.run_id for t in traces}
    assert report.files_read > len(list((root / "whole").rglob("*.json*")))
    assert all(why for _, why in report.skipped)


def test_a_recorded_tool_that_only_looks_replays_as_a_read_and_an_unknown_one_as_a_write():
    """A Claude Code session's WebFetch and WebSearch are reads (shown and run as such in a replay); a tool
    the importer does not know keeps no mode, and the replay runs it alone, as a write."""
    from agentlab.forking import replay_setup

    session = agentlab.load_recorded(agentlab.datasets.claude_code_session("subagent"))
    assert {t["name"]: t["mode"] for t in session.started["tools"]} == {"WebSearch": "read", "WebFetch": "read"}
    assert set(session.calls["mode"]) == {"read"}
    assert {t.name: t.mode for t in replay_setup(session)["tools"]} == {"WebSearch": "read", "WebFetch": "read"}
    from agentlab.recorded.build import recorded_mode

    assert recorded_mode("Bash") is None and recorded_mode("Write") is None


def test_a_sessions_headline_counts_the_same_input_tokens_as_its_steps():
    """The headline's "in" is every input token sent (what the step table's "in" column adds up to), with the
    cache's share said beside it, not the uncached remainder alone."""
    session = agentlab.load_recorded(agentlab.datasets.claude_code_session("subagent"))
    sent = int(session.steps["context_tokens"].sum())
    uncached = int(session.steps["input_tokens"].sum())
    assert sent > uncached
    assert f" · {sent:,} in ({uncached:,} uncached, " in repr(session)


CODEX_REAL = next((FIX / "codex_real").glob("rollout-2026-05-11T11-26-55-*.jsonl"))
ISO_MOMENT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


def _as_if_run(src: Path, dest: Path, model: str, started: datetime) -> Path:
    """``src`` (a real Codex CLI rollout) as if it had run from ``started`` with ``model``: every moment in it
    moved by the same amount, so its calls keep their spacing."""
    text = src.read_text()
    first = datetime.fromisoformat(ISO_MOMENT.search(text).group(0).replace("Z", "+00:00"))
    shift = started - first

    def moved(m: re.Match[str]) -> str:
        at = datetime.fromisoformat(m.group(0).replace("Z", "+00:00")) + shift
        return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"

    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(ISO_MOMENT.sub(moved, text).replace('"model":"gpt-5.5"', f'"model":"{model}"'))
    return dest


def test_a_recorded_call_is_priced_as_billed_on_the_day_it_was_made(tmp_path):
    """genai-prices dates price changes: o3 cost five times as much per token before 2025-06-10. A session that ran
    across that midnight pays the old price for the calls made before it and the new one after, as an import of
    the same session dated wholly before or wholly after prices each call."""
    original = load_recorded(CODEX_REAL)
    asked = original.events[original.events["kind"] == "model_request"].set_index("step")["t"]
    gaps = asked.diff().shift(-1)  # from each call to the next
    last_before = int(gaps.idxmax())  # midnight falls in the widest gap: calls on both sides
    start = datetime(2025, 6, 10, tzinfo=UTC) - timedelta(seconds=asked[last_before] + gaps[last_before] / 2)

    def costs(started: datetime, name: str) -> pd.Series:
        trace = load_recorded(_as_if_run(CODEX_REAL, tmp_path / name / CODEX_REAL.name, "o3", started))
        return trace.steps.set_index("step")["cost"]

    across = costs(start, "across")
    old = costs(datetime(2025, 5, 1, 9, tzinfo=UTC), "old")
    new = costs(datetime(2025, 7, 1, 9, tzinfo=UTC), "new")
    before, after = across.index <= last_before, across.index > last_before
    assert before.any() and after.any()
    assert list(across[before]) == pytest.approx(list(old[before]))
    assert list(across[after]) == pytest.approx(list(new[after]))
    assert (old > new).all()  # the two prices differ on every call: the checks above can tell them apart
    assert original.steps["cost"].notna().all()  # the real session (gpt-5.5, 2026) is priced as before


def test_a_call_dated_past_any_calendar_is_priced_at_todays_rates_not_a_crash():
    """A hostile record: its start on the last day of year 9999, a call 10^12 s after it and one at NaN."""
    from agentlab.pricing import lookup_prices
    from agentlab.recorded.build import RecordedRun, RecordedStep, build_run

    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    steps = [RecordedStep([{"type": "text", "text": "ok"}], usage, "o3", requested_at=t) for t in (1e12, math.nan)]
    run = RecordedRun(
        "far",
        "generated",
        "test",
        [{"role": "user", "content": "Go."}],
        steps,
        model="o3",
        started_at="9999-12-31T23:59:59Z",
    )
    trace = Trace(build_run(run), None)
    today = lookup_prices("o3")
    assert list(trace.steps["cost"]) == pytest.approx([(1000 * today.input + 100 * today.output) / 1e6] * 2)

"""The importers of the newer formats, checked against files the real tools wrote.

Each fixture under ``tests/fixtures/recorded/*_real``, ``cline_sdk`` and
``claude_code_2_0`` is a file from a public repository whose licence allows
shipping it (the README there names repository, commit, path and licence; long
strings are cut, every number, id and timestamp is kept). Each test reads the file plainly, without the
importer, and compares: steps = API calls, per-step tokens, totals, tool calls
matched to their results, timestamps -> latency.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import pytest

from agentlab.recorded import ImportReport, load_recorded
from agentlab.recorded.detect import detect
from agentlab.trace import Trace

FIX = Path(__file__).parent / "fixtures" / "recorded"
CODEX_TUI = FIX / "codex_real" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
CODEX_DESKTOP = FIX / "codex_real" / "rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
GEMINI_CHAT = FIX / "gemini_cli_real" / "session-2025-12-01T21-45-5b959dae.json"
GEMINI_OPS = FIX / "gemini_cli_real" / "session-2026-01-16T11-01-file-ops-37b7abef.json"
CLINE_SDK = FIX / "cline_sdk" / "1784094124598_rruoq.messages.json"
OPENHANDS = FIX / "openhands_real" / "output.jsonl"
STREAM = FIX / "stream_json_real" / "claude-flow-hello-swarm.jsonl"

TOKENS = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]


def at(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def recorded_rows(trace: Trace) -> list[dict]:
    return trace.steps.loc[~trace.steps["estimated"], TOKENS].to_dict("records")


def row(input_tokens: int, output_tokens: int, cache_read: int, cache_write: int = 0) -> dict:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_tokens": cache_read,
        "cache_write_tokens": cache_write,
    }


# ------------------------------------------------------------------ Codex CLI
def test_a_real_codex_rollout_gives_one_step_per_token_event_written_after_the_calls_output():
    lines = [json.loads(x) for x in CODEX_TUI.read_text().splitlines()]
    inputs = {"function_call_output", "custom_tool_call_output"}
    outputs = {"reasoning", "function_call", "custom_tool_call", "web_search_call"}
    expected, latencies, last_total = [], [], None
    sent = asked = None  # the last input line; the time the call's input was complete
    for d in lines:  # a plain reading: each token_count whose running total moved is one call
        p, t = d["payload"], at(d["timestamp"])
        kind = p.get("type")
        if d["type"] == "turn_context" or kind in inputs or (kind == "message" and p["role"] != "assistant"):
            sent = t
        elif kind in outputs or (kind == "message" and p["role"] == "assistant"):
            asked = sent if asked is None else asked
        elif kind == "token_count" and p.get("info") and p["info"]["total_token_usage"] != last_total:
            last_total, u = p["info"]["total_token_usage"], p["info"]["last_token_usage"]
            expected.append(
                row(u["input_tokens"] - u["cached_input_tokens"], u["output_tokens"], u["cached_input_tokens"])
            )
            latencies.append(t - asked)
            asked = None
    trace = load_recorded(CODEX_TUI)
    assert detect(CODEX_TUI) == "codex" and trace.started["recorded"]["cli_version"] == "0.125.0"
    assert len(trace) == len(expected) == 66  # not 132: the usage follows the items, it is no second call
    assert trace.steps[TOKENS].to_dict("records") == expected and not trace.steps["estimated"].any()
    for col in TOKENS:
        assert trace.summary[col] == sum(e[col] for e in expected)
    total = last_total  # the rollout's own running total agrees
    assert trace.summary["input_tokens"] + trace.summary["cache_read_tokens"] == total["input_tokens"]
    assert trace.summary["output_tokens"] == total["output_tokens"]
    assert list(trace.steps["latency"]) == pytest.approx(latencies, abs=1e-3)
    calls = [d["payload"] for d in lines if d["payload"].get("type") in ("function_call", "custom_tool_call")]
    assert list(trace.calls["call_id"]) == [c["call_id"] for c in calls]
    assert list(trace.calls["tool"]) == [c["name"] for c in calls]
    assert (trace.calls["outcome"] == "ok").all()  # every call met its output by call_id
    assert not math.isnan(trace.summary["cost"])  # gpt-5.5 is in genai-prices' OpenAI table


def test_a_real_codex_desktop_rollout_without_token_events_is_estimated_and_says_so():
    lines = [json.loads(x) for x in CODEX_DESKTOP.read_text().splitlines()]
    groups, in_group = 0, False  # a plain reading: a call is a run of output items between inputs
    for d in lines:
        p = d["payload"]
        kind = p.get("type")
        if kind in ("reasoning", "function_call") or (kind == "message" and p.get("role") == "assistant"):
            groups += not in_group
            in_group = True
        elif kind in ("function_call_output", "user_message"):  # Desktop writes the user's words as an event only
            in_group = False
    assert not any(d["payload"].get("type") == "token_count" for d in lines)
    trace = load_recorded(CODEX_DESKTOP)
    assert trace.started["recorded"]["originator"] == "Codex Desktop"
    assert len(trace) == groups == 20
    assert trace.steps["estimated"].all()
    words = [d["payload"]["message"] for d in lines if d["payload"].get("type") == "user_message"]
    assert trace.started["task"] == words[0][:500]
    said = [
        b["text"] for e in trace.records if e["kind"] == "tool_results" for b in e["content"] if b["type"] == "text"
    ]
    assert said == words[1:]  # the user's later words, where they were said
    notes = " ".join(trace.started["recorded"]["notes"])
    assert "estimated" in notes and "no totals" in notes and "no price" in notes
    assert math.isnan(trace.summary["cost"])  # no model named, no price: unknown, not $0
    outputs = {d["payload"]["call_id"] for d in lines if d["payload"].get("type") == "function_call_output"}
    assert set(trace.calls["call_id"]) == outputs and (trace.calls["outcome"] == "ok").all()


# ------------------------------------------------------------------ Gemini CLI
def _gemini_batches(message: dict) -> list[list[dict]]:
    """A message's tool calls split where their recorded timestamp changes (one response each)."""
    out: list[list[dict]] = []
    for c in message.get("toolCalls") or []:
        if not out or c["timestamp"] != out[-1][0]["timestamp"]:
            out.append([])
        out[-1].append(c)
    return out or [[]]


@pytest.mark.parametrize("path", [GEMINI_CHAT, GEMINI_OPS], ids=["chat", "file-ops"])
def test_a_real_gemini_cli_session_counts_the_replies_folded_into_one_message_and_keeps_their_recorded_usage(path):
    doc = json.loads(path.read_text())
    replies = [m for m in doc["messages"] if m["type"] == "gemini"]
    calls = sum(len(_gemini_batches(m)) for m in replies)
    expected = []
    for m in replies:  # as Google bills it: input includes cached; thoughts are output
        tok = m["tokens"]
        expected.append(row(tok["input"] - tok["cached"] + tok["tool"], tok["output"] + tok["thoughts"], tok["cached"]))
    trace = load_recorded(path)
    assert isinstance(trace, Trace) and detect(path) == "gemini-cli"
    assert len(trace) == calls > len(replies)  # tool-only replies were written into the message before them
    assert trace.started["recorded"]["merged_responses"] == calls - len(replies)
    assert recorded_rows(trace) == expected  # each message's usage on the step of the reply it belongs to
    assert int(trace.steps["estimated"].sum()) == calls - len(replies)
    uses = [c for m in replies for c in m.get("toolCalls") or []]
    assert list(trace.calls["tool"]) == [c["name"] for c in uses]
    assert list(trace.calls["call_id"]) == [c["id"] for c in uses]
    assert (trace.calls["outcome"] == "ok").all()
    first = replies[0]
    assert trace.steps["latency"].iloc[0] == pytest.approx(at(first["timestamp"]) - at(doc["messages"][0]["timestamp"]))


def test_gemini_cli_prices_come_from_google_and_an_unknown_model_name_is_no_price_not_zero():
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    trace = load_recorded(GEMINI_CHAT)
    s = trace.steps.iloc[0]
    google = calc_price(
        GUsage(
            input_tokens=int(s["input_tokens"] + s["cache_read_tokens"]),
            cache_read_tokens=int(s["cache_read_tokens"]),
            output_tokens=int(s["output_tokens"]),
        ),
        model_ref=trace.started["model"],
        provider_id="google",
    )
    assert trace.started["model"] == "gemini-3-pro-image-preview"
    assert s["cost"] == pytest.approx(float(google.total_price))
    ops = load_recorded(GEMINI_OPS)  # the CLI wrote "gemini-3-pro", a name no price table has
    assert math.isnan(ops.summary["cost"])
    assert any("no price for model 'gemini-3-pro'" in n for n in ops.started["recorded"]["notes"])


# ------------------------------------------------------------------ Cline SDK
def test_a_real_cline_sdk_session_reads_each_calls_metrics_and_either_of_its_files_imports_it(tmp_path):
    doc = json.loads(CLINE_SDK.read_text())
    msgs = doc["messages"]
    calls = [m for m in msgs if m["role"] == "assistant"]
    expected = []
    for m in calls:  # inputTokens is the whole prompt: the cache reads are inside it
        x = m["metrics"]
        expected.append(
            row(
                x["inputTokens"] - x["cacheReadTokens"] - x["cacheWriteTokens"],
                x["outputTokens"],
                x["cacheReadTokens"],
                x["cacheWriteTokens"],
            )
        )
    latencies = [(m["ts"] - msgs[i - 1]["ts"]) / 1000 for i, m in enumerate(msgs) if m["role"] == "assistant"]
    assert detect(CLINE_SDK) == "cline"
    traces = load_recorded(CLINE_SDK)  # the user switched model for the last reply: one price list per run
    opus, other = traces.traces
    assert opus.run_id == doc["sessionId"] and other.started["recorded"]["boundary"] == "model switch"
    assert [opus.started["model"], other.started["model"]] == [
        calls[0]["modelInfo"]["id"],
        calls[-1]["modelInfo"]["id"],
    ]
    assert traces.steps[TOKENS].to_dict("records") == expected and not traces.steps["estimated"].any()
    assert list(traces.steps["recorded_cost"]) == pytest.approx([m["metrics"]["cost"] for m in calls])
    assert list(traces.steps["latency"]) == pytest.approx(latencies, abs=1e-3)
    uses = [b["id"] for m in calls for b in m["content"] if b["type"] == "tool_use"]
    assert list(traces.calls["call_id"]) == uses and (traces.calls["outcome"] == "ok").all()
    assert opus.started["system"] == doc["system_prompt"]
    # the manifest beside it names the same session; a folder holding both imports it once, skipping nothing
    manifest = load_recorded(CLINE_SDK.with_name("1784094124598_rruoq.json"))
    assert manifest.steps.drop(columns=["run_id"]).equals(traces.steps.drop(columns=["run_id"]))
    report = ImportReport()
    folder = load_recorded(CLINE_SDK.parent, report=report)
    assert len(folder) == 2 and report.skipped == [] and report.runs == 2


# ------------------------------------------------------------------ OpenHands
@pytest.mark.parametrize("n", [0, 1], ids=["ponyc-4595", "ponyc-4593"])
def test_a_real_openhands_output_gives_a_step_per_llm_response_matched_to_its_actions_and_observations(n):
    line = json.loads(OPENHANDS.read_text().splitlines()[n])
    usages = line["metrics"]["token_usages"]
    expected = [
        row(
            u["prompt_tokens"] - u["cache_read_tokens"] - u["cache_write_tokens"],
            u["completion_tokens"],
            u["cache_read_tokens"],
            u["cache_write_tokens"],
        )
        for u in usages
    ]
    responses = []  # a plain reading: the LLM responses the actions carry, in order
    for e in line["history"]:
        rid = (e.get("tool_call_metadata") or {}).get("model_response", {}).get("id")
        if "action" in e and rid and rid not in responses:
            responses.append(rid)
    assert responses == [u["response_id"] for u in usages]
    trace = load_recorded(OPENHANDS).traces[n]
    assert detect(OPENHANDS) == "openhands" and trace.run_id == line["instance_id"]
    assert len(trace) == len(usages)
    assert trace.steps[TOKENS].to_dict("records") == expected and not trace.steps["estimated"].any()
    by_id = {x["response_id"]: x["latency"] for x in line["metrics"]["response_latencies"]}
    assert list(trace.steps["latency"]) == pytest.approx([by_id[r] for r in responses])
    # every completion is timed; one that came back without usage or action still was an API call
    timed = len(line["metrics"]["response_latencies"])
    assert trace.summary["model_calls"] == timed and timed - len(usages) == n
    if n:
        assert any(f"counts {timed} API calls but holds {len(usages)}" in x for x in trace.started["recorded"]["notes"])
    observed = {
        e["tool_call_metadata"]["tool_call_id"]: e["content"]
        for e in line["history"]
        if "observation" in e and e.get("tool_call_metadata")
    }
    done = trace.calls[trace.calls["outcome"] == "ok"]
    assert set(done["call_id"]) == set(observed)
    for cid, preview in zip(done["call_id"], done["result_preview"], strict=True):
        assert observed[cid].startswith(preview.removesuffix("…")[:40])
    assert trace.started["model"] == usages[0]["model"]
    assert math.isnan(trace.summary["cost"])  # an OpenRouter Llama name no price table has: unknown, not $0


# ------------------------------------------------------------------ claude -p stream-json
def test_a_real_claude_p_stream_json_capture_gives_the_session_and_one_linked_run_per_parallel_subagent():
    lines = [json.loads(x) for x in STREAM.read_text().splitlines()]
    by_agent: dict[str | None, dict[str, dict]] = {}
    for d in lines:  # a plain reading: the last line of each message id holds its usage
        if d["type"] == "assistant":
            by_agent.setdefault(d["parent_tool_use_id"], {})[d["message"]["id"]] = d["message"]["usage"]
    traces = load_recorded(STREAM)
    assert detect(STREAM) == "claude-code-stream-json"
    main = traces[STREAM.stem]
    assert len(traces) == len(by_agent) == 6  # the session and five Task subagents run side by side
    for parent, calls in by_agent.items():
        trace = (
            main
            if parent is None
            else next(t for t in traces if (t.started.get("parent") or {}).get("tool_use_id") == parent)
        )
        expected = [
            row(u["input_tokens"], u["output_tokens"], u["cache_read_input_tokens"], u["cache_creation_input_tokens"])
            for u in calls.values()
        ]
        got = trace.steps[TOKENS].to_dict("records")
        for g, e, est in zip(got, expected, trace.steps["estimated"], strict=True):
            if est:  # a call whose lines never carried more than the stream's first count (3 output
                # tokens for a reply of 2,000 characters): estimated from the reply, never below the record
                assert g["output_tokens"] > e["output_tokens"] and {**g, "output_tokens": 0} == {
                    **e,
                    "output_tokens": 0,
                }
            else:
                assert g == e
        if parent is not None:
            assert trace.started["parent"]["run_id"] == main.run_id
    task_step = {}  # the session's step whose Task call started each subagent
    for k, ids in enumerate(by_agent[None], start=1):
        for d in lines:
            if d["type"] == "assistant" and d["message"]["id"] == ids:
                task_step.update({b["id"]: k for b in d["message"]["content"] if b.get("name") == "Task"})
    for t in traces:
        if t is not main:
            assert t.started["parent"]["step"] == task_step[t.started["parent"]["tool_use_id"]]
    assert (main.steps["latency"] == 0).all()  # stream-json lines carry no timestamps: no latency to give
    assert "result" not in {d["type"] for d in lines}  # the capture ends before the result line
    assert main.started["recorded"]["recorded_cost"] is None
    assert list(main.steps["estimated"]) == [True, False]  # the first call's count was never the final one


# ------------------------------------------------------------------ replay
@pytest.mark.parametrize(
    "path",
    [CODEX_TUI, CODEX_DESKTOP, GEMINI_CHAT, GEMINI_OPS, CLINE_SDK, OPENHANDS, STREAM],
    ids=["codex-tui", "codex-desktop", "gemini-chat", "gemini-ops", "cline-sdk", "openhands", "stream-json"],
)
def test_every_real_fixture_replays_to_the_end_of_its_record_or_says_why(path):
    import asyncio

    from agentlab.forking import replay

    imported = load_recorded(path)
    trace = imported if isinstance(imported, Trace) else imported.traces[0]
    r = replay(trace)
    result = asyncio.run(r.run())
    assert r.model_calls == len(trace)
    if not math.isnan(trace.summary["cost"]):  # priced: the replay spends what the import says it cost
        assert r.spent == pytest.approx(trace.summary["cost"], rel=1e-12)
    if trace.step(len(trace)).tool_uses:  # the record stops mid-turn: the next call has no reply to give
        assert result.reason == "model error" and "beyond what was recorded" in result.detail
    else:
        assert type(result).__name__ == "Done"


# ------------------------------------------------------------------ Claude Code 2.0 (subagents beside the session)
CC20 = FIX / "claude_code_2_0" / "-tmp-private"
CC20_SESSION = CC20 / "4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"


def test_a_real_claude_code_2_0_session_brings_the_agent_files_beside_it_linked_to_it():
    def plain(path: Path) -> list[dict]:
        calls: dict[str, dict] = {}
        for x in path.read_text().splitlines():
            d = json.loads(x)
            if d.get("type") == "assistant" and d["message"].get("model") != "<synthetic>":
                u = d["message"]["usage"]  # the last line of a message id holds its final usage
                calls[d["message"]["id"]] = row(
                    u["input_tokens"],
                    u["output_tokens"],
                    u.get("cache_read_input_tokens", 0),
                    u.get("cache_creation_input_tokens", 0),
                )
        return list(calls.values())

    agents = sorted(CC20.glob("agent-*.jsonl"))
    assert {json.loads(a.read_text().splitlines()[0])["sessionId"] for a in agents} == {CC20_SESSION.stem}
    traces = load_recorded(CC20_SESSION)  # the session file alone: its 2.0 agent files are found beside it
    session = traces[CC20_SESSION.stem]
    assert session.steps[TOKENS].to_dict("records") == plain(CC20_SESSION)
    assert {json.loads(x).get("version") for x in CC20_SESSION.read_text().splitlines()} >= {"2.0.64"}
    for a in agents:
        sub = traces[f"{CC20_SESSION.stem}-{a.stem}"]
        assert sub.started["parent"]["run_id"] == session.run_id
        assert sub.steps[TOKENS].to_dict("records") == plain(a)
    report = ImportReport()
    folder = load_recorded(CC20, report=report)  # the folder: the same runs, each once
    assert sorted(t.run_id for t in folder) == sorted(t.run_id for t in traces) and report.skipped == []


@pytest.mark.parametrize(
    "folder",
    [
        "codex_real",
        "gemini_cli_real",
        "cline_sdk",
        "openhands_real",
        "stream_json_real",
        "claude_code_2_0",
        "inspect_real",
    ],
)
def test_redaction_leaves_the_real_secret_free_files_as_they_were(folder):
    imported = load_recorded(FIX / folder)  # tool calls, code, shell output, paths: no secret among them
    records = [json.dumps(e, default=str) for t in imported for e in t.records]
    assert records and not any("[redacted]" in r for r in records)


# ------------------------------------------------------------------ inspect-ai
INSPECT_POPULARITY = FIX / "inspect_real" / "2025-02-11T15-17-00-05-00_popularity_dPiJifoWeEQBrfWsAopzWr.eval"
INSPECT_EPOCHS = FIX / "inspect_real" / "log_streaming.eval"


@pytest.mark.parametrize("path", [INSPECT_POPULARITY, INSPECT_EPOCHS], ids=["gpt-4o-mini", "two-epochs"])
def test_real_inspect_logs_give_a_run_per_sample_and_epoch_with_each_model_events_usage(path):
    import zipfile

    z = zipfile.ZipFile(path)
    expected: dict[str, list[dict]] = {}
    took: dict[str, list] = {}
    for name in z.namelist():  # a plain reading: each sample's model events, in order
        if name.startswith("samples/"):
            sample = json.loads(z.read(name))
            events = [e for e in sample["events"] if e["event"] == "model"]
            key = f"{path.stem}-{name.removeprefix('samples/').removesuffix('.json')}"
            expected[key] = [
                row(e["output"]["usage"]["input_tokens"], e["output"]["usage"]["output_tokens"], 0) for e in events
            ]
            took[key] = [e["output"].get("time") for e in events]
    traces = load_recorded(path)
    assert detect(path) == "inspect-eval"
    assert sorted(t.run_id for t in traces) == sorted(expected)
    for t in traces:
        assert t.steps[TOKENS].to_dict("records") == expected[t.run_id]
        if all(x is not None for x in took[t.run_id]):  # 0.3.58 keeps the seconds each call took
            assert list(t.steps["latency"]) == pytest.approx(took[t.run_id], abs=1e-3)
    served = {
        e["output"]["model"]
        for n in z.namelist()
        if n.startswith("samples/")
        for e in json.loads(z.read(n))["events"]
        if e["event"] == "model"
    }
    assert {t.started["model"] for t in traces} == served  # the model the provider says served the call

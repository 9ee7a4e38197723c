"""Every import audits itself, and no hostile file takes the machine down.

The records below are written here in the shapes real files have (structure,
ids and usage as they are found; text neutral), each naming what it follows:
Claude Code 2.1.45 sessions in K3RN-LABS/k3rn.labs and R3zil/duck_town
(``.claude/projects/…``: lines of one ``requestId`` whose ``message.id`` is
each line's own uuid), inspect-ai logs (``ModelEvent`` with ``cache: "read"``,
``error``, ``pending``; Google usage with ``reasoning_tokens`` outside
``output_tokens``; ``attachment://`` content; a sample with two prompts, as in
Raheemrana/scicode-bench), and a Gemini CLI project moved with its old copy
left under ``tmp/<sha256>/`` (fabien-lessirard/dotfiles). Expected figures
come from a plain reading with list prices typed here, not from the importer.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlab.recorded import ImportReport, load_recorded
from agentlab.trace import Trace

FIX = Path(__file__).parent / "fixtures" / "recorded"
SONNET = "claude-sonnet-4-5-20250929"  # $3 in, $15 out, $0.30 cache read, $3.75 5-minute write (per MTok)


def sonnet_cost(inp: int, out: int, read: int, write: int) -> float:
    return (inp * 3 + out * 15 + read * 0.30 + write * 3.75) / 1e6


def cc_line(kind: str, uuid: str, ts: str, **rest) -> dict:
    return {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/w",
        "sessionId": "5e55",
        "version": "2.1.45",
        "type": kind,
        "uuid": uuid,
        "timestamp": ts,
        **rest,
    }


SHAPES = ("own-ids", "shared-id", "start-count")
"""How the lines of one call are written: ``own-ids`` (Claude Code 2.1.45: each line's ``message.id`` is
its own uuid, the full usage on each line), ``shared-id`` (one ``msg_`` id, the full usage on each line),
``start-count`` (one ``msg_`` id; the first line carries the count the stream started with, output 1-30,
the last line the final usage, as 2.1.29 subagent files in K3RN-LABS/k3rn.labs show)."""


def cc_session(calls: int = 4, shapes: list[str] | None = None) -> list[dict]:
    """A Claude Code 2.1.45 session: each call on two lines (text, then a tool call) sharing a ``requestId``,
    written in ``shapes[c]`` (:data:`SHAPES`; own ids by default), the stop reason on the last line."""
    lines = [cc_line("user", "u0", "2026-02-10T01:00:00.000Z", message={"role": "user", "content": "do the task"})]
    for c in range(calls):
        shape = (shapes or [])[c] if c < len(shapes or []) else "own-ids"
        usage = {
            "input_tokens": 3,
            "cache_creation_input_tokens": 1000 + c,
            "cache_read_input_tokens": 5000 * c,
            "output_tokens": 120 + c,
        }
        for part, (block, stop) in enumerate(
            [
                ({"type": "text", "text": f"step {c}"}, None),
                ({"type": "tool_use", "id": f"toolu_{c}", "name": "Bash", "input": {"command": "ls"}}, "tool_use"),
            ]
        ):
            uid = f"a{c}-{part}"
            line_usage = {**usage, "output_tokens": 1 + c} if shape == "start-count" and part == 0 else usage
            msg = {
                "model": SONNET,
                "id": uid if shape == "own-ids" else f"msg_{c}",
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": stop,
                "usage": line_usage,
            }
            lines.append(
                cc_line("assistant", uid, f"2026-02-10T01:0{c}:0{part}.000Z", message=msg, requestId=f"req_{c}")
            )
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{c}", "content": "ok"}]}
        lines.append(cc_line("user", f"r{c}", f"2026-02-10T01:0{c}:05.000Z", message=result))
    return lines


def cc_plain_cost(lines: list[dict]) -> float:
    """Each request priced once, at the usage of its line with the stop reason (the final one)."""
    by_request = {d["requestId"]: d["message"]["usage"] for d in lines if d["message"].get("stop_reason")}
    return sum(
        sonnet_cost(
            u["input_tokens"], u["output_tokens"], u["cache_read_input_tokens"], u["cache_creation_input_tokens"]
        )
        for u in by_request.values()
    )


def write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return path


def total_cost(loaded) -> float:
    return sum(t.summary["cost"] for t in ([loaded] if isinstance(loaded, Trace) else loaded))


# ------------------------------------------------------------------ 1: one request, one step
def test_lines_of_one_request_are_one_step_even_when_each_line_has_its_own_message_id(tmp_path):
    lines = cc_session(4)
    trace = load_recorded(write_jsonl(tmp_path / "s.jsonl", lines))
    assert len(trace) == 4  # 8 assistant lines, 4 requests
    assert trace.summary["cost"] == pytest.approx(cc_plain_cost(lines))
    assert trace.started["recorded"]["audit"]["status"] == "ok"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_duplicating_splitting_or_reordering_a_sessions_lines_never_changes_its_cost(tmp_path_factory, data):
    lines = cc_session(4, data.draw(st.lists(st.sampled_from(SHAPES), min_size=4, max_size=4)))
    expected = cc_plain_cost(lines)
    # one Claude Code process writes all the lines of one API call into one file; a copy (a resumed
    # session's) holds every line of the calls it copies, with their uuids: a request's lines move together
    groups: dict[str, list[dict]] = {}
    for d in lines:
        groups.setdefault(d.get("requestId") or d["uuid"], []).append(d)
    keys = list(groups)
    copied = data.draw(st.lists(st.sampled_from(keys), max_size=4))
    placed = [(k, data.draw(st.booleans())) for k in keys + copied]  # (group, in the second file?)
    order = data.draw(st.permutations(range(sum(len(groups[k]) for k, _ in placed))))
    tagged = [(d, second) for k, second in placed for d in groups[k]]
    tagged = [tagged[i] for i in order]
    first = [d for d, second in tagged if not second]
    second = [d for d, second in tagged if second]
    folder = tmp_path_factory.mktemp("session")
    write_jsonl(folder / "a.jsonl", first or second)
    if first and second:
        write_jsonl(folder / "b.jsonl", second)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = load_recorded(folder)
    assert total_cost(loaded) == pytest.approx(expected)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_calls_lines_scattered_over_files_keep_its_cost_or_the_audit_says_it_is_low(tmp_path_factory, data):
    """Any line anywhere (a copy of one line, a call's lines split between files): the cost is the plain
    reading's, or the import says which call it counted too low."""
    lines = cc_session(4, data.draw(st.lists(st.sampled_from(SHAPES), min_size=4, max_size=4)))
    expected = cc_plain_cost(lines)
    order = data.draw(st.permutations(range(len(lines))))
    dupes = data.draw(st.lists(st.integers(0, len(lines) - 1), max_size=6))
    changed = [lines[i] for i in order] + [lines[i] for i in dupes]
    cut = data.draw(st.integers(1, len(changed) - 1))
    folder = tmp_path_factory.mktemp("session")
    write_jsonl(folder / "a.jsonl", changed[:cut])
    write_jsonl(folder / "b.jsonl", changed[cut:])
    import warnings

    report = ImportReport()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = load_recorded(folder, report=report)
    said = [f for f in report.findings if f["check"] == "duplicate_call"]
    if total_cost(loaded) != pytest.approx(expected):
        assert total_cost(loaded) < expected and said  # never more; when less, said so
    assert all("too low" in f["message"] for f in said)


# ------------------------------------------------------------------ 2-4, 10: inspect
def inspect_log(path: Path) -> Path:
    """An inspect log of one Google sample: a cache replay, a paid call whose reply is an attachment and
    whose reasoning tokens are outside its output count, a failed and a pending call, and a second prompt."""

    def model(n, **rest):
        return {"event": "model", "model": "google/gemini-2.5-pro", "timestamp": f"2026-01-01T00:00:0{n}+00:00", **rest}

    sample = {
        "id": 1,
        "epoch": 1,
        "started_at": "2026-01-01T00:00:00+00:00",
        "messages": [
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "second question"},
            {"role": "assistant", "content": "attachment://h1"},
        ],
        "attachments": {"h1": "the second answer"},
        "events": [
            model(
                1,
                cache="read",
                output={
                    "model": "gemini-2.5-pro",
                    "choices": [{"message": {"role": "assistant", "content": "first answer"}, "stop_reason": "stop"}],
                    "usage": {"input_tokens": 500, "output_tokens": 50, "total_tokens": 550},
                },
            ),
            model(
                2,
                output={
                    "model": "gemini-2.5-pro",
                    "choices": [
                        {"message": {"role": "assistant", "content": "attachment://h1"}, "stop_reason": "stop"}
                    ],
                    "usage": {
                        "input_tokens": 1000,
                        "output_tokens": 100,
                        "reasoning_tokens": 900,
                        "total_tokens": 2000,
                    },
                },
            ),
            model(3, error="RESOURCE_EXHAUSTED", output={"model": "gemini-2.5-pro", "choices": []}),
            model(4, pending=True, output={"model": "gemini-2.5-pro", "choices": []}),
        ],
        "model_usage": {
            "google/gemini-2.5-pro": {
                "input_tokens": 1500,
                "output_tokens": 150,
                "reasoning_tokens": 900,
                "total_tokens": 2550,
            }
        },
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", json.dumps({"eval": {"task": "t", "model": "google/gemini-2.5-pro"}}))
        z.writestr("samples/1_epoch_1.json", json.dumps(sample))
    return path


def test_an_inspect_log_charges_only_the_calls_that_reached_the_api_with_their_reasoning(tmp_path):
    trace = load_recorded(inspect_log(tmp_path / "g.eval"))
    # plain reading: one paid call, 1,000 input and 100 + 900 output tokens at $1.25 / $10 per MTok
    assert trace.summary["model_calls"] == 1
    assert trace.summary["cost"] == pytest.approx((1000 * 1.25 + 1000 * 10) / 1e6)
    assert list(trace.steps["cost"]) == [0.0, pytest.approx(0.01125)]  # the cache replay is $0
    assert trace.step(2).reply["content"] == [{"type": "text", "text": "the second answer"}]
    assert trace.started["recorded"]["unreached_calls"] == 2
    assert trace.started["recorded"]["audit"]["status"] == "ok"  # the sample's model_usage agrees


def test_a_replayed_inspect_sample_with_two_prompts_plays_both_replies(tmp_path):
    import asyncio

    import agentlab

    trace = load_recorded(inspect_log(tmp_path / "g.eval"))
    run = agentlab.replay(trace)
    asyncio.run(run.run())
    assert run.model.calls == 2 and run.spent == pytest.approx(trace.summary["cost"])


# ------------------------------------------------------------------ 6: a moved Gemini project
def test_a_gemini_sessions_old_copy_under_a_hash_folder_is_counted_once(tmp_path):
    src = FIX / "gemini_cli_real" / "session-2026-01-16T11-01-file-ops-37b7abef.json"

    def tokens(loaded):
        return sum(
            t.summary["input_tokens"] + t.summary["output_tokens"] for t in [loaded] if isinstance(loaded, Trace)
        ) or sum(t.summary["input_tokens"] + t.summary["output_tokens"] for t in loaded)

    one = tokens(load_recorded(src))
    for project in ("my-project", "a" * 64):
        (tmp_path / "tmp" / project / "chats").mkdir(parents=True)
        shutil.copy(src, tmp_path / "tmp" / project / "chats" / src.name)
    report = ImportReport()
    with pytest.warns(UserWarning, match="already counted"):
        both = load_recorded(tmp_path, report=report)
    assert tokens(both) == one
    assert [p.parent.parent.name for p, _ in report.skipped] == ["a" * 64]


# ------------------------------------------------------------------ the audit
def test_the_audit_reports_nothing_on_any_real_fixture():
    import warnings

    for folder in sorted(p for p in FIX.iterdir() if p.is_dir()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = load_recorded(folder)
        for t in [loaded] if isinstance(loaded, Trace) else loaded:
            assert t.started["recorded"]["audit"]["findings"] == [], (folder.name, t.run_id)
            assert t.runs["audit_findings"].iloc[0] == 0


def test_import_check_prints_each_money_finding_with_its_file_and_fails(tmp_path, capsys):
    from agentlab.cli import main

    doc = json.loads((FIX / "gemini_cli_real" / "session-2025-12-01T21-45-5b959dae.json").read_text())
    first = next(m for m in doc["messages"] if m.get("type") == "gemini" and isinstance(m.get("tokens"), dict))
    first["tokens"]["output"], first["tokens"]["thoughts"] = -40, 0  # a count no API writes
    bad = tmp_path / "session-bad.json"
    bad.write_text(json.dumps(doc))
    assert main(["import", str(bad), "--out", str(tmp_path / "runs"), "--check"]) == 1
    out = capsys.readouterr().out
    assert f"{bad}: usage_counts (step 1): usage.output_tokens is -40: a count is never negative" in out
    assert main(["import", str(bad), "--out", str(tmp_path / "runs2")]) == 0  # without --check: said, not failed
    out = capsys.readouterr().out
    assert "audit: 2 finding(s)" in out and "agentlab import PATH --check" in out, out


# ------------------------------------------------------------------ hostile files: bounded, refused, named
_CAPPED = textwrap.dedent(
    """
    import resource, sys, warnings
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    from agentlab.recorded import limits, load_recorded
    limits.MAX_MEMBER_BYTES = 16 << 20
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            load_recorded(sys.argv[1])
        print("LOADED", [str(w.message) for w in caught])
    except Exception as exc:
        print("ERROR", type(exc).__name__, exc)
    print("GREW_MIB", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
    """
)


def capped(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _CAPPED, str(path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    grew = int(done.stdout.split("GREW_MIB")[1])
    assert grew < 200, done.stdout  # bounded: a 256 MiB member is never held (the limit here is 16 MiB)
    return done.stdout


def _bomb_zip(path: Path, member: str, method: int) -> None:
    chunk = b"\0" * (1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", "{}")
        with z.open(member, "w", force_zip64=True) as f:
            for _ in range(256):
                f.write(chunk)


def test_a_deflate_zip_bomb_is_refused_naming_the_member_and_the_limit(tmp_path):
    bomb = tmp_path / "bomb.eval"
    _bomb_zip(bomb, "samples/1_epoch_1.json", zipfile.ZIP_DEFLATED)
    out = capped(bomb)
    assert "ERROR ImportLimit" in out and "samples/1_epoch_1.json inflates past 16 MiB" in out


def test_a_zstd_zip_bomb_is_refused_naming_the_member_and_the_limit(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    raw = zstandard.ZstdCompressor().compress(b"\0" * (256 << 20))
    bomb = tmp_path / "bomb.eval"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_STORED) as z:
        z.writestr("header.json", "{}")
        z.writestr("samples/1_epoch_1.json", raw)
    data = bytearray(bomb.read_bytes())  # mark the sample zstd-compressed (method 93) as inspect writes it
    name = b"samples/1_epoch_1.json"
    local = data.index(b"PK\x03\x04" + data[4:6], data.index(name) - 30 - 4)
    for at in (i for i in range(len(data)) if data.startswith(b"PK\x03\x04", i) or data.startswith(b"PK\x01\x02", i)):
        header_name_at = at + (30 if data[at + 2] == 3 else 46)
        if data[header_name_at : header_name_at + len(name)] == name:
            method_at = at + (8 if data[at + 2] == 3 else 10)
            data[method_at : method_at + 2] = (93).to_bytes(2, "little")
    del local
    bomb.write_bytes(bytes(data))
    out = capped(bomb)
    assert "ERROR ImportLimit" in out and "inflates past 16 MiB" in out


def test_a_line_nested_100000_deep_is_refused_not_called_still_being_written(tmp_path):
    deep = write_jsonl(tmp_path / "deep.jsonl", cc_session(1))
    with open(deep, "a") as f:
        f.write("[" * 100_000 + "]" * 100_000 + "\n")
        f.write(json.dumps(cc_session(1)[0]) + "\n")
    out = capped(deep)
    assert "ERROR ImportLimit" in out and "line 5 nests deeper than 1024 levels" in out
    assert "still being written" not in out


def test_two_jsonl_links_naming_each_other_are_skipped_and_named(tmp_path):
    from agentlab.cli import main

    folder = tmp_path / "f"
    write_jsonl(folder / "real.jsonl", cc_session(2))
    (folder / "a.jsonl").symlink_to(folder / "b.jsonl")
    (folder / "b.jsonl").symlink_to(folder / "a.jsonl")
    out = capped(folder)
    assert "LOADED" in out and "a.jsonl: skipped (a link that cannot be followed" in out
    assert main(["import", str(folder), "--out", str(tmp_path / "runs")]) == 0
    (tmp_path / "runs" / "a.jsonl").symlink_to(tmp_path / "runs" / "b.jsonl")
    (tmp_path / "runs" / "b.jsonl").symlink_to(tmp_path / "runs" / "a.jsonl")
    import agentlab

    with pytest.warns(UserWarning, match="a link that cannot be followed"):
        assert list(agentlab.sql("select run_id from runs", tmp_path / "runs")["run_id"]) == ["real"]


# ------------------------------------------------------------------ 5: counts from the start of the stream
START_COUNTS = FIX / "claude_code_start_counts" / "6c1d0f3e-2b7a-4c55-9e0a-5a1f3d2c8b41.jsonl"
"""Claude Code 2.1.29 in the shape of K3RN-LABS/k3rn.labs' sessions: the lines of a call share ``message.id``
and ``requestId``, carry no stop reason and repeat the usage the stream started with (output 1-4 tokens);
the first call's reply is 11,000 characters of text, recorded as 4 output tokens."""


def _plain_calls(lines: list[dict]) -> dict[str, dict]:
    """Each request's usage and reply characters, read plainly (no agentlab code)."""
    calls: dict[str, dict] = {}
    for d in lines:
        if d["type"] != "assistant":
            continue
        c = calls.setdefault(d["requestId"], {"usage": d["message"]["usage"], "chars": 0})
        for b in d["message"]["content"]:
            c["chars"] += len(b.get("text", "")) if b["type"] == "text" else len(json.dumps(b["input"]))
    return calls


def test_an_11k_character_reply_recorded_as_4_output_tokens_is_estimated_from_its_text_and_says_so():
    lines = [json.loads(x) for x in START_COUNTS.read_text().splitlines()]
    calls = list(_plain_calls(lines).values())
    assert calls[0]["usage"]["output_tokens"] == 4 and calls[0]["chars"] > 11_000
    trace = load_recorded(START_COUNTS)
    steps = trace.steps
    assert len(steps) == 2 and steps["estimated"].all()
    for (_, row), c in zip(steps.iterrows(), calls, strict=True):
        u = c["usage"]  # what the file knows exactly stays exact
        assert (row["input_tokens"], row["cache_read_tokens"], row["cache_write_tokens"]) == (
            u["input_tokens"],
            u["cache_read_input_tokens"],
            u["cache_creation_input_tokens"],
        )
    # text runs 2.5-6 characters a token (code the fewest): 11,000 characters are 1,800-4,400 tokens, not 4
    out = int(steps["output_tokens"].iloc[0])
    assert calls[0]["chars"] / 6 <= out <= calls[0]["chars"] / 2.5
    u = calls[0]["usage"]
    low = sonnet_cost(
        u["input_tokens"], calls[0]["chars"] // 6, u["cache_read_input_tokens"], u["cache_creation_input_tokens"]
    )
    high = sonnet_cost(
        u["input_tokens"], int(calls[0]["chars"] / 2.5), u["cache_read_input_tokens"], u["cache_creation_input_tokens"]
    )
    assert low <= steps["cost"].iloc[0] <= high  # at the recorded 4 tokens it would be $0.01 too low
    audit = trace.started["recorded"]["audit"]
    assert audit["status"] == "estimated" and audit["findings"] == [] and audit["estimated_steps"] == 2
    assert any("not the final one" in n for n in trace.started["recorded"]["notes"])


def test_a_reply_whose_count_claims_to_be_final_but_cannot_be_is_an_audit_finding(tmp_path):
    lines = [json.loads(x) for x in START_COUNTS.read_text().splitlines()]
    for d in lines:  # a later version, and a stop reason on the call's last line: the 4 claims to be final
        d["version"] = "2.1.60"
        if d["type"] == "assistant" and d["message"]["content"][0]["type"] == "tool_use":
            d["message"]["stop_reason"] = "tool_use"
    trace = load_recorded(write_jsonl(tmp_path / "s.jsonl", lines))
    assert not trace.steps["estimated"].iloc[0] and trace.steps["output_tokens"].iloc[0] == 4
    found = trace.started["recorded"]["audit"]["findings"]
    assert [(f["check"], f["step"]) for f in found] == [("output_count", 1)]
    assert "4 output tokens for a reply of" in found[0]["message"]


# ------------------------------------------------------------------ 7, 8: Gemini CLI replies and estimates
PRO_IN, PRO_OUT, PRO_READ = 1.25, 10.0, 0.125  # gemini-2.5-pro per MTok under 200k tokens (Google's list price)


def pro_cost(inp: int, out: int, read: int) -> float:
    return (inp * PRO_IN + out * PRO_OUT + read * PRO_READ) / 1e6


def gemini_session(calls: list[dict]) -> dict:
    """A Gemini CLI chat session in the shape of codemie-ai/codemie-code's real ones (``gemini_cli_real/``):
    ``calls`` are ``(stamp, tokens, [(tool, made_ms, stamp), ...])`` as the CLI records them; tool-call ids are
    ``<tool>-<epoch ms>-<random>``, as the CLI makes them."""
    msgs: list[dict] = [{"id": "u1", "timestamp": "2026-01-16T11:01:00.000Z", "type": "user", "content": "go"}]
    for n, c in enumerate(calls):
        tool_calls = [
            {
                "id": f"{tool}-{made}-{n}{i}abc",
                "name": tool,
                "args": {"file_path": f"/w/f{n}{i}.txt"},
                "result": [{"functionResponse": {"id": f"{tool}-{made}", "name": tool, "response": {"output": "ok"}}}],
                "status": "success",
                "timestamp": stamp,
            }
            for i, (tool, made, stamp) in enumerate(c["tools"])
        ]
        msgs.append(
            {
                "id": f"g{n}",
                "timestamp": c["stamp"],
                "type": "gemini",
                "content": c.get("text", ""),
                "model": c.get("model", "gemini-2.5-pro"),
                "tokens": {**c["tokens"], "tool": 0, "total": 0},
                **({"toolCalls": tool_calls} if tool_calls else {}),
            }
        )
    return {"sessionId": "5b95", "projectHash": "ab" * 32, "startTime": "2026-01-16T11:01:00.000Z", "messages": msgs}


def ms(ts: str) -> int:
    from datetime import datetime

    return round(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)


def test_gemini_tool_calls_of_one_reply_stamped_a_millisecond_apart_are_one_call(tmp_path):
    t = "2026-01-16T11:04:13.751Z"
    made = ms(t) - 300  # both calls were made while the reply streamed, before either was recorded
    doc = gemini_session(
        [
            {
                "stamp": "2026-01-16T11:04:13.751Z",
                "tokens": {"input": 10_000, "output": 40, "cached": 8_000, "thoughts": 60},
                "tools": [("read_file", made, "2026-01-16T11:04:13.751Z"), ("read_file", made + 1, t[:-4] + "752Z")],
            },
            {
                "stamp": "2026-01-16T11:04:20.000Z",
                "text": "done",
                "tokens": {"input": 11_000, "output": 10, "cached": 9_000, "thoughts": 0},
                "tools": [],
            },
        ]
    )
    f = tmp_path / "session-2026-01-16T11-01-5b95.json"
    f.write_text(json.dumps(doc))
    trace = load_recorded(f)
    assert len(trace) == 2 and not trace.steps["estimated"].any()  # no invented call between them
    assert [c["tool"] for c in trace.step(1).calls] == ["read_file", "read_file"]
    expected = pro_cost(2_000, 100, 8_000) + pro_cost(2_000, 10, 9_000)
    assert trace.summary["cost"] == pytest.approx(expected)
    # a batch made after the one before it was recorded is a later reply (the CLI's own merging)
    later = ms("2026-01-16T11:04:13.752Z") + 5_000
    doc["messages"][1]["toolCalls"][1].update(id=f"read_file-{later}-x1abc", timestamp="2026-01-16T11:04:19.000Z")
    f.write_text(json.dumps(doc))
    assert len(load_recorded(f)) == 3


def test_an_estimated_gemini_call_reads_the_cache_as_its_recorded_neighbour_does(tmp_path):
    s1, s2 = "2026-01-16T11:04:13.000Z", "2026-01-16T11:04:30.000Z"
    doc = gemini_session(
        [
            {  # a reply, then a later tool-only reply the CLI folded into this message (its usage lost)
                "stamp": s1,
                "tokens": {"input": 10_000, "output": 40, "cached": 8_000, "thoughts": 0},
                "tools": [("read_file", ms(s1) - 200, s1), ("write_file", ms(s1) + 9_000, s2)],
            },
            {
                "stamp": "2026-01-16T11:04:40.000Z",
                "text": "done",
                "tokens": {"input": 11_000, "output": 10, "cached": 9_000, "thoughts": 0},
                "tools": [],
            },
        ]
    )
    f = tmp_path / "session-2026-01-16T11-01-5b95.json"
    f.write_text(json.dumps(doc))
    trace = load_recorded(f)
    steps = trace.steps
    assert list(steps["estimated"]) == [False, True, False]
    est = steps.iloc[1]
    sent = int(est["input_tokens"] + est["cache_read_tokens"])
    # the step before it read 8,000 of its 10,000 prompt tokens from the cache: so does the estimate
    assert est["cache_read_tokens"] == round(sent * 8_000 / 10_000)
    assert est["cost"] == pytest.approx(
        pro_cost(sent - round(sent * 0.8), int(est["output_tokens"]), round(sent * 0.8))
    )
    assert est["cost"] < pro_cost(sent, int(est["output_tokens"]), 0) / 2  # priced as fresh input it is 2-7x
    audit = trace.started["recorded"]["audit"]
    assert audit["status"] == "estimated" and audit["findings"] == []


# ------------------------------------------------------------------ 11: what a folder holds besides runs
def test_claude_codes_metadata_files_pass_quietly_and_a_git_lfs_pointer_is_named(tmp_path):
    from agentlab.recorded import SkippedFileWarning

    project = tmp_path / "projects" / "-home-user-w"
    write_jsonl(project / "5e55.jsonl", cc_session(2))
    (project / "sessions-index.json").write_text(json.dumps({"version": 1, "entries": [{"sessionId": "5e55"}]}))
    sub = [{**d, "uuid": "s" + d["uuid"], "isSidechain": True, "agentId": "a1"} for d in cc_session(1)]
    for d in sub:
        if d["type"] == "assistant":
            d["requestId"] = "s" + d["requestId"]
    write_jsonl(project / "5e55" / "subagents" / "agent-a1.jsonl", sub)
    (project / "5e55" / "subagents" / "agent-a1.meta.json").write_text(json.dumps({"agentType": "Explore"}))
    pointer = project / "old.jsonl"  # a repository cloned without its LFS objects
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 + "\nsize 48213\n")
    report = ImportReport()
    with pytest.warns(SkippedFileWarning) as caught:
        load_recorded(tmp_path / "projects", report=report)
    assert [str(w.message) for w in caught] == [
        f"{pointer}: skipped (a Git LFS pointer, not the recorded file (fetch it with `git lfs pull`))"
    ]
    assert sorted(p.name for p in report.metadata) == ["agent-a1.meta.json", "sessions-index.json"]
    assert "2 agent metadata file(s) passed over" in report.summary()
    with pytest.raises(Exception, match="Git LFS pointer"):
        load_recorded(pointer)


def test_calls_under_gemini_clis_auto_router_are_unpriced_and_said_so_and_the_others_keep_their_price(tmp_path):
    def call(n, model, inp):
        return {
            "stamp": f"2026-01-16T11:0{n}:00.000Z",
            "model": model,
            "text": f"answer {n}",
            "tokens": {"input": inp, "output": 30, "cached": 0, "thoughts": 0},
            "tools": [],
        }

    doc = gemini_session(
        [call(1, "gemini-2.5-pro", 1000), call(2, "gemini-2.5-pro", 1200), call(3, "auto-gemini-3", 1400)]
        + [call(4, "gemini-2.5-pro", 1600)]
    )
    for n in (2, 3, 4):  # the user spoke between the replies
        doc["messages"].insert(
            2 * n - 2,
            {"id": f"u{n}", "timestamp": f"2026-01-16T11:0{n - 1}:30.000Z", "type": "user", "content": "and?"},
        )
    f = tmp_path / "session-2026-01-16T11-01-5b95.json"
    f.write_text(json.dumps(doc))
    traces = load_recorded(f)
    by_model = {t.started["model"]: t for t in traces if t.started["model"] == "auto-gemini-3"}
    auto = by_model["auto-gemini-3"]
    notes = " ".join(auto.started["recorded"]["notes"])
    assert "Gemini CLI's router" in notes and "gemini-3-pro-preview or gemini-3-flash-preview" in notes
    assert auto.steps["cost"].isna().all()
    priced = [t for t in traces if t.started["model"] == "gemini-2.5-pro"]
    assert sum(t.summary["cost"] for t in priced) == pytest.approx(
        pro_cost(1000, 30, 0) + pro_cost(1200, 30, 0) + pro_cost(1600, 30, 0)
    )


# ------------------------------------------------------------------ the record's own totals
def test_a_codex_rollout_that_lost_a_calls_token_event_disagrees_with_its_running_total(tmp_path):
    src = FIX / "codex_real" / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
    lines = [json.loads(x) for x in src.read_text().splitlines()]
    tokens = [i for i, d in enumerate(lines) if d["payload"].get("type") == "token_count" and d["payload"].get("info")]
    final = lines[tokens[-1]]["payload"]["info"]["total_token_usage"]
    assert load_recorded(src).started["recorded"]["audit"]["findings"] == []  # whole: the calls add up to it
    lost = lines[tokens[3]]["payload"]["info"]["last_token_usage"]
    del lines[tokens[3]]  # one call's token event lost (a cut line, a crash while writing)
    trace = load_recorded(write_jsonl(tmp_path / src.name, lines))
    found = [f for f in trace.started["recorded"]["audit"]["findings"] if f["check"] == "record_total"]
    sent = final["input_tokens"] - lost["input_tokens"]
    assert [f["message"] for f in found] == [
        f"the rollout's running total (total_token_usage) says {final['input_tokens']:,} tokens sent; "
        f"its calls add up to {sent:,}"
    ]


def test_a_mini_swe_agent_instance_cost_the_calls_do_not_reach_is_a_finding(tmp_path):
    doc = json.loads((FIX / "mini_swe_agent" / "django__django-16255.traj.json").read_text())
    for m in doc["messages"]:  # a version that keeps no per-call cost: only the run's instance_cost
        if m["role"] == "assistant":
            m["extra"]["response"]["usage"].pop("cost", None)
    f = tmp_path / "a.traj.json"
    f.write_text(json.dumps(doc))
    trace = load_recorded(f)
    assert trace.started["recorded"]["audit"]["findings"] == []  # the lab's list prices give its instance_cost
    paid = doc["info"]["model_stats"]["instance_cost"]
    doc["info"]["model_stats"]["instance_cost"] = paid * 1.5  # a call the trajectory does not hold was paid for
    f.write_text(json.dumps(doc))
    trace = load_recorded(f)
    found = trace.started["recorded"]["audit"]["findings"]
    assert [x["check"] for x in found] == ["record_total"]
    assert (
        f"the record's own total cost is ${paid * 1.5:.6f}; the lab prices its calls at ${paid:.6f} (-33%)"
        in (found[0]["message"])
    )


# ------------------------------------------------------------------ the audit in a notebook
def test_the_notebook_display_of_an_import_shows_each_runs_audit_and_every_finding(tmp_path):
    from agentlab.recorded import import_recorded

    doc = json.loads((FIX / "mini_swe_agent" / "django__django-16255.traj.json").read_text())
    doc["info"]["model_stats"]["instance_cost"] *= 2  # the record's total: twice what its calls add up to
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.traj.json").write_text(json.dumps(doc))
    shutil.copy(FIX / "mini_swe_agent" / "github_issue.traj.json", src / "b.traj.json")
    report = import_recorded(src, tmp_path / "runs")
    html = report._repr_html_()
    assert html.startswith('<div class="tex2jax_ignore mathjax_ignore">') and "$" not in html  # money, not math
    assert "2 finding(s): record_total x2" in html  # a's run
    assert "estimated (" in html  # b's run: no usage recorded
    assert html.count("<tr><td style='text-align:left'>a</td><td style='text-align:left'>record_total</td>") == 2
    assert f"{src / 'a.traj.json'}" in html and "the record&#x27;s own total cost is &#36;" in html
    traces = load_recorded(src)
    text = repr(traces)
    assert "import audit of 2 run(s): 1 estimated, 1 findings" in text
    assert "import audit: 2 finding(s) (record_total)" in traces["a"]._repr_html_()

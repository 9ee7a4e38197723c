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


def cc_session(calls: int = 4) -> list[dict]:
    """A Claude Code 2.1.45 session: each call on two lines (text, then a tool call) sharing a ``requestId``,
    each line's ``message.id`` its own uuid, the usage repeated on both, the stop reason on the last."""
    lines = [cc_line("user", "u0", "2026-02-10T01:00:00.000Z", message={"role": "user", "content": "do the task"})]
    for c in range(calls):
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
            msg = {
                "model": SONNET,
                "id": uid,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": stop,
                "usage": usage,
            }
            lines.append(
                cc_line("assistant", uid, f"2026-02-10T01:0{c}:0{part}.000Z", message=msg, requestId=f"req_{c}")
            )
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{c}", "content": "ok"}]}
        lines.append(cc_line("user", f"r{c}", f"2026-02-10T01:0{c}:05.000Z", message=result))
    return lines


def cc_plain_cost(lines: list[dict]) -> float:
    by_request = {d["requestId"]: d["message"]["usage"] for d in lines if d["type"] == "assistant"}
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
    lines = cc_session(4)
    expected = cc_plain_cost(lines)
    order = data.draw(st.permutations(range(len(lines))))
    dupes = data.draw(st.lists(st.integers(0, len(lines) - 1), max_size=6))
    changed = [lines[i] for i in order] + [lines[i] for i in dupes]
    cut = data.draw(st.integers(0, len(changed)))
    folder = tmp_path_factory.mktemp("session")
    write_jsonl(folder / "a.jsonl", changed[:cut] or changed)
    if cut:
        write_jsonl(folder / "b.jsonl", changed[cut:] or changed[:1])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = load_recorded(folder)
    assert total_cost(loaded) == pytest.approx(expected)


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
    assert f"{bad}: usage_counts (step 1): output_tokens is -40, below zero" in out
    assert main(["import", str(bad), "--out", str(tmp_path / "runs2")]) == 0  # without --check: said, not failed
    out = capsys.readouterr().out
    assert "audit: 2 finding(s)" in out and "agentlab import PATH --check" in out, out


# ------------------------------------------------------------------ hostile files: bounded, refused, named
_CAPPED = textwrap.dedent(
    """
    import resource, sys, warnings
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    from agentlab.recorded import _bounds, load_recorded
    _bounds.MAX_MEMBER_BYTES = 16 << 20
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

"""Paths come from us, never from content (issue 24).

Run ids and experiment names follow one rule, checked before anything runs;
an id read from a recorded file becomes a file name only through that rule;
every file the lab writes stays inside its folder; a second run cannot write
into another run's trace; a link in an import folder is not followed out.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

import agentlab as al
from agentlab import reply
from agentlab.cli import main
from agentlab.recorded import import_recorded
from agentlab.trace import TraceWriter

FIX = Path(__file__).parent / "fixtures" / "recorded" / "claude_code"
TOOL_HEAVY = FIX / "tool_heavy.jsonl"
SUB = FIX / "ae4a77f8-aedd-4bc1-888f-c94edc91af04" / "subagents" / "agent-aac57f5.jsonl"

BAD_IDS = ["../x", "../../etc/cron.d/x", "/tmp/abs", ".hidden", "a\x00b", "", "..", "a/b", "a\\b", "x" * 129]


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def _model():
    return al.ScriptedModel([reply("hi")])


@pytest.mark.parametrize("run_id", BAD_IDS, ids=repr)
def test_a_bad_run_id_is_refused_before_the_run_starts_with_the_rule_named(tmp_path, run_id):
    runs = tmp_path / "deep" / "runs"
    model = _model()
    with pytest.raises(
        ValueError, match=r"run_id .* is not allowed: it must be 1 to 128 characters of letters, digits"
    ):
        al.run("q", model=model, run_id=run_id, trace=runs, max_cost=None)
    with pytest.raises(ValueError, match="is not allowed"):
        al.Run("q", model=model, run_id=run_id, max_cost=None)
    assert model.calls == 0
    assert files_under(tmp_path) == set()


def test_a_writer_used_directly_refuses_a_bad_run_id_as_a_trace_write_failure(tmp_path):
    """Below the engine's check, the writer's own: the run stops, it does not finish Done without a trace."""
    from agentlab.events import Event

    writer = TraceWriter(tmp_path / "runs")
    with pytest.raises(al.errors.TraceWriteError, match="would be written outside|is not allowed"):
        writer(Event("run_started", "../escaped", 0, 1, 0.0, {}))
    assert files_under(tmp_path) == set()


def test_a_second_run_with_an_existing_run_id_cannot_write_into_the_first_runs_trace(tmp_path):
    first = al.run("first task", model=_model(), run_id="same", trace=tmp_path, max_cost=None)
    before = (tmp_path / "same.jsonl").read_bytes()
    model = _model()
    second = al.run("second task", model=model, run_id="same", trace=tmp_path, max_cost=None)
    assert isinstance(first, al.Done)
    assert isinstance(second, al.Stopped) and second.reason == "trace write failed"
    assert "already has a trace" in second.detail and "pass another run_id" in second.detail
    assert model.calls == 0  # refused before anything was spent
    assert (tmp_path / "same.jsonl").read_bytes() == before
    assert al.load_run("same", tmp_path).summary["task"] == "first task"


def test_a_second_run_through_the_same_writer_cannot_write_into_the_first_runs_trace(tmp_path):
    writer = TraceWriter(tmp_path)
    first = al.run("first task", model=_model(), run_id="same", trace=writer, max_cost=None)
    second = al.run("second task", model=_model(), run_id="same", trace=writer, max_cost=None)
    assert isinstance(first, al.Done) and second.reason == "trace write failed"
    assert al.load_run("same", tmp_path).summary["task"] == "first task"


def test_a_resumed_run_still_appends_to_its_own_trace(tmp_path):
    run = al.Run(
        "q",
        model=al.ScriptedModel([reply(None, ("echo", {})), reply("done")]),
        tools=[echo],
        run_id="resumable",
        max_steps=1,
        max_cost=None,
        subscribers=[TraceWriter(tmp_path)],
    )
    import asyncio

    stopped = asyncio.run(run.run())
    assert stopped.reason == "step limit"
    run.resume(max_steps=3)
    done = asyncio.run(run.run())
    assert isinstance(done, al.Done)
    kinds = [json.loads(x)["kind"] for x in (tmp_path / "resumable.jsonl").read_text().splitlines()]
    assert kinds.count("run_finished") == 2 and "resumed" in kinds


@al.tool
def echo() -> str:
    """Say ok."""
    return "ok"


@pytest.mark.parametrize("name", ["../..", "../outside", "/tmp/abs-experiment", ".hidden", "a/b", "a\x00"], ids=repr)
def test_an_experiment_name_follows_the_same_rule(tmp_path, name):
    with pytest.raises(ValueError, match=r"experiment name .* is not allowed: it must be 1 to 128 characters"):
        al.Experiment(
            ["q"], {"a": {}}, model=lambda task, seed, **o: _model(), folder=tmp_path / "exp", name=name, progress=False
        )
    assert files_under(tmp_path) == set()


def _session_with_sidechain(folder: Path, agent_id: str) -> Path:
    """A real Claude Code session with a real subagent's lines appended, its agentId set by the file's content."""
    lines = [json.loads(x) for x in SUB.read_text().splitlines() if x.strip()]
    for d in lines:
        if d.get("isSidechain"):
            d["agentId"] = agent_id
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / "session.jsonl"
    f.write_text(TOOL_HEAVY.read_text() + "".join(json.dumps(d) + "\n" for d in lines))
    return f


@pytest.mark.parametrize(
    "agent_id", ["real-runs/../../../escaped/pwned", "/tmp/abs-pwned", "..", ".hidden", "a\x00b"], ids=repr
)
def test_an_agent_id_from_a_recorded_file_never_places_a_file_outside_the_out_folder(tmp_path, agent_id):
    src = _session_with_sidechain(tmp_path / "in", agent_id)
    out = tmp_path / "real-runs" / "out"
    written = import_recorded(src, out)
    assert len(written) == 2
    assert all(f.parent == out for f in written)
    assert files_under(tmp_path) == {src, *written}
    assert not Path("/tmp/abs-pwned.jsonl").exists()
    sub = al.load_run(written[1].stem, out)
    assert sub.started["parent"]["run_id"] == written[0].stem  # the link survives the renaming


def test_a_symlink_in_an_import_folder_is_not_followed_out_and_its_content_never_shown(tmp_path):
    folder = tmp_path / "recorded"
    folder.mkdir()
    (folder / "session.jsonl").write_text(TOOL_HEAVY.read_text())
    os.symlink("/etc/passwd", folder / "passwd.jsonl")
    secret = Path("/etc/passwd").read_text().splitlines()[0]
    out, err = io.StringIO(), io.StringIO()
    status = main(["import", str(folder), "--out", str(tmp_path / "runs")], out=out, err=err)
    assert status == 0, err.getvalue()
    assert secret not in out.getvalue() + err.getvalue()
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["session.jsonl"]
    assert [t.run_id for t in al.load_recorded(folder)] == ["session"]  # the same walk for load_recorded


def test_every_file_the_lab_writes_is_placed_by_one_function_that_refuses_to_leave_its_folder(tmp_path):
    from agentlab.trace.files import UnsafePath, inside

    (tmp_path / "runs").mkdir()
    os.symlink("/etc", tmp_path / "runs" / "link")
    assert inside(tmp_path / "runs", "ok.jsonl") == tmp_path / "runs" / "ok.jsonl"
    for name in ["../x.jsonl", "/etc/passwd", "link/passwd", "a\x00.jsonl", "", "."]:
        with pytest.raises(UnsafePath):
            inside(tmp_path / "runs", name)


def test_a_link_planted_in_an_experiment_folder_cannot_send_its_writes_elsewhere(tmp_path):
    target = tmp_path / "elsewhere.json"
    (tmp_path / "exp" / "e").mkdir(parents=True)
    os.symlink(target, tmp_path / "exp" / "e" / "manifest.json")
    with pytest.raises(ValueError, match="would be written outside"):
        al.Experiment(
            ["q"], {"a": {}}, model=lambda task, seed, **o: _model(), folder=tmp_path / "exp", name="e", progress=False
        )
    assert not target.exists()

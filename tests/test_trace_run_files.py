"""A run's trace file at its start and end: what the writer's quicker set-up keeps (issue 27, the fixed cost).

The run's file is opened with one ``open`` that refuses a link; a link is then judged as before (followed
only when it stays inside the runs folder). A bare ``Basic <credential>`` in a run's events, which the
writer's pre-test used to let through, is redacted. A run's result finds its trace after a ``chdir``.
"""

from __future__ import annotations

import os

import agentlab as al
from agentlab import reply


def _echo(text: str) -> str:
    """Echo the text back."""
    return text


def test_a_link_inside_the_runs_folder_is_still_followed_and_the_run_written_through_it(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    target = runs / "kept.txt"
    target.write_text("")
    os.symlink(target, runs / "linked.jsonl")
    result = al.run("go", [], model=al.ScriptedModel([reply("done")]), trace=runs, run_id="linked", max_cost=None)
    assert isinstance(result, al.Done)
    assert '"run_finished"' in target.read_text()


def test_a_basic_credential_alone_in_a_tool_result_never_reaches_the_trace(tmp_path):
    credential = "YWRhOmh1bnRlcjI="
    model = al.ScriptedModel([reply(None, ("_echo", {"text": f"use Basic {credential} now"})), reply("done")])
    result = al.run("go", [_echo], model=model, trace=tmp_path, max_cost=None)
    text = (tmp_path / f"{result.run_id}.jsonl").read_text()
    assert credential not in text and "use Basic [redacted] now" in text


def test_a_runs_trace_is_found_by_its_result_after_a_change_of_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = al.run("go", [], model=al.ScriptedModel([reply("done")]), max_cost=None)  # ./runs
    monkeypatch.chdir("/")
    assert list(result.trace.events["kind"])[-1] == "run_finished"

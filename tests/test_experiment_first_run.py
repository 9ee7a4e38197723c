"""An experiment as a newcomer first runs it: a model that cannot be called is one error before any cell, a failed
cell's row reads in one line (its traceback in the trace), and a terminal shows a progress bar."""

from __future__ import annotations

import io
import json

import pytest

import agentlab as al
from agentlab.models.resolve import MissingAPIKey

from .helpers import PRICES

TASKS = [{"id": f"t{i}", "input": f"q{i}"} for i in range(3)]


def test_a_claude_id_with_no_key_fails_before_the_first_cell_with_one_error(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    exp = al.Experiment(TASKS, al.grid(model=["claude-haiku-4-5"], max_steps=[8, 20]), folder=tmp_path, progress=False)
    with pytest.raises(MissingAPIKey) as caught:
        exp.run()
    message = str(caught.value)
    assert "claude-haiku-4-5" in message and "ANTHROPIC_API_KEY" in message and "No cell was run" in message
    assert "\n" not in message
    assert not (tmp_path / "experiment" / "runs.jsonl").exists() and not list(tmp_path.rglob("*.jsonl"))


def test_an_offline_model_id_still_runs(tmp_path):
    runs = al.Experiment(TASKS[:1], {"a": {}}, model="offline", folder=tmp_path, progress=False).run().runs
    assert list(runs["outcome"]) == ["done"]


def test_a_cell_that_cannot_be_built_has_a_one_line_error_and_its_traceback_in_the_trace(tmp_path):
    def broken_tools(task):
        raise RuntimeError("the shop is closed\nsecond line of detail")

    exp = al.Experiment(
        TASKS[:2],
        {"a": {"prices": PRICES}},
        tools=broken_tools,
        model=lambda task, seed: al.ScriptedModel([al.reply("hi")]),
        folder=tmp_path,
        progress=False,
    )
    runs = exp.run().runs
    assert list(runs["reason"]) == ["setup failed"] * 2
    assert list(runs["error"]) == ["RuntimeError: the shop is closed"] * 2
    trace = tmp_path / "experiment" / "traces" / f"{runs['run_id'][0]}.jsonl"
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [e["kind"] for e in events] == ["setup_failed"]
    assert "Traceback" in events[0]["error"]["traceback"] and "broken_tools" in events[0]["error"]["traceback"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("tty", "shown"), [(True, True), (False, False)])
def test_a_terminal_gets_a_progress_bar_by_default(tmp_path, monkeypatch, tty, shown):
    err = _Terminal() if tty else io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    al.Experiment(TASKS, {"a": {}}, model="offline", folder=tmp_path).run()
    assert ("3/3" in err.getvalue()) is shown, err.getvalue()

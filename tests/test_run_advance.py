"""``Run.advance()``: a step for a driver that follows the run through its events (the notebook panel).

It is ``Run.step()`` without the ``StepRecord``: the same step, the same events, the same trace, the same pause
before tools and the same hand-back of held trace lines when it returns.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import agentlab as al
from agentlab import reply
from agentlab.trace import TraceWriter

from .helpers import ONE_TOOL_STEP


@al.tool(mode="read")
def lookup(key: str) -> str:
    """Look up a key."""
    return "v:" + key


def _script() -> list[dict[str, Any]]:
    return [reply("looking", ("lookup", {"key": "a"})), reply(None, ("lookup", {"key": "b"})), reply("both found")]


def _run(folder: Path, events: list[al.Event] | None = None) -> tuple[al.Run, Path]:
    """A run on a fake clock with a fixed id, traced to ``folder``; its events also go to ``events``."""
    run = al.Run("find a and b", [lookup], model=al.ScriptedModel(_script()), clock=al.FakeClock(), run_id="r1")
    run.subscribe(TraceWriter(folder))
    if events is not None:
        run.subscribe(events.append)
    return run, folder / "r1.jsonl"


def kinds_in(file: Path) -> list[str]:
    return [json.loads(line)["kind"] for line in file.read_bytes().splitlines()]


def test_advance_takes_one_step_and_returns_nothing(tmp_path):
    events: list[al.Event] = []
    run, _ = _run(tmp_path, events)
    assert asyncio.run(run.advance()) is None
    assert run.steps == 1 and run.phase == "ready" and run.result is None
    assert [e.kind for e in events] == ["run_started", *ONE_TOOL_STEP]
    assert run.messages[-1]["content"][0]["content"] == "v:a"  # the tool ran, its result is in the history


def test_a_run_driven_by_advance_writes_the_trace_a_run_driven_by_step_writes(tmp_path):
    """Byte for byte, on a fake clock: only the record returned differs."""
    by_step, by_advance = tmp_path / "step", tmp_path / "advance"
    a, a_file = _run(by_step)
    b, b_file = _run(by_advance)
    records = []
    while not a.finished:
        records.append(asyncio.run(a.step()))
    while not b.finished:
        asyncio.run(b.advance())
    assert a_file.read_bytes() == b_file.read_bytes()
    assert a.result == b.result and isinstance(b.result, al.Done)
    assert [r.step for r in records] == [1, 2, 3] and b.steps == 3


def test_advance_pauses_before_tools_with_the_reply_on_disk(tmp_path):
    """As ``step(pause_before_tools=True)``: the calls wait in ``pending_calls``, the reply that asked for them
    is in the trace already (handed back), and the next ``advance()`` runs them."""
    run, file = _run(tmp_path)
    asyncio.run(run.advance(pause_before_tools=True))
    assert run.phase == "awaiting tools"
    assert [c["name"] for c in run.pending_calls] == ["lookup"]
    assert kinds_in(file) == ["run_started", "model_request", "model_called"]
    asyncio.run(run.advance())
    assert run.pending_calls == [] and run.steps == 1
    assert kinds_in(file)[3:] == ["tool_started", "tool_finished", "tool_results", "step_finished"]


def test_advance_after_the_end_says_the_run_has_finished(tmp_path):
    run, _ = _run(tmp_path)
    while not run.finished:
        asyncio.run(run.advance())
    with pytest.raises(RuntimeError, match="has finished"):
        asyncio.run(run.advance())

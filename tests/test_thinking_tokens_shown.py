"""How much of the output bill was reasoning: ``usage.output_tokens_details.thinking_tokens`` shown in the steps
frame (read from the log and from the store alike), the report and the panel.

The replies are served by ``MessagesServer`` to the real ``anthropic`` SDK, whole and streamed. Their usage's shape
is the SDK 2.17 types': ``types/usage.py`` (``output_tokens_details: Optional[OutputTokensDetails]``) and
``types/output_tokens_details.py`` (``thinking_tokens: int``, "Always <= output_tokens").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentlab as al
from agentlab.lab._html import status_html, step_html
from agentlab.lab._state import PanelState
from agentlab.lab._text import panel_text
from agentlab.models.anthropic import AnthropicModel
from agentlab.report import report_text
from agentlab.testing import MessagesServer
from agentlab.trace import compact

from .trace_fixtures import assert_same_frames, from_logs

STREAMS = pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
HAIKU = "claude-haiku-4-5"


def _usage(output: int, thinking: int | None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "input_tokens": 1_500,
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if thinking is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thinking}
    return usage


def _tool_use(n: int) -> dict[str, Any]:
    return {
        "content": [
            {"type": "thinking", "thinking": "which file first?", "signature": "sig"},
            {"type": "tool_use", "id": f"toolu_{n}", "name": "look", "input": {"n": n}},
        ],
        "stop_reason": "tool_use",
        "usage": _usage(400, 300),
    }


def look(n: int) -> str:
    """Look at item n."""
    return f"item {n}"


def _run(folder: Path, stream: bool, events: list[al.Event] | None = None) -> al.Result:
    """Three steps: two replies with thinking (300 of 400 output tokens), one without details (0 of 100)."""
    final = {"content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn", "usage": _usage(100, None)}
    with MessagesServer([_tool_use(1), _tool_use(2), final]) as server:
        model = AnthropicModel(HAIKU, client=server.client(), stream=stream, cache=False)
        return al.run(
            "Look twice.",
            [look],
            model=model,
            trace=folder,
            clock=al.FakeClock(),
            max_cost=None,
            subscribers=[] if events is None else [events.append],
        )


@STREAMS
def test_the_steps_frame_shows_each_steps_thinking_tokens_from_the_log_and_the_store_alike(tmp_path, stream):
    folder = tmp_path / "runs"
    result = _run(folder, stream)
    logs = from_logs(folder)
    steps = logs.steps
    assert list(steps["thinking_tokens"]) == [300, 300, 0]
    assert list(steps["output_tokens"]) == [400, 400, 100]
    assert str(steps["thinking_tokens"].dtype) == "int64"
    assert list(al.load_run(result.run_id, folder).steps["thinking_tokens"]) == [300, 300, 0]  # one run, per-run path
    compact(folder)
    stored = al.load_runs(folder)
    assert stored.sources == {result.run_id: "store"}
    assert list(stored.steps["thinking_tokens"]) == [300, 300, 0]
    assert_same_frames(logs, stored)


@STREAMS
def test_the_report_says_how_much_of_the_output_bill_was_reasoning(tmp_path, stream):
    folder = tmp_path / "runs"
    result = _run(folder, stream)
    text = report_text(result.run_id, folder)
    assert "thinking: 600 of the 900 output tokens were reasoning (67% of the output bill)" in text
    assert "400 out tokens (300 thinking)" in text  # the step's own line
    assert "100 out tokens ·" in text  # a reply that reported no thinking says nothing of it


def test_a_report_of_a_run_without_thinking_has_no_thinking_line(tmp_path):
    folder = tmp_path / "runs"
    final = {"content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn", "usage": _usage(100, 0)}
    with MessagesServer([final]) as server:
        model = AnthropicModel(HAIKU, client=server.client(), stream=False, cache=False)
        result = al.run("Go.", model=model, trace=folder, clock=al.FakeClock(), max_cost=None)
    assert "thinking" not in report_text(result.run_id, folder)


@STREAMS
def test_the_panel_shows_the_runs_output_of_which_thinking_as_the_replies_arrive(tmp_path, stream):
    events: list[al.Event] = []
    _run(tmp_path / "runs", stream, events)
    state = PanelState()
    called = [e for e in events if e.kind == "model_called"]
    for e in events:
        state.apply(e)
        if e is called[0]:
            assert state.output_line() == "400 tokens, of which thinking 300 (75%)"
    assert (state.output_tokens, state.thinking_tokens) == (900, 600)
    assert "of which thinking 600 (67%)" in status_html(state)
    assert "output 900 tokens, of which thinking 600 (67%)" in panel_text(state)
    first = state.log[called[0].step]
    assert first.thinking_tokens == 300
    assert "400 out tokens (of which thinking 300)" in step_html(first)
    assert "of which thinking" not in step_html(state.log[called[-1].step])  # the reply reported none

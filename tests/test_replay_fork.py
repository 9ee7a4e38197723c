"""Replaying a recorded run offline and forking it at a step."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from agentlab import Done, FunctionModel, Run, ScriptedModel, Stopped, load_run, reply, tool
from agentlab.forking import fork, recorded_tools, replay, replay_setup
from agentlab.models.replay import ReplayModel
from agentlab.recorded import load_recorded
from agentlab.trace import TraceWriter

FIX = Path(__file__).parent / "fixtures" / "recorded"
SUBAGENT = FIX / "claude_code" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04" / "subagents" / "agent-aac57f5.jsonl"
TOOL_HEAVY = FIX / "claude_code" / "tool_heavy.jsonl"
MULTI_TURN = FIX / "claude_code" / "multi_turn.jsonl"  # the user speaks again after replies that end the turn
MINI = FIX / "mini_swe_agent" / "django__django-16255.traj.json"


def _run(r: Run):
    return asyncio.run(r.run())


@pytest.mark.parametrize(
    "path", [SUBAGENT, TOOL_HEAVY, MINI], ids=["claude-subagent", "claude-session", "mini-swe-agent"]
)
def test_a_replay_spends_exactly_what_the_record_spent_step_by_step(path, tmp_path):
    recorded = load_recorded(path)
    r = replay(recorded, subscribers=[TraceWriter(tmp_path)])
    result = _run(r)
    assert r.model_calls == len(recorded)
    assert r.spent == recorded.summary["cost"]  # exactly, not approximately
    if recorded.step(len(recorded)).tool_uses:  # the record stops mid-turn (the user interrupted)
        assert result.reason == "model error" and "beyond what was recorded" in result.detail
    again = load_run(r.run_id, tmp_path)
    assert list(again.steps["cost"]) == list(recorded.steps["cost"])
    assert list(again.steps["context_tokens"]) == list(recorded.steps["context_tokens"])


def test_replayed_tools_answer_with_the_recorded_results_and_run_nothing(tmp_path):
    recorded = load_recorded(TOOL_HEAVY)
    r = replay(recorded, subscribers=[TraceWriter(tmp_path)])
    _run(r)
    again = load_run(r.run_id, tmp_path)
    assert list(again.calls["tool"]) == list(recorded.calls["tool"])
    assert list(again.calls["result_preview"]) == list(recorded.calls["result_preview"])


def test_asking_a_replay_for_more_than_the_record_stops_with_a_clear_reason():
    recorded = load_recorded(MINI)
    model = ReplayModel(recorded)
    model.calls = len(model.replies)  # every recorded reply already given
    r = Run("go on", model=model, max_cost=None, max_steps=3)
    result = _run(r)
    assert isinstance(result, Stopped) and result.reason == "model error"
    assert "cannot go beyond what was recorded" in result.detail
    assert f"has {len(recorded)} replies" in result.detail


def test_a_fork_at_step_k_sends_the_model_exactly_the_first_k_steps_of_history(tmp_path):
    recorded = load_recorded(MINI)
    k = 5
    seen = []

    def model(messages, tools):
        seen.append(copy.deepcopy(messages))  # the engine hands over its live history
        return reply("I will stop here.")

    f = fork(recorded, at_step=k, model=FunctionModel(model), max_cost=None, subscribers=[TraceWriter(tmp_path)])
    _run(f)
    assert seen[0] == recorded.messages_at(k + 1)
    assert [m["role"] for m in seen[0]].count("assistant") == k
    forked = load_run(f.run_id, tmp_path)
    assert forked.started["parent"] == {"run_id": recorded.run_id, "step": k}
    assert forked.started["system"] == recorded.started["system"]


def test_a_fork_continues_live_with_other_tools_and_budgets():
    recorded = load_recorded(MINI)

    @tool(mode="read")
    def bash(command: str) -> str:
        """Run a shell command (a stub)."""
        return f"ran {command}"

    model = ScriptedModel(
        [reply(None, ("bash", {"command": "ls"})), reply(None, ("bash", {"command": "pwd"})), reply("done")]
    )
    f = fork(recorded, at_step=3, model=model, tools=[bash], max_steps=2, max_cost=None)
    result = _run(f)
    assert isinstance(result, Stopped) and result.reason == "step limit"
    assert f.messages[-1]["content"][0]["content"] == "ran pwd"


def test_a_fork_by_default_answers_recorded_calls_and_refuses_new_ones():
    recorded = load_recorded(TOOL_HEAVY)
    tools = {t.name: t for t in recorded_tools(recorded)}
    first = recorded.step(1).tool_uses[0]
    assert asyncio.run(tools["Bash"].fn(**first["input"])).startswith("Command running in background")
    with pytest.raises(Exception, match="not recorded"):
        asyncio.run(tools["Bash"].fn(command="rm -rf /"))


def test_a_fork_after_the_last_reply_needs_a_new_task():
    recorded = load_recorded(MINI)
    recorded_steps = len(recorded)
    f = fork(recorded, at_step=recorded_steps, model=ScriptedModel([reply("ok")]), max_cost=None)
    assert f.messages[-1]["role"] == "user"  # the record ended with the submission's output
    with pytest.raises(ValueError, match="out of range|0..17"):
        fork(recorded, at_step=recorded_steps + 1)


def test_fork_curve_draws_the_parent_and_the_fork_from_the_fork_point(tmp_path):
    pytest.importorskip("matplotlib")
    from agentlab import plots

    recorded = load_recorded(MINI)
    f = fork(
        recorded, at_step=4, model=ScriptedModel([reply("done")]), max_cost=None, subscribers=[TraceWriter(tmp_path)]
    )
    _run(f)
    forked = load_run(f.run_id, tmp_path)
    ax = plots.fork_curve(recorded, forked)
    lines = ax.get_lines()
    parent_line, fork_line = lines[0], lines[1]
    assert len(parent_line.get_xdata()) == len(recorded)
    assert fork_line.get_xdata()[0] == 4
    assert fork_line.get_ydata()[0] == pytest.approx(recorded.steps["cost"].iloc[:4].sum())
    with pytest.raises(ValueError, match="not a fork"):
        plots.fork_curve(forked, recorded)


def test_a_fork_after_a_final_reply_asks_what_to_do_next():
    recorded = load_recorded(SUBAGENT)  # ends with the subagent's answer
    with pytest.raises(ValueError, match="task="):
        fork(recorded, at_step=len(recorded), model=ScriptedModel([reply("ok")]), max_cost=None)
    f = fork(
        recorded,
        at_step=len(recorded),
        task="Now summarise it in one line.",
        model=ScriptedModel([reply("ok")]),
        max_cost=None,
    )
    assert f.messages[-1] == {"role": "user", "content": "Now summarise it in one line."}


def test_replay_tools_false_runs_the_tools_you_give_instead_of_the_record():
    recorded = load_recorded(MINI)
    ran = []

    @tool(mode="read")
    def bash(command: str) -> str:
        """Run a shell command (a stub that records what it was asked)."""
        ran.append(command)
        return "stub output"

    r = replay(recorded, replay_tools=False, tools=[bash])
    _run(r)
    assert ran == [c["args"]["command"] for c in recorded.calls.to_dict("records")][: len(ran)] and len(ran) == len(
        recorded
    )
    assert r.spent == recorded.summary["cost"]  # the replies, and so the spend, are still the record's


# ---------------------------------------------------------------- multi-turn sessions
def _said_by_user(messages):
    """The user's own words in a history (text blocks and strings, not tool results), in order."""
    out = []
    for m in messages:
        if m["role"] != "user":
            continue
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(b["text"] for b in content if b.get("type") == "text")
    return out


def _ends_turn_then_user_speaks(trace):
    """Steps whose reply ended the turn and after which the user spoke again."""
    ended = {e["step"] for e in trace.records if e["kind"] == "model_called" and e.get("stop_reason") == "end_turn"}
    return [e["step"] for e in trace.records if e["kind"] == "tool_results" and e["step"] in ended]


def test_a_multi_turn_session_replays_every_turn_with_the_recorded_spend(tmp_path):
    recorded = load_recorded(MULTI_TURN)
    assert _ends_turn_then_user_speaks(recorded) == [47, 49]  # the fixture: two more turns after the first end_turn
    r = replay(recorded, subscribers=[TraceWriter(tmp_path)])
    result = _run(r)
    assert isinstance(result, Done), result
    assert r.steps == r.model_calls == len(recorded) == 50
    assert r.spent == recorded.summary["cost"]  # exactly
    assert result.text.startswith("Yes")  # the answer to "did you push?", the session's last reply
    again = load_run(r.run_id, tmp_path)
    assert list(again.steps["step"]) == list(recorded.steps["step"])  # numbered on across turns
    assert list(again.steps["cost"]) == list(recorded.steps["cost"])
    assert again.outcome == "done" and len(again) == 50


@pytest.mark.parametrize("path", [MULTI_TURN, TOOL_HEAVY], ids=["after-end-turn", "with-tool-results"])
def test_human_turns_appear_in_the_replayed_history_at_the_recorded_steps(path, tmp_path):
    recorded = load_recorded(path)
    r = replay(recorded, subscribers=[TraceWriter(tmp_path)])
    _run(r)
    again = load_run(r.run_id, tmp_path)
    for k in recorded.step_numbers:
        assert _said_by_user(again.messages_at(k)) == _said_by_user(recorded.messages_at(k)), f"step {k}"
    if path == MULTI_TURN:
        assert "did you push?" not in _said_by_user(again.messages_at(49))
        assert again.messages_at(50)[-1] == {"role": "user", "content": [{"type": "text", "text": "did you push?"}]}
        assert again.messages_at(50)[-2]["role"] == "assistant"  # step 49's reply, which ended its turn
    else:  # the user interrupted step 2's tool call and asked something new in the same message
        sent = again.messages_at(3)[-1]["content"]
        assert sent[0]["type"] == "tool_result" and sent[-1]["text"].startswith("scrolling back in xterm.js")


def test_a_replay_ends_done_when_the_users_last_words_got_no_recorded_reply():
    recorded = load_recorded(MULTI_TURN)
    model = ReplayModel(recorded)
    model.calls = 47  # step 47 ended its turn and the user spoke; one reply is left to give after it
    assert model.user_turn()[0]["text"].startswith("<task-notification>")
    model.calls = 50
    assert model.user_turn() is None  # nothing recorded after the last reply: the replay finishes


def test_a_live_model_still_ends_the_run_at_end_turn():
    r = Run("hi", model=ScriptedModel([reply("Hello."), reply("never asked")]), max_cost=None)
    result = _run(r)
    assert isinstance(result, Done) and r.steps == 1 and result.text == "Hello."


def test_a_fork_after_a_human_turn_sends_what_the_user_said(tmp_path):
    recorded = load_recorded(MULTI_TURN)
    seen = []

    def model(messages, tools):
        seen.append(copy.deepcopy(messages))
        return reply("Yes, pushed.")

    f = fork(recorded, at_step=49, model=FunctionModel(model), max_cost=None)
    result = _run(f)
    assert seen[0] == recorded.messages_at(50)
    assert seen[0][-1]["content"][0]["text"] == "did you push?"
    assert _said_by_user(seen[0]).count("did you push?") == 1
    assert isinstance(result, Done) and f.steps == 1  # a fork is live: it ends at its own end_turn


def test_the_panel_steps_a_multi_turn_replay_to_its_last_recorded_reply(tmp_path):
    pytest.importorskip("ipywidgets", reason="the panel needs ipywidgets (the 'lab' extra)")
    from agentlab import Lab

    recorded = load_recorded(MULTI_TURN)

    async def main():
        lab = Lab(**replay_setup(recorded), trace=tmp_path, chart=False)
        clicks = 0
        while not lab.engine.finished:
            lab.panel.buttons["step"].click()
            await lab.wait()
            clicks += 1
            assert clicks <= len(recorded) + 1, "the replay should have finished"
        return lab, clicks

    lab, clicks = asyncio.run(main())
    assert clicks == len(recorded) == 50  # one click per recorded step, across all three turns
    assert isinstance(lab.engine.result, Done)
    assert "done" in lab.panel.status.value
    assert lab.trace.outcome == "done" and len(lab.trace) == 50
    assert lab.trace.summary["cost"] == recorded.summary["cost"]
    assert lab.trace.messages_at(50)[-1]["content"][0]["text"] == "did you push?"


def test_a_replay_goes_on_when_the_model_spoke_twice_in_a_row(tmp_path):
    import json

    from agentlab.models.replay import NOTHING_SAID

    def gemini(n, text, inp):
        return {
            "id": f"g{n}",
            "timestamp": f"2026-01-16T11:0{n}:00.000Z",
            "type": "gemini",
            "content": text,
            "model": "gemini-2.5-pro",
            "tokens": {"input": inp, "output": 20, "cached": 0, "thoughts": 0, "tool": 0, "total": inp + 20},
        }

    # a Gemini CLI session (the shape of codemie-ai/codemie-code's) in which the model answered, the CLI printed
    # an info line, and the model answered again before the user spoke
    doc = {
        "sessionId": "5b95",
        "projectHash": "ab" * 32,
        "startTime": "2026-01-16T11:00:00.000Z",
        "messages": [
            {"id": "u1", "timestamp": "2026-01-16T11:00:00.000Z", "type": "user", "content": "hello"},
            gemini(1, "first answer", 1000),
            {"id": "i1", "timestamp": "2026-01-16T11:01:30.000Z", "type": "info", "content": "retrying"},
            gemini(2, "second answer", 1100),
            {"id": "u2", "timestamp": "2026-01-16T11:02:30.000Z", "type": "user", "content": "and now?"},
            gemini(3, "third answer", 1300),
        ],
    }
    f = tmp_path / "session-2026-01-16T11-00-5b95.json"
    f.write_text(json.dumps(doc))
    recorded = load_recorded(f)
    assert len(recorded) == 3
    r = replay(recorded, subscribers=[TraceWriter(tmp_path / "runs")])
    result = _run(r)
    assert isinstance(result, Done) and result.text == "third answer"  # not "first answer" after one step
    assert r.steps == r.model_calls == 3 and r.spent == recorded.summary["cost"]
    again = load_run(r.run_id, tmp_path / "runs")
    assert again.messages_at(2)[-1] == {"role": "user", "content": [{"type": "text", "text": NOTHING_SAID}]}
    assert again.messages_at(3)[-1]["content"][0]["text"] == "and now?"

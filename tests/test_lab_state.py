"""The panel's view model: real engine events in, gauges, status and log out (no widgets)."""

from __future__ import annotations

import asyncio

import pytest

import agentlab as al
from agentlab import reply
from agentlab.lab._html import result_html, step_html
from agentlab.lab._panel import enabled_buttons, parse_limit
from agentlab.lab._state import PanelState, gauge_level, gauge_text

from .helpers import PRICES, lookup


def feed(task, tools, script, **kw):
    """Run offline with a PanelState subscribed; return (state, result)."""
    state = PanelState()
    model = al.ScriptedModel(script)
    run = al.Run(task, tools, model=model, clock=al.FakeClock(), subscribers=[state.apply], **kw)
    result = asyncio.run(run.run())
    return state, result


def test_gauge_colour_follows_the_share_of_its_limit():
    """A gauge is green below 70 %, amber from 70 %, red from 90 %, and marked when it stopped the run."""
    assert gauge_level(None) == "idle"
    assert gauge_level(0.69) == "ok"
    assert gauge_level(0.7) == "warn"
    assert gauge_level(0.95) == "danger"
    assert gauge_level(0.3, stopped_this=True) == "stopped"


def test_gauge_text_shows_used_and_limit_with_infinity_for_none():
    """Each gauge reads 'used / limit' in its own unit, ∞ when unlimited."""
    assert gauge_text("steps", 3, 8) == "3 / 8"
    assert gauge_text("cost", 0.01234, 0.5) == "$0.0123 / $0.50"
    assert gauge_text("time", 1.25, 60) == "1.2 s / 60 s"
    assert gauge_text("steps", 2, None) == "2 / ∞"


def test_a_finished_run_shows_its_steps_cost_answer_and_log():
    """After a two-step run the state holds the step count, spent dollars, the answer and both steps."""
    state, result = feed(
        "find a",
        [lookup],
        [reply("let me look", ("lookup", {"key": "a"})), reply("It is A.")],
        max_steps=4,
        prices=PRICES,
    )
    assert isinstance(result, al.Done)
    assert state.status_line() == "done"
    assert state.answer == "It is A."
    steps = state.gauge("steps")
    assert (steps.used, steps.limit, steps.text) == (2, 4, "2 / 4")
    assert state.gauge("cost").used == pytest.approx(result.spent)
    assert sorted(state.log) == [1, 2]
    call = state.log[1].calls[0]
    assert (call.tool, call.args, call.mode, call.outcome, call.result) == (
        "lookup",
        {"key": "a"},
        "read",
        "ok",
        "value of a",
    )
    assert state.log[1].text == "let me look"
    assert state.context_tokens == state.log[2].context_tokens > state.log[1].context_tokens
    assert state.chart_steps == [1, 2] and state.chart_cost[-1] == pytest.approx(result.spent)


def test_the_budget_that_stopped_the_run_is_marked_on_its_gauge():
    """A run stopped by the step limit marks the steps gauge, and only it, as the one that stopped it."""
    script = [reply(None, ("lookup", {"key": str(i)})) for i in range(5)]
    state, result = feed("loop", [lookup], script, max_steps=2)
    assert isinstance(result, al.Stopped) and result.reason == "step limit"
    assert state.stopped_by == "steps"
    assert state.gauge("steps").level == "stopped" and state.gauge("steps").stopped_run
    assert not state.gauge("cost").stopped_run
    assert state.status_line().startswith("stopped: step limit (used all 2 steps")


def test_cost_gauge_warns_before_the_limit():
    """With most of the dollar budget spent the cost gauge turns amber or red before anything stops."""
    state = PanelState()
    state.limits = {"max_steps": 8, "max_cost": 0.10, "deadline_s": 60}
    state.spent = 0.075
    assert state.gauge("cost").level == "warn"
    state.spent = 0.095
    assert state.gauge("cost").level == "danger"


def test_each_tool_outcome_gets_its_own_style_in_the_log():
    """ok, recoverable, retried, fatal and nudged calls are rendered with distinct outcome classes."""
    flaky_calls = []

    @al.tool(mode="read")
    def missing(id: int) -> str:
        """Never found."""
        raise al.ToolError(f"{id} not found", hint="search instead")

    @al.tool(mode="read")
    def flaky() -> str:
        """Fails once, then works."""
        flaky_calls.append(1)
        if len(flaky_calls) == 1:
            raise al.RetryableError("503")
        return "fine"

    @al.tool(mode="write")
    def delete_all() -> str:
        """Not allowed."""
        raise al.PermissionDenied("no deletes for you")

    script = [
        reply(None, ("missing", {"id": 1}), ("flaky", {})),
        reply(None, ("lookup", {"key": "x"})),
        reply(None, ("lookup", {"key": "x"})),
        reply(None, ("lookup", {"key": "x"})),
        reply(None, ("delete_all", {})),
    ]
    state, result = feed("mix", [missing, flaky, delete_all, lookup], script, max_steps=8)
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    outcomes = {c.outcome for e in state.log.values() for c in e.calls}
    assert outcomes == {"recoverable", "retried", "ok", "nudged", "fatal"}
    html = "".join(step_html(e) for e in state.log.values())
    for kind in outcomes:
        assert f"agentlab-outcome-{kind}" in html
    assert "retried 1×" in html
    assert "[write]" in html and "[read]" in html
    assert "PermissionDenied: no deletes for you" in html


def test_long_results_are_cut_with_the_whole_text_one_click_away():
    """A result over the preview length shows its start and a <details> holding all of it."""
    text = "line\n" * 200
    out = result_html(text, preview=50)
    assert "agentlab-truncated" in out and "<details" in out
    assert out.count("line") == 10 + 200
    assert result_html("short").count("<details") == 0


def test_dollars_never_reach_mathjax():
    """Dollar signs are written as HTML entities, so notebooks do not typeset them as math."""
    state, _ = feed("q", [], [reply("costs $5 and $6")], max_steps=2)
    assert "$" not in step_html(state.log[1])


def test_a_step_reads_with_the_same_markup_live_and_read_back(tmp_path):
    """The panel's log and the trace's repr of the same step share one container and one escaping:
    a page or a stylesheet finds step 1 the same way in both, and neither lets a tool's markup through."""
    hostile = "<img src=x onerror=alert(1)> costs $5"

    @al.tool(mode="read")
    def fetch() -> str:
        """Returns markup."""
        return hostile

    state = PanelState()
    script = al.ScriptedModel([reply(None, ("fetch", {})), reply("done")])
    result = al.run("q", [fetch], model=script, trace=tmp_path, subscribers=[state.apply], clock=al.FakeClock())
    live = step_html(state.log[1])
    read_back = result.trace.step(1)._repr_html_()
    for html in (live, read_back):
        assert html.startswith("<div class='agentlab-step ") and " data-step='1' " in html.split(">", 1)[0]
        assert "<div class='agentlab-step-head'" in html
        assert "<img" not in html and "$" not in html
        assert "&lt;img src=x onerror=alert(1)&gt; costs &#36;5" in html


def test_buttons_enabled_follow_the_run():
    """Pause only while running, Run/Step to continue a stopped-by-budget run, nothing once done."""
    s = PanelState()
    assert enabled_buttons(s) == {"step": True, "run": True, "pause": False, "stop": True}
    s.control = "running"
    assert enabled_buttons(s) == {"step": False, "run": False, "pause": True, "stop": True}
    s.control = "pausing"
    assert enabled_buttons(s)["pause"] is False and enabled_buttons(s)["stop"] is True
    s.control, s.outcome, s.reason = None, "stopped", "budget"
    assert enabled_buttons(s) == {"step": True, "run": True, "pause": False, "stop": False}
    s.reason = "fatal"
    assert not any(enabled_buttons(s).values())
    s.outcome = "done"
    assert not any(enabled_buttons(s).values())


def test_limit_fields_parse_numbers_and_name_the_bad_one():
    """Empty means no limit; a bad value raises an error naming the field."""
    assert parse_limit("max_cost", " 1.5 ") == 1.5
    assert parse_limit("max_cost", "$2") == 2.0
    assert parse_limit("max_steps", "") is None
    with pytest.raises(ValueError, match="max_steps must be a whole number"):
        parse_limit("max_steps", "2.5")
    with pytest.raises(ValueError, match="deadline_s must be > 0"):
        parse_limit("deadline_s", "-1")

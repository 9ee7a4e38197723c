"""The Lab panel headless: real widgets without a kernel, driven by Button.click()."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import pytest

import agentlab as al
from agentlab import reply

from .helpers import PRICES


@al.tool(mode="read")
def lookup(key: str) -> str:
    """Look a key up."""
    if key.startswith("huge"):
        return "y" * 10_000
    return "x" * 2000 if key == "big" else f"value of {key}"


class Gate:
    """A model whose every call waits until the test lets it through (no sleeping)."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = 0
        self.entered: asyncio.Event | None = None
        self.open: asyncio.Event | None = None

    async def __call__(self, messages, tools):
        self.entered.set()
        await self.open.wait()
        self.open.clear()
        self.calls += 1
        return self.script[self.calls - 1] if self.calls <= len(self.script) else reply("the end")

    def start(self):
        self.entered, self.open = asyncio.Event(), asyncio.Event()

    async def let_one_through(self):
        self.entered.clear()
        self.open.set()
        await asyncio.sleep(0)


def looping(n=20):
    return [reply(f"step {i}", ("lookup", {"key": str(i)})) for i in range(n)]


def make_lab(script, **kw):
    kw.setdefault("clock", al.FakeClock())
    kw.setdefault("max_steps", 8)
    model = script if isinstance(script, al.FunctionModel) else al.ScriptedModel(script)
    return al.Lab("find things", [lookup], model=model, **kw)


def click(lab, name):
    lab.panel.buttons[name].click()


def gauge(lab, name):
    return lab.panel.gauge_texts[name].value


def log_entries(lab):
    """The log's step entries, newest first, as HTML strings."""
    return re.split(r"<div class='agentlab-step(?: [^']*)?' ", lab.panel.log_html)[1:]


def phase(lab):
    return lab.state.status_line()


def test_run_button_runs_to_the_end_and_the_panel_shows_it():
    """Clicking Run steps until Done; status, gauges, log and chart show the finished run."""

    async def main():
        lab = make_lab([reply("looking", ("lookup", {"key": "a"})), reply("It is A.")], prices=PRICES)
        assert phase(lab) == "ready" and "0 / 8" in gauge(lab, "steps")
        click(lab, "run")
        assert lab.running and lab.panel.buttons["run"].disabled and not lab.panel.buttons["pause"].disabled
        result = await lab.wait()
        assert isinstance(result, al.Done) and result.text == "It is A."
        assert "done" in lab.panel.status.value and "It is A." in lab.panel.status.value
        assert "2 / 8" in gauge(lab, "steps")
        assert f"&#36;{result.spent:.4f}" in gauge(lab, "cost")
        assert lab.panel.bars["steps"].value == pytest.approx(2 / 8)
        assert lab.panel.bars["steps"].bar_style == "success"
        assert all(b.disabled for b in lab.panel.buttons.values())
        entries = log_entries(lab)
        assert len(entries) == 2 and "step 2" in entries[0] and "looking" in entries[1]
        assert "agentlab-outcome-ok" in entries[1]
        chart = lab.panel.chart.value  # SVG for the browser to draw, one point a step: not a picture
        assert chart.startswith("<svg") and chart.count("<polyline") == 2
        assert all(len(line.split('points="')[1].split('"')[0].split()) == 2 for line in chart.split("<polyline")[1:])
        assert lab.trace.outcome == "done" and len(lab.trace) == 2

    asyncio.run(main())


def test_step_button_does_one_step_then_pauses():
    """Step runs exactly one model call and its tools, then the panel says paused."""

    async def main():
        lab = make_lab(looping())
        click(lab, "step")
        await lab.wait()
        assert lab.engine.steps == 1 and not lab.engine.finished
        assert phase(lab) == "paused" and "1 / 8" in gauge(lab, "steps")
        assert not lab.panel.buttons["step"].disabled and lab.panel.buttons["pause"].disabled
        click(lab, "step")
        await lab.wait()
        assert lab.engine.steps == 2

    asyncio.run(main())


def test_pause_shows_pausing_until_the_step_in_flight_ends():
    """Pause mid-step reads "pausing" while the model call is out, then "paused" after that step."""

    async def main():
        gate = Gate(looping())
        gate.start()
        lab = make_lab(al.FunctionModel(gate))
        click(lab, "run")
        await gate.entered.wait()  # step 1's model call is in flight
        await gate.let_one_through()
        await gate.entered.wait()  # step 2's model call is in flight
        click(lab, "pause")
        assert phase(lab) == "pausing" and "pausing" in lab.panel.status.value
        assert lab.panel.buttons["pause"].disabled and not lab.panel.buttons["stop"].disabled
        await gate.let_one_through()
        await lab.wait()
        assert phase(lab) == "paused" and lab.engine.steps == 2 and not lab.engine.finished
        assert gate.calls == 2
        click(lab, "run")  # resumes from where it paused
        await gate.entered.wait()
        await gate.let_one_through()
        await gate.entered.wait()
        click(lab, "stop")
        assert phase(lab) == "stopping"
        await gate.let_one_through()
        result = await lab.wait()
        assert isinstance(result, al.Stopped) and result.reason == "cancelled"
        assert "stopped: cancelled" in lab.panel.status.value
        assert lab.engine.steps == 4

    asyncio.run(main())


def test_stop_on_a_paused_run_ends_it_cancelled_without_another_model_call():
    """Stop while paused records Stopped("cancelled") and makes no further model call."""

    async def main():
        lab = make_lab(looping())
        click(lab, "step")
        await lab.wait()
        click(lab, "stop")
        result = await lab.wait()
        assert isinstance(result, al.Stopped) and result.reason == "cancelled"
        assert lab.engine.model_calls == 1
        assert "stopped: cancelled" in lab.panel.status.value
        assert not lab.panel.buttons["run"].disabled  # a cancelled run can be continued

    asyncio.run(main())


def test_a_run_stopped_by_its_budget_continues_after_raising_the_limit_in_the_panel():
    """Stopped at "budget": the cost gauge says so; raise max cost in the field, click Run, it finishes."""

    async def main():
        script = [reply("a" * 400, ("lookup", {"key": str(i)})) for i in range(3)] + [reply("Finally done.")]
        lab = make_lab(script, max_cost=0.004, prices=PRICES)
        click(lab, "run")
        result = await lab.wait()
        assert isinstance(result, al.Stopped) and result.reason == "budget"
        assert lab.panel.bars["cost"].bar_style == "danger"
        assert "agentlab-level-stopped" in gauge(lab, "cost")  # the class the page styles (and the browser test finds)
        assert "stopped the run" in gauge(lab, "cost") and "stopped the run" not in gauge(lab, "steps")
        assert "stopped: budget" in lab.panel.status.value
        assert lab.panel.limit_fields["max_cost"].value == "0.004"

        lab.panel.limit_fields["max_cost"].value = "lots"
        click(lab, "run")
        assert "max_cost must be a number" in lab.panel.message.value
        assert not lab.running and lab.result is result  # nothing lost

        lab.panel.limit_fields["max_cost"].value = "1.00"
        click(lab, "run")
        assert lab.panel.message.value == ""
        done = await lab.wait()
        assert isinstance(done, al.Done) and done.text == "Finally done."
        assert "&#36;1.00" in gauge(lab, "cost") and "stopped the run" not in gauge(lab, "cost")
        assert "agentlab-level-stopped" not in gauge(lab, "cost")

    asyncio.run(main())


def test_lab_run_takes_raised_limits_from_code():
    """lab.run(max_steps=...) continues a run stopped at its step limit; limits on a live run are refused."""

    async def main():
        lab = make_lab(looping(3) + [reply("ok")], max_steps=2)
        with pytest.raises(ValueError, match="only to continue a stopped run"):
            lab.run(max_steps=5)
        await lab.run()
        assert lab.result.reason == "step limit" and "stopped the run" in gauge(lab, "steps")
        await lab.run(max_steps=6)
        assert isinstance(lab.result, al.Done) and lab.engine.steps == 4
        assert "4 / 6" in gauge(lab, "steps")

    asyncio.run(main())


def test_pause_before_tools_shows_the_requested_calls_before_running_them():
    """With the option ticked, Step stops after the reply; the log shows the call as awaiting; Step runs it."""

    async def main():
        lab = make_lab([reply("I will look", ("lookup", {"key": "k"})), reply("done")])
        lab.panel.pause_before_tools.value = True
        click(lab, "step")
        await lab.wait()
        assert lab.engine.phase == "awaiting tools"
        assert phase(lab) == "paused: tools awaiting approval"
        entry = log_entries(lab)[0]
        assert "agentlab-outcome-requested" in entry and "lookup" in entry and "awaiting" in entry
        click(lab, "step")
        await lab.wait()
        entry = log_entries(lab)[0]
        assert "agentlab-outcome-ok" in entry and "value of k" in entry
        lab.panel.pause_before_tools.value = False
        click(lab, "run")
        assert isinstance(await lab.wait(), al.Done)

    asyncio.run(main())


def test_deadline_gauge_counts_working_time_and_marks_the_stop():
    """A model that takes 10 s per call on a fake clock stops at a 25 s deadline; the time gauge says so."""
    clock = al.FakeClock()

    def slow(messages, tools):
        clock.advance(10)
        return reply("working", ("lookup", {"key": str(len(messages))}))

    async def main():
        lab = make_lab(al.FunctionModel(slow), clock=clock, deadline_s=25, max_steps=10)
        await lab.run()
        assert lab.result.reason == "deadline"
        assert "30.0 s / 25 s" in gauge(lab, "time") and "stopped the run" in gauge(lab, "time")
        assert lab.panel.bars["time"].value == 1.0 and lab.panel.bars["time"].bar_style == "danger"

    asyncio.run(main())


def test_long_tool_results_are_truncated_in_the_log():
    """A 2000-character result shows a preview and a 'show all' disclosure."""

    async def main():
        lab = make_lab([reply(None, ("lookup", {"key": "big"})), reply("ok")])
        await lab.run()
        entry = log_entries(lab)[-1]
        assert "agentlab-truncated" in entry and "show all 2,000 characters" in entry

    asyncio.run(main())


def test_pause_reaches_a_run_whose_instant_steps_give_the_event_loop_no_turn(monkeypatch):
    """Replies that pause their turn call no tool, so the engine's steps never yield to the event loop: the drive
    gives a turn of its own between steps (every TURN_S; every step here), so a Pause from another task lands
    while the run goes on rather than after its last step."""
    import agentlab.lab

    monkeypatch.setattr(agentlab.lab, "TURN_S", 0.0)
    script = [reply(f"part {i}", stop_reason="pause_turn") for i in range(40)] + [reply("done")]

    async def main():
        lab = make_lab(script, max_steps=100)
        seen = []

        async def pauser():
            seen.append(lab.engine.steps)
            lab.pause()

        click(lab, "run")
        task = asyncio.get_running_loop().create_task(pauser())
        await lab.wait()
        await task
        assert seen and seen[0] < 40 and phase(lab) == "paused" and not lab.engine.finished
        assert lab.engine.steps <= seen[0] + 1  # paused after the step in flight when the click came

    asyncio.run(main())


def test_redraws_are_coalesced_and_flushed_at_the_end():
    """Hundreds of events cause a handful of redraws; the final state is still drawn exactly."""

    async def main():
        lab = make_lab(looping(60) + [reply("ok")], max_steps=100, refresh_s=3600)
        before = lab.panel.renders
        await lab.run()
        assert lab.state.events > 300
        assert lab.panel.renders - before <= 3
        assert "61 / 100" in gauge(lab, "steps") and "done" in lab.panel.status.value

    asyncio.run(main())


def widget_updates(monkeypatch):
    """Count the state updates each widget sends to the front end (the comm messages; none is attached here)."""
    from collections import Counter

    from ipywidgets.widgets.widget import Widget

    counts: Counter[int] = Counter()
    send = Widget._send

    def counting(self, msg, buffers=None):
        if msg.get("method") == "update":
            counts[id(self)] += 1
        return send(self, msg, buffers)

    monkeypatch.setattr(Widget, "_send", counting)
    return counts


def test_a_streaming_reply_redraws_its_own_step_not_the_log_before_it(monkeypatch):
    """Thirty steps whose tool returned 10 kB each, then a reply streamed in fragments with a redraw after each:
    the browser was sent those steps once, when the log moved past them, and each redraw while the reply
    streams sends that step alone (a page re-renders all it is sent, up to five times a second)."""
    from ipywidgets.widgets.widget import Widget

    sent: list[int] = []  # characters each update of the log's widgets sent, while the last reply streams
    send = Widget._send

    def measuring(self, msg, buffers=None):
        if streaming and msg.get("method") == "update" and self in (lab.panel.log_newest, lab.panel.log_earlier):
            sent.append(len(json.dumps(msg["state"])))
        return send(self, msg, buffers)

    monkeypatch.setattr(Widget, "_send", measuring)
    answer = "The shelves hold rows of books. " * 8
    script = [reply(f"step {i}", ("lookup", {"key": f"huge {i}"})) for i in range(30)] + [reply(answer)]
    streaming = False

    def redraw_on_each_fragment(event):
        nonlocal streaming
        if event.kind == "model_delta" and event.step == 31:
            streaming = True
            lab.panel.render()

    lab = al.Lab(
        "find things",
        [lookup],
        model=al.ScriptedModel(script, stream=12),
        clock=al.FakeClock(),
        max_steps=40,
        max_cost=None,
        refresh_s=3600,
        subscribers=[redraw_on_each_fragment],
    )
    assert isinstance(lab.run(), al.Done)  # from a script: the run to its end
    earlier = [n for n in sent if n > 300_000]  # the 30 steps and their results, 10 kB each
    assert len(earlier) == 1, sent  # sent once, when the log moved on to the streaming step
    streamed = [n for n in sent if n not in earlier]
    assert len(streamed) >= len(answer) // 12 - 2  # then a redraw a fragment...
    assert max(streamed) < 2_000, streamed  # ...each sending that step's text so far, not the whole log again
    entries = log_entries(lab)  # and the log, drawn whole at the end, holds every step, newest first
    assert [e.split("'")[1] for e in entries] == [str(n) for n in range(31, 0, -1)]
    assert all("show all 10,000 characters" in e for e in entries[1:]) and "The shelves hold" in entries[0]


@pytest.mark.parametrize("steps", [5, 120])
def test_a_runs_widget_updates_do_not_grow_with_its_steps(monkeypatch, steps):
    """Run to the end with no redraw due in between: each widget is updated at most once a redraw (Run's own
    answer and the final one), however many steps ran, and the panel still shows the end."""
    counts = widget_updates(monkeypatch)

    async def main():
        lab = make_lab(looping(steps) + [reply("ok")], max_steps=steps + 1, max_cost=None, refresh_s=3600)
        before = lab.panel.renders
        counts.clear()
        await lab.run()
        redraws = lab.panel.renders - before
        assert redraws == 2
        assert counts and max(counts.values()) <= redraws
        assert sum(counts.values()) <= 20
        assert f"{steps + 1} / {steps + 1}" in gauge(lab, "steps") and "done" in lab.panel.status.value

    asyncio.run(main())


def test_a_step_in_flight_does_not_hide_what_came_before_it():
    """While step 2's model call is out, the panel draws step 1's log entry, the steps gauge and "calling model":
    the Lab's subscriber only queues events, and the panel still draws them mid-step, not only between steps."""

    async def main():
        gate = Gate(looping())
        gate.start()
        lab = make_lab(al.FunctionModel(gate), refresh_s=0.01)
        drawn = asyncio.Event()

        def seen(change):
            if "step 0" in lab.panel.log_html and "calling model" in lab.panel.status.value:
                drawn.set()

        lab.panel.log_newest.observe(seen, names="value")
        lab.panel.log_earlier.observe(seen, names="value")
        lab.panel.status.observe(seen, names="value")
        click(lab, "run")
        await gate.entered.wait()
        await gate.let_one_through()
        await gate.entered.wait()  # step 2's model call is in flight: the drive is not between steps
        await asyncio.wait_for(drawn.wait(), 60)  # a guard against a hang, not a timing
        assert "2 / 8" in gauge(lab, "steps") and lab.running and gate.calls == 1  # step 2 counts, in flight
        click(lab, "stop")
        await gate.let_one_through()
        assert isinstance(await lab.wait(), al.Stopped)

    asyncio.run(main())


def test_log_keeps_the_latest_steps_and_says_how_many_are_hidden():
    """With log_limit=5 the log shows steps 12..8 and a note pointing to the trace."""

    async def main():
        lab = make_lab(looping(11) + [reply("ok")], max_steps=20, log_limit=5)
        await lab.run()
        entries = log_entries(lab)
        assert [e.split("'")[1] for e in entries] == ["12", "11", "10", "9", "8"]
        assert "7 earlier step(s) not shown" in entries[-1]

    asyncio.run(main())


def test_from_a_script_step_and_run_return_results_directly():
    """Without a running event loop, lab.step() and lab.run() run synchronously."""
    lab = make_lab([reply(None, ("lookup", {"key": "a"})), reply("ok")])
    assert lab.step() is None and lab.engine.steps == 1 and lab.phase == "paused"
    result = lab.run()
    assert isinstance(result, al.Done) and lab.phase == "done"


def test_bad_arguments_are_named():
    """Bad Lab options raise errors that name the parameter."""
    with pytest.raises(ValueError, match="log_limit"):
        make_lab([reply("x")], log_limit=0)
    with pytest.raises(ValueError, match="refresh_s"):
        make_lab([reply("x")], refresh_s=-1)
    with pytest.raises(ValueError, match="max_cost"):
        make_lab([reply("x")], max_cost=-1)


def test_missing_ipywidgets_is_reported_when_a_lab_is_made(monkeypatch):
    """Without ipywidgets, import agentlab works and Lab() raises an ImportError saying what to install."""
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(ImportError, match="pip install 'ipywidgets"):
        make_lab([reply("x")])


def test_importing_agentlab_loads_no_widgets_or_plots():
    """import agentlab (and reading agentlab.Lab) does not import ipywidgets or matplotlib."""
    code = (
        "import sys, agentlab; agentlab.Lab; "
        "print(sorted(m for m in ('ipywidgets', 'matplotlib', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_clicks_delivered_on_another_threads_loop_run_and_stop_the_run_on_the_labs_own_loop():
    """ipykernel 7 may deliver a widget click on a subshell's thread, which runs an event loop of its own.

    The run must still step on the loop the Lab was made on, and a Stop clicked while a model call is held must
    end it cancelled: a run once stepped on the subshell's loop, and a Stop that raced the end of that step
    resumed the run it had just stopped (the browser test caught it).
    """
    import threading

    async def main():
        home = asyncio.get_running_loop()
        seen: list[tuple[asyncio.AbstractEventLoop, str]] = []
        held, release = asyncio.Event(), asyncio.Event()

        async def model(messages, tools):
            seen.append((asyncio.get_running_loop(), threading.current_thread().name))
            if len(seen) == 2:
                held.set()
                await release.wait()  # only Stop ends this call
            return reply("looking", ("lookup", {"key": str(len(seen))}))

        lab = make_lab(al.FunctionModel(model), max_steps=10)

        def click_on_a_subshell(name):
            async def there():
                click(lab, name)

            worker = threading.Thread(target=asyncio.run, args=(there(),), name="subshell")
            worker.start()
            worker.join()

        click_on_a_subshell("run")
        await asyncio.wait_for(held.wait(), 60)  # a guard against a hang, not a timing
        click_on_a_subshell("stop")
        result = await asyncio.wait_for(lab.wait(), 60)
        return home, seen, result, lab

    home, seen, result, lab = asyncio.run(main())
    assert [loop for loop, _ in seen] == [home, home]
    assert all(name != "subshell" for _, name in seen)
    assert isinstance(result, al.Stopped) and result.reason == "cancelled"
    assert lab.phase.startswith("stopped") and lab.state.status_line().startswith("stopped: cancelled")
    assert len(seen) == 2  # the Stop did not resume the run for another step


def test_a_fresh_panel_shows_empty_axes_not_an_image():
    """Before any step the chart is empty axes that say so: no image widget, so no broken-image icon."""
    import ipywidgets as w

    lab = make_lab([reply("done")], prices=PRICES)

    def widgets(x):
        yield x
        for child in getattr(x, "children", ()):
            yield from widgets(child)

    assert not any(isinstance(x, w.Image) for x in widgets(lab.panel.widget))
    assert "no step yet" in lab.panel.chart.value and "<polyline" not in lab.panel.chart.value


def test_the_chart_is_markup_that_runs_nothing_and_fetches_nothing():
    """What the chart writes into the page is inert SVG: no script, no link, no external reference; its dollar
    signs are entities (JupyterLab typesets a bare pair as math)."""
    import re

    from agentlab.lab._chart import chart_svg

    svg = chart_svg([1, 2, 3], [1200, 2400, 40_000], [0.01, 0.5, 2.0])
    assert not re.search(r"<script|<a\b|href|<image|<foreignObject|\bon\w+=|url\(", svg, re.I)
    assert "$" not in svg and "&#36;" in svg
    assert [m for m in re.findall(r"https?://[^\"]+", svg)] == ["http://www.w3.org/2000/svg"]  # a name, not a fetch


@pytest.mark.parametrize(("value", "top"), [(0, 1.0), (0.004, 0.005), (3, 5.0), (7.2, 10.0), (1200, 2000.0)])
def test_the_chart_axis_top_is_the_next_round_number(value, top):
    from agentlab.lab._chart import nice_max

    assert nice_max(value) == top


def test_a_closed_lab_leaves_no_widget_of_its_panel_open_so_a_notebooks_widget_state_still_saves():
    """Closing a lab closes every widget of its panel; saving the notebook's widget state (every live widget,
    what JupyterLab's "Save Widget State" does) then still works."""
    import ipywidgets
    from ipywidgets.widgets.widget import _instances

    before = set(_instances)
    lab = make_lab([reply("It is A.")], prices=PRICES)
    lab.run()
    made = [w for key, w in list(_instances.items()) if key not in before]
    assert len(made) > 5  # the panel's boxes, buttons, gauges, log and chart
    lab.close()
    assert [w for w in made if w.comm is not None] == []
    ipywidgets.Widget.get_manager_state(drop_defaults=False)  # raises on an open box around a closed child

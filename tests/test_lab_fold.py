"""The panel folds a step's log entry when it draws it (the trace writer checked every event first).

What it shows must be what folding each event as it arrives shows: the same
gauges, status, chart and log entries, drawn at any moment of any run, and
no secret in any of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab import reply
from agentlab.lab._html import step_html
from agentlab.lab._state import PanelState
from agentlab.lab._text import panel_text
from agentlab.trace.writer import TraceWriter

KEY = "sk-ant-api03-F0ldL8terK3yAbCdEfGhIjKlMnOpQrStUvWx-0123456789"
PASSWORD = "Zq7-fold-Hunter2"


@al.tool(mode="read")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@al.tool(mode="read")
def credentials(service: str) -> str:
    """Returns a key (a result holding a secret)."""
    return f"the {service} token is {KEY}"


@al.tool(mode="write")
def login(host: str, password: str) -> str:
    """Logs in (a secret by its field name: the redactor learns it)."""
    return f"logged in to {host}"


@al.tool(mode="read")
def missing(key: str) -> str:
    """Never found (a recoverable error)."""
    raise al.ToolError(f"{key} not found", hint="try another")


@al.tool(mode="write")
def forbidden() -> str:
    """Refused (a fatal error quoting a key)."""
    raise al.PermissionDenied(f"refused: key {KEY} is not yours")


TOOLS = [lookup, credentials, login, missing, forbidden]
CALLS = {
    "lookup": lambda i: ("lookup", {"key": f"k{i}"}),
    "credentials": lambda i: ("credentials", {"service": "db"}),
    "login": lambda i: ("login", {"host": f"h{i}", "password": PASSWORD}),
    "missing": lambda i: ("missing", {"key": f"m{i}"}),
    "forbidden": lambda i: ("forbidden", {}),
}
TEXTS = {
    "none": None,
    "plain": "let me look that up",
    "key": f"I will use {KEY} for it",
    "echo": f"the one from before: {PASSWORD}",  # bare: removed only once the redactor has learned it
    "dollars": "that costs $5 <b>now</b>",
}


def script(plan: list[tuple[str, list[str]]], final: str | None) -> list[dict]:
    replies, learned = [], False
    for i, (text, calls) in enumerate(plan):
        if text == "echo" and not learned:
            text = "plain"  # a value is learned from a call's arguments before it can be removed bare
        replies.append(reply(TEXTS[text], *(CALLS[c](i) for c in calls)))
        learned = learned or "login" in calls
    if final is not None:
        replies.append(reply(final))
    return replies


def view(s: PanelState) -> dict:
    """Everything the panel draws but the log's entries."""
    return {
        "numbers": (s.steps, s.spent, s.elapsed, s.context_tokens, s.events),
        "status": (s.phase, s.status_line(), s.outcome, s.reason, s.detail, s.answer, s.error, s.guard_note),
        "limits": dict(s.limits),
        "gauges": s.gauges(),
        "chart": (list(s.chart_steps), list(s.chart_tokens), list(s.chart_cost)),
        "steps": (s.log.newest, s.log.dropped + len(s.log)),
        "text": panel_text(s),
    }


def entry(s: PanelState, n: int) -> tuple[dict, str]:
    return dataclasses.asdict(s.log[n]), step_html(s.log[n])


def run_both(
    replies, *, stream: int, max_steps: int, draws: list[tuple[int, int]], queued: bool = True, keep: int | None = None
):
    """One run with the panel's state folded both ways, each behind its own trace writer (as the ``Lab`` has it).

    ``draws``: (event index, how many recent steps): where the lazy state is drawn mid-run and compared.
    ``queued``: the lazy state's events are queued and folded at each draw (the ``Lab``'s way), else applied.
    ``keep``: the lazy state holds only that many recent steps (the ``Lab`` keeps its ``log_limit``)."""
    at = dict(draws)
    mismatches: list[str] = []
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        writer_a, writer_b = TraceWriter(a), TraceWriter(b)
        run_id = "fold-run"
        eager = PanelState(writer_a.redactor_for(run_id))
        lazy = PanelState(writer_b.redactor_for(run_id), checked_upstream=True, keep=keep)
        seen = [0]

        def draw(event: al.Event) -> None:
            i = seen[0]
            seen[0] += 1
            if i in at:
                lazy.catch_up()  # what a redraw does first
            if i in at and lazy.log.newest is not None:
                recent = [n for n in lazy.log if n > lazy.log.newest - at[i]]
                if view(lazy) != view(eager) or [entry(lazy, n) for n in recent] != [entry(eager, n) for n in recent]:
                    mismatches.append(f"at event {i} ({event.kind})")

        def queue(event: al.Event) -> None:
            lazy.pending.append(event)

        model = al.ScriptedModel(replies, stream=stream) if stream else al.ScriptedModel(replies)
        run = al.Run(
            "fold",
            TOOLS,
            model=model,
            clock=al.FakeClock(),
            run_id=run_id,
            max_steps=max_steps,
            subscribers=[writer_a, writer_b, eager.apply, queue if queued else lazy.apply, draw],
        )
        asyncio.run(run.run())
        writer_a.close()
        writer_b.close()
    lazy.catch_up()  # the final draw
    return eager, lazy, mismatches


plans = st.lists(
    st.tuples(st.sampled_from(sorted(TEXTS)), st.lists(st.sampled_from(sorted(CALLS)), max_size=3)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=plans,
    final=st.sampled_from([None, "Done.", f"Done with {KEY}."]),
    stream=st.sampled_from([0, 0, 7]),
    max_steps=st.integers(1, 10),
    draws=st.lists(st.tuples(st.integers(0, 80), st.integers(1, 4)), max_size=6),
    queued=st.booleans(),
    keep=st.sampled_from([None, 1, 2, 4]),
)
def test_folding_a_step_when_it_is_drawn_shows_what_folding_each_event_at_once_shows(
    plan, final, stream, max_steps, draws, queued, keep
):
    """Any run, drawn at any moments (its events queued until then, or folded as they come): the gauges,
    status, chart and the drawn entries match the state folded event by event, then every entry does; neither
    holds the key or the password."""
    eager, lazy, mismatches = run_both(
        script(plan, final), stream=stream, max_steps=max_steps, draws=draws, queued=queued, keep=keep
    )
    assert not mismatches
    assert view(lazy) == view(eager)
    held = list(lazy.log)  # all steps, or the newest `keep` of them
    assert held == list(eager.log)[len(eager.log) - len(held) :] and (keep is None or len(held) <= keep)
    assert [entry(lazy, n) for n in held] == [entry(eager, n) for n in held]
    shown = json.dumps([entry(lazy, n) for n in lazy.log], default=str) + json.dumps(view(lazy), default=str)
    assert KEY not in shown and PASSWORD not in shown


def test_a_value_learned_after_a_step_arrived_is_removed_from_it_when_it_is_drawn():
    """The password the model said bare at step 1 is learned from step 2's login arguments: a panel that folds
    step 1 when it draws it, after that, removes it there too (one folding each event at once could not)."""
    replies = [
        reply(f"trying {PASSWORD} first", ("lookup", {"key": "a"})),
        reply(None, ("login", {"host": "db", "password": PASSWORD})),
        reply("Done."),
    ]
    eager, lazy, _ = run_both(replies, stream=0, max_steps=5, draws=[])
    assert PASSWORD in eager.log[1].text  # folded before anything said it was a password
    assert PASSWORD not in lazy.log[1].text and "[redacted]" in lazy.log[1].text
    assert lazy.log[2].calls[0].args["password"] == "[redacted]"


def test_a_state_without_an_upstream_check_folds_each_event_as_it_arrives():
    """A state with its own redactor (no trace writer checks events before it) cannot wait: each step's entry
    is folded, and the values it learns removed, as events arrive."""
    state = PanelState(checked_upstream=True)  # no shared redactor: nobody checks upstream
    replies = [reply(None, ("login", {"host": "db", "password": PASSWORD})), reply(f"used {PASSWORD}")]
    run = al.Run("q", TOOLS, model=al.ScriptedModel(replies), clock=al.FakeClock(), subscribers=[state.apply])
    asyncio.run(run.run())
    assert not state.checked_upstream
    assert PASSWORD not in state.log[2].text


@pytest.mark.parametrize("trace", [True, False])
def test_a_long_runs_log_shows_its_last_steps_with_no_secret_in_the_widgets(tmp_path, trace):
    """30 steps, log_limit=4: the log shows steps 31..28 (the final answer first), as folding each event at once
    would, a note for the 27 hidden, and the widgets' saved state holds no key from any step."""
    import ipywidgets
    from ipywidgets.widgets.widget import _instances  # every live widget, as a notebook's saved state holds them

    before = set(_instances)  # widgets other tests left (some closed, in containers) are theirs: not serialised
    replies = [reply(f"step {i} uses {KEY}", ("credentials", {"service": f"s{i}"})) for i in range(30)]
    replies.append(reply("Done."))
    lab = al.Lab(
        "fold",
        TOOLS,
        model=al.ScriptedModel(replies),
        clock=al.FakeClock(),
        max_steps=40,
        log_limit=4,
        chart=False,
        trace=tmp_path if trace else False,
    )
    result = lab.run()
    assert isinstance(result, al.Done)
    eager, _, _ = run_both(replies, stream=0, max_steps=40, draws=[])
    drawn = lab.panel.log_html
    assert drawn.startswith("".join(step_html(eager.log[n]) for n in (31, 30, 29, 28)))
    assert "27 earlier step(s) not shown" in drawn
    assert list(lab.state.log) == [28, 29, 30, 31]  # a long run holds the steps it can draw, not all it sent
    made_here = [w for key, w in list(_instances.items()) if key not in before]
    assert made_here  # the panel's own widgets are the ones checked
    saved = json.dumps(ipywidgets.Widget.get_manager_state(drop_defaults=False, widgets=made_here))
    assert KEY not in saved and "[redacted]" in saved
    lab.close()


def test_a_queued_state_reads_up_to_date_through_its_read_side():
    """Events queued and not yet drawn: the phase, status line, gauges and the plain-text panel already show them."""
    state = PanelState()
    replies = [reply(None, ("lookup", {"key": "a"})), reply("It is A.")]
    run = al.Run("q", TOOLS, model=al.ScriptedModel(replies), clock=al.FakeClock(), max_steps=4)
    run.subscribe(state.pending.append)  # the Lab's subscriber: the queue's own append
    asyncio.run(run.run())
    assert state.events == 0 and state.pending
    assert state.status_line() == "done" and state.gauge("steps").text == "2 / 4"
    assert not state.pending and state.answer == "It is A."
    assert "answer: It is A." in panel_text(state)


def test_a_state_subscribed_through_its_queue_keeps_up_after_each_catch_up():
    """The queue is emptied, not replaced, when it is folded: the subscribed ``append`` still reaches the state."""
    state = PanelState()
    replies = [reply(None, ("lookup", {"key": "a"})), reply("It is A.")]
    run = al.Run("q", TOOLS, model=al.ScriptedModel(replies), clock=al.FakeClock(), max_steps=4)
    run.subscribe(state.pending.append)
    asyncio.run(run.step())
    assert state.gauge("steps").text == "1 / 4" and state.answer == ""  # folded: the queue is empty now
    asyncio.run(run.step())
    assert state.status_line() == "done" and state.gauge("steps").text == "2 / 4" and state.answer == "It is A."


@pytest.mark.parametrize("trace", [True, False])
def test_a_password_learned_in_a_step_the_log_never_draws_is_still_removed_from_a_step_it_draws(tmp_path, trace):
    """The whole run folded in one redraw, log_limit=2: step 1's login (which teaches the redactor the password)
    scrolls out unread, and step 6 says the password bare. With a trace writer ahead the writer learned it;
    without one the panel must still fold step 1 to learn it: either way step 6 is drawn without it."""
    replies = [reply(None, ("login", {"host": "db", "password": PASSWORD}))]
    replies += [reply(None, ("lookup", {"key": f"k{i}"})) for i in range(4)]
    replies += [reply(f"the one from before: {PASSWORD}")]
    lab = al.Lab(
        "fold",
        TOOLS,
        model=al.ScriptedModel(replies),
        clock=al.FakeClock(),
        approve=lambda request: True,
        log_limit=2,
        refresh_s=3600,
        chart=False,
        trace=tmp_path if trace else False,
    )
    assert isinstance(lab.run(), al.Done)
    assert list(lab.state.log) == [5, 6]
    assert PASSWORD not in lab.panel.log_html and "[redacted]" in lab.panel.log_html
    lab.close()

"""An event's ``t`` is a reading of the run's working time taken after the event before it was emitted, so the
times of a run's events never go back; an event that carries a time of its own (a call's ``end``, a step's
``elapsed``) is emitted at that very reading (issue 27: one clock reading serves both)."""

from __future__ import annotations

import agentlab as al
from agentlab import reply

from .helpers import Recorder


class TickingClock(al.FakeClock):
    """Every reading is one second after the last: no two readings are alike, so an event read at its own
    reading can be told from one read at another's."""

    def now(self) -> float:
        self.t += 1.0
        return self.t


@al.tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


@al.tool
async def fetch(key: str) -> str:
    """Fetch a key."""
    return key.lower()


def _events(*replies: al.Reply) -> list[al.Event]:
    seen = Recorder()
    al.run(
        "go",
        [lookup, fetch],
        model=al.ScriptedModel(list(replies)),
        clock=TickingClock(),
        subscribers=[seen],
        trace=False,
        max_cost=None,
    )
    return seen.events


STEPS = (
    reply(None, ("lookup", {"key": "a"})),
    reply(None, ("fetch", {"key": "B"}), ("lookup", {"key": "c"})),
    reply("done"),
)


def test_each_event_is_timed_after_the_one_before_it():
    events = _events(*STEPS)
    times = [e.t for e in events]
    assert len(events) > 10
    assert times == sorted(set(times))  # every event read the clock after the last one was emitted


def test_a_finished_call_is_timed_at_its_end_and_a_started_one_at_its_start():
    events = _events(*STEPS)
    started = {e.data["call_id"]: e for e in events if e.kind == "tool_started"}
    finished = [e for e in events if e.kind == "tool_finished"]
    assert len(finished) == 3
    for e in finished:
        assert e.t == e.data["end"]
        assert started[e.data["call_id"]].t == e.data["start"]


def test_a_finished_step_is_timed_at_the_working_time_it_reports():
    steps = [e for e in _events(*STEPS) if e.kind == "step_finished"]
    assert len(steps) == 2
    assert all(e.t == e.data["elapsed"] for e in steps)


def test_a_reply_is_timed_at_the_reading_that_ends_its_latency():
    events = _events(*STEPS)
    for before, called in zip(events, events[1:], strict=False):
        if called.kind == "model_called":
            assert before.kind == "model_request"
            # model_request read the clock, then the call's start was read, then its end: the reply's time.
            assert called.t - before.t == called.data["latency"] + 1.0

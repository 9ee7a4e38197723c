"""A fast run still lets the rest of its event loop in (issue 27: one turn when something waits, not one a step)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import agentlab as al
from agentlab import reply
from agentlab._runtime import turns
from agentlab._runtime.turns import POLL_S, Turns


def _endless() -> al.FunctionModel:
    return al.FunctionModel(lambda m, t: reply(None, ("note", {"n": len(m)})))


def test_a_task_woken_by_a_tool_cancels_the_run_in_the_next_step():
    """A tool wakes another task on the same loop (an asyncio.Event), and that task cancels the run: it gets
    its turn in the very next step's tools phase, as when every step gave the loop a turn (deterministic: no
    clock decides it)."""

    async def go() -> tuple[al.Run, al.FunctionModel]:
        woken = asyncio.Event()

        async def note(n: int) -> str:
            """Note a number."""
            if n >= 5:  # the third step's call
                woken.set()
            return "ok"

        model = _endless()
        r = al.Run("q", [note], model=model, max_cost=None, max_steps=50)

        async def stopper() -> None:
            await woken.wait()
            r.cancel()

        waiting = asyncio.ensure_future(stopper())
        await r.run()
        await waiting
        return r, model

    r, model = asyncio.run(go())
    assert r.result is not None and r.result.reason == "cancelled"
    assert model.calls == 4, "the stopper ran in the step after the one that woke it"
    assert r.result.detail == "cancelled during the tools of step 4"


def test_a_timer_that_came_due_gets_its_turn_in_the_next_step():
    """``loop.call_later(0, run.cancel)`` set before the run: the timer is due at once, so the loop runs it
    in the first turn the run gives (as when every step gave one): the run stops in its second step."""

    async def go() -> tuple[al.Run, al.FunctionModel]:
        async def note(n: int) -> str:
            """Note a number."""
            return "ok"

        model = _endless()
        r = al.Run("q", [note], model=model, max_cost=None, max_steps=50)
        asyncio.get_running_loop().call_later(0, r.cancel)
        await r.run()
        return r, model

    r, model = asyncio.run(go())
    assert r.result is not None and r.result.reason == "cancelled"
    assert model.calls == 2 and r.result.detail == "cancelled during the tools of step 2"


class _Loop:
    """What Turns reads of asyncio's own loop: its ready queue, its timers and its clock."""

    def __init__(self) -> None:
        self._ready: list[Any] = []
        self._scheduled: list[Any] = []
        self.now = 100.0

    def time(self) -> float:
        return self.now


class _Timer:
    def __init__(self, when: float) -> None:
        self._when = when

    def when(self) -> float:
        return self._when


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(turns.time, "monotonic", lambda: now[0])
    return now


def test_with_nothing_waiting_the_loop_gets_a_turn_only_every_poll_interval(clock: list[float]):
    t, loop = Turns(), _Loop()
    assert t.due(loop), "the first time: a turn"
    assert not t.due(loop), "nothing waits and no time passed: no turn"
    clock[0] += POLL_S / 2
    assert not t.due(loop)
    clock[0] += POLL_S / 2
    assert t.due(loop), "POLL_S of the run's time: a turn to poll the loop's sockets"
    assert not t.due(loop)


def test_a_waiting_callback_or_a_due_timer_gets_a_turn_at_once(clock: list[float]):
    t, loop = Turns(), _Loop()
    t.due(loop)
    loop._ready.append(object())  # another task woken, a call_soon_threadsafe from a widget's thread
    assert t.due(loop)
    loop._ready.clear()
    loop._scheduled.append(_Timer(loop.now + 1))
    assert not t.due(loop), "a timer not yet due does not need a turn"
    loop.now += 1
    assert t.due(loop), "a timer that came due does"


def test_a_loop_whose_queues_cannot_be_read_gets_a_turn_every_time(clock: list[float]):
    """uvloop and other loops keep their queues in C: every step gives them a turn, as before."""
    t = Turns()
    assert all(t.due(object()) for _ in range(3))  # type: ignore[arg-type]

"""The panel asks before a write that needs approval; the text fallback says where the run is."""

from __future__ import annotations

import asyncio

import agentlab as al
from agentlab import reply

from .helpers import PRICES


def _lab():
    done: list[int] = []

    @al.tool(mode="write", approve=True)
    def refund(order_id: int) -> str:
        """Refund an order."""
        done.append(order_id)
        return f"refunded {order_id}"

    model = al.ScriptedModel([reply("refunding", ("refund", {"order_id": 7})), reply("Refunded.")])
    lab = al.Lab("refund 7", [refund], model=model, clock=al.FakeClock(), prices=PRICES, chart=False, trace=False)
    return lab, done


async def _until(predicate):
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("the panel never got there")


def test_a_pending_write_shows_its_call_and_approve_runs_it():
    async def main():
        lab, done = _lab()
        lab.panel.buttons["run"].click()
        await _until(lambda: lab.panel.approval.layout.display == "flex")
        assert "refund" in lab.panel.approval_text.value and "&quot;order_id&quot;: 7" in lab.panel.approval_text.value
        assert not lab.panel.buttons["stop"].disabled  # Stop still works while it waits
        assert "1 / 8" in lab.panel.gauge_texts["steps"].value
        assert done == []
        lab.panel.approve_button.click()
        result = await lab.wait()
        assert isinstance(result, al.Done) and done == [7]
        assert lab.panel.approval.layout.display == "none"

    asyncio.run(main())


def test_deny_in_the_panel_stops_the_run_without_running_the_write():
    async def main():
        lab, done = _lab()
        lab.panel.buttons["run"].click()
        await _until(lambda: lab.panel.approval.layout.display == "flex")
        lab.panel.deny_button.click()
        result = await lab.wait()
        assert isinstance(result, al.Stopped) and result.reason == "fatal"
        assert "denied in the panel" in result.detail and done == []
        assert "stopped: fatal" in lab.panel.status.value

    asyncio.run(main())


def test_stop_while_waiting_for_approval_cancels_the_run():
    async def main():
        lab, done = _lab()
        lab.panel.buttons["run"].click()
        await _until(lambda: lab.panel.approval.layout.display == "flex")
        lab.panel.buttons["stop"].click()
        result = await lab.wait()
        assert isinstance(result, al.Stopped) and result.reason == "cancelled" and done == []
        assert lab.panel.approval.layout.display == "none"

    asyncio.run(main())


def test_the_text_fallback_names_phase_gauges_and_last_step():
    async def main():
        lab, _ = _lab()
        text = lab._repr_mimebundle_()
        data = text[0] if isinstance(text, tuple) else text
        assert "application/vnd.jupyter.widget-view+json" in data
        assert data["text/plain"].startswith(f"agentlab run {lab.run_id}")
        assert "ready" in data["text/plain"] and "steps 0 / 8" in data["text/plain"]
        lab.panel.buttons["run"].click()
        await _until(lambda: lab.panel.approval.layout.display == "flex")
        waiting = lab._repr_mimebundle_()
        waiting = waiting[0] if isinstance(waiting, tuple) else waiting
        assert 'waiting for approval: refund({"order_id": 7})' in waiting["text/plain"]
        lab.panel.approve_button.click()
        await lab.wait()
        data = lab._repr_mimebundle_()
        data = data[0] if isinstance(data, tuple) else data
        plain = data["text/plain"]
        assert "done" in plain.splitlines()[0]
        assert "steps 2 / 8" in plain
        assert "last step 2" in plain and "answer: Refunded." in plain

    asyncio.run(main())

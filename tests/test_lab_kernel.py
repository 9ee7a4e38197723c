"""The Lab in a real Jupyter kernel: a notebook run by nbclient starts, pauses, resumes
and stops a run through the panel's buttons while later cells ``await`` it."""

from __future__ import annotations

import json

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.kernel

SETUP = """
import asyncio, json
import agentlab as al
from agentlab import reply

@al.tool(mode="read")
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return f"value of {key}"

calls = []
hold = {"at": 3, "reached": asyncio.Event(), "release": asyncio.Event()}

async def model_fn(messages, tools):
    # answers at once, except that call number hold["at"] waits for the notebook to let it go:
    # so a cell knows the run is mid-step without watching a clock
    calls.append(1)
    if len(calls) == hold["at"]:
        hold["reached"].set()
        await hold["release"].wait()
    return reply("still looking", ("lookup", {"key": str(len(messages))}))

def hold_at(n):
    hold.update(at=n, reached=asyncio.Event(), release=asyncio.Event())

lab = al.Lab("count forever", [lookup], model=al.FunctionModel(model_fn),
             max_steps=2000, max_cost=None, deadline_s=None, trace=TRACE_DIR)
lab
"""

START = """
lab.panel.buttons["run"].click()
print("running:", lab.running)
"""

PAUSE = """
await asyncio.wait_for(hold["reached"].wait(), 120)  # the third model call is in flight
lab.panel.buttons["pause"].click()
said_on_click = lab.phase
hold["release"].set()
await lab.wait()
paused_at = lab.engine.steps
print(json.dumps({"on_click": said_on_click, "phase": lab.phase, "steps": paused_at}))
"""

HOLD = """
made = len(calls)
for _ in range(200):  # the kernel's loop is free to run anything that is still scheduled
    await asyncio.sleep(0)
print(json.dumps({"held": lab.engine.steps == paused_at and len(calls) == made and not lab.running,
                  "phase": lab.phase}))
"""

RESUME_AND_STOP = """
hold_at(len(calls) + 3)
lab.panel.buttons["run"].click()
await asyncio.wait_for(hold["reached"].wait(), 120)  # two more steps done, the third call in flight
lab.panel.buttons["stop"].click()
result = await lab.wait()
print(json.dumps({"reason": result.reason, "steps": result.steps, "phase": lab.phase,
                  "status": lab.panel.status.value, "steps_gauge": lab.panel.gauge_texts["steps"].value,
                  "buttons": {k: b.disabled for k, b in lab.panel.buttons.items()},
                  "trace": [lab.trace.reason, len(lab.trace)]}))
"""


def last_json(cell) -> dict:
    text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    return json.loads(text.strip().splitlines()[-1])


def test_notebook_pauses_resumes_and_stops_a_run_through_the_panel(tmp_path):
    """In a real kernel, Run/Pause/Run/Stop clicks drive a background run while later cells await it."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(src)
        for src in (
            f"TRACE_DIR = {str(tmp_path / 'runs')!r}\n" + SETUP,
            START,
            PAUSE,
            HOLD,
            RESUME_AND_STOP,
        )
    ]
    client = nbclient.NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()

    setup_out = nb.cells[0].outputs
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in setup_out), setup_out
    assert "running: True" in nb.cells[1].outputs[0]["text"]

    paused = last_json(nb.cells[2])
    assert paused["on_click"] == "pausing"
    assert paused["phase"] == "paused" and paused["steps"] == 3  # the step in flight ended, then it paused

    held = last_json(nb.cells[3])
    assert held == {"held": True, "phase": "paused"}

    stopped = last_json(nb.cells[4])
    assert stopped["reason"] == "cancelled" and stopped["phase"] == "stopped"
    assert stopped["steps"] == paused["steps"] + 3  # the step stopped mid-call is in the count (and the trace)
    assert "stopped: cancelled" in stopped["status"]
    assert f"{stopped['steps']} / 2000" in stopped["steps_gauge"]
    assert stopped["buttons"] == {"step": False, "run": False, "pause": True, "stop": True}
    assert stopped["trace"] == ["cancelled", stopped["steps"]]


LIMIT_FIRST = """
import asyncio, json
import agentlab as al
from agentlab import reply

@al.tool(mode="read")
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return f"value of {key}"

lab = al.Lab("count", [lookup], model=al.FunctionModel(lambda m, t: reply("looking", ("lookup", {"key": "k"}))),
             max_steps=12, trace=TRACE_DIR)
lab
"""

TYPE_THEN_RUN = """
lab.panel.limit_fields["max_steps"].value = "3"   # typed into the fresh panel, before the first Run
lab.panel.buttons["run"].click()
await lab.wait()
started = json.loads(open(f"{TRACE_DIR}/{lab.run_id}.jsonl").readline())
print(json.dumps({"steps": lab.engine.steps, "reason": str(lab.result.reason), "message": lab.panel.message.value,
                  "field": lab.panel.limit_fields["max_steps"].value, "budget": started["budget"]}))
"""


def test_a_limit_typed_into_the_panel_before_the_first_run_applies(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(f"TRACE_DIR = {str(tmp_path / 'runs')!r}\n" + LIMIT_FIRST),
            nbformat.v4.new_code_cell(TYPE_THEN_RUN),
        ]
    )
    nbclient.NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    out = last_json(nb.cells[1])
    assert (out["steps"], out["reason"], out["field"]) == (3, "step limit", "3"), out
    assert out["message"] == "" and out["budget"]["max_steps"] == 3  # the trace records the budget it ran under

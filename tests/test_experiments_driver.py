"""Every synchronous entry point runs on the one driver: a task a run leaves behind cannot hold the caller.

The stubborn tool ignores its cancellation until the test lets it go, which
it does only after the entry point has returned. ``asyncio.run`` waits for
such a task without a limit, so an entry point still built on it would hang
here until ``within`` fails it; on the driver it returns once the run's
deadline has cut the tool off. No timing is asserted.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from types import SimpleNamespace

import pytest

import agentlab as al
from agentlab import FunctionModel, reply
from agentlab.experiments import model_graded
from agentlab.experiments.tasks import Task

from .helpers import PRICES, within

DEADLINE_S = 1.0
"""Long enough that set-up (counted by the deadline) never uses it up on a loaded machine, so the tool always runs."""


@pytest.fixture(scope="module", autouse=True)
def warm():
    """One plain run with a tool first: the lazy imports of a first run are not charged to a test's deadline."""

    @al.tool
    def ok() -> str:
        """Answer."""
        return "ok"

    al.run("q", [ok], model=al.ScriptedModel([reply(None, ("ok", {})), reply("done")]), trace=False)


HANG = "the entry point waited for an abandoned task"
"""What a test here hanging would mean."""


@pytest.fixture
def stubborn():
    """An async tool that swallows every cancellation until the test ends."""
    let_go = threading.Event()

    @al.tool
    async def stubborn() -> str:
        """Refuse to be cancelled."""
        while not let_go.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass
        return "late"

    yield stubborn
    let_go.set()


def calls_stubborn(task=None, seed=0):
    return al.ScriptedModel([reply(None, ("stubborn", {})), reply("never")])


def test_run_returns_at_the_deadline_despite_a_stubborn_tool(stubborn):
    result = within(
        20,
        lambda: al.run("q", [stubborn], model=calls_stubborn(), trace=False, deadline_s=DEADLINE_S),
        HANG,
    )
    assert result.reason == "deadline" and result.abandoned


def test_lab_run_from_a_script_returns_at_the_deadline_despite_a_stubborn_tool(stubborn):
    lab = al.Lab("q", [stubborn], model=calls_stubborn(), trace=False, deadline_s=DEADLINE_S)
    result = within(20, lab.run, HANG)
    assert result.reason == "deadline" and result.abandoned


def test_experiment_run_returns_at_the_deadline_despite_a_stubborn_tool(stubborn, tmp_path):
    exp = al.Experiment(
        [{"id": "t0", "input": "q"}, {"id": "t1", "input": "q"}],
        {"a": {"prices": PRICES, "deadline_s": DEADLINE_S}},
        tools=[stubborn],
        model=calls_stubborn,
        folder=tmp_path,
        progress=False,
        concurrency=2,
    )
    runs = within(20, exp.run, HANG).runs
    assert list(runs["reason"]) == ["deadline", "deadline"] and list(runs["steps"]) == [
        1,
        1,
    ]  # cut off in the tool


def test_model_graded_called_plainly_returns_despite_a_task_its_model_left_behind():
    """The grader's model starts a task that ignores cancellation; grading still returns its score."""
    let_go = threading.Event()

    async def stubborn() -> None:
        while not let_go.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass

    async def grade(messages, tools):
        asyncio.get_running_loop().create_task(stubborn())  # a telemetry flush, say, that never ends
        return reply("PASS")

    scorer = model_graded("is it right?", model=FunctionModel(grade), prices=PRICES)
    try:
        score = within(20, lambda: scorer(SimpleNamespace(text="4"), Task("t", "2+2?", "4")), HANG)
    finally:
        let_go.set()
    assert score == 1.0


def test_a_loop_closed_by_the_caller_leaves_no_pending_task_at_exit(tmp_path):
    """``loop.run_until_complete(al.arun(...)); loop.close()`` with the real SDK: stderr stays empty at exit."""
    script = tmp_path / "own_loop.py"
    script.write_text(
        textwrap.dedent("""
        import asyncio, gc
        import agentlab as al
        from agentlab.models.anthropic import AnthropicModel
        from agentlab.testing import MessagesServer

        with MessagesServer([al.reply("4")]) as server:
            model = AnthropicModel("claude-sonnet-4-5", client=server.client())
            loop = asyncio.new_event_loop()
            result = loop.run_until_complete(al.arun("2+2?", model=model, trace=False))
            loop.close()
            assert result.outcome == "done", result
            del loop
            gc.collect()
        print("ok")
    """)
    )
    done = subprocess.run([sys.executable, "-X", "dev", str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert "Task was destroyed" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr

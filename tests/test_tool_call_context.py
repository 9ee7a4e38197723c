"""Each tool call runs in a copy of the run's context, whatever runs it (issue 27: the copy names the call,
instead of a wrapper setting and resetting a variable around every call).

What a user sees: a tool reads the context variables its caller set (a request id, a tracing span), under
arun() as under run(), on a worker thread as on the loop's; what a tool sets never reaches the engine, its
subscribers or the next call; and a run a tool starts is the sub-run of that very call, parallel calls each
their own.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading

import agentlab as al
from agentlab import reply

from .helpers import within

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def test_a_sync_tool_on_a_worker_reads_the_callers_context_variables_under_arun():
    seen: list[str] = []

    @al.tool(mode="read")
    def whoami(n: int) -> str:
        """Say who asked."""
        seen.append(WHO.get())
        return "ok"

    async def go() -> al.Result:
        WHO.set("alice")
        turns = [
            reply(None, ("whoami", {"n": 1})),
            reply(None, ("whoami", {"n": 2}), ("whoami", {"n": 3})),
            reply("ok"),
        ]
        model = al.ScriptedModel(turns)
        return await al.arun("q", [whoami], model=model, trace=False)

    result = within(20, lambda: asyncio.run(go()))
    assert isinstance(result, al.Done)
    assert seen == ["alice"] * 3


def test_parallel_sync_reads_under_run_read_the_callers_context_variables():
    met = threading.Barrier(2, timeout=10)
    seen: list[str] = []

    @al.tool(mode="read")
    def whoami(part: int) -> str:
        """Say who asked, once both parts run."""
        met.wait()
        seen.append(WHO.get())
        return "ok"

    def go() -> al.Result:
        WHO.set("bob")
        model = al.ScriptedModel([reply(None, ("whoami", {"part": 1}), ("whoami", {"part": 2})), reply("ok")])
        return al.run("q", [whoami], model=model, trace=False)

    result = within(20, go)
    assert isinstance(result, al.Done)
    assert seen == ["bob", "bob"]


def test_what_a_tool_sets_in_its_context_never_reaches_the_next_call_nor_the_subscribers():
    """A sync tool (worker and loop thread both) and an async tool set the variable; nobody else sees it."""
    seen_by_tools: list[str] = []
    seen_by_subscriber: list[str] = []

    @al.tool(mode="read")
    def sync_tool(n: int) -> str:
        """Set the variable, after reading it."""
        seen_by_tools.append(WHO.get())
        WHO.set(f"sync {n}")
        return "ok"

    @al.tool(mode="read")
    async def async_tool(n: int) -> str:
        """Set the variable, after reading it."""
        seen_by_tools.append(WHO.get())
        WHO.set(f"async {n}")
        await asyncio.sleep(0)
        return "ok"

    turns = [
        reply(None, ("sync_tool", {"n": 1})),
        reply(None, ("sync_tool", {"n": 2}), ("async_tool", {"n": 3})),
        reply(None, ("async_tool", {"n": 4})),
        reply(None, ("sync_tool", {"n": 5})),
        reply("ok"),
    ]

    def go(runner: str) -> al.Result:
        WHO.set("caller")
        model = al.ScriptedModel(list(turns))
        tools = [sync_tool, async_tool]
        sub = [lambda e: seen_by_subscriber.append(WHO.get())]
        if runner == "run":
            return al.run("q", tools, model=model, trace=False, subscribers=sub)
        return asyncio.run(al.arun("q", tools, model=model, trace=False, subscribers=sub))

    for runner in ("run", "arun"):
        seen_by_tools.clear()
        seen_by_subscriber.clear()
        result = within(20, lambda runner=runner: go(runner))
        assert isinstance(result, al.Done)
        assert seen_by_tools == ["caller"] * 5, runner
        assert set(seen_by_subscriber) == {"caller"}, runner


def test_runs_started_by_parallel_calls_of_one_turn_each_link_to_their_own_call(tmp_path):
    met = threading.Barrier(2, timeout=10)

    @al.tool(mode="read")
    def ask(question: str) -> str:
        """Ask a helper agent, once the other question is being asked too."""
        met.wait()
        return al.run(question, model=al.ScriptedModel([reply(f"re {question}")]), trace=tmp_path).text

    model = al.ScriptedModel([reply(None, ("ask", {"question": "a"}), ("ask", {"question": "b"})), reply("done")])
    result = within(30, lambda: al.run("q", [ask], model=model, trace=tmp_path))
    assert isinstance(result, al.Done)
    from agentlab.trace import read_events

    runs = [read_events(f) for f in tmp_path.glob("**/*.jsonl")]
    parent = next(ev for ev in runs if ev[0]["run_id"] == result.run_id)
    call_of = {e["args"]["question"]: e["call_id"] for e in parent if e["kind"] == "tool_started"}
    children = {ev[0]["task"]: ev[0]["parent"] for ev in runs if ev[0].get("parent")}
    assert {q: p["tool_use_id"] for q, p in children.items()} == call_of
    assert all(p["run_id"] == result.run_id and p["step"] == 1 for p in children.values())

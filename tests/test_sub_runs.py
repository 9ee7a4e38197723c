"""Sub-runs: an agent calling an agent from a tool is billed to, bounded by and traced in the run that called it."""

from __future__ import annotations

import asyncio

import pytest

import agentlab as al
from agentlab.experiments import TotalLedger
from agentlab.trace import load_run

PRICES = al.Prices(3.0, 15.0)
CHILD_TASK = "Summarise the order history: " + "order 1042 was late; " * 40


def child_model() -> al.FunctionModel:
    """A sub-agent that looks something up once, then answers."""

    def fn(messages, tools):
        if len(messages) == 1:
            return al.reply(None, ("lookup", {"q": "1042"}))
        return al.reply("The depot held order 1042 for three days. " * 3)

    return al.FunctionModel(fn, name="sub-agent")


@al.tool(mode="read")
def lookup(q: str) -> str:
    """Look an order up."""
    return f"order {q}: held at the depot"


def parent_model(tool: str) -> al.ScriptedModel:
    return al.ScriptedModel([al.reply(None, (tool, {"question": "why late?"})), al.reply("Done: the depot held it.")])


def run_parent(tool, tmp_path, **options):
    runs = tmp_path / "runs"
    children: list[al.Done | al.Stopped] = []

    if tool == "sync":

        @al.tool(mode="read", name="ask_agent")
        def ask_agent(question: str) -> str:
            """Ask a sub-agent."""
            result = al.run(
                CHILD_TASK,
                [lookup],
                model=child_model(),
                prices=PRICES,
                trace=runs,
                clock=al.FakeClock(),
            )
            children.append(result)
            return result.text
    else:

        @al.tool(mode="read", name="ask_agent")
        async def ask_agent(question: str) -> str:
            """Ask a sub-agent."""
            result = await al.arun(
                CHILD_TASK,
                [lookup],
                model=child_model(),
                prices=PRICES,
                trace=runs,
                clock=al.FakeClock(),
            )
            children.append(result)
            return result.text

    options.setdefault("prices", PRICES)
    result = al.run(
        "Why was order 1042 late?",
        [ask_agent],
        model=parent_model("ask_agent"),
        trace=runs,
        clock=al.FakeClock(),
        run_id="parent",
        **options,
    )
    return result, children, runs


@pytest.mark.parametrize("tool", ["sync", "async"])
def test_a_run_started_inside_a_tool_is_linked_to_the_call_and_billed_to_the_parent(tool, tmp_path):
    result, (child,), runs = run_parent(tool, tmp_path)
    assert isinstance(result, al.Done) and isinstance(child, al.Done) and child.spent > 0
    parent_trace, child_trace = load_run("parent", runs), load_run(child.run_id, runs)
    assert child_trace.started["parent"] == {
        "run_id": "parent",
        "step": 1,
        "tool_use_id": "toolu_0001",
    }
    own = sum(e["cost"] for e in parent_trace.records if e["kind"] == "model_called")
    assert result.spent == pytest.approx(own + child.spent)  # the parent's cost includes its sub-run's
    assert result.input_tokens > child.input_tokens > 0  # and so do its tokens
    (sub,) = [e for e in parent_trace.records if e["kind"] == "sub_run"]
    assert (sub["run_id"], sub["tool_use_id"], sub["outcome"], sub["step"]) == (
        child.run_id,
        "toolu_0001",
        "done",
        1,
    )
    assert sub["cost"] == pytest.approx(child.spent)


def test_the_parents_trace_frames_and_cost_curve_include_the_sub_run(tmp_path):
    result, (child,), runs = run_parent("sync", tmp_path)
    steps = load_run("parent", runs).steps
    assert steps["sub_run_cost"].tolist() == [pytest.approx(child.spent), 0.0]
    assert steps["cost"].sum() == pytest.approx(result.spent)
    assert al.load_runs(runs).runs.set_index("run_id").loc["parent", "cost"] == pytest.approx(result.spent)
    ax = al.plots.cost_curve(steps)
    assert max(max(line.get_ydata()) for line in ax.get_lines()) == pytest.approx(result.spent)


def test_a_sub_run_reserves_from_the_parents_budget_and_never_passes_it(tmp_path):
    """The parent's max_cost is its sub-runs' limit: with $0.007 of which the parent spent some, the sub-agent
    (whose first call could cost $0.0068) is refused before it spends anything, and the parent goes on."""
    result, (child,), _ = run_parent("sync", tmp_path, max_cost=0.007)
    assert (child.outcome, child.reason, child.spent, child.steps) == ("stopped", "budget", 0.0, 0)
    assert child.detail.startswith("the budget left to parent run parent cannot cover the next call (at least $0.0068)")
    assert isinstance(result, al.Done) and 0 < result.spent <= 0.007
    roomy, (funded,), _ = run_parent("sync", tmp_path / "roomy", max_cost=0.01)
    assert isinstance(funded, al.Done) and funded.spent < roomy.spent <= 0.01


def test_sub_runs_reserve_through_the_parents_own_ledger(tmp_path):
    """A parent in an experiment (a shared total): its sub-runs' spending counts against that total too."""
    total = TotalLedger(limit=1.0)

    @al.tool(mode="read")
    def ask_agent(question: str) -> str:
        """Ask a sub-agent."""
        return al.run(
            CHILD_TASK,
            [lookup],
            model=child_model(),
            prices=PRICES,
            trace=False,
            clock=al.FakeClock(),
        ).text

    parent = al.Run(
        "Why late?",
        [ask_agent],
        model=parent_model("ask_agent"),
        prices=PRICES,
        clock=al.FakeClock(),
        ledger=total,
    )
    result = asyncio.run(parent.run())
    assert isinstance(result, al.Done)
    assert total.spent == pytest.approx(result.spent) and total.reserved == pytest.approx(0.0)


def test_a_run_made_outside_any_tool_is_not_a_sub_run(tmp_path):
    first = al.run("hi", model=al.ScriptedModel([al.reply("a")]), trace=tmp_path, clock=al.FakeClock())
    assert "parent" not in load_run(first.run_id, tmp_path).started


def test_a_sub_run_cannot_spend_once_its_parent_has_ended(tmp_path):
    """A sub-run made in a tool but run after the parent finished would change a final bill: it is refused."""
    made: list[al.Run] = []

    @al.tool(mode="read")
    def ask_later(question: str) -> str:
        """Make a sub-agent and leave it for later."""
        made.append(al.Run(CHILD_TASK, [lookup], model=child_model(), prices=PRICES, clock=al.FakeClock()))
        return "queued"

    result = al.run(
        "Why late?",
        [ask_later],
        model=parent_model("ask_later"),
        prices=PRICES,
        trace=False,
        clock=al.FakeClock(),
        run_id="gone",
    )
    late = asyncio.run(made[0].run())
    assert (late.reason, late.spent, late.steps) == ("budget", 0.0, 0)
    assert late.detail.startswith("the budget left to parent run gone (which has ended) cannot cover the next call")
    assert result.spent > 0


def test_sub_runs_started_by_parallel_calls_of_one_turn_all_add_up(tmp_path):
    children: list[al.Done | al.Stopped] = []

    @al.tool(mode="read")
    async def ask_agent(question: str) -> str:
        """Ask a sub-agent."""
        result = await al.arun(
            CHILD_TASK + question,
            [lookup],
            model=child_model(),
            prices=PRICES,
            trace=tmp_path,
            clock=al.FakeClock(),
        )
        children.append(result)
        return result.text

    model = al.ScriptedModel(
        [
            al.reply(None, ("ask_agent", {"question": "a"}), ("ask_agent", {"question": "b"})),
            al.reply("Both answered."),
        ]
    )
    result = al.run(
        "Ask twice.",
        [ask_agent],
        model=model,
        prices=PRICES,
        trace=tmp_path,
        clock=al.FakeClock(),
        run_id="two",
    )
    trace = load_run("two", tmp_path)
    subs = [e for e in trace.records if e["kind"] == "sub_run"]
    assert sorted(e["tool_use_id"] for e in subs) == ["toolu_0001", "toolu_0002"] and len(children) == 2
    own = sum(e["cost"] for e in trace.records if e["kind"] == "model_called")
    assert result.spent == pytest.approx(own + sum(c.spent for c in children))
    assert trace.steps["sub_run_cost"].tolist() == [
        pytest.approx(sum(c.spent for c in children)),
        0.0,
    ]


def _child_in(question: str) -> al.Done | al.Stopped:
    return al.run(CHILD_TASK, [lookup], model=child_model(), prices=PRICES, trace=False, clock=al.FakeClock())


@pytest.mark.parametrize("how", ["ThreadPoolExecutor", "run_in_executor", "thread"])
def test_sub_runs_started_from_threads_a_tool_starts_are_billed_to_and_bounded_by_the_parent(how, tmp_path):
    """Four sub-agents run from a sync tool's thread pool (or an async tool's ``run_in_executor``, or threads of
    its own) are the parent's sub-runs: linked, reserved from its ``max_cost``, and added to its ``spent``."""
    import concurrent.futures
    import threading

    children: list[al.Done | al.Stopped] = []

    if how == "ThreadPoolExecutor":

        @al.tool(mode="read", name="ask_agents")
        def ask_agents(question: str) -> str:
            """Ask four sub-agents."""
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                children.extend(pool.map(_child_in, [question] * 4))
            return "asked"

    elif how == "run_in_executor":

        @al.tool(mode="read", name="ask_agents")
        async def ask_agents(question: str) -> str:
            """Ask four sub-agents."""
            loop = asyncio.get_running_loop()
            children.extend(await asyncio.gather(*[loop.run_in_executor(None, _child_in, question) for _ in range(4)]))
            return "asked"

    else:

        @al.tool(mode="read", name="ask_agents")
        def ask_agents(question: str) -> str:
            """Ask four sub-agents."""
            threads = [threading.Thread(target=lambda: children.append(_child_in(question))) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return "asked"

    model = al.ScriptedModel([al.reply(None, ("ask_agents", {"question": "why?"})), al.reply("Done.")])
    result = al.run("Why late?", [ask_agents], model=model, prices=PRICES, trace=tmp_path, clock=al.FakeClock(),
                    max_cost=0.02, run_id="pooled")  # fmt: skip
    assert len(children) == 4 and isinstance(result, al.Done)
    refused = [c for c in children if c.spent == 0]
    assert len(refused) < 4 and all(c.reason == "budget" and "parent run pooled" in c.detail for c in refused)
    own = sum(e["cost"] for e in load_run("pooled", tmp_path).records if e["kind"] == "model_called")
    assert result.spent == pytest.approx(own + sum(c.spent for c in children))  # every child's dollar is the parent's
    assert result.spent <= 0.02  # and within its budget


def test_a_pool_used_outside_any_tool_starts_no_sub_runs(tmp_path):
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(_child_in, ["a", "b"]))
    assert all(isinstance(r, al.Done) and r.spent > 0 for r in results)  # on their own: unlimited by any parent


def test_importing_agentlab_leaves_thread_pools_and_threads_as_the_stdlib_made_them():
    """The link across a tool's threads is installed by the first tool call, never by ``import agentlab``."""
    import subprocess
    import sys

    code = (
        "import concurrent.futures, threading\n"
        "before = (concurrent.futures.ThreadPoolExecutor.submit, threading.Thread.start)\n"
        "import agentlab\n"
        "print((concurrent.futures.ThreadPoolExecutor.submit, threading.Thread.start) == before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "True"

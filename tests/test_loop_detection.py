"""Loop detection: allowed, allowed, nudged, stopped; and the model that recovers after a nudge."""

from __future__ import annotations

import agentlab as al
from agentlab import reply
from agentlab._engine.loopguard import LoopGuard, call_key

from .helpers import Recorder, Seen, last_tool_results

runs = []


@al.tool(mode="read")
def search(query: str, limit: int = 5) -> str:
    """Search the records."""
    runs.append(query)
    return f"no match for {query}"


def test_key_ignores_argument_order():
    """{"a":1,"b":2} and {"b":2,"a":1} are the same call."""
    assert call_key("t", {"a": 1, "b": 2}) == call_key("t", {"b": 2, "a": 1})
    assert call_key("t", {"a": 1}) != call_key("u", {"a": 1})


def test_guard_sequence_is_run_run_nudge_stop():
    """The pure counter: two runs, a nudge on the third, a stop on the fourth."""
    g = LoopGuard()
    k = call_key("search", {"query": "x"})
    verdicts = []
    for _ in range(4):
        verdict, _ = g.check(k)
        verdicts.append(verdict)
        g.remember(k, "r", False)
    assert verdicts == ["run", "run", "nudge", "stop"]


def test_third_identical_call_is_nudged_and_fourth_stops_the_run():
    """The third call is not rerun: the model gets the earlier result plus a nudge; the fourth stops."""
    runs.clear()
    rec = Recorder()
    seen = Seen(lambda m, t: reply(None, ("search", {"query": "lost parcel", "limit": 5})))
    result = al.run("q", [search], model=al.FunctionModel(seen), trace=False, subscribers=[rec], max_steps=10)
    assert runs == ["lost parcel", "lost parcel"]
    nudge = last_tool_results(seen.requests[3])[0]["content"]
    assert nudge.startswith(
        "no match for lost parcel\n\n[agentlab] You have now asked for search with exactly these arguments 3 times"
    )
    assert "Try a different approach" in nudge
    assert result.reason == "loop detected"
    assert result.detail == "search was requested 4 times with the same arguments, after a nudge, at step 4"
    assert [e.data["outcome"] for e in rec.of("tool_finished")] == ["ok", "ok", "nudged"]
    assert len(rec.of("nudged")) == 1


def test_a_model_that_changes_course_after_the_nudge_recovers():
    """After the nudge a different call runs normally and the run can finish."""
    runs.clear()

    def model(messages, tools):
        last = messages[-1]["content"]
        if isinstance(last, list) and "[agentlab]" in last[0]["content"]:
            return reply(None, ("search", {"query": "parcel 1042"}))
        if isinstance(last, list) and "1042" in last[0]["content"]:
            return reply("Found it.")
        return reply(None, ("search", {"query": "lost parcel"}))

    rec = Recorder()
    result = al.run("q", [search], model=al.FunctionModel(model), trace=False, subscribers=[rec])
    assert isinstance(result, al.Done) and result.text == "Found it."
    assert runs == ["lost parcel", "lost parcel", "parcel 1042"]
    assert rec.of("run_finished")[0].data["nudges"] == 1


def test_a_successful_write_resets_the_counts():
    """Reading again after a write is legitimate: the counts start over."""
    runs.clear()

    @al.tool(mode="write")
    def refresh() -> str:
        return "refreshed"

    script = (
        [reply(None, ("search", {"query": "q"}))] * 2
        + [reply(None, ("refresh", {}))]
        + [reply(None, ("search", {"query": "q"}))] * 2
        + [reply("done")]
    )
    result = al.run("q", [search, refresh], model=al.ScriptedModel(script), trace=False)
    assert isinstance(result, al.Done) and runs == ["q"] * 4


def test_threshold_is_a_setting():
    """loop_nudge_at=2 nudges the second identical call."""
    runs.clear()
    seen = Seen(lambda m, t: reply(None, ("search", {"query": "x"})))
    result = al.run("q", [search], model=al.FunctionModel(seen), trace=False, loop_nudge_at=2)
    assert runs == ["x"] and result.reason == "loop detected" and result.steps == 3

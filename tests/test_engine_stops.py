"""Each way a run can end, reached by a scripted model, with its reason and numbers."""

from __future__ import annotations

import asyncio
import math

import pytest

import agentlab as al
from agentlab import reply
from agentlab.errors import TraceWriteError
from agentlab.models.resolve import MissingAPIKey
from agentlab.vocab import StopReason

from .helpers import Recorder, lookup


def test_end_turn_is_done_with_the_answer_and_all_three_budgets():
    """A reply with stop_reason end_turn ends the run as Done carrying the text and budgets."""
    model = al.ScriptedModel([reply(None, ("lookup", {"key": "a"})), reply("The answer is 42.")])
    result = al.run("q", [lookup], model=model, trace=False, max_steps=5, max_cost=0.25, deadline_s=30)
    assert isinstance(result, al.Done)
    assert result.text == "The answer is 42."
    assert result.steps == 2 and result.model_calls == 2
    assert result.budget.max_steps == 5 and result.budget.max_cost == 0.25 and result.budget.deadline_s == 30
    assert 0 < result.spent < 0.25
    assert "steps 2/5" in repr(result) and "$0.25" in repr(result)


def test_stop_sequence_is_done_too():
    """stop_sequence is a normal finish, like end_turn."""
    result = al.run("q", model=al.ScriptedModel([reply("ok", stop_reason="stop_sequence")]), trace=False)
    assert isinstance(result, al.Done) and result.text == "ok"


def test_step_limit_stops_after_exactly_max_steps_model_calls():
    """A model alternating between two calls forever is stopped at max_steps, not one call later."""
    calls = iter(range(10**6))
    model = al.FunctionModel(lambda m, t: reply(None, ("lookup", {"key": "ab"[next(calls) % 2]})))
    result = al.run("q", [lookup], model=model, trace=False, max_steps=4, max_cost=None)
    assert isinstance(result, al.Stopped)
    assert result.reason == "step limit"
    assert result.detail == "used all 4 steps without a final answer"
    assert model.calls == 4 and result.steps == 4


def test_max_tokens_is_not_success_and_says_where():
    """A reply cut off at max_tokens stops the run instead of passing as an answer."""
    model = al.ScriptedModel([reply("word " * 500)])
    result = al.run("q", model=model, trace=False, max_tokens=50)
    assert isinstance(result, al.Stopped) and result.reason == "max_tokens"
    assert result.detail == "the reply at step 1 was cut off at max_tokens=50"
    assert len(result.text) < len("word " * 500)


def test_pause_turn_continues_with_another_model_call():
    """pause_turn means the API paused a long turn: the loop calls the model again."""
    model = al.ScriptedModel([reply("thinking...", stop_reason="pause_turn"), reply("done")])
    result = al.run("q", model=model, trace=False)
    assert isinstance(result, al.Done) and result.steps == 2
    assert [m["role"] for m in result.messages] == ["user", "assistant", "assistant"]


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [("refusal", "refusal"), ("model_context_window_exceeded", "context window")],
)
def test_model_side_stop_reasons_have_their_own_names(stop_reason, reason):
    """refusal and a full context window are diagnoses of their own."""
    result = al.run("q", model=al.ScriptedModel([reply("no", stop_reason=stop_reason)]), trace=False)
    assert isinstance(result, al.Stopped) and result.reason == reason
    assert "step 1" in result.detail


def test_unknown_stop_reason_keeps_the_raw_value():
    """A stop reason the engine does not know is reported raw, not guessed at."""
    result = al.run("q", model=al.ScriptedModel([reply("x", stop_reason="brand_new")]), trace=False)
    assert result.reason == "unexpected stop reason"
    assert "'brand_new'" in result.detail


def test_script_running_out_is_a_model_error_not_an_index_error():
    """A ScriptedModel with no more replies stops the run with a clear model error."""
    model = al.ScriptedModel([reply(None, ("lookup", {"key": "a"}))])
    result = al.run("q", [lookup], model=model, trace=False)
    assert result.reason == "model error"
    assert "ran out of replies after 1 calls" in result.detail


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"content": [], "stop_reason": "tool_use"}, "no content blocks"),  # empty + end_turn is valid (Done)
        ({"content": [{"type": "tool_use", "name": "lookup", "input": {}}], "stop_reason": "tool_use"}, "has no 'id'"),
        ({"content": [{"type": "tool_use", "id": "t1", "input": {}}], "stop_reason": "tool_use"}, "has no 'name'"),
        ({"content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": [1]}]}, "'input' is not an object"),
        ("just a string", "must be a dict"),
        ({"content": [{"text": "no type"}]}, "has no 'type'"),
    ],
)
def test_malformed_reply_stops_clearly_and_keeps_the_raw_reply(raw, problem):
    """A reply without the Messages API shape ends the run with the problem and the raw reply."""
    rec = Recorder()

    class RawModel:  # the bare protocol: no id filling, no truncation
        model = "claude-sonnet-4-5"

        async def complete(self, request):
            return raw

    async def go():
        r = al.Run("q", [lookup], model=RawModel(), subscribers=[rec])
        return await r.run()

    result = asyncio.run(go())
    assert isinstance(result, al.Stopped) and result.reason == "malformed reply"
    assert problem in result.detail
    assert "raw reply" in result.detail
    called = rec.of("model_called")
    assert called and "raw" in called[0].data and problem in called[0].data["error"]


def test_cancel_stops_at_the_next_safe_point():
    """cancel() between steps ends the run with "cancelled" before another model call."""

    async def go():
        model = al.FunctionModel(lambda m, t: reply(None, ("lookup", {"key": str(len(m))})))
        r = al.Run("q", [lookup], model=model, max_cost=None)
        await r.step()
        r.cancel()
        await r.step()
        return r, model

    r, model = asyncio.run(go())
    assert r.result.reason == "cancelled" and model.calls == 1
    assert r.result.detail == "cancelled before step 2"


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"max_steps": 0}, ValueError, "max_steps"),
        ({"max_steps": -1}, ValueError, "max_steps"),
        ({"max_steps": 2.5}, TypeError, "max_steps"),
        ({"max_cost": -0.1}, ValueError, "max_cost"),
        ({"max_cost": math.nan}, ValueError, "max_cost"),
        ({"max_cost": "1"}, TypeError, "max_cost"),
        ({"deadline_s": 0}, ValueError, "deadline_s"),
        ({"deadline_s": math.nan}, ValueError, "deadline_s"),
        ({"cost_guard": "soft"}, ValueError, "cost_guard"),
        ({"max_tokens": 0}, ValueError, "max_tokens"),
        ({"max_concurrency": 0}, ValueError, "max_concurrency"),
        ({"loop_nudge_at": 1}, ValueError, "loop_nudge_at"),
    ],
)
def test_invalid_settings_name_the_parameter_before_anything_runs(kwargs, exc, name):
    """Bad budgets and settings raise at once, naming the parameter; the model is never called."""
    model = al.ScriptedModel([reply("x")])
    with pytest.raises(exc, match=name):
        al.run("q", model=model, trace=False, **kwargs)
    assert model.calls == 0


def test_duplicate_tool_names_are_refused():
    """Two tools with one name would be ambiguous to the model: a ValueError says which."""

    def a() -> str:
        return "a"

    with pytest.raises(ValueError, match="'lookup'"):
        al.Run("q", [lookup, al.tool(a, name="lookup")], model=al.ScriptedModel([]))


def test_unpriced_model_with_a_cost_budget_is_an_error_not_a_silent_zero():
    """A model with no known price cannot be held to max_cost: say so at start."""
    model = al.ScriptedModel([reply("x")], model="no-such-model")
    with pytest.raises(ValueError, match="no price is known for model 'no-such-model'"):
        al.Run("q", model=model)
    done = al.run("q", model=model, max_cost=None, trace=False)
    assert isinstance(done, al.Done) and done.spent == 0.0


def test_run_works_inside_a_running_event_loop():
    """run() called where a loop already runs (as in Jupyter) still returns the result."""

    async def inside_jupyter_like_loop():
        return al.run("q", model=al.ScriptedModel([reply("from inside")]), trace=False)

    result = asyncio.run(inside_jupyter_like_loop())
    assert isinstance(result, al.Done) and result.text == "from inside"


def test_step_by_step_makes_exactly_one_model_call_per_step_and_snapshot_matches():
    """After k calls of step(), exactly k model calls were made and the snapshot says k."""

    async def go():
        model = al.FunctionModel(lambda m, t: reply(None, ("lookup", {"key": str(len(m))})))
        r = al.Run("q", [lookup], model=model, max_steps=10, max_cost=1.0)
        seen = []
        for k in range(1, 5):
            rec = await r.step()
            seen.append((k, model.calls, r.snapshot.steps, rec.step, round(rec.spent, 9), round(r.spent, 9)))
        return r, seen

    r, seen = asyncio.run(go())
    for k, calls, steps, rec_step, rec_spent, spent in seen:
        assert calls == steps == rec_step == k
        assert rec_spent == spent
    assert not r.finished and r.snapshot.max_steps == 10 and r.snapshot.max_cost == 1.0


def test_stepping_a_finished_run_is_a_clear_error():
    """step() after the end raises, saying the run finished and how."""

    async def go():
        r = al.Run("q", model=al.ScriptedModel([reply("bye")]))
        await r.run()
        with pytest.raises(RuntimeError, match="has finished: Done"):
            await r.step()

    asyncio.run(go())


def test_a_model_id_without_a_key_is_an_error_that_says_how_to_go_offline(monkeypatch):
    """model="claude-..." with no ANTHROPIC_API_KEY runs nothing: the error names the key and model="offline"."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingAPIKey) as caught:
        al.run("q", model="claude-sonnet-4-5", trace=False)
    text = str(caught.value)
    assert text.startswith("model='claude-sonnet-4-5' is a Claude model, and no ANTHROPIC_API_KEY is set")
    assert "model='offline'" in text and "agentlab.ScriptedModel" in text


def test_offline_is_asked_for_and_says_so_in_its_answer(monkeypatch):
    """model="offline" runs with no key, priced as a Claude model; "offline:<id>" prices it as that id."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = al.run("q", model="offline", trace=False)
    assert isinstance(result, al.Done) and result.text.startswith("(offline model: no real model answered.")
    haiku = al.Run("q", model="offline:claude-haiku-4-5")
    assert (haiku.model.name, haiku.model.model) == ("offline", "claude-haiku-4-5")


@pytest.mark.parametrize("sync", [True, False])
def test_cancel_interrupts_a_hanging_tool_and_keeps_its_call_for_a_resume(sync):
    """Stop does not wait for the deadline: a step stuck in a tool ends as "cancelled" at once."""
    import threading

    release = threading.Event()

    def hang_sync() -> str:
        release.wait(30)
        return "late"

    async def hang_async() -> str:
        await asyncio.Event().wait()
        return "never"

    tool = al.tool(hang_sync if sync else hang_async, name="hang")

    async def go():
        started = asyncio.Event()
        r = al.Run("q", [tool], model=al.ScriptedModel([reply(None, ("hang", {}))]), deadline_s=60)
        r.subscribe(lambda e: started.set() if e.kind == "tool_started" else None)
        stepping = asyncio.ensure_future(r.step())
        await asyncio.wait_for(started.wait(), 10)
        r.cancel()
        await asyncio.wait_for(stepping, 10)
        return r

    try:
        r = asyncio.run(go())
    finally:
        release.set()
    assert r.result.reason == "cancelled"
    assert r.result.detail == "cancelled during step 1 (running tools)"
    assert [c["name"] for c in r.pending_calls] == ["hang"]


class _TraceFailsOn:
    """A trace writer whose disk fills at the first event of one kind (then it writes again)."""

    def __init__(self, kind: str) -> None:
        self.kind, self.error = kind, TraceWriteError(f"no space left writing {kind}")

    def __call__(self, event: al.Event) -> None:
        if event.kind == self.kind and self.error is not None:
            error, self.error = self.error, None
            raise error


@pytest.mark.parametrize(
    ("kind", "model_calls"),
    [("run_started", 0), ("model_request", 0), ("tool_started", 1), ("tool_results", 1), ("run_finished", 2)],
)
def test_a_trace_that_cannot_be_written_stops_the_run_naming_the_failed_write_wherever_it_fails(kind, model_calls):
    """Never Done over an incomplete trace: the run stops at the next check with the writer's own error."""
    failing, seen = _TraceFailsOn(kind), Recorder()
    error = failing.error
    ran: list[str] = []

    def lookup(key: str) -> str:
        """Look a key up."""
        ran.append(key)
        return f"value of {key}"

    model = al.ScriptedModel([reply(None, ("lookup", {"key": "a"})), reply("The answer is 42.")])
    result = al.run("q", [lookup], model=model, trace=False, subscribers=[failing, seen], clock=al.FakeClock())
    # a call is made only once its start is written: none when that write (or an earlier one) failed
    assert ran == ([] if kind in ("run_started", "model_request", "tool_started") else ["a"])
    assert isinstance(result, al.Stopped) and result.reason == "trace write failed"
    assert result.error is error and result.detail == str(error)
    assert result.model_calls == model_calls  # it stops where the write failed, not a model call later
    ends = seen.of("run_finished")
    assert ends[-1].data["reason"] == "trace write failed" and ends[-1].data["detail"] == str(error)


def test_the_stopped_reference_names_every_stop_reason():
    """``help(al.Stopped)`` lists the reasons a run can stop with: all of them, as the engine spells them."""
    doc = " ".join((al.Stopped.__doc__ or "").split())
    assert [r.value for r in StopReason if f'"{r.value}"' not in doc] == []

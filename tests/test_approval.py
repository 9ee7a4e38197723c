"""Approval of writes: approve, deny (fatal, never told to the model), edit; the deadline bounds the wait."""

from __future__ import annotations

import pytest

import agentlab as al
from agentlab import reply

from .helpers import Recorder


def _tools(log):
    @al.tool(mode="write", approve=True)
    def refund(order_id: int, amount: float) -> str:
        log.append((order_id, amount))
        return f"refunded {amount} on {order_id}"

    @al.tool(mode="read")
    def lookup(order_id: int) -> str:
        return f"order {order_id}: 30.0"

    return [refund, lookup]


def _run(answer, *, clock=None, **options):
    log: list = []
    asked: list = []

    def approve(request):
        asked.append(request)
        if clock is not None:
            clock.advance(5.0)  # the human took five seconds
        return answer

    model = al.ScriptedModel(
        [reply(None, ("lookup", {"order_id": 7}), ("refund", {"order_id": 7, "amount": 30.0})), reply("refunded")]
    )
    rec = Recorder()
    result = al.run(
        "refund order 7",
        _tools(log),
        model=model,
        trace=False,
        approve=approve,
        clock=clock,
        subscribers=[rec],
        **options,
    )
    return result, log, asked, rec, model


def test_an_approved_write_runs_and_reads_are_not_asked_about():
    result, log, asked, rec, _ = _run(True)
    assert isinstance(result, al.Done)
    assert log == [(7, 30.0)]
    assert [(a.tool, a.args) for a in asked] == [("refund", {"order_id": 7, "amount": 30.0})]
    assert [e.data["answer"] for e in rec.of("approval_answered")] == ["approve"]


def test_a_denied_write_stops_the_run_and_the_model_never_hears_of_it():
    result, log, asked, rec, model = _run("not today")
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    assert "denied by the approver: not today" in result.detail
    assert log == []
    assert model.calls == 1  # no second model call: the denial was not handed back
    assert isinstance(result.error, al.PermissionDenied)


def test_edited_arguments_are_checked_and_run_instead():
    result, log, _, rec, _ = _run({"order_id": 7, "amount": "12.5"})
    assert isinstance(result, al.Done)
    assert log == [(7, 12.5)]
    (answered,) = rec.of("approval_answered")
    assert answered.data["answer"] == "edit"


def test_bad_edited_arguments_are_a_recoverable_error_naming_the_field():
    result, log, _, _, _ = _run({"order_id": "seven", "amount": 1})
    assert log == []
    assert isinstance(result, al.Done)  # the model was told the call was invalid and answered
    assert "order_id" in str(result.messages[-2]["content"])


def test_waiting_counts_against_the_deadline_by_default():
    clock = al.FakeClock()
    result, log, *_ = _run(True, clock=clock, deadline_s=3.0)
    assert isinstance(result, al.Stopped) and result.reason == "deadline"


def test_waiting_can_be_taken_off_the_clock():
    clock = al.FakeClock()
    result, log, *_ = _run(True, clock=clock, deadline_s=3.0, approval_stops_clock=True)
    assert isinstance(result, al.Done)
    assert log == [(7, 30.0)]
    assert result.budget.elapsed < 1.0  # the five seconds of waiting were given back


def test_run_approve_true_asks_for_every_write_through_the_prompt(monkeypatch):
    @al.tool
    def save(note: str) -> str:
        return "saved"

    answers = iter(['e {"note": "edited"}', "y"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    model = al.ScriptedModel([reply(None, ("save", {"note": "x"})), reply("ok")])
    rec = Recorder()
    result = al.run("save", [save], model=model, trace=False, approve=True, subscribers=[rec])
    assert isinstance(result, al.Done)
    assert rec.of("tool_finished")[0].data["result"] == "saved"
    assert rec.of("approval_answered")[0].data["args"] == {"note": "edited"}


def test_a_bad_approve_option_is_named():
    with pytest.raises(TypeError, match="approve must be a callback, True or None"):
        al.Run("t", model=al.ScriptedModel([reply("x")]), approve=3)

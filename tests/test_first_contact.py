"""What a new user meets in the first minutes: reprs, names, tool schemas, tasks, the cost guard's wording."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

import agentlab as al
from agentlab.experiments import Task, load_tasks

from .helpers import PRICES


def two_step_model() -> al.ScriptedModel:
    return al.ScriptedModel(
        [
            al.reply(None, ("get_order", {"order_id": 1042})),
            al.reply("Order 1042 was held at the depot."),
        ]
    )


@al.tool(mode="read")
def get_order(order_id: int) -> dict:
    """Fetch one order by its number."""
    return {"id": order_id, "status": "delayed at the depot"}


# ------------------------------------------------------------------ reprs
def test_a_run_has_a_repr_with_its_id_phase_model_tokens_and_budgets():
    r = al.Run(
        "Why was order 1042 late?",
        [get_order],
        model=two_step_model(),
        run_id="abc123",
        clock=al.FakeClock(),
    )
    assert (
        repr(r)
        == "<Run abc123 ready · offline scripted (priced as claude-sonnet-4-5) · 0 in / 0 out tokens · steps 0/8 · "
        "$0.0000/$0.50 · 0.0s/60s>"
    )
    result = al.run(
        "Why was order 1042 late?",
        [get_order],
        model=two_step_model(),
        run_id="abc124",
        trace=False,
        clock=al.FakeClock(),
        prices=PRICES,
    )
    assert result.input_tokens > 0 and result.output_tokens > 0


def test_done_and_stopped_show_tokens_as_well_as_dollars():
    done = al.run(
        "Why was order 1042 late?",
        [get_order],
        model=two_step_model(),
        run_id="d1",
        trace=False,
        clock=al.FakeClock(),
        prices=PRICES,
    )
    tokens = f"{done.input_tokens:,} in / {done.output_tokens:,} out"
    assert repr(done).startswith(f"Done('Order 1042 was held at the depot.', steps=2, tokens={tokens}, spent=$")
    assert f"<td style='text-align:left'>{tokens}</td>" in done._repr_html_()
    stopped = al.run(
        "Why was order 1042 late?",
        [get_order],
        model=two_step_model(),
        run_id="s1",
        trace=False,
        clock=al.FakeClock(),
        prices=PRICES,
        max_steps=1,
    )
    assert repr(stopped).startswith("Stopped('step limit', 'used all 1 steps without a final answer', steps=1, tokens=")
    assert stopped.input_tokens > 0 and ", spent=$" in repr(stopped)


def test_the_loop_guard_and_the_cost_guard_report_have_names_that_cannot_be_confused():
    r = al.Run("hi", model=two_step_model(), clock=al.FakeClock())
    assert type(r.loop_guard).__name__ == "LoopGuard" and not hasattr(r, "guard")
    result = al.run("hi", model=al.ScriptedModel([al.reply("hello")]), trace=False, clock=al.FakeClock())
    assert type(result.cost_check).__name__ == "GuardReport"
    with pytest.warns(DeprecationWarning, match="result.cost_check"):
        assert result.guard is result.cost_check


def test_done_and_stopped_name_the_money_spent_alike_and_the_old_name_still_works_with_a_warning():
    """One name for the dollars a run spent (``spent``, as on the run and its events); ``result.cost`` warns."""
    done = al.run("q", [get_order], model=two_step_model(), trace=False, clock=al.FakeClock(), prices=PRICES)
    stopped = al.run(
        "q", [get_order], model=two_step_model(), trace=False, clock=al.FakeClock(), prices=PRICES, max_steps=1
    )
    assert isinstance(done, al.Done) and isinstance(stopped, al.Stopped)
    assert 0 < stopped.spent < done.spent
    assert ", spent=$" in repr(done) and ", spent=$" in repr(stopped) and "cost=" not in repr(done)
    for result in (done, stopped):
        with pytest.warns(DeprecationWarning, match="result.spent"):
            assert result.cost == result.spent


# ------------------------------------------------------- pydantic in tools
@al.tool(mode="read")
def search(
    query: Annotated[str, Field(description="what to look for", min_length=2)],
    limit: Annotated[int, Field(description="how many results", gt=0)],
    page: int = Field(1, description="which page", ge=1, le=50),
    exact: bool = False,
) -> list[str]:
    """Search the catalogue.

    Args:
        query: overridden by the Field's description.
        exact: match the whole phrase.
    """
    return [query] * limit


def test_pydantic_field_metadata_reaches_the_schema_sent_to_claude():
    props = search.definition()["input_schema"]["properties"]
    assert props["query"] == {"type": "string", "description": "what to look for", "minLength": 2}
    assert props["limit"] == {
        "type": "integer",
        "description": "how many results",
        "exclusiveMinimum": 0,
    }
    assert props["page"] == {
        "type": "integer",
        "description": "which page",
        "default": 1,
        "minimum": 1,
        "maximum": 50,
    }
    assert props["exact"] == {
        "type": "boolean",
        "description": "match the whole phrase.",
        "default": False,
    }
    assert search.definition()["input_schema"]["required"] == ["query", "limit"]


def test_pydantic_limits_are_enforced_when_the_model_calls_the_tool():
    assert search.validate({"query": "tea", "limit": 2}) == {
        "query": "tea",
        "limit": 2,
        "page": 1,
        "exact": False,
    }
    with pytest.raises(al.ToolError, match="'limit': Input should be greater than 0"):
        search.validate({"query": "tea", "limit": -1})
    with pytest.raises(al.ToolError, match="'page': Input should be less than or equal to 50"):
        search.validate({"query": "tea", "limit": 1, "page": 51})
    model = al.ScriptedModel([al.reply(None, ("search", {"query": "tea", "limit": -1})), al.reply("gave up")])
    result = al.run("find tea", [search], model=model, trace=False, clock=al.FakeClock())
    sent = result.messages[2]["content"][0]
    assert sent["is_error"] and "greater than 0" in sent["content"]


# ------------------------------------------------------------------ tasks
def test_a_scorer_can_read_a_task_given_as_a_dict_as_a_dict():
    (task,) = load_tasks([{"id": "t1", "input": "What is 2+2?", "target": "4", "level": 1}])
    assert task["target"] == task.target == "4" and task["input"] == "What is 2+2?" and task["level"] == 1
    assert task.get("missing", "x") == "x" and "level" in task and task.keys() == ["level", "id", "input", "target"]
    with pytest.raises(KeyError, match="task 't1' has no 'answer': it has 'level', 'id', 'input', 'target'"):
        task["answer"]
    assert Task("t2", "q")["target"] is None


# ------------------------------------------------------------ cost guard
BIG = "word " * 8000  # 40,000 characters: the byte bound is 40,000 tokens, the real count far fewer


def big_run(**model_options):
    model = al.FunctionModel(lambda m, t: al.reply("short answer"), **model_options)
    return al.run(BIG, model=model, prices=PRICES, max_cost=0.08, trace=False, clock=al.FakeClock())


def test_a_bounded_refusal_says_could_cost_up_to_and_how_to_check_exactly():
    result = big_run()
    assert result.reason == "budget" and result.steps == 0 and result.spent == 0
    assert "the next call could cost up to $0.12" in result.detail
    assert "a bound, not a count" in result.detail
    for way in (
        "a model that counts tokens",
        "FunctionModel(count_tokens=...)",
        "cost_guard='estimate'",
    ):
        assert way in result.detail


@pytest.mark.parametrize("asynchronous", [False, True])
def test_function_model_count_tokens_gives_the_guard_an_exact_count(asynchronous):
    asked = []

    def count(request):
        asked.append(len(request.messages))
        return 9000

    async def acount(request):
        return count(request)

    result = big_run(count_tokens=acount if asynchronous else count)
    assert isinstance(result, al.Done) and result.text == "short answer" and asked == [1]
    assert result.cost_check.calls == {"exact": 1}


def test_function_model_count_tokens_must_be_a_function_returning_an_int():
    with pytest.raises(TypeError, match="count_tokens must be a function"):
        al.FunctionModel(lambda m, t: al.reply("x"), count_tokens=5)
    events: list[al.Event] = []
    model = al.FunctionModel(lambda m, t: al.reply("short answer"), count_tokens=lambda request: "many")
    result = al.run(
        BIG,
        model=model,
        prices=PRICES,
        max_cost=0.08,
        trace=False,
        clock=al.FakeClock(),
        subscribers=[events.append],
    )
    assert result.reason == "budget" and result.spent == 0  # a count that fails leaves the bound to decide
    (end,) = [e for e in events if e.kind == "run_finished"]
    assert "count_tokens must return an int >= 0, got 'many'" in end.data["last_guard_check"]["count_error"]

"""Tool definitions are checked when the tool is made, not at the first API request (issue 14)."""

from __future__ import annotations

import math

import pytest

import agentlab as al
from agentlab import reply
from agentlab.tools import MAX_RESULT_CHARS, Retry, Tool


def lookup(q: str) -> str:
    """Look something up."""
    return q


@pytest.mark.parametrize("name", ["look up", "x" * 65, "<lambda>", "", "naïve", "a.b"])
def test_names_that_break_the_api_rule_are_refused(name):
    with pytest.raises(ValueError, match="breaks the API's rule"):
        Tool(lookup, name=name)


def test_a_lambda_without_a_name_is_refused_with_a_hint():
    with pytest.raises(ValueError, match="pass name="):
        al.tool(lambda q: q)
    assert al.tool(lambda q: q, name="echo").name == "echo"


@pytest.mark.parametrize("name", [42, b"lookup", ["lookup"]])
def test_a_non_string_name_is_a_type_error(name):
    with pytest.raises(TypeError, match="must be a string"):
        Tool(lookup, name=name)


def test_names_at_the_limit_are_accepted():
    assert Tool(lookup, name="a-B_9" + "x" * 59).name.endswith("x")


def test_generators_and_async_generators_are_refused():
    def pages(n: int):
        yield n

    async def apages(n: int):
        yield n

    class Gen:
        __name__ = "gen"

        def __call__(self, n: int):
            yield n

    for fn in (pages, apages, Gen()):
        with pytest.raises(TypeError, match="generator cannot be a tool"):
            al.tool(fn)


def test_methods_work_bound_with_self_never_in_the_schema():
    class Shop:
        def __init__(self) -> None:
            self.stock = {"pen": 3}

        @al.tool(mode="read")
        def count(self, item: str) -> int:
            """How many are in stock."""
            return self.stock[item]

        def price(self, item: str) -> float:
            """The price."""
            return 1.5

    shop = Shop()
    for t in (shop.count, al.tool(shop.price, mode="read")):
        assert isinstance(t, Tool)
        assert set(t.input_schema["properties"]) == {"item"}
        assert t.input_schema["required"] == ["item"]
    model = al.ScriptedModel([reply(None, ("count", {"item": "pen"})), reply("3 pens")])
    result = al.run("stock?", [shop.count], model=model, trace=False)
    assert isinstance(result, al.Done)
    assert result.messages[2]["content"][0]["content"] == "3"
    assert set(Shop.count.input_schema["properties"]) == {"item"}


@pytest.mark.parametrize("timeout", [True, math.inf, math.nan, 0, -1, "5"])
def test_a_timeout_must_be_a_finite_positive_number(timeout):
    with pytest.raises(ValueError, match="timeout must be a finite number"):
        Tool(lookup, timeout=timeout)


def test_timeouts_of_any_real_type_become_floats():
    from fractions import Fraction

    assert Tool(lookup, timeout=Fraction(1, 2)).timeout == 0.5
    assert isinstance(Tool(lookup, timeout=3).timeout, float)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": 1.5}, "max_attempts"),
        ({"base_delay": -1}, "base_delay"),
        ({"max_delay": math.inf}, "max_delay"),
    ],
)
def test_bad_retry_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Retry(**kwargs)


def test_a_huge_result_is_cut_with_a_notice_and_stored_once(tmp_path):
    """The model sees the first max_result_chars and a notice; the trace holds the cut result once."""
    big = "MARK" + "y" * (3 * MAX_RESULT_CHARS)

    @al.tool(mode="read")
    def dump(q: str) -> str:
        """Dump everything."""
        return big

    @al.tool(mode="read", max_result_chars=100)
    def small(q: str) -> dict:
        """A capped tool."""
        return {"rows": list(range(1000))}

    model = al.ScriptedModel([reply(None, ("dump", {"q": "all"}), ("small", {"q": "x"})), reply("done")])
    result = al.run("dump", [dump, small], model=model, trace=tmp_path, max_cost=None)
    results = result.messages[2]["content"]
    assert len(results[0]["content"]) < MAX_RESULT_CHARS + 400
    assert "cut to its first 1,000,000 of 3,000,004 characters" in results[0]["content"]
    assert results[1]["content"].startswith('{"rows": [0, 1, 2') and "first 100 of" in results[1]["content"]
    data = (tmp_path / f"{result.run_id}.jsonl").read_bytes()
    assert data.count(b"MARK") == 1
    assert len(data) < 1.2 * MAX_RESULT_CHARS
    rebuilt = al.load_run(result.run_id, tmp_path).messages
    assert rebuilt[2]["content"] == results  # the history read back still holds the result the model saw


def test_bad_max_result_chars_is_refused():
    with pytest.raises(ValueError, match="max_result_chars"):
        Tool(lookup, max_result_chars=0)
    assert Tool(lookup, max_result_chars=None).result_text("z" * 2_000_000) == "z" * 2_000_000

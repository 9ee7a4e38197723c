"""A tool call's fast paths (issue 27) give what the long way gives.

Arguments already of the tool's plain field types are taken as they are: the same keyword arguments as
pydantic's validation (values, defaults, order), and for anything else the same coercion or the same error
naming the bad field (each case checked against the tool's own pydantic model). A text result within the
tool's cap is taken as it is: the same content for the model as content blocks or the capped text.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab.errors import ToolError
from agentlab.tools import result_blocks, result_text


def by_pydantic(t: al.Tool, args: Any) -> dict[str, Any] | str:
    """What validation gave before the fast path: the model's fields, or the error's text."""
    try:
        return dict(t._model.model_validate(args).__dict__)
    except pydantic.ValidationError:
        try:
            t._plan, plan = None, t._plan  # the long way's error text (the fast path never makes one)
            t.validate(args)
        except ToolError as exc:
            return str(exc)
        finally:
            t._plan = plan
        raise AssertionError("pydantic refused what validate() accepted") from None


def by_validate(t: al.Tool, args: Any) -> dict[str, Any] | str:
    try:
        return t.validate(args)
    except ToolError as exc:
        return str(exc)


def same(a: Any, b: Any) -> bool:
    """Equal, key order included, NaN equal to NaN, and of the same types (1 is not 1.0 nor True)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@al.tool
def lookup(key: str) -> str:
    """Look up a key."""
    return key


@al.tool
def search(query: str, limit: int = 10, score: float = 0.5, exact: bool = False, page: int | None = None) -> str:
    """Search.

    Args:
        query: what to look for
        limit: how many results
    """
    return query


@al.tool
def anything(payload: Any, note: str | None = None) -> str:
    """Take anything."""
    return "ok"


def test_simple_tools_are_validated_by_their_plan_and_constrained_ones_by_pydantic():
    """Which tools take the fast path: plain types, optional or defaulted; a constraint, an alias or a
    container sends every call to pydantic."""

    @al.tool
    def positive(n: Annotated[int, pydantic.Field(gt=0)]) -> str:
        """A constrained field."""
        return ""

    @al.tool
    def listed(keys: list[str]) -> str:
        """A container (pydantic copies it)."""
        return ""

    @al.tool
    def aliased(key: str = pydantic.Field("x", alias="KEY")) -> str:
        """An alias."""
        return ""

    @al.tool
    def mutable_default(key: str, tags: Any = []) -> str:  # noqa: B006 - the point of the test
        """A mutable default (pydantic copies it)."""
        return ""

    assert all(t._plan is not None for t in (lookup, search, anything))
    assert all(t._plan is None for t in (positive, listed, aliased, mutable_default))


VALUES = st.one_of(
    st.text(max_size=5),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.sampled_from(["1", "1.5", "true", "no", " 2 ", "\ud800"]),
)
KEYS = st.sampled_from(["key", "query", "limit", "score", "exact", "page", "payload", "note", "other"])


@settings(max_examples=600, deadline=None)
@given(tool=st.sampled_from([lookup, search, anything]), args=st.dictionaries(KEYS, VALUES, max_size=6))
def test_validate_gives_what_pydantic_gives_for_any_arguments(tool, args):
    """Same kwargs or the same error text, over generated arguments: exact types, coercible strings and
    numbers, bools where ints are asked for, big ints, NaN, containers, missing and unknown fields."""
    assert same(by_validate(tool, args), by_pydantic(tool, args))


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (lookup, {"key": "k1"}),
        (lookup, {}),
        (lookup, {"key": "k1", "extra": 1}),
        (lookup, {"key": 1}),
        (search, {"query": "q", "limit": True}),
        (search, {"query": "q", "limit": "7"}),
        (search, {"query": "q", "score": 1}),
        (search, {"query": "q", "limit": 2**64}),
        (search, {"query": "q", "page": None}),
        (anything, {"payload": [1, {"a": 2}]}),
        (lookup, ["not", "a", "dict"]),
    ],
)
def test_validate_gives_what_pydantic_gives_for_the_usual_mistakes(tool, args):
    assert same(by_validate(tool, args), by_pydantic(tool, args))


def test_a_value_of_any_type_reaches_the_tool_as_the_same_object():
    payload = {"nested": [1, 2]}
    assert anything.validate({"payload": payload})["payload"] is payload


def test_a_model_gets_the_field_named_when_its_call_has_a_wrong_type():
    """Through a whole run: the model reads which argument was wrong, as before."""
    model = al.ScriptedModel([al.reply(None, ("search", {"query": "q", "limit": "many"})), al.reply("done")])
    result = al.run("q", [search], model=model, trace=False)
    (block,) = result.messages[2]["content"]
    assert block["is_error"] and "'limit'" in block["content"] and "valid integer" in block["content"]


@settings(max_examples=300, deadline=None)
@given(
    value=st.one_of(
        st.text(max_size=12),
        st.integers(),
        st.none(),
        st.lists(st.text(max_size=3), max_size=2),
        st.just([{"type": "text", "text": "a block"}]),
    ),
    cap=st.one_of(st.none(), st.integers(min_value=1, max_value=10)),
)
def test_a_text_result_reaches_the_model_as_the_long_way_gives_it(value, cap):
    """A result that is text within the tool's cap is taken as it is (issue 27): the model sees what the long
    way (content blocks, else the text cut with a notice) gives, for text at, under and over the cap."""
    t = al.Tool(lookup.fn, max_result_chars=cap)
    blocks = result_blocks(value)
    assert t.result_content(value) == (blocks if blocks is not None else result_text(value, cap))

"""@tool: schema from the signature, validation that names the field, modes and limits."""

from __future__ import annotations

import asyncio

import pytest

import agentlab as al
from agentlab import reply

from .helpers import last_tool_results


@al.tool(mode="read")
def get_order(order_id: int, include_items: bool = False) -> dict:
    """Fetch one order by its number.

    Args:
        order_id: The order number, e.g. 1042.
        include_items: Also list the order's items.
    """
    return {"id": order_id, "items": [] if include_items else None}


def test_schema_comes_from_signature_hints_and_docstring():
    """Name, description, types, defaults and per-argument help reach the model."""
    d = get_order.definition()
    assert d["name"] == "get_order"
    assert d["description"] == "Fetch one order by its number."
    schema = d["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["order_id"]
    assert schema["properties"]["order_id"] == {"type": "integer", "description": "The order number, e.g. 1042."}
    assert schema["properties"]["include_items"]["type"] == "boolean"
    assert schema["properties"]["include_items"]["default"] is False


def test_decorated_function_stays_callable_as_itself():
    """A tool is still the function: tests and code can call it directly."""
    assert get_order(7) == {"id": 7, "items": None}
    assert get_order.mode == "read"


def test_undeclared_mode_means_write():
    """The safe default is to serialize: a plain function becomes a write tool."""

    @al.tool
    def touch(x: str) -> str:
        return x

    assert touch.mode == "write"


def test_bad_arguments_are_a_recoverable_error_naming_the_field():
    """The model gets is_error with the field and what was expected, and the run goes on."""
    model = al.ScriptedModel([reply(None, ("get_order", {"order_id": "soon"})), reply("sorry")])
    result = al.run("q", [get_order], model=model, trace=False)
    block = last_tool_results(result.messages[:-1])[0]
    assert block["is_error"] is True
    assert "'order_id'" in block["content"] and "valid integer" in block["content"]
    assert "Next step: call get_order again" in block["content"]
    assert isinstance(result, al.Done)


def test_unexpected_and_missing_arguments_are_named():
    """An extra argument and a missing one are both reported by name."""
    with pytest.raises(al.ToolError) as info:
        get_order.validate({"include_items": True, "colour": "red"})
    assert "'order_id': Field required" in info.value.message
    assert "'colour': Extra inputs are not permitted" in info.value.message


def test_max_calls_limits_a_tool_per_run():
    """Past max_calls the model is told the tool is used up, without running it."""
    ran = []

    @al.tool(mode="read", max_calls=2)
    def ping(n: int) -> str:
        ran.append(n)
        return "pong"

    model = al.ScriptedModel([reply(None, ("ping", {"n": i})) for i in range(3)] + [reply("done")])
    result = al.run("q", [ping], model=model, trace=False)
    assert ran == [0, 1]
    last = last_tool_results(result.messages[:-1])[0]
    assert last["is_error"] and "at most 2 times" in last["content"]


@pytest.mark.parametrize(
    ("options", "match"),
    [({"mode": "rw"}, "mode must be 'read' or 'write'"), ({"timeout": 0}, "timeout"), ({"max_calls": 0}, "max_calls")],
)
def test_bad_tool_options_are_refused_at_definition(options, match):
    """A wrong option fails where the tool is defined, naming it."""
    with pytest.raises(ValueError, match=match):
        al.tool(lambda x: x, name="echo", **options)


def test_star_args_cannot_be_described_to_a_model():
    """*args/**kwargs have no schema: a clear TypeError instead of a vague one later."""

    def f(*args: int) -> int:
        return 0

    with pytest.raises(TypeError, match="name each argument"):
        al.tool(f)


def test_async_tools_are_awaited():
    """An async function is a tool too, awaited on the run's loop."""

    @al.tool(mode="read")
    async def fetch(key: str) -> str:
        await asyncio.sleep(0)
        return key.upper()

    model = al.ScriptedModel([reply(None, ("fetch", {"key": "abc"})), reply("ok")])
    result = al.run("q", [fetch], model=model, trace=False)
    assert last_tool_results(result.messages[:-1])[0]["content"] == "ABC"

"""normalize_reply, the one gate every reply passes: what it keeps of each field, and what it leaves alone."""

from __future__ import annotations

import pytest

from agentlab.messages import MalformedReply, Usage, normalize_reply


def test_a_tool_call_without_input_gets_empty_arguments_and_the_model_s_own_block_is_left_as_it_was():
    block = {"type": "tool_use", "id": "t1", "name": "lookup"}
    r = normalize_reply({"content": [block], "stop_reason": "tool_use"})
    assert r.tool_calls == [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}]
    assert block == {"type": "tool_use", "id": "t1", "name": "lookup"}  # a copy went into the reply


def test_a_reply_without_a_stop_reason_says_tool_use_when_it_calls_a_tool_and_end_turn_when_not():
    call = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    assert normalize_reply({"content": [{"type": "text", "text": "x"}, call]}).stop_reason == "tool_use"
    assert normalize_reply({"content": [{"type": "text", "text": "x"}]}).stop_reason == "end_turn"


def test_the_optional_fields_of_a_reply_are_kept_when_they_have_their_shape_and_dropped_when_not():
    r = normalize_reply(
        {
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "refusal",
            "model": "claude-sonnet-4-6",
            "_request_id": "req_1",
            "request_id": "req_2",
            "container": {"id": "cont_1"},
            "stop_details": {"category": "cyber"},
            "context_management": "not an object",
            "parsed": {"a": 1},
            "usage": {"input_tokens": 3, "output_tokens": 4},
        }
    )
    assert (r.model, r.request_id, r.container, r.stop_details) == (
        "claude-sonnet-4-6",
        "req_1",
        "cont_1",
        {"category": "cyber"},
    )
    assert r.context_management is None and r.parsed == {"a": 1} and r.usage == Usage(3, 4)
    bare = normalize_reply({"content": [{"type": "text", "text": "hi"}], "request_id": "req_2", "container": "c2"})
    assert (bare.request_id, bare.container, bare.usage, bare.stop_details) == ("req_2", "c2", None, None)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"content": [{"type": "text"}]}, "text block 0 has no 'text'"),
        ({"content": [{"type": "text", "text": "a"}, "b"]}, "content block 1 has no 'type'"),
        ({"content": [{"type": "tool_use", "id": "", "name": "f"}]}, "tool_use block 0 has no 'id'"),
        ({"content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}, "(f): 'input' is not an object"),
        ({"content": [{"type": "text", "text": "a"}], "stop_reason": 3}, "'stop_reason' must be a string"),
        ({"content": {"type": "text", "text": "a"}}, "the reply has no content blocks"),
    ],
)
def test_a_reply_of_the_wrong_shape_is_refused_naming_what_is_wrong(raw, problem):
    with pytest.raises(MalformedReply, match=problem.replace("(", r"\(").replace(")", r"\)")) as caught:
        normalize_reply(raw)
    assert caught.value.raw is raw


def test_the_records_a_step_builds_stay_frozen_equal_and_replaceable_and_take_the_same_arguments():
    """Usage, Reply, GuardCheck and ModelRequest, built every step, are plain frozen records: hashable, equal by
    value, ``replace``-able, with the signature their fields give."""
    import dataclasses
    import inspect

    from agentlab.budget import GuardCheck
    from agentlab.messages import Reply
    from agentlab.models.base import ModelRequest

    u = Usage(100, 10, cache_read_input_tokens=5)
    assert u == Usage(input_tokens=100, output_tokens=10, cache_read_input_tokens=5) and hash(u) == hash(
        Usage(100, 10, 0, 5)
    )
    assert (u.cache_creation_input_tokens, u.speed, u.iterations) == (0, None, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        u.input_tokens = 1  # type: ignore[misc]
    assert dataclasses.replace(u, output_tokens=3) == Usage(100, 3, 0, 5)
    for cls in (Usage, Reply, GuardCheck, ModelRequest):
        params = list(inspect.signature(cls).parameters.values())
        assert [(p.name, p.default) for p in params] == [
            (f.name, inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default)
            for f in dataclasses.fields(cls)
        ]
    with pytest.raises(TypeError):
        Usage(1, 2, bogus=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Reply([])  # type: ignore[call-arg]  # stop_reason has no default

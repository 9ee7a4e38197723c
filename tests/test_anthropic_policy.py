"""The adapter's pure parts: the error table, retry-after, cache breakpoints, the network guard, model resolution."""

from __future__ import annotations

import copy
import email.utils

import pytest

import agentlab as al
from agentlab.models.anthropic import AnthropicModel, api_error, retry_after, with_cache_breakpoints
from agentlab.models.resolve import MissingAPIKey, resolve_model
from agentlab.netguard import NetworkBlocked, check_url, is_loopback, local_only


def body(message: str, error_type: str = "api_error", code: str | None = None) -> dict:
    error = {"type": error_type, "message": message}
    if code:
        error["details"] = {"error_code": code}
    return {"type": "error", "error": error}


@pytest.mark.parametrize(
    ("status", "headers", "error_type", "code", "kind", "reason"),
    [
        (429, {}, "rate_limit_error", None, al.RetryableError, None),
        (529, {}, "overloaded_error", None, al.RetryableError, None),
        (500, {}, "api_error", None, al.RetryableError, None),
        (408, {}, "timeout_error", None, al.RetryableError, None),
        (409, {}, "conflict_error", None, al.RetryableError, None),
        (500, {"x-should-retry": "false"}, "api_error", None, al.ModelError, "model error"),
        (400, {"x-should-retry": "true"}, "invalid_request_error", None, al.RetryableError, None),
        (401, {}, "authentication_error", None, al.AuthenticationFailed, None),
        (403, {}, "permission_error", None, al.PermissionDenied, None),
        (429, {}, "rate_limit_error", "enforced_spend_limit_reached", al.FatalError, None),
        (429, {}, "rate_limit_error", "contract_spend_limit_reached", al.FatalError, None),
        (402, {}, "billing_error", None, al.FatalError, None),
        (400, {}, "invalid_request_error", None, al.ModelError, "model error"),
        (404, {}, "not_found_error", None, al.ModelError, "model error"),
        (413, {}, "request_too_large", None, al.ModelError, "request too large"),
    ],
)
def test_every_api_status_maps_to_one_kind_of_failure(status, headers, error_type, code, kind, reason):
    """The error table: retryable, fatal or a model error with its stop reason, per status, header and code."""
    err = api_error(status, headers, body("something", error_type, code))
    assert type(err) is kind
    if reason:
        assert err.reason == reason
    assert err.status_code == status


def test_a_prompt_too_long_is_a_context_window_stop_not_a_plain_bad_request():
    """The API's "prompt is too long" 400 becomes the "context window" reason."""
    err = api_error(400, {}, body("prompt is too long: 201000 tokens > 200000 maximum", "invalid_request_error"))
    assert isinstance(err, al.ModelError) and err.reason == "context window"
    assert "201000 tokens" in err.message


def test_error_messages_carry_status_type_code_and_request_id_but_never_the_key():
    """An error says what the API said, and scrubs the key if the server echoed it."""
    err = api_error(
        401,
        {"request-id": "req_42"},
        body("invalid key sk-secret-123", "authentication_error"),
        secrets=("sk-secret-123",),
    )
    text = str(err)
    assert "401 authentication_error" in text and "req_42" in text
    assert "sk-secret-123" not in text and "[redacted]" in text


def test_retry_after_reads_ms_then_seconds_then_an_http_date():
    """retry-after-ms wins; retry-after may be seconds (even fractional) or a date; junk and past dates mean no hint."""
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "1.5"}) == 1.5
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 20, usegmt=True)
    assert retry_after({"retry-after": date}, now=now) == pytest.approx(20, abs=1)
    assert retry_after({"retry-after": email.utils.formatdate(now - 20, usegmt=True)}, now=now) is None
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None
    assert api_error(429, {"retry-after": "3"}, body("x")).retry_after == 3.0


def test_cache_breakpoints_are_added_to_copies_and_never_to_the_inputs():
    """Marking the prefix and latest message leaves the caller's system, tools and messages untouched."""
    tools = [{"name": "a", "input_schema": {}}, {"name": "b", "input_schema": {}}]
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]
    before = copy.deepcopy((tools, messages))
    system, new_tools, new_messages = with_cache_breakpoints("Be brief.", tools, messages)
    assert (tools, messages) == before
    assert system == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert new_tools == tools  # the system prompt carries the prefix breakpoint
    assert new_messages[-1]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert new_messages[:-1] == messages[:-1]


def test_the_message_breakpoint_skips_thinking_and_empty_text_blocks():
    """Thinking blocks and empty text cannot carry cache_control, so the marker goes on the block before them."""
    msg = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Plan."},
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "text", "text": ""},
        ],
    }
    _, _, (marked,) = with_cache_breakpoints(None, [], [msg])
    assert [("cache_control" in b) for b in marked["content"]] == [True, False, False]
    _, tools, _ = with_cache_breakpoints(None, [{"name": "a"}], [msg])
    assert tools == [{"name": "a", "cache_control": {"type": "ephemeral"}}]


def test_the_network_guard_allows_only_loopback_when_on():
    """Local-only mode admits 127.0.0.1, ::1 and localhost, refuses anything else, and is off unless set."""
    on = {"AGENTLAB_LOCAL_ONLY": "1"}
    for url in ("http://127.0.0.1:8080", "http://[::1]:9/v1", "http://localhost:5"):
        check_url(url, on)
    for url in ("https://api.anthropic.com", "http://10.0.0.5", "http://127.0.0.1.evil.com"):
        with pytest.raises(NetworkBlocked, match="AGENTLAB_LOCAL_ONLY"):
            check_url(url, on)
    check_url("https://api.anthropic.com", {})
    assert local_only({"AGENTLAB_LOCAL_ONLY": "true"}) and not local_only({"AGENTLAB_LOCAL_ONLY": "0"})
    assert is_loopback("127.0.0.2") and not is_loopback("example.com")


def test_resolve_model_falls_back_offline_without_a_key_and_says_so_in_one_line():
    """No ANTHROPIC_API_KEY: the offline fallback is returned with a one-line notice naming both models."""
    fallback = al.ScriptedModel([al.reply("offline answer")], name="shop scenario")
    model, notice = resolve_model("claude-sonnet-4-5", fallback=fallback, environ={})
    assert model is fallback
    assert notice is not None and "\n" not in notice
    assert "ANTHROPIC_API_KEY" in notice and "shop scenario" in notice and "claude-sonnet-4-5" in notice
    result = al.run("Hi", model=model, clock=al.FakeClock())
    assert result.text == "offline answer"


def test_resolve_model_without_a_key_or_fallback_refuses_and_says_how_to_go_offline():
    """No silent stand-in: a Claude id with no key and no fallback is an error naming model='offline'."""
    with pytest.raises(MissingAPIKey, match="model='offline'"):
        resolve_model("claude-sonnet-4-5", environ={})
    model, notice = resolve_model("offline", environ={})
    assert (model.name, model.model, notice) == ("offline", "claude-sonnet-4-5", None)


def test_resolve_model_picks_claude_when_a_key_is_set():
    """With a key in the environment a model id becomes an AnthropicModel; a model object passes through."""
    import anthropic

    client = anthropic.AsyncAnthropic(api_key="resolve-key", base_url="http://127.0.0.1:9")
    model, notice = resolve_model(
        "claude-haiku-4-5", environ={"ANTHROPIC_API_KEY": "resolve-key"}, client=client, cache=False
    )
    assert isinstance(model, AnthropicModel) and model.model == "claude-haiku-4-5" and model.cache is False
    assert notice is None
    offline = al.ScriptedModel([al.reply("x")])
    assert resolve_model(offline) == (offline, None)


def test_resolve_model_rejects_what_is_not_a_model_naming_the_parameter():
    """Bad specs and fallbacks fail with the parameter's name."""
    with pytest.raises(TypeError, match="spec"):
        resolve_model(42)
    with pytest.raises(ValueError, match="spec"):
        resolve_model("  ")
    with pytest.raises(TypeError, match="fallback"):
        resolve_model("claude-sonnet-4-5", fallback="offline", environ={})


def test_a_thinking_budget_shrinks_with_a_clamped_max_tokens():
    """When the cost guard lowers max_tokens under the thinking budget, the budget follows (or thinking turns off)."""
    import anthropic

    from agentlab.models.base import ModelRequest

    client = anthropic.AsyncAnthropic(api_key="k", base_url="http://127.0.0.1:9")
    model = AnthropicModel(client=client, thinking={"type": "enabled", "budget_tokens": 4000})
    params = lambda mt: model.build_params(ModelRequest(None, [{"role": "user", "content": "hi"}], [], mt))  # noqa: E731
    assert params(8000)["thinking"] == {"type": "enabled", "budget_tokens": 4000}
    assert params(3000)["thinking"] == {"type": "enabled", "budget_tokens": 2999}
    with pytest.warns(UserWarning, match=r"max_tokens=900 .* thinking budget \(4000 tokens"):
        assert params(900)["thinking"] == {"type": "disabled"}  # never silently: the warning names both numbers
    with pytest.raises(ValueError, match="budget_tokens=4000 must be below max_tokens=2000"):
        AnthropicModel(client=client, max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 4000})


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_structured_output_is_requested_as_typed_and_parsed_on_done(stream):
    """output_format= goes out as output_config.format; the JSON answer is on Done.parsed; a non-JSON one is
    malformed.
    """
    from agentlab.testing import MessagesServer

    schema = {"type": "json_schema", "schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    with MessagesServer([al.reply('{"city": "Paris"}'), al.reply("Paris, I think.")]) as server:
        model = AnthropicModel(client=server.client(), stream=stream, output_format=schema)
        done = al.run("Capital of France?", model=model, trace=False, prices=al.Prices(3.0, 15.0))
        bad = al.run("Capital of France?", model=model, trace=False, prices=al.Prices(3.0, 15.0))
    assert server.requests[0].body["output_config"] == {"format": schema}
    assert isinstance(done, al.Done) and done.parsed == {"city": "Paris"}
    assert (
        bad.reason == "malformed reply" and "not the JSON the output format asked for" in bad.detail and bad.spent > 0
    )


def test_a_tool_that_returns_content_blocks_hands_them_to_claude_as_blocks():
    """Text, image and document blocks (tool_result.content's shapes) go back as blocks, not as their JSON text."""
    from agentlab.testing import MessagesServer

    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    blocks = [
        {"type": "text", "text": "The chart:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": pixel}},
    ]

    @al.tool(mode="read")
    def chart() -> list:
        """Draw the chart."""
        return blocks

    events: list = []
    with MessagesServer([al.reply(None, ("chart", {})), al.reply("A single pixel.")]) as server:
        result = al.run(
            "Show me",
            [chart],
            model=AnthropicModel(client=server.client()),
            trace=False,
            prices=al.Prices(3.0, 15.0),
            subscribers=[events.append],
        )
    sent = server.requests[1].body["messages"][-1]["content"][0]
    assert sent["type"] == "tool_result" and sent["content"] == blocks and result.text == "A single pixel."
    finished = next(e for e in events if e.kind == "tool_finished")
    assert finished.data["result"] == "The chart:\n[image block]"  # the event names the image, without its bytes

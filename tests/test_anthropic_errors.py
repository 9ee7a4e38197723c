"""API failures through the real SDK: retried by the engine within the deadline, or stopping the run with a reason."""

from __future__ import annotations

import random
import time

import pytest

import agentlab as al
from agentlab.models.anthropic import AnthropicModel
from agentlab.testing import MessagesServer, dropped, fault, reply, slow
from tests.helpers import Recorder

KEY = "errors-test-key-7d1c0b9a"


@pytest.fixture
def server():
    with MessagesServer() as s:
        yield s


def go(server: MessagesServer, *, clock=None, **options):
    """Run one short task against ``server``; return (result, events, clock)."""
    clock = clock or al.FakeClock()
    rec = Recorder()
    model = AnthropicModel("claude-sonnet-4-5", client=server.client(api_key=KEY))
    result = al.run("Where is order 7?", model=model, clock=clock, rng=random.Random(0), subscribers=[rec], **options)
    return result, rec, clock


def test_429_waits_exactly_as_long_as_retry_after_says(server):
    """A rate limit with retry-after: 2 is retried after a 2 s wait on the run's clock, and the run succeeds."""
    server.add(fault(429, "rate limited", retry_after=2), reply("Shipped."))
    result, rec, clock = go(server)
    assert isinstance(result, al.Done) and result.text == "Shipped."
    assert clock.sleeps == [2.0]
    (retry,) = rec.of("model_retry")
    assert retry.data["wait"] == 2.0 and "429" in retry.data["error"]
    assert len(server.requests) == 2


def test_retry_after_ms_is_preferred_for_its_precision(server):
    """retry-after-ms (1500) wins over retry-after (9)."""
    server.add(fault(529, retry_after=9, retry_after_ms=1500), reply("Shipped."))
    result, _, clock = go(server)
    assert isinstance(result, al.Done) and clock.sleeps == [1.5]


def test_a_retry_after_beyond_the_deadline_stops_at_once_with_the_reason(server):
    """Told to wait 30 s with 10 s left, the run stops with "deadline" without waiting, and says why."""
    server.add(fault(429, "slow down", retry_after=30), reply("never sent"))
    result, _, clock = go(server, deadline_s=10)
    assert isinstance(result, al.Stopped) and result.reason == "deadline"
    assert "would pass the deadline" in result.detail and "30.0s" in result.detail
    assert clock.sleeps == [] and len(server.requests) == 1


@pytest.mark.parametrize(
    "make", [lambda: fault(529, "Overloaded"), lambda: fault(503), lambda: fault(408), lambda: fault(409), dropped]
)
def test_transient_failures_are_retried_invisibly(server, make):
    """Overloaded, unavailable, timeout, conflict and a dropped connection are retried; the model never hears of
    them.
    """
    server.add(make(), reply("Shipped."))
    result, rec, _ = go(server)
    assert isinstance(result, al.Done) and result.text == "Shipped."
    assert len(rec.of("model_retry")) == 1 and len(server.requests) == 2
    second = server.requests[1].body["messages"]
    assert second == server.requests[0].body["messages"]  # nothing about the failure reached the history


def test_x_should_retry_false_is_obeyed(server):
    """A 500 that says x-should-retry: false is not retried: the run stops with "model error" after one request."""
    server.add(fault(500, "internal", should_retry=False), reply("never sent"))
    result, rec, _ = go(server)
    assert isinstance(result, al.Stopped) and result.reason == "model error"
    assert "not to retry" in result.detail and len(server.requests) == 1 and rec.of("model_retry") == []


def test_x_should_retry_true_makes_any_status_retryable(server):
    """A 400 that says x-should-retry: true is retried."""
    server.add(fault(400, "try again", should_retry=True), reply("Shipped."))
    result, _, _ = go(server)
    assert isinstance(result, al.Done) and len(server.requests) == 2


def test_retries_that_run_out_stop_with_model_error_and_the_count(server):
    """Three 503s in a row (the policy's three attempts) stop the run, saying how many attempts failed."""
    server.add(fault(503), fault(503), fault(503), reply("never sent"))
    result, rec, _ = go(server)
    assert isinstance(result, al.Stopped) and result.reason == "model error"
    assert "failed 3 times" in result.detail and len(server.requests) == 3 and len(rec.of("model_retry")) == 2


@pytest.mark.parametrize(
    ("item", "error_type", "words"),
    [
        (fault(401, "invalid x-api-key"), al.AuthenticationFailed, "API key was refused"),
        (fault(403, "not allowed to use this model"), al.PermissionDenied, "permission denied"),
        (fault(429, "monthly limit", error_code="enforced_spend_limit_reached"), al.FatalError, "billing"),
        (fault(400, "Your credit balance is too low", error_type="billing_error"), al.FatalError, "billing"),
        (fault(402, "payment required"), al.FatalError, "billing"),
    ],
)
def test_what_no_retry_can_fix_stops_the_run_as_fatal_after_one_request(server, item, error_type, words):
    """Authentication, permission and billing failures stop the run at once, with the API's words."""
    server.add(item, reply("never sent"))
    result, rec, _ = go(server)
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    assert isinstance(result.error, error_type) and words in result.detail
    assert item.message in result.detail
    assert len(server.requests) == 1 and rec.of("model_retry") == []
    assert KEY not in result.detail and KEY not in repr(result.error)


def test_a_bad_request_stops_with_model_error_and_the_api_message(server):
    """A 400 stops the run with "model error" and the API's own message."""
    server.add(fault(400, "messages.0.content: unsupported block type 'banana'"))
    result, _, _ = go(server)
    assert isinstance(result, al.Stopped) and result.reason == "model error"
    assert "unsupported block type 'banana'" in result.detail and "invalid_request_error" in result.detail


@pytest.mark.parametrize(
    "item",
    [fault(400, "prompt is too long: 212000 tokens > 200000 maximum")],
)
def test_a_request_too_large_for_the_context_stops_with_context_window(server, item):
    """A prompt longer than the model's window stops the run with "context window", not a generic error."""
    server.add(item)
    result, _, _ = go(server)
    assert isinstance(result, al.Stopped) and result.reason == "context window"
    assert item.message in result.detail


def test_a_reply_slower_than_the_deadline_stops_the_run_near_the_deadline(server):
    """The server takes 30 s; a run with a 0.5 s deadline stops with "deadline" within a generous 5 s."""
    server.add(slow(reply("too late"), 30))
    t0 = time.monotonic()
    result, _, _ = go(server, clock=al.clock.SystemClock(), deadline_s=0.5)
    took = time.monotonic() - t0
    assert isinstance(result, al.Stopped) and result.reason == "deadline"
    assert took < 5.0, took
    assert 0 < float(server.requests[0].headers["x-stainless-timeout"]) <= 0.5  # the time left, not the SDK's 600 s


def test_the_server_running_out_of_script_is_a_clear_model_error(server):
    """A test that scripts too few replies gets a message saying so, not a hang or a cryptic failure."""
    result, _, _ = go(server)
    assert isinstance(result, al.Stopped) and "no scripted reply left" in result.detail


def test_a_model_call_to_a_remote_host_fails_loudly_in_local_only_mode(monkeypatch):
    """With AGENTLAB_LOCAL_ONLY=1 (set for the whole suite) a call to api.anthropic.com stops the run before any I/O."""
    import anthropic

    monkeypatch.setenv("AGENTLAB_LOCAL_ONLY", "1")
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url="https://api.anthropic.com", max_retries=0)
    result = al.run("Hi", model=AnthropicModel(client=client), clock=al.FakeClock())
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    assert "api.anthropic.com" in result.detail and "AGENTLAB_LOCAL_ONLY" in result.detail
    assert type(result.error).__name__ == "NetworkBlocked"


def test_a_redirect_off_this_machine_is_blocked_too(server, monkeypatch):
    """Local-only mode checks every request the client sends, so a 307 to a remote host stops the run as fatal."""
    from agentlab.testing import Fault

    monkeypatch.setenv("AGENTLAB_LOCAL_ONLY", "1")
    server.add(Fault(status=307, message="moved", headers={"location": "https://api.anthropic.com/v1/messages"}))
    result, rec, _ = go(server)
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    assert type(result.error).__name__ == "NetworkBlocked" and "api.anthropic.com" in result.detail
    assert len(server.requests) == 1 and rec.of("model_retry") == []

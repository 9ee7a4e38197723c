"""The caller's own first attempt (issue 27's fast path) is retried and counted exactly as one made by the loop."""

from __future__ import annotations

import asyncio
import random

import agentlab as al
from agentlab import reply
from agentlab._runtime.isolate import Raised, Returned
from agentlab.clock import FakeClock
from agentlab.errors import RetryableError, ToolError
from agentlab.retry import RetriesExhausted, retrying

from .helpers import Recorder


def _loop(attempt, clock, first, max_attempts=3):
    return retrying(
        attempt,
        is_retryable=lambda e: isinstance(e, RetryableError),
        max_attempts=max_attempts,
        wait_for=lambda n, e: 1.0,
        sleep=clock.sleep,
        time_left=lambda: None,
        on_retry=lambda n, e, w: None,
        first=first,
    )


def test_a_failed_first_attempt_made_by_the_caller_counts_as_attempt_one():
    clock, made = FakeClock(), []

    async def attempt():
        made.append(1)
        return Returned("ok")

    out, attempts = asyncio.run(_loop(attempt, clock, Raised(RetryableError("503"))))
    assert out == Returned("ok") and attempts == 2 and len(made) == 1 and clock.sleeps == [1.0]


def test_a_first_failure_that_is_not_retryable_ends_at_once_without_another_attempt():
    made = []

    async def attempt():
        made.append(1)
        return Returned("ok")

    error = ToolError("no such order")
    out, attempts = asyncio.run(_loop(attempt, FakeClock(), Raised(error)))
    assert out == Raised(error) and attempts == 1 and made == []


def test_the_caller_s_first_attempt_counts_towards_max_attempts():
    async def attempt():
        return Raised(RetryableError("503 again"))

    out, attempts = asyncio.run(_loop(attempt, FakeClock(), Raised(RetryableError("503")), max_attempts=2))
    assert isinstance(out, Raised) and isinstance(out.error, RetriesExhausted) and attempts == 2


def test_a_model_that_fails_once_is_retried_once_and_the_run_finishes():
    fails = [RetryableError("overloaded")]

    def flaky(messages, tools):
        if fails:
            raise fails.pop()
        return reply("done")

    rec = Recorder()
    policy = al.Policy(base_delay=0.0, jitter=0.0)
    result = al.run(
        "q", model=al.FunctionModel(flaky), trace=False, subscribers=[rec], policy=policy, rng=random.Random(0)
    )
    assert isinstance(result, al.Done) and result.text == "done"
    assert [e.data["attempt"] for e in rec.of("model_retry")] == [1]

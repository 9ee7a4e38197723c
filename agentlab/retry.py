"""Retries with exponential backoff and jitter, bounded by the run's deadline.

A hand-written 30 lines rather than tenacity: every wait must be checked
against the time left (a wait that would pass the deadline stops the run at
once instead of sleeping), honour ``retry_after`` from the upstream, and go
through the injected clock so tests are exact and instant.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

from ._runtime.isolate import Raised, Returned
from .errors import AgentlabError, RetryableError, safe_str


class DeadlineExceeded(AgentlabError):
    """Internal: the run's deadline passed (or a wait would pass it)."""


class RetriesExhausted(AgentlabError):
    """Internal: every attempt failed with a retryable error."""

    def __init__(self, last: BaseException, attempts: int) -> None:
        super().__init__(safe_str(last))
        self.last = last
        self.attempts = attempts


def backoff(attempt: int, base: float, cap: float, jitter: float, rng: random.Random) -> float:
    """Wait before retry number ``attempt`` (1-based): base·2^(n-1), capped, jittered down."""
    delay = min(cap, base * 2 ** (attempt - 1))
    return delay * (1 - jitter * rng.random())


async def retrying(
    attempt: Callable[[], Awaitable[Returned | Raised]],
    *,
    is_retryable: Callable[[Exception], bool],
    max_attempts: int,
    wait_for: Callable[[int, Exception], float],
    sleep: Callable[[float], Awaitable[None]],
    time_left: Callable[[], float | None],
    on_retry: Callable[[int, Exception, float], None],
    first: Raised | None = None,
) -> tuple[Returned | Raised, int]:
    """Make ``attempt()`` until it returns or fails for good; how it ended, and the attempts made.

    Each attempt says how it ended as a value (see :mod:`agentlab._runtime.isolate`). A failure
    that is not retryable ends the loop as itself; a retryable one on the last attempt as
    :class:`RetriesExhausted`; a wait that would pass the deadline as :class:`DeadlineExceeded`.

    ``first``: the first attempt, already made by the caller and failed (nearly every call
    succeeds at once, so the caller makes the first attempt itself and comes here only
    after a failure).
    """
    n = 0
    while True:
        n += 1
        out = first if n == 1 and first is not None else await attempt()
        if isinstance(out, Returned):
            return out, n
        exc = out.error
        if isinstance(exc, DeadlineExceeded) or not is_retryable(exc):
            return out, n
        if n >= max_attempts:
            return Raised(_caused(RetriesExhausted(exc, n), exc)), n
        hinted = exc.retry_after if isinstance(exc, RetryableError) else None
        wait = hinted if hinted is not None else wait_for(n, exc)
        left = time_left()
        if left is not None and wait >= left:
            why = f"a retry wait of {wait:.1f}s after {type(exc).__name__}: {safe_str(exc)} would pass the deadline"
            return Raised(_caused(DeadlineExceeded(f"{why} ({left:.1f}s left)"), exc)), n
        on_retry(n, exc, wait)
        await sleep(wait)


def _caused(err: AgentlabError, cause: Exception) -> AgentlabError:
    err.__cause__ = cause  # as ``raise err from cause`` would: the traceback shows the last failure
    return err

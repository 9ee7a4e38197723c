"""Retries with exponential backoff and jitter, bounded by the run's deadline.

A hand-written 30 lines rather than tenacity: every wait must be checked
against the time left (a wait that would pass the deadline stops the run at
once instead of sleeping), honour ``retry_after`` from the upstream, and go
through the injected clock so tests are exact and instant.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .errors import AgentlabError, RetryableError, safe_str

T = TypeVar("T")


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
    attempt: Callable[[], Awaitable[T]],
    *,
    is_retryable: Callable[[BaseException], bool],
    max_attempts: int,
    wait_for: Callable[[int, BaseException], float],
    sleep: Callable[[float], Awaitable[None]],
    time_left: Callable[[], float | None],
    on_retry: Callable[[int, BaseException, float], None],
) -> tuple[T, int]:
    """Call ``attempt()`` until it succeeds; return (value, attempts made)."""
    n = 0
    while True:
        n += 1
        try:
            return await attempt(), n
        except DeadlineExceeded:
            raise
        except Exception as exc:
            if not is_retryable(exc):
                raise
            if n >= max_attempts:
                raise RetriesExhausted(exc, n) from exc
            hinted = exc.retry_after if isinstance(exc, RetryableError) else None
            wait = hinted if hinted is not None else wait_for(n, exc)
            left = time_left()
            if left is not None and wait >= left:
                raise DeadlineExceeded(
                    f"a retry wait of {wait:.1f}s after {type(exc).__name__}: {safe_str(exc)} would pass the deadline "
                    f"({left:.1f}s left)"
                ) from exc
            on_retry(n, exc, wait)
            await sleep(wait)

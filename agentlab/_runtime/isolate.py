"""Run a tool's or a model's code so that nothing it does can take the engine with it.

A tool may raise anything, ignore its cancellation, or never return. The
engine therefore never awaits such code directly:

* :func:`start` runs it as its own task (async code) or on an abandonable
  daemon thread (sync code, :mod:`agentlab._runtime.threads`), and either way turns
  whatever it raises into data: an ``(ok, value)`` pair. ``SystemExit`` or
  ``KeyboardInterrupt`` raised inside a task would otherwise leave the event
  loop itself; ``StopIteration`` cannot cross a coroutine or a future.
* :func:`settle` waits for that pair with a time limit. When the limit
  passes, or the step waiting is cancelled, the work is cancelled and given
  :data:`GRACE_S` to finish; work that still has not finished (it swallowed
  its cancellation, or it is a thread Python cannot stop) is *abandoned*:
  nobody waits for it, and ``on_abandon`` names it so the run's result can
  say what was left running.

The ordinary ``Exception`` family is re-raised as itself (the retry policy
needs the real type); the rest travels as :class:`~agentlab.errors.Escaped`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from ..errors import Escaped
from .threads import run_on_daemon_thread
from .watchdog import handoff

GRACE_S = 0.02
"""How long cancelled work may take to finish before it is abandoned (seconds)."""

_abandoned: set[asyncio.Future[Any]] = set()
"""Abandoned tasks, kept referenced so the garbage collector does not complain about them."""


@handoff("code")
async def _capture(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    try:
        return True, await coro
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # a real cancellation, asked for by the engine
        return False, exc  # the code raised CancelledError on its own: a failure, not a stop
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, GeneratorExit... become data
        return False, exc


def start(work: Callable[[], Any], is_async: bool) -> asyncio.Future[tuple[bool, Any]]:
    """Begin ``work()``: a coroutine function's coroutine as a task, a plain function on a daemon thread."""
    if not is_async:
        return run_on_daemon_thread(work)
    try:
        coro = work()
    except BaseException as exc:  # noqa: BLE001 - calling it raised before any await
        fut: asyncio.Future[tuple[bool, Any]] = asyncio.get_running_loop().create_future()
        fut.set_result((False, exc))
        return fut
    if not asyncio.iscoroutine(coro):  # a function that returned a value (or an awaitable object)
        return asyncio.ensure_future(_capture(_await(coro)))
    return asyncio.ensure_future(_capture(coro))


async def _await(value: Any) -> Any:
    return await value if hasattr(value, "__await__") else value


async def inline(work: Callable[[], Any], timeout: float | None) -> tuple[bool, Any]:
    """Await ``work()`` in the calling task, within ``timeout``; what it raises becomes data.

    Cheaper than :func:`start` (no task of its own), for code trusted to
    honour its cancellation (the model adapters): code that swallows it would
    hold the caller. ``TimeoutError`` is raised only when *our* timeout expired.
    """
    cm = asyncio.timeout(timeout)
    try:
        async with cm:
            return True, await work()
    except TimeoutError as exc:
        if cm.expired():
            raise
        return False, exc
    except asyncio.CancelledError:
        raise  # trusted code raising it means "stopped" (a stream cut short by Stop): honoured as a cancel
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt... become data
        return False, exc


def unwrap(outcome: tuple[bool, Any], where: str) -> Any:
    """The value of an ``(ok, value)`` pair, or raise what it holds (in a form that can travel)."""
    ok, value = outcome
    if ok:
        return value
    if isinstance(value, Exception) and not isinstance(value, (StopIteration, StopAsyncIteration)):
        raise value
    raise Escaped(value, where)


async def in_thread(fn: Callable[[], Any], where: str) -> Any:
    """``fn()`` on an abandonable daemon thread; its value, or what it raised (in a form that can travel)."""
    return unwrap(await run_on_daemon_thread(fn), where)


async def settle(
    fut: asyncio.Future[tuple[bool, Any]], timeout: float | None, on_abandon: Callable[[], None]
) -> tuple[bool, Any]:
    """Wait for ``fut`` at most ``timeout`` seconds; raise ``TimeoutError`` when it passes.

    On the timeout, or when the waiting task is cancelled, ``fut`` is let go
    of (see :func:`let_go`) before the exception leaves.
    """
    try:
        done, _ = await asyncio.wait({fut}, timeout=timeout)
    except asyncio.CancelledError:
        await let_go(fut, on_abandon)
        raise
    if not done:
        await let_go(fut, on_abandon)
        raise TimeoutError
    return fut.result()


def is_abandoned(fut: asyncio.Future[Any]) -> bool:
    """Was ``fut`` abandoned (it had its chance to finish after a cancel, and did not)?"""
    return fut in _abandoned


async def let_go(fut: asyncio.Future[Any], on_abandon: Callable[[], None]) -> None:
    """Cancel ``fut``; if it has not finished within :data:`GRACE_S`, abandon it and say so."""
    if fut.done():
        return
    if isinstance(fut, asyncio.Task):
        fut.cancel()
        await asyncio.wait({fut}, timeout=GRACE_S)
    if not fut.done():
        _abandoned.add(fut)
        fut.add_done_callback(_abandoned.discard)
        on_abandon()

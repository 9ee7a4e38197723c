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
import contextvars
import types
from collections.abc import Callable, Coroutine, Generator
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


def _done(ok: bool, value: Any) -> asyncio.Future[tuple[bool, Any]]:
    fut: asyncio.Future[tuple[bool, Any]] = asyncio.get_running_loop().create_future()
    fut.set_result((ok, value))
    return fut


@handoff("code")  # a coroutine's first step runs inside it
def start(work: Callable[[], Any], is_async: bool) -> asyncio.Future[tuple[bool, Any]]:
    """Begin ``work()``: a coroutine function's coroutine as a task, a plain function on a daemon thread.

    A coroutine's first step runs at once, as an eager task's would (Python 3.12's
    ``eager_task_factory``): most tools answer without ever waiting, and then no task is made and
    no loop turn is spent (the hot loop's largest saving). A coroutine that does wait is handed,
    mid-flight, to a task of its own (in the same context), and is from then on like any other.
    """
    if not is_async:
        return run_on_daemon_thread(work)
    try:
        coro = work()
    except BaseException as exc:  # noqa: BLE001 - calling it raised before any await
        return _done(False, exc)
    if not asyncio.iscoroutine(coro):  # a function that returned a value (or an awaitable object)
        return asyncio.ensure_future(_capture(_await(coro)))
    context = contextvars.copy_context()  # the tool's context vars never leak into the engine's
    try:
        yielded = context.run(coro.send, None)
    except StopIteration as stop:
        return _done(True, stop.value)
    except BaseException as exc:  # noqa: BLE001 - its own CancelledError too: nobody cancelled it yet
        return _done(False, exc)
    return asyncio.get_running_loop().create_task(_capture(_resume(coro, yielded)), context=context)


@handoff("code")
@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """Go on with a coroutine whose first step already ran, ``yielded`` being what that step gave
    the event loop (a future to wait for): what the task sends or throws is passed through."""
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:  # noqa: BLE001 - thrown in by the task (its cancellation): the code's to handle
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            yielded = coro.send(sent)
        except StopIteration as stop:
            return stop.value


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
    if fut.done():  # it answered at once (see start): no timer, no loop turn
        return fut.result()
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

"""Run a tool's or a model's code so that nothing it does can take the engine with it.

A tool may raise anything, ignore its cancellation, or never return. The
engine therefore never awaits such code directly. :func:`run` runs it (an
async tool's coroutine in its own task, a sync tool on an abandonable daemon
thread, :mod:`agentlab._runtime.threads`) within a time limit, and says how
it ended as a value, one of :data:`Settled`:

* :class:`Returned` - its value;
* :class:`Raised` - what it raised, as an ordinary ``Exception``: the
  ordinary family as itself (the retry policy needs the real type), the rest
  (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``, a
  ``CancelledError`` it raised on its own, ``StopIteration``, which no future
  or coroutine can carry) wrapped in :class:`~agentlab.errors.Escaped`;
* :class:`TimedOut` - the limit passed first. The work was cancelled and
  given :data:`GRACE_S` to finish; work that still had not (it swallowed its
  cancellation, or it is a thread Python cannot stop) is *abandoned*: nobody
  waits for it, and ``on_abandon`` names it so the run's result can say what
  was left running. The same happens when the step waiting is cancelled.

A coroutine's first step runs at once (as an eager task's would, Python
3.12's ``eager_task_factory``): an async tool that answers without waiting
needs no task of its own. A sync tool always runs on a worker thread, its
answer awaited through a future.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import types
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

from ..errors import Escaped
from . import threads
from .watchdog import handoff

GRACE_S = 0.02
"""How long cancelled work may take to finish before it is abandoned (seconds)."""

QUICK_S = 0.0005
"""How long the loop's thread may wait on the worker for a sync call alone in its turn, before it follows the
call with a future: a tool that answers at once then costs no wake-up of the event loop (docs/benchmarks.md)."""

_abandoned: set[asyncio.Future[Any]] = set()
"""Abandoned tasks and futures, kept referenced so the garbage collector does not complain about them."""


@dataclass(frozen=True, slots=True)
class Returned:
    """The code returned ``value``."""

    value: Any


@dataclass(frozen=True, slots=True)
class Raised:
    """The code raised ``error`` (see :func:`caught` for the form it travels in)."""

    error: Exception


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The time limit passed before the code ended (it was cancelled, or abandoned and named)."""


Settled = Returned | Raised | TimedOut


def caught(exc: BaseException, where: str) -> Raised:
    """What the code raised, in a form that can travel: an ``Exception`` as itself, the rest as ``Escaped``."""
    if isinstance(exc, Exception) and not isinstance(exc, (StopIteration, StopAsyncIteration)):
        return Raised(exc)
    return Raised(Escaped(exc, where))


def _ended(job: threads.Job, where: str) -> Returned | Raised:
    return Returned(job.value) if job.ok else caught(job.value, where)


@handoff("code")  # a coroutine's first step, or the wait for a sync call, runs inside it
async def run(
    work: Callable[[], Any],
    *,
    is_async: bool,
    timeout: float | None,
    where: str,
    on_abandon: Callable[[], None],
    context: contextvars.Context | None = None,
    alone: bool = False,
) -> Settled:
    """Run ``work()`` within ``timeout`` seconds (``None``: no limit); how it ended, as a value.

    ``alone``: a sync call that is the only one of its turn, waited for up to :data:`QUICK_S` on its worker
    before the wait goes to the event loop (nothing else of the turn is kept waiting meanwhile).

    ``context``: the context the code runs in, whatever runs it (used once);
    by default async code runs in a copy of the caller's, sync code in its
    worker thread's own.
    """
    fut: asyncio.Future[Any]
    if not is_async:
        job = threads.submit(work if context is None else functools.partial(context.run, work), near=alone)
        if alone and job.wait(QUICK_S if timeout is None else min(QUICK_S, timeout)):
            return _ended(job, where)
        fut = job.future()
        settled = await _settle(fut, timeout, on_abandon)
        return settled or _ended(job, where)
    if context is None:
        context = contextvars.copy_context()  # the tool's context vars never leak into the engine's
    try:
        coro = context.run(work)
    except BaseException as exc:  # noqa: BLE001 - calling it raised before any await
        return caught(exc, where)
    if type(coro) is not types.CoroutineType and not asyncio.iscoroutine(coro):  # a value, or an awaitable
        fut = asyncio.get_running_loop().create_task(_capture(_await(coro), where), context=context)
    else:
        try:
            yielded = context.run(coro.send, None)
        except StopIteration as stop:
            return Returned(stop.value)
        except BaseException as exc:  # noqa: BLE001 - its own CancelledError too: nobody cancelled it yet
            return caught(exc, where)
        # It waits for something: hand it, mid-flight, to a task of its own (in the same context).
        fut = asyncio.get_running_loop().create_task(_capture(_resume(coro, yielded), where), context=context)
    settled = await _settle(fut, timeout, on_abandon)
    return settled or fut.result()


async def _settle(fut: asyncio.Future[Any], timeout: float | None, on_abandon: Callable[[], None]) -> TimedOut | None:
    """Wait for ``fut`` at most ``timeout`` seconds: ``None`` when it is done, else :class:`TimedOut`.

    On the timeout, or when the waiting task is cancelled, ``fut`` is let go
    of (see :func:`let_go`) before this returns or the cancellation leaves.
    """
    if not fut.done():
        try:
            done, _ = await asyncio.wait({fut}, timeout=timeout)
        except asyncio.CancelledError:
            await let_go(fut, on_abandon)
            raise
        if not done:
            await let_go(fut, on_abandon)
            return TimedOut()
    return None


@handoff("code")
async def _capture(coro: Coroutine[Any, Any, Any], where: str) -> Returned | Raised:
    try:
        return Returned(await coro)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # a real cancellation, asked for by the engine
        return caught(exc, where)  # the code raised CancelledError on its own: a failure, not a stop
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, GeneratorExit... become data
        return caught(exc, where)


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


@types.coroutine
def one_turn() -> Generator[None, None, None]:
    """``await one_turn()``: what ``await asyncio.sleep(0)`` does (the task yields to the event loop for one
    turn), without its two frames."""
    yield


async def _await(value: Any) -> Any:
    return await value if hasattr(value, "__await__") else value


async def inline(work: Callable[[], Any], timeout: float | None, where: str) -> Settled:
    """Await ``work()`` in the calling task, within ``timeout``; how it ended, as a value.

    Unlike :func:`run` it makes no task of its own: for code trusted to honour
    its cancellation (the model adapters): code that swallows it would hold
    the caller. A ``CancelledError`` it raises is taken as a cancel (a stream
    cut short by Stop) and leaves as itself.

    Its first step runs before any timer is set: code that answers
    without waiting (an offline model, a replay) needs none; code that waits
    goes on under the same limit, counted from the start (``timeout_at``), in
    the same task and context.
    """
    loop = asyncio.get_running_loop()
    end = None if timeout is None else loop.time() + timeout
    try:
        awaitable = work()
        if asyncio.iscoroutine(awaitable):
            try:
                yielded = awaitable.send(None)
            except StopIteration as stop:
                return Returned(stop.value)
            awaitable = _resume(awaitable, yielded)
        cm = asyncio.timeout_at(end)  # any other awaitable (or not: await raises TypeError) is awaited as it is
        try:
            async with cm:
                return Returned(await awaitable)
        except TimeoutError as exc:
            return TimedOut() if cm.expired() else caught(exc, where)
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt... become data
        return caught(exc, where)


async def in_thread(fn: Callable[[], Any], where: str) -> Any:
    """``fn()`` on an abandonable daemon thread, with no time limit of its own; its value, or raise
    what it raised (in a form that can travel). The caller bounds the wait (cancelling it abandons)."""
    out = await run(fn, is_async=False, timeout=None, where=where, on_abandon=lambda: None)
    if isinstance(out, Raised):
        raise out.error
    assert isinstance(out, Returned)  # no timeout, so it returned or raised
    return out.value


def is_abandoned(fut: asyncio.Future[Any]) -> bool:
    """Was ``fut`` abandoned (it had its chance to finish after a cancel, and did not)?"""
    return fut in _abandoned


async def let_go(fut: asyncio.Future[Any], on_abandon: Callable[[], None]) -> None:
    """Cancel ``fut``; if it has not finished within :data:`GRACE_S`, abandon it and say so.

    The caller being cancelled during the grace (a sibling call's stop cancels
    the rest of its turn) does not cut it short: the grace runs out, ``fut`` is
    abandoned if it must be, and then the cancellation goes on. Cut short, the
    work would be neither finished nor abandoned, and the driver, closing the
    loop, would wait for it as for any live task.
    """
    if fut.done():
        return
    interrupted: asyncio.CancelledError | None = None
    if isinstance(fut, asyncio.Task):
        fut.cancel()
        loop = asyncio.get_running_loop()
        end = loop.time() + GRACE_S
        while not fut.done() and (left := end - loop.time()) > 0:
            try:
                await asyncio.wait({fut}, timeout=left)
            except asyncio.CancelledError as exc:
                interrupted = interrupted or exc
    if not fut.done():
        _abandoned.add(fut)
        fut.add_done_callback(_abandoned.discard)
        on_abandon()
    if interrupted is not None:
        raise interrupted

"""Offline models: replies from a function or a script, no network, no key.

They are public API (pydantic-ai's ``FunctionModel``, httpx's
``MockTransport``): users build lessons and tests with them. Replies may omit
``usage``; the engine then estimates tokens from the request and the reply,
so an offline run's cost grows with its context just as a real run's does.

Like a real model, an offline model honours ``max_tokens``: a reply longer
than the request allows comes back cut off with ``stop_reason="max_tokens"``.

With ``stream=N`` an offline model streams as Claude does: each reply is
handed to the engine in fragments of ``N`` characters, ``chunk_delay``
seconds apart on the given clock (a ``FakeClock`` makes that instant in
tests, a real one makes the offline notebooks show text growing).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from .._checks import is_whole
from ..clock import Clock, SystemClock
from ..messages import CHARS_PER_TOKEN, Message, estimate_tokens
from .base import ModelRequest
from .streaming import chunk_reply

DEFAULT_PRICED_AS = "claude-sonnet-4-5"

Call = tuple[str, dict[str, Any]]


def reply(
    text: str | None = None,
    *calls: Call,
    stop_reason: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A reply in Messages API shape: optional text, then tool calls.

    ``reply("Done.")`` ends the run; ``reply(None, ("get_order", {"id": 7}))``
    asks for a tool. Tool-use ids are filled in by the model that sends it.
    """
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    for name, args in calls:
        content.append({"type": "tool_use", "name": name, "input": args})
    out: dict[str, Any] = {"role": "assistant", "content": content}
    out["stop_reason"] = stop_reason or ("tool_use" if calls else "end_turn")
    if usage is not None:
        out["usage"] = usage
    return out


class FunctionModel:
    """A model whose replies come from ``fn(messages, tools)`` (sync or async).

    ``fn`` may also take a third argument, the full :class:`ModelRequest`.
    ``model`` is the id whose prices the run is charged at (offline runs
    cost what the same tokens would cost on that model). ``stream`` (chars
    per fragment), ``chunk_delay`` and ``clock`` make it stream its replies.
    ``count_tokens(request) -> int`` (sync or async), when given, counts a
    request's input tokens exactly, so the hard cost guard checks the exact
    cost near the limit instead of a bound (see docs/cost-guard.md).
    """

    count_tokens: Callable[[ModelRequest], Awaitable[int]]
    """Present only when a ``count_tokens`` function was given: the engine asks only models that can count."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        model: str = DEFAULT_PRICED_AS,
        name: str | None = None,
        stream: int | None = None,
        chunk_delay: float = 0.0,
        clock: Clock | None = None,
        count_tokens: Callable[[ModelRequest], int | Awaitable[int]] | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel needs a function, got {type(fn).__name__}")
        if count_tokens is not None:
            if not callable(count_tokens):
                raise TypeError(
                    "count_tokens must be a function of the request returning an int, got "
                    f"{type(count_tokens).__name__}"
                )
            counter = count_tokens

            async def count(request: ModelRequest) -> int:
                n = counter(request)
                if inspect.isawaitable(n):
                    n = await n
                if not is_whole(n, 0):
                    raise TypeError(f"count_tokens must return an int >= 0, got {n!r}")
                return n

            self.count_tokens = count
        if stream is not None and not is_whole(stream, 1):
            raise ValueError(f"stream must be a number of characters per fragment (>= 1) or None, got {stream!r}")
        if not isinstance(chunk_delay, (int, float)) or chunk_delay < 0:
            raise ValueError(f"chunk_delay must be seconds >= 0, got {chunk_delay!r}")
        self.stream = stream
        self.chunk_delay = float(chunk_delay)
        self.clock: Clock = clock or SystemClock()
        self.fn = fn
        self.model = model
        self.name = name or getattr(fn, "__name__", "function")
        params = inspect.signature(fn).parameters
        self._wants_request = len(params) >= 3
        self._ids = itertools.count(1)
        self.calls = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} priced as {self.model}>"

    async def complete(self, request: ModelRequest) -> Any:
        """Call the function with the history, the tool schemas and the request; the reply with estimated usage."""
        self.calls += 1
        args = (request.messages, request.tools, request) if self._wants_request else (request.messages, request.tools)
        out = self.fn(*args)
        if type(out) is not dict and inspect.isawaitable(out):  # (a dict, the usual reply, is never awaitable)
            out = await out
        if isinstance(out, dict):
            out = self._fill_ids(out)
            out = _truncate(out, request.max_tokens)
            if self.stream and request.on_delta is not None and isinstance(out.get("content"), list):
                for delta in chunk_reply(out["content"], self.stream):
                    if self.chunk_delay:
                        await self.clock.sleep(self.chunk_delay)
                    request.on_delta(*delta)
        return out

    def _fill_ids(self, out: dict[str, Any]) -> dict[str, Any]:
        content = out.get("content")
        if not isinstance(content, list):
            return out
        for block in content:  # (a loop, not any(): this runs on every reply)
            if isinstance(block, dict) and "id" not in block and block.get("type") == "tool_use":
                break
        else:
            return out  # every call has its id (or there is none): nothing to copy
        filled = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use" and "id" not in block:
                block = {**block, "id": f"toolu_{next(self._ids):04d}"}
            filled.append(block)
        return {**out, "content": filled}


def _truncate(out: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """Cut a reply to ``max_tokens`` the way the API does: text kept, calls lost."""
    content = out.get("content")
    if not isinstance(content, list) or "usage" in out or estimate_tokens(content) <= max_tokens:
        return out
    budget = max(0, max_tokens * CHARS_PER_TOKEN - 40)  # room for the block's own JSON
    kept: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text" or budget <= 0:
            break
        text = block.get("text", "")[:budget]
        budget -= len(text)
        kept.append({"type": "text", "text": text})
    if not kept:
        kept = [{"type": "text", "text": ""}]
    return {**out, "content": kept, "stop_reason": "max_tokens"}


class ScriptedModel(FunctionModel):
    """A fixed sequence of replies; each item is a reply or ``fn(messages, tools)``.

    Running past the end of the script raises a clear error (the run stops
    with reason ``"model error"``), never an ``IndexError`` from deep inside.
    """

    def __init__(
        self,
        replies: Iterable[Any],
        *,
        model: str = DEFAULT_PRICED_AS,
        name: str = "scripted",
        stream: int | None = None,
        chunk_delay: float = 0.0,
        clock: Clock | None = None,
    ) -> None:
        self.replies: Sequence[Any] = list(replies)
        super().__init__(self._next, model=model, name=name, stream=stream, chunk_delay=chunk_delay, clock=clock)

    def _next(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any:
        from ..errors import ModelError

        i = self.calls - 1
        if i >= len(self.replies):
            raise ModelError(f"ScriptedModel ran out of replies after {len(self.replies)} calls")
        item = self.replies[i]
        return item(messages, tools) if callable(item) else item

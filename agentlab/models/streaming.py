"""Streaming replies: the Messages API's server-sent events folded back into one message.

Pure logic, no I/O: :class:`StreamAssembler` takes the stream's events as
decoded JSON dicts (``message_start``, ``content_block_start`` /
``content_block_delta`` / ``content_block_stop``, ``message_delta``,
``message_stop``) and builds the same message a non-streamed call returns,
block for block. Each text, thinking or tool-input fragment is also handed
back as a :class:`Delta` so the caller can show it as it arrives.

Tool input arrives as fragments of JSON (``input_json_delta``); it is parsed
once, when its block stops. Input that does not parse then is a malformed
reply, with the raw text kept in the error (unless the reply was cut at
``max_tokens``, which may end inside a tool's input: that is a max_tokens stop).

:func:`chunk_reply` does the reverse for offline models: a finished reply cut
into the deltas a stream would have carried, so scripted runs show the same
growing text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any

import orjson

from ..errors import AgentlabError
from ..messages import Block, MalformedReply, Usage, estimate_tokens
from ..pricing import Prices

DeltaKind = str  # "text" | "thinking" | "tool_input"
OnDelta = Callable[[int, DeltaKind, str], None]
"""``on_delta(index, kind, text)``: one fragment of content block ``index`` as it arrives."""

TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


Delta = tuple[int, DeltaKind, str]
"""``(index, kind, text)``: one fragment of content block ``index``."""


async def sse_batches(chunks: AsyncIterator[bytes]) -> AsyncGenerator[list[bytes], None]:
    """The ``data`` of the server-sent events in a byte stream, one list per chunk read
    (``ping`` and comments skipped; chunks that finish no event yield nothing).

    A small parser of the SSE framing (events end with a blank line; ``data:``
    lines of one event are joined by newlines), several times cheaper per event
    than a general decoder: a 2,000-token reply is some 500 events. Events that
    came in one read are handed back together, so the caller pays the generator's
    step once per read, not once per event.
    """
    buf = b""
    async for chunk in chunks:
        if buf:
            chunk = buf + chunk
        if b"\n\n" not in chunk and b"\r\n\r\n" not in chunk:
            buf = chunk
            continue
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n")
        end = chunk.find(b"\n\n")
        if end == len(chunk) - 2:  # the usual read: exactly one whole event
            buf = b""
            data = event_data(chunk[:end])
            if data is not None:
                yield [data]
            continue
        *events, buf = chunk.split(b"\n\n")
        out = [d for d in map(event_data, events) if d is not None]
        if out:
            yield out


async def sse_data(chunks: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    """The ``data`` of each server-sent event in a byte stream, one at a time (see :func:`sse_batches`)."""
    async for batch in sse_batches(chunks):
        for data in batch:
            yield data


def event_data(event: bytes) -> bytes | None:
    """The ``data`` of one server-sent event (its lines, without the blank line that ends it);
    ``None`` for a ``ping``, a comment, or an event without data.

    The common case (one ``data:`` line) is two ``find`` calls and a slice.
    """
    if event.startswith(b"data:"):
        i = 0
    else:
        i = event.find(b"\ndata:") + 1
        if not i:
            return None
    j = event.find(b"\n", i)
    if j < 0:
        line = event[i + 5:]
    elif event.find(b"\ndata:", j) < 0:
        line = event[i + 5:j]
    else:  # several data lines: joined by newlines, as the SSE spec says
        lines = [ln[5:].lstrip(b" ") if ln[5:6] == b" " else ln[5:] for ln in event.split(b"\n") if ln.startswith(b"data:")]
        return None if b'"type":"ping"' in lines[0] else b"\n".join(lines)
    if line[:1] == b" ":
        line = line.lstrip(b" ")
    return None if b'"type":"ping"' in line else line


def feed_batch(acc: StreamAssembler, batch: list[bytes], on_delta: OnDelta | None) -> None:
    """Feed the events of one read to ``acc``; hand their fragments to ``on_delta``.

    Consecutive fragments of one content block in the same read go out as one
    fragment (the watcher sees the same characters in the same order, with one
    call instead of many); a read that carries a single fragment, like the
    stream's first, goes out at once. Fragments are handed on before any other
    event is taken, so an ``error`` event cannot hide what came before it.
    """
    loads = orjson.loads
    if len(batch) == 1 or on_delta is None:
        for data in batch:
            delta = acc.feed(loads(data))
            if delta is not None and on_delta is not None:
                on_delta(*delta)
        return
    index, kind, texts = -1, "", []
    for data in batch:
        event = loads(data)
        if event.get("type") == "content_block_delta":
            delta = acc.feed(event)
            if delta is None:
                continue
            if delta[0] == index and delta[1] == kind:
                texts.append(delta[2])
                continue
            if texts:
                on_delta(index, kind, "".join(texts))
            index, kind, texts = delta[0], delta[1], [delta[2]]
            continue
        if texts:
            on_delta(index, kind, "".join(texts))
            index, kind, texts = -1, "", []
        acc.feed(event)
    if texts:
        on_delta(index, kind, "".join(texts))


class StreamError(AgentlabError):
    """An ``error`` event inside a streamed reply (the body of an HTTP error, sent after a 200)."""

    def __init__(self, body: dict[str, Any]) -> None:
        found = body.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        self.body = body
        self.error_type = str(error.get("type") or "api_error")
        self.message = str(error.get("message") or "")
        super().__init__(f"{self.error_type}: {self.message}")


class StreamAssembler:
    """Folds stream events into a message dict; see the module docstring."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, Block] = {}
        self._json: dict[int, list[str]] = {}
        self._text: dict[tuple[int, str], list[str]] = {}  # (index, "text" | "thinking") -> fragments
        self.stopped = False  # message_stop seen
        self.deltas = 0
        self.broken: dict[int, tuple[str, str]] = {}  # tool input that did not parse: (problem, raw text)

    def feed(self, event: dict[str, Any]) -> Delta | None:
        """Take one event; return the fragment it carries for display, if any."""
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            index = int(event["index"])
            block = dict(event.get("content_block") or {})
            if block.get("type") in TOOL_BLOCKS:
                self._json[index] = []
            self.blocks[index] = block
        elif kind == "content_block_stop":
            self._close(int(event["index"]))
        elif kind == "message_start":
            self.message = dict(event.get("message") or {})
            self.message["usage"] = dict(self.message.get("usage") or {})
        elif kind == "message_delta":
            for key, value in (event.get("delta") or {}).items():
                if value is not None or key not in self.message:
                    self.message[key] = value
            usage = self.message.setdefault("usage", {})
            usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            raise StreamError(event)
        return None

    def _delta(self, event: dict[str, Any]) -> Delta | None:
        index = event["index"]
        if type(index) is not int:
            index = int(index)
        delta = event.get("delta") or {}
        dt = delta.get("type")
        if dt == "text_delta" or dt == "thinking_delta":
            kind = "text" if dt == "text_delta" else "thinking"
            text = delta.get(kind, "")
            parts = self._text.get((index, kind))
            if parts is None:  # text kept as parts, joined once at the end (not copied per fragment)
                self.blocks.setdefault(index, {"type": "text", "text": ""})
                parts = self._text[(index, kind)] = []
            parts.append(text)
            self.deltas += 1
            return (index, kind, text)
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        if dt == "input_json_delta":
            text = delta.get("partial_json", "")
            self._json.setdefault(index, []).append(text)
            self.deltas += 1
            return (index, "tool_input", text)
        if dt == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif dt == "citations_delta":
            citations = block.get("citations") or []
            block["citations"] = [*citations, delta.get("citation")]
        return None

    def _close(self, index: int) -> None:
        parts = self._json.pop(index, None)
        if parts is None:
            return
        block = self.blocks[index]
        raw = "".join(parts)
        if not raw.strip():
            block["input"] = block.get("input") or {}
            return
        try:
            value = json.loads(raw)
        except ValueError as exc:
            value = None
            why = f"not valid JSON ({exc})"
        else:
            why = "not an object"
        if not isinstance(value, dict):
            # Judged at the end: a reply cut at max_tokens may end inside a tool's input.
            self.broken[index] = (f"{block.get('type')} block {index} ({block.get('name')}): its streamed input is {why}", raw)
            block["input"] = {}
            return
        block["input"] = value

    def result(self) -> dict[str, Any]:
        """The assembled message (call after ``message_stop``)."""
        for index in list(self._json):  # a tool block never closed: parse what came
            self._close(index)
        for (index, key), parts in self._text.items():
            block = self.blocks[index]
            block[key] = block.get(key, "") + "".join(parts)
        self._text.clear()
        message = {**self.message, "content": [self.blocks[i] for i in sorted(self.blocks)]}
        if self.broken and message.get("stop_reason") != "max_tokens":
            problem, raw = next(iter(self.broken.values()))
            raise MalformedReply(problem, {**message, "partial_json": raw})
        return message

    def partial_text(self) -> str:
        """The text received so far (for a stream cut short)."""
        return "".join(b.get("text", "") + "".join(self._text.get((i, "text"), ())) for i, b in sorted(self.blocks.items()) if b.get("type") == "text")


class Fragments:
    """An ``on_delta`` that keeps the fragments of one reply as they arrive, so a stream cut
    short can still be shown and charged.

    Each fragment is also passed to ``forward`` (the engine emits it as a
    ``model_delta``), and when ``stopped()`` turns true (Stop pressed from a
    subscriber) the call raises ``CancelledError``, which closes the stream at once.
    """

    def __init__(self, forward: OnDelta | None = None, stopped: Callable[[], bool] | None = None) -> None:
        self._parts: dict[int, list[str]] = {}
        self.forward = forward
        self.stopped = stopped

    def __call__(self, index: int, kind: DeltaKind, text: str) -> None:
        self.add(index, kind, text)
        if self.forward is not None:
            self.forward(index, kind, text)
        if self.stopped is not None and self.stopped():
            raise asyncio.CancelledError("stopped mid-stream")

    def add(self, index: int, kind: DeltaKind, text: str) -> None:
        self._parts.setdefault(index, [kind]).append(text)

    def content(self) -> list[Block]:
        """The partial blocks: text and thinking as received, tool input as its raw partial JSON."""
        out: list[Block] = []
        for index in sorted(self._parts):
            kind, *texts = self._parts[index]
            whole = "".join(texts)
            if kind == "text":
                out.append({"type": "text", "text": whole})
            elif kind == "thinking":
                out.append({"type": "thinking", "thinking": whole})
            else:
                out.append({"type": "tool_input", "partial_json": whole})
        return out


def cut_short(fragments: Fragments, est_input_tokens: int, max_tokens: int, prices: Prices | None) -> dict[str, Any] | None:
    """The ``model_called`` data of a reply cut short (Stop, the deadline), or ``None`` if nothing arrived.

    The API bills the tokens generated before the cut, but the final usage
    never came: input is charged as the cost guard estimated it, output from
    the fragments received, and the event says both are estimates.
    """
    content = fragments.content()
    if not content:
        return None
    usage = Usage(input_tokens=est_input_tokens, output_tokens=min(estimate_tokens(content), max_tokens))
    return {
        "content": content, "usage": usage.as_dict(), "estimated": True, "partial": True,
        "cost": prices.cost(usage) if prices else 0.0, "server_tool_cost": 0.0, "request_id": None,
        "context_tokens": usage.context_tokens, "max_tokens": max_tokens,
    }


# ---------------------------------------------------------------- offline
def chunk_reply(content: list[Block], chunk_chars: int) -> Iterator[Delta]:
    """The deltas a stream would carry for ``content``: text, thinking and tool input in pieces."""
    if chunk_chars < 1:
        raise ValueError(f"chunk_chars must be >= 1, got {chunk_chars!r}")
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            kind, whole = "text", str(block.get("text", ""))
        elif kind == "thinking":
            kind, whole = "thinking", str(block.get("thinking", ""))
        elif kind in TOOL_BLOCKS:
            kind, whole = "tool_input", json.dumps(block.get("input", {}), ensure_ascii=False)
        else:
            continue
        for start in range(0, len(whole), chunk_chars):
            yield (index, kind, whole[start:start + chunk_chars])

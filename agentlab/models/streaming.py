"""Streaming replies: the SDK parses and assembles the stream; this hands each fragment on as it arrives.

The ``anthropic`` SDK owns the wire: its SSE decoder reads the bytes (pings
and comments by event name, never by what the data contains), and its
accumulator (``accumulate_event``, the one ``MessageStream`` uses) folds the
events into the message, block for block, so every block and delta type the
SDK knows (text, thinking and signatures, tool input as partial JSON,
citations, compaction summaries, fallback blocks, ``context_management``,
the serving model) reaches the trace and goes back to the API without a
change here. :class:`StreamAssembler` wraps that accumulator and keeps only
what the SDK does not do: each fragment handed back as a :class:`Delta` for
subscribers, tool input that will not parse judged at the end (a reply cut at
``max_tokens`` may end inside a tool's input, which the SDK keeps as far as
it parses), and the count of fragments shown (a stream that breaks after
some were shown is not retried).

:class:`Fragments` keeps what was shown, so a stream cut short (Stop, the
deadline) can be traced and charged (:func:`cut_short`); :func:`chunk_reply`
cuts a finished reply into the deltas a stream would carry, for offline models.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import AgentlabError
from ..messages import Block, MalformedReply, Usage, estimate_tokens
from ..pricing import Prices

DeltaKind = str  # "text" | "thinking" | "tool_input" | "compaction" | "citation" | a newer delta's name
OnDelta = Callable[[int, DeltaKind, str], None]
"""``on_delta(index, kind, text)``: one fragment of content block ``index`` as it arrives."""

TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})

Delta = tuple[int, DeltaKind, str]
"""``(index, kind, text)``: one fragment of content block ``index``."""

ASSEMBLED_EVENTS = frozenset(
    {"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta"}
)
"""The events the SDK's accumulator folds into the message; others (``ping``, types newer than the SDK) are skipped."""

DELTA_TEXT = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "input_json_delta": ("tool_input", "partial_json"),
    "compaction_delta": ("compaction", "content"),
}
"""Delta type -> (fragment kind, the field holding its text). Any other delta but signatures is handed on as JSON."""


class StreamError(AgentlabError):
    """An ``error`` event inside a streamed reply (the body of an HTTP error, sent after a 200)."""

    def __init__(self, body: dict[str, Any]) -> None:
        found = body.get("error")
        error: dict[str, Any] = found if isinstance(found, dict) else {}
        self.body = body
        self.error_type = str(error.get("type") or "api_error")
        self.message = str(error.get("message") or "")
        super().__init__(f"{self.error_type}: {self.message}")


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


class StreamAssembler:
    """The SDK's stream accumulator, with fragments handed back as they arrive; see the module docstring.

    ``feed`` takes an event as the SDK's stream yields it (a typed event) or as
    decoded JSON (a dict); ``result`` is the message as a dict, the same shape
    a non-streamed call returns.
    """

    def __init__(self, request_headers: Any = None) -> None:
        import httpx2

        self._snapshot: Any = None
        self._json: dict[int, bytes] = {}
        self._headers = request_headers if request_headers is not None else httpx2.Headers()
        self.stopped = False  # message_stop seen
        self.deltas = 0
        self.broken: dict[int, tuple[str, str]] = {}  # tool input that did not parse: (problem, raw text)
        self.cut_inputs: list[int] = []  # tool blocks whose input max_tokens cut: kept as far as it parsed

    def feed(self, event: Any) -> Delta | None:
        """Take one event; return the fragment it carries for display, if any."""
        kind = _get(event, "type")
        if kind == "message_stop":
            self.stopped = True
            return None
        if kind == "error":
            raise StreamError(_dump(event, mode="python"))
        if kind not in ASSEMBLED_EVENTS:
            return None
        if self._snapshot is None and kind != "message_start":
            raise MalformedReply(f"the stream sent {kind} before message_start", {"event": _dump(event)})
        index = _get(event, "index")
        if kind == "content_block_delta" and index in self.broken:
            problem, raw = self.broken[index]
            self.broken[index] = (problem, raw + str(_get(_get(event, "delta"), "partial_json") or ""))
        else:
            self._accumulate(event, kind, index)
        return self._fragment(event) if kind == "content_block_delta" else None

    def _accumulate(self, event: Any, kind: str, index: Any) -> None:
        from anthropic.lib.streaming._beta_messages import accumulate_event

        message = _get(event, "message") if kind == "message_start" and self._snapshot is None else None
        if message is not None:
            # The SDK's first snapshot is this message as sent; made here as the SDK makes it, so a hostile count
            # in its usage ("12abc" for an int) is the usage rules' to name, not a pydantic serializer warning.
            from anthropic.types.beta.parsed_beta_message import ParsedBetaMessage

            self._snapshot = ParsedBetaMessage.construct(**_dump(message, mode="python"))
            return
        try:
            self._snapshot = accumulate_event(
                event=event, current_snapshot=self._snapshot, json_bufs=self._json, request_headers=self._headers
            )
        except ValueError as exc:  # tool input that is not JSON: judged at the end (max_tokens may have cut it)
            block = self._snapshot.content[index]
            raw = self._json.get(index, b"").decode("utf-8", "replace") + str(
                _get(_get(event, "delta"), "partial_json") or ""
            )
            why = str(exc).split(" JSON: ")[0]
            self.broken[index] = (
                f"{block.type} block {index} ({getattr(block, 'name', None)}): its streamed input is not valid JSON "
                f"({why})",
                raw,
            )

    def _fragment(self, event: Any) -> Delta | None:
        delta = _get(event, "delta")
        dt = _get(delta, "type")
        if dt == "signature_delta":
            return None
        index = int(_get(event, "index"))
        known = DELTA_TEXT.get(dt)
        if known is not None:
            text = _get(delta, known[1]) or ""
            kind = known[0]
        else:
            body = _dump(delta)
            kind = "citation" if dt == "citations_delta" else str(dt or "delta").removesuffix("_delta")
            text = json.dumps({k: v for k, v in body.items() if k != "type"}, ensure_ascii=False)
        self.deltas += 1
        return (index, kind, text)

    def result(self) -> dict[str, Any]:
        """The assembled message (call after ``message_stop``)."""
        if self._snapshot is None:
            raise MalformedReply("the stream carried no message_start", {})
        message = _dump(self._snapshot)
        if message.get("stop_details", 0) is None:  # the SDK sets it from every message_delta; the API omits it
            del message["stop_details"]
        cut = message.get("stop_reason") == "max_tokens"
        for index, raw in self._json.items():  # the SDK parses partial JSON; a block that ended must be whole
            if index in self.broken or cut:
                continue
            try:
                whole = json.loads(raw) if raw.strip() else {}
            except ValueError as exc:
                block = message["content"][index]
                what = f"{block.get('type')} block {index} ({block.get('name')})"
                problem = f"{what}: its streamed input is not valid JSON ({exc})"
                self.broken[index] = (problem, raw.decode("utf-8", "replace"))
                continue
            if not isinstance(whole, dict):
                block = message["content"][index]
                problem = (
                    f"{block.get('type')} block {index} ({block.get('name')}): its streamed input is not an object"
                )
                self.broken[index] = (problem, raw.decode("utf-8", "replace"))
        if cut:
            self.cut_inputs = [i for i in self._json if i not in self.broken] + list(self.broken)
            for index in self.broken:
                message["content"][index].setdefault("input", {})
        if self.broken and not cut:
            problem, text = next(iter(self.broken.values()))
            raise MalformedReply(f"{problem}; it arrived as {_clip(text)}", {**message, "partial_json": text})
        return message

    @property
    def began(self) -> bool:
        """``message_start`` arrived: the API accepted the request and began the reply (it may bill it)."""
        return self._snapshot is not None

    def partial_text(self) -> str:
        """The text received so far (for a stream cut short)."""
        if self._snapshot is None:
            return ""
        return "".join(b.text for b in self._snapshot.content if getattr(b, "type", None) == "text")


def _clip(raw: str, n: int = 120) -> str:
    return repr(raw) if len(raw) <= n else f"{raw[:n]!r}... ({len(raw)} characters)"


def _dump(event: Any, mode: str = "json") -> Any:
    """An SDK object as plain data, as the server sent it. ``warnings=False``: a hostile value (``"12abc"`` where
    the SDK's type says int) is the usage rules' to name, not a serializer warning about the SDK's model."""
    return event if isinstance(event, dict) else event.to_dict(mode=mode, warnings=False)


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
            elif kind == "tool_input":
                out.append({"type": "tool_input", "partial_json": whole})
            elif kind == "compaction":
                out.append({"type": "compaction", "content": whole})
        return out


def cut_short(
    fragments: Fragments, est_input_tokens: int, max_tokens: int, prices: Prices | None
) -> dict[str, Any] | None:
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
        "content": content,
        "usage": usage.as_dict(),
        "estimated": True,
        "partial": True,
        "cost": prices.cost(usage) if prices else 0.0,
        "server_tool_cost": 0.0,
        "request_id": None,
        "context_tokens": usage.context_tokens,
        "max_tokens": max_tokens,
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
            yield (index, kind, whole[start : start + chunk_chars])

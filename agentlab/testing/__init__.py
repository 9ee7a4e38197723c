"""A local Messages API server, so agents can be tested offline with the real SDK.

:class:`MessagesServer` listens on 127.0.0.1 (a free port), answers
``POST /v1/messages`` with scripted replies in the exact JSON shape of the
Messages API, and records every request it receives, headers included. It can
also misbehave on cue: an HTTP error with ``retry-after`` or
``x-should-retry`` (:func:`fault`), a dropped connection (:func:`dropped`), a
reply slower than any deadline (:func:`slow`). Point the real
``anthropic.AsyncAnthropic`` at it (``server.client()``) and the whole stack
(SDK, adapter, engine) runs as it would against the API::

    with MessagesServer([reply(None, ("lookup", {"id": 7})), reply("Found it.")]) as server:
        result = agentlab.run("Find 7", [lookup], model=AnthropicModel(client=server.client()))
        assert server.requests[1].body["messages"][-1]["content"][0]["type"] == "tool_result"

Like the API it checks what it is sent (a ``tool_use`` without its
``tool_result``, more than four cache breakpoints, a missing key are 400/401
errors), and it simulates the prompt cache: ``cache_control`` breakpoints
write prefixes, later requests that start with a written prefix read it, and
``usage`` reports uncached, cache-write and cache-read tokens accordingly
(about one token per three characters, as agentlab's estimates count). An
entry belongs to its model and lives for its TTL (five minutes, or an hour
for a ``"ttl": "1h"`` breakpoint), each read renewing it, on the clock the
server is given (``clock=``, so a test moves time without waiting). A request
that sends ``diagnostics`` gets the API's cache diagnostics back: with the
``previous_message_id`` of an earlier reply, ``diagnostics.cache_miss_reason``
says where the two requests part (model, system, tools, messages), as the
SDK's ``Diagnostics`` type describes. Simplification: any earlier block
boundary can be a hit.

A request with ``"stream": true`` is answered with the streaming protocol as
documented: ``message_start``, a ``ping``, ``content_block_start`` /
``content_block_delta`` / ``content_block_stop`` per block (text, thinking and
its signature, tool input as partial JSON, citations), ``message_delta`` with
the stop reason and usage, ``message_stop``. :func:`streamed` scripts how:
fragment size, a pause, an ``error`` event or a dropped connection after a
number of events.

Routes are a table (:attr:`MessagesServer.routes`): a new endpoint is one
method ``post_<name>(body, headers)`` on the handler and one entry there.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .._checks import is_whole
from ..models.offline import reply
from .tokens import (
    Tokenizer,
    cap_output,
    count_segments,
    tokenizer_for,
    validate_count_request,
)

__all__ = [
    "Fault",
    "MessagesServer",
    "PromptCache",
    "Received",
    "Slow",
    "Streamed",
    "dropped",
    "fault",
    "html_error",
    "recorded_stream",
    "reply",
    "slow",
    "stream_events",
    "streamed",
]

MAX_BREAKPOINTS = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
"""How long a cache entry lives after its last write or read, by its breakpoint's ``ttl``."""

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


# ----------------------------------------------------------------- scripting
@dataclass(frozen=True, slots=True)
class Fault:
    """An HTTP error reply in the API's error shape, or (``drop=True``) a connection closed without a reply."""

    status: int = 500
    message: str = "Internal server error"
    error_type: str = "api_error"
    headers: Mapping[str, str] = field(default_factory=dict)
    error_code: str | None = None
    drop: bool = False
    html: bool = False  # answer with an HTML page, as a proxy in front of the API does (502 Bad Gateway)
    page: str | None = None  # the HTML page to send, when ``html``

    def body(self) -> Any:
        """The error body the server sends: the API's JSON error shape, or an HTML page for a proxy error."""
        if self.html and self.page is not None:
            return self.page
        if self.html:
            head = f"<head><title>{self.status} {self.message}</title></head>"
            return f"<html>{head}<body><h1>{self.message}</h1></body></html>"
        error: dict[str, Any] = {"type": self.error_type, "message": self.message}
        if self.error_code:
            error["details"] = {"error_code": self.error_code}
        return {"type": "error", "error": error}


@dataclass(frozen=True, slots=True)
class Slow:
    """``item`` answered only after ``seconds`` of real time (for deadline tests)."""

    item: Any
    seconds: float


def fault(
    status: int,
    message: str | None = None,
    *,
    retry_after: float | str | None = None,
    retry_after_ms: float | None = None,
    should_retry: bool | None = None,
    error_code: str | None = None,
    error_type: str | None = None,
) -> Fault:
    """An error reply: ``fault(429, retry_after=2)``, ``fault(500, should_retry=False)``, ``fault(529)``."""
    if not isinstance(status, int) or not 400 <= status <= 599:
        raise ValueError(f"status must be an HTTP error code (400-599), got {status!r}")
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
    if should_retry is not None:
        headers["x-should-retry"] = "true" if should_retry else "false"
    kind = error_type or ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
    return Fault(status, message or f"{kind} ({status})", kind, headers, error_code)


def html_error(status: int = 502, message: str = "Bad Gateway", page: str | None = None) -> Fault:
    """An error answered with an HTML page instead of the API's JSON (a gateway's 502, say)."""
    return Fault(status, message, "api_error", {}, None, html=True, page=page)


@dataclass(frozen=True, slots=True)
class Streamed:
    """How to stream ``item`` when the request asks for a stream (see :func:`streamed`)."""

    item: Any
    chunk: int = 16
    pause: float = 0.0
    error: Fault | None = None
    drop_after: int | None = None
    hold_after: int | None = None
    hold: float = 0.0
    after: int = 0


def streamed(
    item: dict[str, Any] | list[dict[str, Any]],
    *,
    chunk: int = 16,
    pause: float = 0.0,
    error: Fault | str | None = None,
    after: int = 0,
    drop_after: int | None = None,
    hold_after: int | None = None,
    hold: float = 30.0,
) -> Streamed:
    """Stream ``item`` in fragments of ``chunk`` characters, ``pause`` real seconds apart.

    ``item`` is a reply, or a list of stream events sent exactly as given.

    ``error`` (a :class:`Fault` or an error type such as ``"overloaded_error"``)
    is sent as an ``error`` event after ``after`` events; ``drop_after`` closes
    the connection after that many events; ``hold_after`` stops sending for
    ``hold`` seconds after that many events (for Stop and deadline tests; the
    server's shutdown cuts the wait short).
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk!r}")
    if isinstance(error, str):
        status = next((k for k, v in ERROR_TYPES.items() if v == error), 500)
        error = Fault(status, f"{error} (inside the stream)", error)
    return Streamed(item, chunk, pause, error, drop_after, hold_after, hold, after)


def recorded_stream(sse: bytes | str, **how: Any) -> Streamed:
    """Serve a recorded server-sent event stream byte for byte (e.g. the SDK repository's fixtures),
    one event per write; ``how`` as :func:`streamed` takes it (``pause``, ``drop_after``...)."""
    raw = sse.encode() if isinstance(sse, str) else sse
    raw = raw.replace(b"\r\n", b"\n")
    events = [part + b"\n\n" for part in raw.split(b"\n\n") if part.strip()]
    return streamed(events, **how)  # type: ignore[arg-type]


def dropped() -> Fault:
    """Close the connection after reading the request, without any reply."""
    return Fault(drop=True)


def slow(item: Any, seconds: float) -> Slow:
    """Answer with ``item`` after ``seconds`` (real time; the server's shutdown cuts it short)."""
    if not seconds >= 0:
        raise ValueError(f"seconds must be >= 0, got {seconds!r}")
    return Slow(item, float(seconds))


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the server saw it. ``headers`` keys are lower-case."""

    method: str
    path: str
    headers: dict[str, str] = field(repr=False)
    body: Any = field(repr=False)
    t: float = field(repr=False)

    def __repr__(self) -> str:  # never the auth headers
        n = len(self.body.get("messages", [])) if isinstance(self.body, dict) else "?"
        return f"<Received {self.method} {self.path} messages={n}>"

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's ``messages`` (empty when the body was not a Messages request)."""
        return self.body.get("messages", []) if isinstance(self.body, dict) else []


# ------------------------------------------------------------ request checks
def validate_request(body: Any) -> str | None:
    """What the real API would refuse with a 400, or ``None`` if the request is acceptable."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    mt = body.get("max_tokens")
    if not is_whole(mt, 1):
        return "max_tokens: must be an integer >= 1"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    programmatic = _programmatic_calls(messages)
    if programmatic and not isinstance(body.get("container"), str):
        return (
            "container: the conversation has tool calls made from code execution "
            f"({', '.join(programmatic)}); the request must send back the container id they ran in"
        )
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or not tool.get("name"):
            return f"tools.{i}.name: Field required"
        if "type" not in tool and not isinstance(tool.get("input_schema"), dict):
            return f"tools.{i}.input_schema: Field required"
    marks = _count_cache_control(body)
    if marks > MAX_BREAKPOINTS:
        return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marks}."
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: must be 'user' or 'assistant'"
        content = m.get("content")
        if not isinstance(content, (str, list)):
            return f"messages.{i}.content: must be a string or a list of blocks"
        uses = (
            [b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
            if isinstance(content, list)
            else []
        )
        if not uses:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if nxt is None:
            continue  # a trailing assistant turn (prefill) may end with tool_use
        nxt_content = nxt.get("content") if isinstance(nxt, dict) else None
        blocks = nxt_content if isinstance(nxt_content, list) else []
        results = [b.get("tool_use_id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        missing = [u for u in uses if u not in results]
        if nxt.get("role") != "user" or missing:
            return (
                f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(map(str, missing or uses))}. Each `tool_use` block must have a corresponding "
                "`tool_result` block in the next message."
            )
        if any(u in programmatic for u in uses) and any(
            not (isinstance(b, dict) and b.get("type") == "tool_result") for b in blocks
        ):
            return (
                f"messages.{i + 1}: the results of tool calls made from code execution must be the message's only "
                "content (tool_result blocks only)"
            )
        extra = [r for r in results if r not in uses]
        if extra:
            ids = ", ".join(map(str, extra))
            return f"messages.{i + 1}: unexpected `tool_use_id` found in `tool_result` blocks: {ids}"
        first_other = next(
            (k for k, b in enumerate(blocks) if not (isinstance(b, dict) and b.get("type") == "tool_result")),
            len(blocks),
        )
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks[first_other:]):
            return f"messages.{i + 1}: `tool_result` blocks must come before any other content"
    return None


def _programmatic_calls(messages: list[Any]) -> list[str]:
    """Ids of tool calls whose ``caller`` is the code-execution tool (programmatic tool calling)."""
    out = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        for b in content if isinstance(content, list) else []:
            caller = b.get("caller") if isinstance(b, dict) and b.get("type") == "tool_use" else None
            if isinstance(caller, dict) and str(caller.get("type", "")).startswith("code_execution"):
                out.append(str(b.get("id")))
    return out


def _count_cache_control(body: dict[str, Any]) -> int:
    n = 1 if body.get("cache_control") else 0
    system = body.get("system")
    blocks: list[Any] = list(body.get("tools") or []) + (system if isinstance(system, list) else [])
    for m in body.get("messages") or []:
        if isinstance(m, dict) and isinstance(m.get("content"), list):
            blocks.extend(m["content"])
    return n + sum(1 for b in blocks if isinstance(b, dict) and b.get("cache_control"))


# ------------------------------------------------------------- prompt cache
class PromptCache:
    """A simulation of the API's prompt cache, precise enough to show what caching saves.

    A request is a sequence of blocks (tools, system, then each message's
    content). A breakpoint (``cache_control``) writes the prefix ending there;
    a later request whose prefix matches a written one reads it. Tokens are
    counted as agentlab estimates them (characters / 3).
    """

    def __init__(
        self, *, min_tokens: int = 0, tokenizer: Tokenizer | str = "plain", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.min_tokens = min_tokens
        self.tokenizer = tokenizer_for(tokenizer)
        self.clock = clock
        self._written: dict[str, float] = {}  # prefix hash -> when it expires
        self._lock = threading.Lock()

    def usage(self, body: dict[str, Any]) -> dict[str, Any]:
        """``input_tokens`` / ``cache_creation_input_tokens`` / ``cache_read_input_tokens`` of ``body``."""
        segments, marks = _segments(body)
        sizes = [self.tokenizer(s) for s in segments]
        cum = list(itertools.accumulate(sizes))
        total = cum[-1] if cum else 0
        if not marks:
            return {"input_tokens": total, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        h = hashlib.sha256(str(body.get("model")).encode())  # an entry belongs to its model
        hashes = []
        for s in segments:
            h.update(s.encode())
            hashes.append(h.copy().hexdigest())
        last = max(marks)
        ttls = _mark_ttls(body, marks)
        one_hour = 0
        with self._lock:
            now = self.clock()
            alive = self._written
            hit = next((i for i in range(last, -1, -1) if alive.get(hashes[i], -1.0) >= now), -1)
            read = cum[hit] if hit >= 0 else 0
            if hit >= 0:  # a read renews the entry for its TTL
                alive[hashes[hit]] = max(alive[hashes[hit]], now + TTL_SECONDS[ttls.get(hit, "5m")])
            created = 0
            if last > hit and cum[last] >= self.min_tokens:
                created = cum[last] - read
                alive.update((hashes[m], now + TTL_SECONDS[ttls[m]]) for m in marks if cum[m] >= self.min_tokens)
                done = read
                for m in sorted(marks):  # each breakpoint writes the stretch before it with its own TTL
                    if cum[m] > done:
                        if ttls.get(m) == "1h":
                            one_hour += cum[m] - done
                        done = cum[m]
        out: dict[str, Any] = {
            "input_tokens": total - read - created,
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
        }
        if created:
            out["cache_creation"] = {
                "ephemeral_5m_input_tokens": created - one_hour,
                "ephemeral_1h_input_tokens": one_hour,
            }
        return out


def _mark_ttls(body: dict[str, Any], marks: list[int]) -> dict[int, str]:
    """The TTL of each breakpoint, by segment index (blocks in the order :func:`_segments` walks)."""
    blocks: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    blocks += system if isinstance(system, list) else ([None] if isinstance(system, str) and system else [])
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks += [None] if isinstance(content, str) else list(content or [])
    out = {}
    for i in marks:
        block = blocks[i] if i < len(blocks) else None
        mark = block.get("cache_control") if isinstance(block, dict) else body.get("cache_control")
        ttl = str(mark.get("ttl") or "5m") if isinstance(mark, dict) else "5m"
        out[i] = ttl if ttl in TTL_SECONDS else "5m"
    for i in range(max(marks, default=-1) + 1):  # a hit between breakpoints renews at the next one's TTL
        out.setdefault(i, next((out[m] for m in sorted(marks) if m >= i), "5m"))
    return out


def _without_marks(obj: Any) -> Any:
    """``obj`` without ``cache_control`` marks (they change no prefix), a text given as a string as its block."""
    if isinstance(obj, dict):
        out = {k: _without_marks(v) for k, v in obj.items() if k != "cache_control"}
        if isinstance(out.get("content"), str) and "role" in out:
            out["content"] = [{"type": "text", "text": out["content"]}]
        return out
    if isinstance(obj, list):
        return [_without_marks(v) for v in obj]
    return obj


# The API counts an image by its pixels (about width x height / 750 tokens), and resizes one past about
# 1.15 megapixels, so an image costs at most about 1,600 tokens whatever its bytes (Anthropic's vision docs).
# The server does not decode images: each base64 image counts as a stand-in of that size, the same for the
# same bytes (so the prompt cache still sees the same prefix).
IMAGE_STAND_IN = "x" * 4_800  # 1,600 tokens at the plain tokenizer's three characters a token


def _as_counted(block: Any) -> Any:
    """``block`` with each base64 image's data replaced by its digest and a fixed-size stand-in."""
    if isinstance(block, list):
        return [_as_counted(b) for b in block]
    if not isinstance(block, dict):
        return block
    source = block.get("source")
    if block.get("type") == "image" and isinstance(source, dict) and isinstance(source.get("data"), str):
        digest = hashlib.sha256(source["data"].encode()).hexdigest()
        return {**block, "source": {**source, "data": f"sha256:{digest}:{IMAGE_STAND_IN}"}}
    return {k: _as_counted(v) if isinstance(v, (dict, list)) else v for k, v in block.items()}


def _segments(body: dict[str, Any]) -> tuple[list[str], list[int]]:
    """Canonical text of each cacheable block (without its cache_control), and the breakpoint indices."""
    segments: list[str] = []
    marks: list[int] = []

    def add(kind: str, block: Any) -> None:
        marked = isinstance(block, dict) and bool(block.get("cache_control"))
        if isinstance(block, dict):
            block = _as_counted({k: v for k, v in block.items() if k != "cache_control"})
        segments.append(kind + json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
        if marked:
            marks.append(len(segments) - 1)

    for tool in body.get("tools") or []:
        add("tool:", tool)
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) and system else system or []:
        add("system:", block)
    for m in body.get("messages") or []:
        content = m.get("content")
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            add(f"{m.get('role')}:", block)
    if body.get("cache_control") and segments:  # automatic caching: the last block
        marks.append(len(segments) - 1)
    return segments, marks


# ------------------------------------------------------------------ server
class MessagesServer:
    """A Messages API on 127.0.0.1 that serves scripted replies and faults, and records requests.

    Args:
        replies: items answered in order, one per request: a reply dict (as
            :func:`agentlab.reply` makes, or a full Messages API message), a
            :class:`Fault`, a :class:`Slow`, or a function ``(body) -> item``.
        cache: simulate the prompt cache in ``usage`` (a reply that gives its
            own ``usage`` is sent as is).
        min_cache_tokens: prefixes shorter than this are not cached (the API's
            minimum is 1024-4096 depending on the model).
        require_key: answer 401 when no ``x-api-key``/``authorization`` is sent.
        max_request_bytes: answer 413 ``request_too_large`` to a bigger body
            (the API's limit is 32 MB).
        tokenizer: how ``usage`` and ``/v1/messages/count_tokens`` count:
            ``"plain"`` (agentlab's estimate), ``"dense"`` (~1.7 bytes per
            token, as code and JSON tokenize), or ``(text) -> tokens``.
        count_endpoint: serve ``POST /v1/messages/count_tokens``; ``False``
            answers 404 there, as a proxy without the endpoint does.

    Replies longer than the request's ``max_tokens`` are cut off there, with
    ``stop_reason="max_tokens"``, as the API does.
    """

    routes: dict[str, str] = {"/v1/messages": "messages", "/v1/messages/count_tokens": "count_tokens"}
    """Path -> handler method suffix: ``POST /v1/messages`` is ``_Handler.post_messages``."""

    def __init__(
        self,
        replies: Iterable[Any] = (),
        *,
        cache: bool = True,
        min_cache_tokens: int = 0,
        require_key: bool = True,
        max_request_bytes: int = 32 * 1024 * 1024,
        tokenizer: Tokenizer | str = "plain",
        count_endpoint: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_request_bytes = max_request_bytes
        self._fingerprints: dict[str, dict[str, Any]] = {}  # reply id -> its request's parts (cache diagnostics)
        self.first_delta_sent: list[float] = []  # time.perf_counter() as each stream's first fragment was written
        self.streams_sent: list[
            tuple[float, float]
        ] = []  # time.perf_counter() before each stream's first event and after its last
        self._queue: deque[Any] = deque(replies)
        self.requests: list[Received] = []
        self.tokenizer = tokenizer_for(tokenizer)
        self.count_endpoint = count_endpoint
        self.cache = PromptCache(min_tokens=min_cache_tokens, tokenizer=self.tokenizer, clock=clock) if cache else None
        self.require_key = require_key
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> MessagesServer:
        """Start listening on a free port of 127.0.0.1 (a no-op when already started)."""
        if self._httpd is not None:
            return self
        handler = type("Handler", (_Handler,), {"owner": self})
        self._httpd = _QuietServer(("127.0.0.1", 0), handler)
        httpd = self._httpd
        self._thread = threading.Thread(
            target=lambda: httpd.serve_forever(poll_interval=0.02), name="agentlab-messages-server", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the server and release its port."""
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> MessagesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The server's base URL, for ``anthropic.AsyncAnthropic(base_url=...)``."""
        if self._httpd is None:
            raise RuntimeError("the server is not running: use `with MessagesServer() as server:` or call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __repr__(self) -> str:
        where = self.url if self._httpd else "stopped"
        return f"<MessagesServer {where} requests={len(self.requests)} queued={len(self._queue)}>"

    # scripting
    def add(self, *items: Any) -> MessagesServer:
        """Queue more replies or faults, answered in order."""
        with self._lock:
            self._queue.extend(items)
        return self

    @property
    def pending(self) -> int:
        """Scripted items not yet used."""
        return len(self._queue)

    def client(self, api_key: str = "sk-ant-test-local", **options: Any) -> Any:
        """An ``anthropic.AsyncAnthropic`` pointed at this server, with the SDK's retries off."""
        import anthropic

        options.setdefault("max_retries", 0)
        return anthropic.AsyncAnthropic(base_url=self.url, api_key=api_key, **options)

    # in-process answers (the HTTP handler's logic, without the transport)
    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply a ``POST /v1/messages`` with ``body`` gets, without HTTP (for fast property tests).

        Same checks, script, prompt cache and tokenizer as over HTTP; a
        scripted fault or a refused request raises ``ValueError``.
        """
        problem = validate_request(body)
        if problem:
            raise ValueError(problem)
        item = self._next(body)
        item = item.item if isinstance(item, Slow) else item
        if not isinstance(item, dict):
            raise ValueError(f"MessagesServer.respond serves replies only, got {item!r}")
        return self._message(item, body)

    def count(self, body: dict[str, Any]) -> int:
        """What ``POST /v1/messages/count_tokens`` answers for ``body``, without HTTP."""
        problem = validate_count_request(body)
        if problem:
            raise ValueError(problem)
        return count_segments(_segments(body)[0], self.tokenizer)

    # serving (called from the handler thread)
    def _next(self, body: Any) -> Any:
        with self._lock:
            item = self._queue.popleft() if self._queue else None
        if item is None:
            n = len(self.requests)
            return fault(500, f"MessagesServer: no scripted reply left for request {n}", should_retry=False)
        if callable(item):
            item = item(body)
        return item

    def _billing_terms(
        self, body: dict[str, Any], content: list[dict[str, Any]], usage: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """What the request asked for that the API reports in ``usage``: fast mode (``speed``), the
        inference region (``inference_geo``) and, past a ``compact_*`` edit's trigger, a compaction pass.

        The compaction pass reads the whole input and writes a summary of at most ``max_tokens`` (a
        compaction block first in the reply); as the SDK's ``BetaIterationsUsage`` documents, its tokens are
        an iteration of their own, not in the top-level counts.
        """
        if body.get("speed") == "fast":
            usage["speed"] = "fast"
        if isinstance(body.get("inference_geo"), str):
            usage["inference_geo"] = body["inference_geo"]
        edits = (body.get("context_management") or {}).get("edits") or []
        compact = next(
            (e for e in edits if isinstance(e, dict) and str(e.get("type", "")).startswith("compact_")), None
        )
        read = (
            usage.get("input_tokens", 0)
            + usage.get("cache_read_input_tokens", 0)
            + usage.get("cache_creation_input_tokens", 0)
        )
        trigger = ((compact or {}).get("trigger") or {}).get("value", 150_000)
        if compact is not None and read >= trigger:
            summary = f"Summary of {read} tokens of conversation. " * 4
            if self.tokenizer(summary) > body["max_tokens"]:
                summary = summary[: body["max_tokens"]]  # no token is shorter than a character
            written = min(self.tokenizer(summary), body["max_tokens"])
            block = {"type": "compaction", "content": summary}
            passes = [
                {
                    "type": "compaction",
                    "input_tokens": read,
                    "output_tokens": written,
                    "cache_read_input_tokens": 0,
                    "cache_creation_input_tokens": 0,
                },
                {
                    "type": "message",
                    **{
                        k: usage.get(k, 0)
                        for k in (
                            "input_tokens",
                            "output_tokens",
                            "cache_read_input_tokens",
                            "cache_creation_input_tokens",
                        )
                    },
                },
            ]
            usage = {**usage, "iterations": passes}
            content = [block, *content]
        return content, usage

    def _message(self, item: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        content = []
        for block in item.get("content") or []:
            if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use") and "id" not in block:
                prefix = "toolu" if block["type"] == "tool_use" else "srvtoolu"
                block = {**block, "id": f"{prefix}_{next(self._ids):06d}"}
            content.append(block)
        stop = item.get("stop_reason") or (
            "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
        )
        usage = item.get("usage")
        if usage is None:
            usage = (
                dict(self.cache.usage(body))
                if self.cache
                else {
                    "input_tokens": count_segments(_segments(body)[0], self.tokenizer),
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                }
            )
            content, usage["output_tokens"], cut = cap_output(content, body["max_tokens"], self.tokenizer)
            stop = "max_tokens" if cut else stop
            content, usage = self._billing_terms(body, content, usage)
        message = {
            "id": item.get("id") or f"msg_{next(self._ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": item.get("model") or body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": item.get("stop_sequence"),
            "usage": usage,
        }
        for key in ("stop_details", "container", "context_management"):
            if item.get(key) is not None:
                message[key] = item[key]
        if isinstance(body.get("diagnostics"), dict):
            message["diagnostics"] = self._diagnose(body, message)
        return message

    def _diagnose(self, body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any] | None:
        """The reply's ``diagnostics``: where this request parts from the one ``previous_message_id`` names.

        As the API documents (the SDK's ``Diagnostics`` and ``CacheMiss*`` types): ``None`` when no earlier id
        is given or nothing diverged; else ``cache_miss_reason`` of type ``model_changed``, ``system_changed``,
        ``tools_changed``, ``messages_changed`` (an earlier message differs, not only more appended) with
        ``cache_missed_input_tokens``, or ``previous_message_not_found``. The comparison is of the requests'
        structure, whatever the cache did.
        """
        system = body.get("system")
        system = [{"type": "text", "text": system}] if isinstance(system, str) else system
        parts = {k: _without_marks(body.get(k)) for k in ("model", "tools", "messages")}
        parts["system"] = _without_marks(system)
        parts["tokens"] = count_segments(_segments(body)[0], self.tokenizer)
        with self._lock:
            self._fingerprints[message["id"]] = parts
            before = self._fingerprints.get(str(body["diagnostics"].get("previous_message_id")))
        if body["diagnostics"].get("previous_message_id") is None:
            return None
        if before is None:
            return {"cache_miss_reason": {"type": "previous_message_not_found"}}
        old = before["messages"] or []
        for name, kind in (("model", "model_changed"), ("system", "system_changed"), ("tools", "tools_changed")):
            if before[name] != parts[name]:
                return {"cache_miss_reason": {"type": kind, "cache_missed_input_tokens": before["tokens"]}}
        if parts["messages"][: len(old)] != old[: len(parts["messages"])]:
            return {"cache_miss_reason": {"type": "messages_changed", "cache_missed_input_tokens": before["tokens"]}}
        return None


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a deadline, a test's dropped pool) is not a server error."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: MessagesServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Each stream event goes out when written, as the API's do (no Nagle batching of small writes).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        return None

    def do_GET(self) -> None:
        self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        server = self.owner
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        with server._lock:
            server.requests.append(Received("POST", self.path, headers, body, time.monotonic()))
        name = server.routes.get(self.path.split("?")[0])
        if name is None and isinstance(body, dict):
            name = _platform_route(self.path, body)
        if name is None or (name == "count_tokens" and not server.count_endpoint):
            return self._send(404, fault(404, f"no route {self.path}").body())
        if server.require_key and not (headers.get("x-api-key") or headers.get("authorization")):
            return self._send(401, fault(401, "x-api-key header is required").body())
        if length > server.max_request_bytes:
            return self._send(
                413,
                fault(413, f"Request exceeds the maximum allowed number of bytes ({server.max_request_bytes})").body(),
            )
        getattr(self, f"post_{name}")(body, headers)

    def post_count_tokens(self, body: Any, headers: dict[str, str]) -> None:
        problem = validate_count_request(body)
        if problem:
            return self._send(400, fault(400, problem).body())
        assert isinstance(body, dict)  # validate_count_request accepts only a JSON object
        self._send(200, {"input_tokens": self.owner.count(body)})

    def post_messages(self, body: Any, headers: dict[str, str]) -> None:
        server = self.owner
        problem = validate_request(body)
        if problem:
            return self._send(400, fault(400, problem).body())
        assert isinstance(body, dict)  # validate_request accepts only a JSON object
        item = server._next(body)
        if isinstance(item, Slow):
            if server._closing.wait(item.seconds):
                return self._drop()
            item = item.item
        how = item if isinstance(item, Streamed) else Streamed(item)
        item = how.item
        if isinstance(item, Fault):
            if item.drop:
                return self._drop()
            return self._send(item.status, item.body(), item.headers)
        if isinstance(item, list) and body.get("stream"):  # events given as they are (recorded bytes, odd streams)
            return self._stream(item, how)
        if not isinstance(item, dict):
            return self._send(500, fault(500, f"MessagesServer: cannot serve a {type(item).__name__}").body())
        message = server._message(item, body)
        if body.get("stream"):
            return self._stream(stream_events(message, how.chunk), how)
        self._send(200, message)

    def _stream(self, events: list[dict[str, Any]], how: Streamed) -> None:
        """Send ``events`` as server-sent events over a chunked response, misbehaving as ``how`` says."""
        closing, first, began = self.owner._closing, True, time.perf_counter()
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("request-id", f"req_{next(self.owner._ids):08d}")
            self.end_headers()
            for n, event in enumerate(events):
                if isinstance(event, bytes):  # a recorded event, sent byte for byte
                    self._chunk(event)
                    continue
                if how.error is not None and n == how.after:
                    err = how.error
                    body = (
                        err.body()
                        if not err.html
                        else {"type": "error", "error": {"type": err.error_type, "message": err.message}}
                    )
                    self._chunk(_sse("error", body))
                    break
                if how.drop_after is not None and n == how.drop_after:
                    return self._drop()
                if how.hold_after is not None and n == how.hold_after and closing.wait(how.hold):
                    return self._drop()
                if how.pause and n and closing.wait(how.pause):
                    return self._drop()
                if event.get("type") == "content_block_delta" and first:
                    first = False
                    self.owner.first_delta_sent.append(time.perf_counter())
                self._chunk(_sse(event["type"], event))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            self.owner.streams_sent.append((began, time.perf_counter()))
        except OSError:  # the client hung up (Stop, a deadline): nothing more to send
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "text/html" if isinstance(payload, str) else "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", f"req_{next(self.owner._ids):08d}")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client gave up (a deadline): nothing to answer
            self.close_connection = True

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


VERTEX_PATH = re.compile(
    r"^/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/([^/:]+):(rawPredict|streamRawPredict)$"
    r"|^/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/([^/:]+):(rawPredict|streamRawPredict)$"
)
"""Vertex AI's Messages routes (the model id in the path, ``count-tokens`` for counts), as the SDK's
``AnthropicVertex`` clients call them."""


def _platform_route(path: str, body: dict[str, Any]) -> str | None:
    """The route of a cloud platform's path (Vertex), with the body made the Messages API's (model from the path)."""
    found = VERTEX_PATH.match(path.split("?")[0])
    if found is None:
        return None
    model, how = (found.group(1), found.group(2)) if found.group(1) else (found.group(3), found.group(4))
    if model == "count-tokens":
        return "count_tokens"
    body.setdefault("model", model)
    if how == "streamRawPredict":
        body.setdefault("stream", True)
    return "messages"


# --------------------------------------------------------------- streaming
def _sse(kind: str, payload: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def stream_events(message: dict[str, Any], chunk: int = 16) -> list[dict[str, Any]]:
    """The events the streaming protocol carries for ``message``, fragments of ``chunk`` characters.

    ``message_start`` holds the message without content, stop reason or output
    usage; each block is opened, filled by deltas (text, thinking then its
    signature, citations, tool input as partial JSON) or sent whole (redacted
    thinking, server tool results), and closed; ``message_delta`` carries the
    stop reason, stop details, container and final usage; ``message_stop`` ends it.
    """
    usage = dict(message.get("usage") or {})
    start_usage = {k: v for k, v in usage.items() if k not in ("output_tokens", "iterations")}
    start_usage["output_tokens"] = 1
    late = ("content", "stop_reason", "stop_sequence", "stop_details", "container", "usage", "context_management")
    head = {k: v for k, v in message.items() if k not in late}
    hops = [b for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "fallback"]
    if hops:  # a server-side fallback: the stream opens as the requested model, its fallback block names the server
        head["model"] = (hops[0].get("from") or {}).get("model", head.get("model"))
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {**head, "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage},
        },
        {"type": "ping"},
    ]

    def pieces(text: str) -> list[str]:
        return [text[i : i + chunk] for i in range(0, len(text), chunk)]

    for index, block in enumerate(message.get("content") or []):
        kind = block.get("type")
        if kind == "text":
            opened = {**block, "text": ""}
            if isinstance(block.get("citations"), list):
                opened["citations"] = []
            events.append({"type": "content_block_start", "index": index, "content_block": opened})
            for citation in block.get("citations") or []:
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "citations_delta", "citation": citation},
                    }
                )
            for part in pieces(block.get("text", "")):
                events.append(
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": part}}
                )
        elif kind == "thinking":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "thinking": "", "signature": ""},
                }
            )
            for part in pieces(block.get("thinking", "")):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": part},
                    }
                )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": block.get("signature", "")},
                }
            )
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            events.append({"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}})
            for part in pieces(json.dumps(block.get("input", {}), separators=(",", ":"))):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": part},
                    }
                )
        elif kind == "compaction":  # the summary arrives as one compaction_delta (the SDK's recorded shape)
            opened = {**block, "content": None}
            opened.pop("encrypted_content", None)
            events.append({"type": "content_block_start", "index": index, "content_block": opened})
            delta = {"type": "compaction_delta", "content": block.get("content")}
            if "encrypted_content" in block:
                delta["encrypted_content"] = block["encrypted_content"]
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        else:  # redacted thinking, server tool results, fallback blocks...: sent whole
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    for key in ("stop_details", "container"):
        if message.get(key) is not None:
            delta[key] = message[key]
    end: dict[str, Any] = {"type": "message_delta", "delta": delta, "usage": usage}
    if message.get("context_management") is not None:
        end["context_management"] = message["context_management"]
    events.append(end)
    events.append({"type": "message_stop"})
    return events

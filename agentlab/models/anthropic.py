"""The real model: Claude through the official ``anthropic`` SDK (async).

What this adapter decides, and why:

* **The engine retries, not the SDK.** The client runs with ``max_retries=0``
  and every failure becomes one of agentlab's three kinds (:func:`api_error`).
  The SDK alone would sleep as long as ``retry-after`` says, past any
  deadline, and its attempts would be invisible; the engine bounds each wait
  by the run's deadline and records every attempt as an event.
* **Every call carries the time left as its timeout.** The SDK's default is
  ten minutes (and it refuses a large non-streaming ``max_tokens`` without an
  explicit timeout).
* **Blocks come back byte for byte.** The reply is the response's JSON, not a
  re-serialised SDK object, so ``thinking``, ``redacted_thinking`` and server
  tool blocks go back to the API exactly as they came.
* **Prompt caching is on by default.** Breakpoints go on the fixed prefix
  (system prompt, else the last tool definition) and on the latest message,
  on *copies*: the run's history never carries ``cache_control``. Their TTL
  is five minutes, or one hour with ``cache="1h"`` (dearer writes).
* **Replies stream by default.** Each fragment goes to ``request.on_delta``
  as it arrives; the events are folded back into the same message a
  non-streamed call returns (:mod:`agentlab.models.streaming`). A stream that
  breaks before anything was shown is retried like its HTTP status; once
  something was shown, the step stops with a clear reason instead.
* **The code-execution container is carried forward.** A reply's
  ``container`` id goes back with the next request of that conversation.
* **The key stays secret.** It never appears in a repr or an error message;
  errors are re-raised without the SDK exception chained (its request object
  holds the auth headers).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import json
import re
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import orjson

from .._safe_text import without_lone_surrogates
from ..errors import (
    AgentlabError,
    AuthenticationFailed,
    FatalError,
    ModelError,
    PermissionDenied,
    RetryableError,
)
from ..messages import Block, MalformedReply, Message
from ..netguard import NetworkBlocked, check_url
from ..redact import scrub as _scrub  # the one owner of scrubbing (issue 23)
from .base import ModelRequest
from .streaming import StreamAssembler, StreamError, feed_batch, sse_batches

DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_TIMEOUT = 600.0
"""Seconds a call may take when the run has no deadline (the SDK's own default)."""

EPHEMERAL = {"type": "ephemeral"}
UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})

CacheMode = bool | Literal["5m", "1h", "automatic"]

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The Messages API refuses a request body larger than this with HTTP 413."""

STREAM_ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402, "permission_error": 403,
    "not_found_error": 404, "timeout_error": 408, "conflict_error": 409, "request_too_large": 413,
    "rate_limit_error": 429, "api_error": 500, "overloaded_error": 529,
}
"""The HTTP status matching an ``error`` event's type, so a stream error is handled like that status."""


SPEND_LIMIT_CODES = frozenset({
    "enforced_spend_limit_reached",
    "contract_spend_limit_reached",
    "linked_organization_spend_limit_reached",
    "linked_organization_billing_unavailable",
})
"""Error codes a retry cannot fix: the account has hit a spending or billing wall."""

_TOO_LONG = re.compile(
    r"prompt is too long|context (window|length|limit)|exceeds? (the )?(model'?s? )?context|too many (input )?tokens",
    re.IGNORECASE,
)


class AnthropicModel:
    """Claude via ``anthropic.AsyncAnthropic``, usable wherever an offline model is.

    Args:
        model: the model id sent to the API; also the id prices are looked up by.
        client: an ``AsyncAnthropic`` to use (e.g. pointed at a local server).
            It is copied with ``max_retries=0``. By default one is made from
            the environment (``ANTHROPIC_API_KEY``).
        max_tokens: an upper cap on every reply, on top of the run's ``max_tokens``.
        cache: ``True`` or ``"5m"`` (default) puts cache breakpoints on the
            system prompt (or last tool) and the latest message with the
            five-minute TTL; ``"1h"`` the same with the one-hour TTL (writes
            cost 2x base input instead of 1.25x); ``"automatic"`` uses the API's
            top-level ``cache_control`` instead; ``False`` turns caching off.
        stream: stream replies (default), so the engine can show them growing.
        server_tools: server tool definitions sent with every request (e.g.
            ``{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}``);
            their fees are priced and, bounded by ``max_uses``, reserved by the
            pre-call cost guard.
        timeout: seconds per call when the run has no deadline.
        thinking: the API's ``thinking`` setting, e.g. ``{"type": "enabled", "budget_tokens": 2048}``.
        params: any other ``messages.create`` arguments (``temperature``, ``tool_choice``, ...).
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        client: Any = None,
        max_tokens: int | None = None,
        cache: CacheMode = True,
        timeout: float = DEFAULT_TIMEOUT,
        thinking: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        name: str | None = None,
        stream: bool = True,
        server_tools: list[Mapping[str, Any]] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must be a non-empty model id string, got {model!r}")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError(f"max_tokens must be an int >= 1 or None, got {max_tokens!r}")
        if cache not in (True, False, "5m", "1h", "automatic"):
            raise ValueError(f"cache must be '5m', '1h', True (= '5m'), False or 'automatic', got {cache!r}")
        tools_given = list(server_tools or [])
        for i, tool in enumerate(tools_given):
            if not isinstance(tool, Mapping) or not isinstance(tool.get("type"), str) or not tool.get("name"):
                raise ValueError(f"server_tools[{i}] must be a server tool definition with 'type' and 'name', got {tool!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        reserved = {"model", "max_tokens", "messages", "system", "tools", "timeout", "stream"} & set(params or {})
        if reserved:
            raise ValueError(f"params must not set {sorted(reserved)}: the engine supplies them")
        import anthropic

        if client is None:
            advice = (
                "set ANTHROPIC_API_KEY, or pass client=anthropic.AsyncAnthropic(api_key=...) "
                "(or run offline: model='offline')"
            )
            try:
                client = anthropic.AsyncAnthropic(max_retries=0)
            except anthropic.CredentialsError as exc:
                raise ValueError(f"AnthropicModel could not load credentials ({exc}): {advice}") from None
            if not (client.api_key or client.auth_token or getattr(client, "credentials", None)):
                raise ValueError(f"AnthropicModel found no credentials: {advice}")
        elif not isinstance(client, anthropic.AsyncAnthropic):
            raise TypeError(f"client must be an anthropic.AsyncAnthropic, got {type(client).__name__}")
        elif client.max_retries != 0:
            client = client.with_options(max_retries=0)
        self.client = client
        # The SDK's default HTTP pool is bound to the event loop that first used it, and
        # `agentlab.run()` starts a new loop per run: keep one pool per loop (see _client_here).
        self._per_loop = _owns_default_pool(client)
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._busy: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.model = model
        self.name = name or model
        self.max_tokens = max_tokens
        self.cache: CacheMode = cache
        self.timeout = float(timeout)
        self.thinking = dict(thinking) if thinking else None
        self.params = dict(params or {})
        self.stream = bool(stream)
        self.server_tools = [dict(t) for t in tools_given]
        self._containers: dict[str, str] = {}

    @property
    def caches(self) -> bool | str:
        """Truthy when prompt caching is on (the hard cost guard then prices input as cache writes):
        ``"1h"`` for one-hour breakpoints, else ``True``."""
        return "1h" if self.cache == "1h" else self.cache is not False

    def __repr__(self) -> str:
        host = _host(str(self.client.base_url))
        return f"<AnthropicModel {self.model} via {host} cache={self.cache!r}>"

    # ------------------------------------------------------------ the call
    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The ``messages.create`` arguments for ``request`` (without the timeout)."""
        max_tokens = request.max_tokens if self.max_tokens is None else min(request.max_tokens, self.max_tokens)
        system: str | list[Block] | None = request.system or None
        tools = [*request.tools, *self.server_tools]
        messages = list(request.messages)
        if self.cache in (True, "5m", "1h"):
            ttl = "1h" if self.cache == "1h" else None
            system, tools, messages = with_cache_breakpoints(system, tools, messages, ttl=ttl)
        params: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": messages}
        if system:
            params["system"] = system
        if tools:
            params["tools"] = tools
        if self.cache == "automatic":
            params["cache_control"] = dict(EPHEMERAL)
        if self.thinking:
            params["thinking"] = _fit_thinking(self.thinking, max_tokens)
        container = self._containers.get(_turn_key(request.messages))
        if container:
            params["container"] = container
        params.update(self.params)
        return without_lone_surrogates(params)  # issue 24: the SDK cannot encode them; the API gets U+FFFD

    def remember_container(self, messages: list[Message], reply: Mapping[str, Any]) -> None:
        """Keep the reply's container id for the request that follows it (history + this reply)."""
        container = reply.get("container")
        cid = container.get("id") if isinstance(container, Mapping) else container
        if isinstance(cid, str) and cid:
            key = _turn_key([*messages, {"role": "assistant", "content": reply.get("content") or []}])
            if len(self._containers) >= 256:
                self._containers.pop(next(iter(self._containers)))
            self._containers[key] = cid

    async def complete(self, request: ModelRequest) -> dict[str, Any]:
        """One Messages API call through the SDK (streamed unless ``stream=False``): the reply as a dict, usage and cost included."""
        with self._in_flight():
            return await self._complete(request)

    async def _complete(self, request: ModelRequest) -> dict[str, Any]:
        import anthropic

        check_url(str(self.client.base_url))
        client = self._client_here()
        timeout = self.timeout if request.timeout is None else max(request.timeout, 0.001)
        secrets = _secrets(self.client)
        params = self.build_params(request)
        if self.stream:
            reply = await self._streamed(client, params, timeout, request, secrets)
            self.remember_container(request.messages, reply)
            return reply
        try:
            raw = await client.messages.with_raw_response.create(**params, timeout=timeout)
            body = await raw.read()
        except anthropic.APIStatusError as exc:
            err = api_error(exc.response.status_code, exc.response.headers, exc.body, secrets=secrets, request_bytes=_size(params))
        except anthropic.APITimeoutError:
            err = RetryableError(f"no reply from the Messages API within {timeout:.1f}s")
        except anthropic.APIConnectionError as exc:
            cause = exc.__cause__
            if isinstance(cause, NetworkBlocked):  # a redirect off this machine, caught by _guard_request
                raise NetworkBlocked(str(cause)) from None
            why = f"{type(cause).__name__}: {cause}" if cause else str(exc)
            err = RetryableError(_scrub(f"connection to the Messages API failed ({why})", secrets))
        else:
            try:
                data = json.loads(body)
            except ValueError:
                data = None
            if not isinstance(data, dict):
                raise ModelError(f"the Messages API reply is not a JSON object: {body[:200]!r}")
            self.remember_container(request.messages, data)
            return {**data, "request_id": raw.request_id}
        raise err  # outside the except block: no SDK exception (and its auth headers) chained

    async def _streamed(
        self, client: Any, params: dict[str, Any], timeout: float, request: ModelRequest, secrets: tuple[str, ...]
    ) -> dict[str, Any]:
        """One streamed call: fragments to ``request.on_delta`` as they come, the assembled message at the end."""
        import anthropic
        import httpx2

        on_delta = request.on_delta
        acc = StreamAssembler()
        request_id = None
        err: AgentlabError
        try:
            async with client.messages.with_streaming_response.create(**params, stream=True, timeout=timeout) as resp:
                request_id = resp.request_id
                async with contextlib.aclosing(sse_batches(resp.http_response.aiter_bytes())) as reads:
                    async for batch in reads:  # closed on any exit, inside this event loop
                        feed_batch(acc, batch, on_delta)
            if not acc.stopped:
                raise httpx2.RemoteProtocolError("the stream ended before message_stop")
            return {**acc.result(), "request_id": request_id}
        except MalformedReply:
            raise
        except StreamError as exc:
            status = STREAM_ERROR_STATUS.get(exc.error_type, 500)
            err = api_error(status, {"request-id": request_id or ""}, exc.body, secrets=secrets, request_bytes=_size(params))
            err = _after_shown(err, acc.deltas, f"an {exc.error_type} event arrived inside the streamed reply")
        except anthropic.APIStatusError as exc:
            err = api_error(exc.response.status_code, exc.response.headers, _read_body(exc), secrets=secrets, request_bytes=_size(params))
        except anthropic.APITimeoutError:
            err = _after_shown(RetryableError(f"no reply from the Messages API within {timeout:.1f}s"), acc.deltas, "the stream timed out")
        except (anthropic.APIConnectionError, httpx2.HTTPError, OSError, ValueError, orjson.JSONDecodeError) as exc:
            cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) else exc
            if isinstance(cause, NetworkBlocked):
                raise NetworkBlocked(str(cause)) from None
            why = f"{type(cause).__name__}: {cause}" if cause else str(exc)
            err = RetryableError(_scrub(f"connection to the Messages API failed ({why})", secrets))
            err = _after_shown(err, acc.deltas, "the connection broke mid-stream")
        raise err  # outside the except block: no SDK exception (and its auth headers) chained


    async def count_tokens(self, request: ModelRequest) -> int:
        """The exact input tokens of ``request`` (the API's free ``count_tokens``), for the hard cost guard."""
        from .counting import count_input_tokens

        check_url(str(self.client.base_url))
        timeout = self.timeout if request.timeout is None else max(request.timeout, 0.001)
        with self._in_flight():
            return await count_input_tokens(
                self._client_here(), self.build_params(request), timeout=timeout, secrets=_secrets(self.client),
                api_error=api_error, scrub=_scrub,
            )

    @contextlib.contextmanager
    def _in_flight(self) -> Iterator[None]:
        """Count this loop's requests in flight (:meth:`close_pool` leaves a pool in use alone)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._busy[loop] = self._busy.get(loop, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._busy[loop] -= 1

    async def close_pool(self) -> None:
        """Close the running loop's connection pool, unless a request is in flight on it.

        :func:`agentlab.arun` calls this as its run ends: a caller driving its
        own loop may close it next (``loop.close()`` cancels nothing), and a
        pool left open then is a pending task and open sockets at exit. The
        next call on this loop opens a fresh pool.
        """
        if not self._per_loop:
            return
        loop = asyncio.get_running_loop()
        with self._lock:
            bound = self._clients.get(loop)
            if bound is None or self._busy.get(loop, 0):
                return
            del self._clients[loop]
        closer = bound[1]
        closer.cancel()  # its finally closes the pool, on this loop
        await asyncio.gather(closer, return_exceptions=True)

    def _client_here(self) -> Any:
        """The client for the running event loop, with its own connection pool.

        Connections opened on one loop cannot be used (or even closed) from
        another, and each ``agentlab.run()`` runs on a fresh loop. So each loop
        gets a copy of the client with a fresh pool, closed when that loop
        shuts down. A client given with a custom ``http_client`` is used as is.
        """
        if not self._per_loop:
            return self.client
        loop = asyncio.get_running_loop()
        with self._lock:
            bound = self._clients.get(loop)
            if bound is None:
                import anthropic

                http = anthropic.DefaultAsyncHttpxClient(event_hooks={"request": [_guard_request]})
                closer = loop.create_task(_close_when_loop_ends(http), name="agentlab: close the Messages API pool")
                bound = self._clients[loop] = (self.client.copy(http_client=http), closer)  # the loop keeps no task alive
        return bound[0]


async def _guard_request(request: Any) -> None:
    """Every request the pool sends (redirects included) passes the local-only check."""
    check_url(str(request.url))


async def _close_when_loop_ends(http: Any) -> None:
    """Wait until the loop cancels every task on shutdown (``asyncio.run`` does), then close the pool."""
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        await http.aclose()


def _owns_default_pool(client: Any) -> bool:
    from anthropic._base_client import AsyncHttpxClientWrapper  # the SDK's own default pool

    return type(getattr(client, "_client", None)) is AsyncHttpxClientWrapper


# ------------------------------------------------------------------ pure logic
def with_cache_breakpoints(
    system: str | list[Block] | None, tools: list[dict[str, Any]], messages: list[Message], *, ttl: str | None = None
) -> tuple[str | list[Block] | None, list[dict[str, Any]], list[Message]]:
    """Copies of the request parts with cache breakpoints on the prefix and the latest message.

    The prefix (tools, then system) is cached at the system prompt's end, or at
    the last tool when there is no system prompt. The latest message gets a
    breakpoint on its last cacheable block, so the next call reads the whole
    history so far from the cache. ``ttl="1h"`` asks for one-hour entries
    (the API's default is five minutes). Nothing passed in is modified.
    """
    mark = {**EPHEMERAL, "ttl": ttl} if ttl else dict(EPHEMERAL)
    if isinstance(system, str) and system:
        system = [{"type": "text", "text": system, "cache_control": dict(mark)}]
    elif isinstance(system, list) and system:
        system = [*system[:-1], {**system[-1], "cache_control": dict(mark)}]
    elif tools:
        tools = [*tools[:-1], {**tools[-1], "cache_control": dict(mark)}]
    if messages:
        marked = _mark_message(messages[-1], mark)
        if marked is not None:
            messages = [*messages[:-1], marked]
    return system, tools, messages


def _mark_message(message: Message, mark: dict[str, Any] = EPHEMERAL) -> Message | None:
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None
        return {**message, "content": [{"type": "text", "text": content, "cache_control": dict(mark)}]}
    if not isinstance(content, list):
        return None
    for i in range(len(content) - 1, -1, -1):
        block = content[i]
        if not isinstance(block, dict) or block.get("type") in UNCACHEABLE:
            continue
        if block.get("type") == "text" and not block.get("text"):
            continue  # the API refuses cache_control on an empty text block
        return {**message, "content": [*content[:i], {**block, "cache_control": dict(mark)}, *content[i + 1:]]}
    return None


def _turn_key(messages: list[Message]) -> str:
    """Where a remembered container id belongs: the conversation's latest assistant turn.

    Keyed by that turn's position and its first block id (a container reply
    always has one: the code-execution call), else a hash of its text, so
    the tool results or the user message that follow do not change the key.
    """
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), -1)
    if at < 0:
        return ""
    content = messages[at].get("content")
    blocks = content if isinstance(content, list) else []
    mark = next((b["id"] for b in blocks if isinstance(b, dict) and isinstance(b.get("id"), str)), None)
    if mark is None:
        mark = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()
    return f"{at}:{mark}"


def _after_shown(err: AgentlabError, shown: int, what: str) -> AgentlabError:
    """A stream failure after fragments were shown is not retried: the watcher saw a reply that will not come."""
    if shown == 0 or not isinstance(err, RetryableError):
        return err
    out = ModelError(
        f"{what} after {shown} fragments of the reply were shown; not retried (a new reply would not match them): {err}",
        reason="model error",
    )
    for attr in ("status_code", "request_id"):
        if hasattr(err, attr):
            setattr(out, attr, getattr(err, attr))
    return out


def _size(params: Mapping[str, Any]) -> int:
    """The request body's size in bytes, as the API measures it for its 413 limit."""
    try:
        return len(json.dumps(params, separators=(",", ":"), default=str).encode())
    except (TypeError, ValueError):
        return 0


def _read_body(exc: Any) -> Any:
    """The JSON body of an HTTP error raised while opening a stream (the SDK may leave it unread)."""
    body = getattr(exc, "body", None)
    if body is not None:
        return body
    try:
        return json.loads(exc.response.text)
    except Exception:
        return None


MIN_THINKING_BUDGET = 1024


def _fit_thinking(thinking: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """The thinking setting, its budget kept below ``max_tokens`` as the API requires.

    The hard cost guard may lower ``max_tokens`` under the configured budget;
    the budget then shrinks with it, down to the API's minimum, below which
    the call runs without extended thinking rather than being refused.
    """
    budget = thinking.get("budget_tokens")
    if thinking.get("type") != "enabled" or not isinstance(budget, int) or budget < max_tokens:
        return thinking
    if max_tokens - 1 >= MIN_THINKING_BUDGET:
        return {**thinking, "budget_tokens": max_tokens - 1}
    return {"type": "disabled"}


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, else ``retry-after`` (seconds or a date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000
            return value if value > 0 else None
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra is None:
        return None
    try:
        value = float(ra)
    except ValueError:
        parsed = email.utils.parsedate_tz(ra)
        if parsed is None:
            return None
        value = email.utils.mktime_tz(parsed) - (time.time() if now is None else now)
    return value if value > 0 else None


def api_error(
    status: int, headers: Mapping[str, str], body: Any, *, secrets: tuple[str, ...] = (), request_bytes: int | None = None
) -> AgentlabError:
    """The agentlab error for an HTTP error from the Messages API: the policy table for the model.

    Billing/spend limits, 401 and 403 are fatal; HTTP 413 is the request's
    *byte size* over the API's limit (stops with "request too large", the size
    given); a prompt too long for the model's context stops with "context
    window"; ``x-should-retry`` is obeyed; 408,
    409, 429 and 5xx are retryable (with the server's ``retry-after``); any
    other 4xx stops with "model error" and the API's message.
    """
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    err_type = error.get("type") if isinstance(error.get("type"), str) else None
    api_message = error.get("message") if isinstance(error.get("message"), str) else (body if isinstance(body, str) else "")
    details = error.get("details")
    details = details if isinstance(details, dict) else {}
    code = details.get("error_code") if isinstance(details.get("error_code"), str) else None
    request_id = headers.get("request-id")
    what = " ".join(x for x in (str(status), err_type, f"[{code}]" if code else None) if x)
    text = _scrub(f"{what}: {api_message or 'no message'}" + (f" (request {request_id})" if request_id else ""), secrets)

    err: AgentlabError
    should_retry = (headers.get("x-should-retry") or "").lower()
    if status == 402 or err_type == "billing_error" or code in SPEND_LIMIT_CODES:
        err = FatalError(f"billing: {text}; a retry cannot fix this")
    elif status == 401:
        err = AuthenticationFailed(f"the API key was refused: {text}")
    elif status == 403:
        err = PermissionDenied(f"permission denied by the Messages API: {text}")
    elif status == 413 or err_type == "request_too_large":
        size = f"the request is {request_bytes:,} bytes" if request_bytes else "the request body is too large"
        err = ModelError(
            f"{size}, over the Messages API's request size limit ({MAX_REQUEST_BYTES // (1024 * 1024)} MB): {text}; "
            "send fewer or smaller documents/images (this is the byte size, not the context window)",
            reason="request too large",
        )
    elif status == 400 and _TOO_LONG.search(api_message or ""):
        err = ModelError(f"the request is too large for the model's context: {text}", reason="context window")
    elif should_retry == "true" or (should_retry != "false" and (status in (408, 409, 429) or status >= 500)):
        err = RetryableError(text, retry_after=retry_after(headers))
    elif should_retry == "false" and status >= 500:
        err = ModelError(f"{text} (the server said not to retry)", reason="model error")
    else:
        err = ModelError(text, reason="model error")
    err.status_code = status  # typed fields of AgentlabError
    err.request_id = request_id
    return err


# ------------------------------------------------------------------ helpers
def _secrets(client: Any) -> tuple[str, ...]:
    return tuple(s for s in (getattr(client, "api_key", None), getattr(client, "auth_token", None)) if s)


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.netloc.rsplit("@", 1)[-1] or url

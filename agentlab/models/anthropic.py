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
import hashlib
import json
import threading
import warnings
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from .._checks import is_whole
from .._safe_text import without_lone_surrogates
from ..errors import (
    AgentlabError,
    ModelError,
)
from ..messages import Block, MalformedReply, Message
from ..netguard import check_url
from ..pricing import RequestTerms, server_tool_passes
from ..redact import scrub as _scrub  # noqa: F401 (the one owner of scrubbing; its old name here)
from ..usage_fields import Caps, check_usage, malformed_usage
from ._errors import (  # noqa: F401 (the policy table's old import path)
    MAX_REQUEST_BYTES,
    SPEND_LIMIT_CODES,
    STREAM_ERROR_STATUS,
    api_error,
    retry_after,
    sdk_error,
)
from .base import ModelRequest
from .request_rules import API_VERSION, check_request, check_settings, input_window
from .streaming import StreamAssembler

DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_TIMEOUT = 600.0
"""Seconds a call may take when the run has no deadline (the SDK's own default)."""

EPHEMERAL = {"type": "ephemeral"}
UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})

CacheMode = bool | Literal["5m", "1h", "automatic"]


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
        params: any other ``messages.create`` arguments (``context_management``, ``fallbacks``, ...), checked
            against the API's rules (:mod:`agentlab.models.request_rules`) when the model is made.
        cache_diagnostics: ask the API for its cache diagnostics: each request names the reply it follows
            (``diagnostics.previous_message_id``, ``null`` on a conversation's first call) and a reply whose
            prompt parted from that request's carries ``diagnostics.cache_miss_reason`` (model, system, tools or
            messages changed), kept in the step's ``model_called`` event so :func:`agentlab.costs.cache_busts`
            checks its own attribution against the API's. Off by default: the API then keeps a fingerprint of
            every request (hashes and token counts, for a limited time), which a user opts into.
        temperature: refused. anthropic SDK 2.x has no sampling parameters, and the API version it speaks
            (``2026-10-21``) answers 400 to ``temperature``, ``top_p`` and ``top_k`` even at their defaults.
    """

    bills = True
    """Every request sent may be billed by the API, even one whose reply never came back: a call Stop or the
    deadline abandons in flight is charged at its worst case (:class:`~agentlab.models.base.Capabilities`)."""

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
        betas: Sequence[str] | None = None,
        temperature: float | None = None,
        tool_choice: Mapping[str, Any] | None = None,
        repeat_tool_choice: bool = False,
        speed: Literal["standard", "fast"] | None = None,
        inference_geo: str | None = None,
        output_format: Mapping[str, Any] | None = None,
        cache_diagnostics: bool = False,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must be a non-empty model id string, got {model!r}")
        if max_tokens is not None and not is_whole(max_tokens, 1):
            raise ValueError(f"max_tokens must be an int >= 1 or None, got {max_tokens!r}")
        if cache not in (True, False, "5m", "1h", "automatic"):
            raise ValueError(f"cache must be '5m', '1h', True (= '5m'), False or 'automatic', got {cache!r}")
        tools_given = list(server_tools or [])
        for i, tool in enumerate(tools_given):
            if not isinstance(tool, Mapping) or not isinstance(tool.get("type"), str) or not tool.get("name"):
                raise ValueError(
                    f"server_tools[{i}] must be a server tool definition with 'type' and 'name', got {tool!r}"
                )
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        if not isinstance(cache_diagnostics, bool):
            raise ValueError(f"cache_diagnostics must be True or False, got {cache_diagnostics!r}")
        if cache_diagnostics and "diagnostics" in (params or {}):
            raise ValueError("diagnostics given both as cache_diagnostics=True and in params=; give it once")
        reserved = {"model", "max_tokens", "messages", "system", "tools", "timeout", "stream"} & set(params or {})
        if reserved:
            raise ValueError(f"params must not set {sorted(reserved)}: the engine supplies them")
        if temperature is not None:
            raise ValueError(
                f"AnthropicModel(temperature={temperature!r}): anthropic SDK 2.x has no sampling parameters and the "
                f"Messages API version {API_VERSION} refuses temperature, top_p and top_k (400, even at 1.0; "
                "the 2026-10-21 migration guide). Remove it: Claude samples at its defaults"
            )
        typed = _typed_params(betas, tool_choice, speed, inference_geo, output_format)
        both = sorted(set(typed) & set(params or {}))
        if both:
            raise ValueError(f"{both} given both as arguments and in params=; give each once")
        if thinking and max_tokens is not None:
            _check_thinking(thinking, max_tokens)
        refused = check_settings(
            {
                "model": model,
                **({"max_tokens": max_tokens} if max_tokens is not None else {}),
                **({"thinking": dict(thinking)} if thinking else {}),
                **typed,
                **dict(params or {}),
            }
        )
        if refused:
            raise ValueError(f"AnthropicModel({model!r}) would be refused by the Messages API: " + "; ".join(refused))
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
        else:
            client = _async_client(client)
        if client.max_retries not in (0, anthropic.DEFAULT_MAX_RETRIES):
            warnings.warn(
                f"AnthropicModel turns the SDK's own retries off (the client set max_retries={client.max_retries}): "
                "agentlab retries instead, each wait bounded by the run's deadline and recorded as an event; "
                "set how many attempts with policy=agentlab.Policy(max_attempts=...)",
                UserWarning,
                stacklevel=2,
            )
        if client.max_retries != 0:
            client = client.with_options(max_retries=0)
        self.client = client
        # The SDK's default HTTP pool is bound to the event loop that first used it, and
        # `agentlab.run()` starts a new loop per run: keep one pool per loop (see _client_here).
        self._per_loop = _owns_default_pool(client)
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        # Each loop's pool closer lives as long as this model; the model let go while a loop goes on (a notebook's,
        # an experiment's cells) closes its pools on their loops, rather than leaving them to the garbage collector.
        weakref.finalize(self, _close_pools_of_a_dropped_model, self._clients)
        self._busy: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.model = model
        self.name = name or model
        self.max_tokens = max_tokens
        self.cache: CacheMode = cache
        self.timeout = float(timeout)
        self.thinking = dict(thinking) if thinking else None
        self.params = {**typed, **dict(params or {})}
        self.repeat_tool_choice = bool(repeat_tool_choice)
        self.stream = bool(stream)
        self.server_tools = [dict(t) for t in tools_given]
        self.cache_diagnostics = cache_diagnostics
        self._containers: dict[str, str] = {}
        self._reply_ids: dict[str, str] = {}  # a conversation's latest assistant turn -> that reply's id

    @property
    def caches(self) -> bool | str:
        """Truthy when prompt caching is on (the hard cost guard then prices input as cache writes):
        ``"1h"`` for one-hour breakpoints, else ``True``."""
        return "1h" if self.cache == "1h" else self.cache is not False

    @property
    def platform(self) -> str:
        """The genai-prices provider this client reaches Claude through: prices follow it where they differ."""
        kind = type(self.client).__name__
        return "aws" if "Bedrock" in kind or "AWS" in kind else "google" if "Vertex" in kind else "anthropic"

    @property
    def request_terms(self) -> RequestTerms:
        """What the requests ask for that changes their price (fast mode, geography, compaction,
        fallback models), so the hard cost guard's worst case includes it."""
        p = self.params
        trigger = None
        cm = p.get("context_management")
        for edit in (cm.get("edits") or []) if isinstance(cm, Mapping) else []:
            if isinstance(edit, Mapping) and str(edit.get("type") or "").startswith("compact_"):
                t = edit.get("trigger")
                value = (
                    t.get("value")
                    if isinstance(t, Mapping) and t.get("type", "input_tokens") == "input_tokens"
                    else None
                )
                trigger = value if is_whole(value) else COMPACTION_TRIGGER
        chain = p.get("fallbacks")
        models = (
            tuple(f["model"] for f in chain if isinstance(f, Mapping) and isinstance(f.get("model"), str))
            if isinstance(chain, list)
            else ()
        )
        speed, geo = p.get("speed"), p.get("inference_geo")
        passes, added, unbounded = server_tool_passes(self.server_tools)
        return RequestTerms(
            speed=speed if isinstance(speed, str) else None,
            inference_geo=geo if isinstance(geo, str) else None,
            compaction_at=trigger,
            models=models,
            passes=passes,
            pass_input=added,
            unbounded=unbounded,
        )

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
        if self.cache_diagnostics:
            params["diagnostics"] = {"previous_message_id": self._reply_ids.get(_turn_key(request.messages))}
        params.update(self.params)
        choice = params.get("tool_choice")
        if (
            isinstance(choice, Mapping)
            and choice.get("type") in ("tool", "any")
            and not self.repeat_tool_choice
            and _tool_ran(request.messages)
        ):
            # A forced choice made the model call the tool once; forcing it again would loop forever.
            params["tool_choice"] = {
                "type": "auto",
                **{k: v for k, v in choice.items() if k == "disable_parallel_tool_use"},
            }
        return without_lone_surrogates(params)  # the SDK cannot encode them; the API gets U+FFFD

    def remember_container(self, messages: list[Message], reply: Mapping[str, Any]) -> None:
        """Keep the reply's container id (and, asking for cache diagnostics, its own id) for the request that
        follows it (history + this reply)."""
        container = reply.get("container")
        cid = container.get("id") if isinstance(container, Mapping) else container
        rid = reply.get("id") if self.cache_diagnostics else None
        if not (isinstance(cid, str) and cid) and not (isinstance(rid, str) and rid):
            return
        key = _turn_key([*messages, {"role": "assistant", "content": reply.get("content") or []}])
        for kept, value in ((self._containers, cid), (self._reply_ids, rid)):
            if isinstance(value, str) and value:
                if len(kept) >= 256:
                    kept.pop(next(iter(kept)))
                kept[key] = value

    async def complete(self, request: ModelRequest) -> dict[str, Any]:
        """One Messages API call through the SDK (streamed unless ``stream=False``): the reply as a dict, usage
        and cost included.
        """
        with self._in_flight():
            return await self._complete(request)

    async def _complete(self, request: ModelRequest) -> dict[str, Any]:

        check_url(str(self.client.base_url))
        client = self._client_here()
        timeout = self.timeout if request.timeout is None else max(request.timeout, 0.001)
        secrets = _secrets(self.client)
        params = self.build_params(request)
        refused = check_request(params)
        if refused:  # nothing sent: a clear error at $0 instead of the API's 400
            raise ModelError("the Messages API would refuse this request: " + "; ".join(refused))
        if self.stream:
            reply = self._believed(await self._streamed(client, params, timeout, request, secrets), params)
            self.remember_container(request.messages, reply)
            return _with_parsed(reply, params)
        try:
            raw = await client.beta.messages.with_raw_response.create(**params, timeout=timeout)
            body = await raw.read()
        except Exception as exc:
            err = sdk_error(exc, secrets=secrets, timeout=timeout, request_bytes=_size(params), sent=True)
        else:
            try:
                data = json.loads(body)
            except ValueError:
                data = None
            if not isinstance(data, dict):
                raise ModelError(f"the Messages API reply is not a JSON object: {body[:200]!r}")
            data = self._believed(data, params)
            self.remember_container(request.messages, data)
            return _with_parsed({**data, "request_id": raw.request_id}, params)
        raise err  # outside the except block: no SDK exception (and its auth headers) chained

    def _believed(self, reply: dict[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
        """The reply, once its usage passed :func:`~agentlab.usage_fields.check_usage` against this request's
        caps (output: ``max_tokens`` per pass; input: the context window per pass; server-tool requests: their
        ``max_uses``). A usage that fails is a malformed reply the API may have billed: the engine charges the
        request's worst case (``maybe_billed``), never what the usage claims."""
        terms = self.request_terms
        window = input_window(self.model)
        uses = [u for t in self.server_tools if isinstance(u := t.get("max_uses"), int)]
        caps = Caps(
            output=params["max_tokens"] * terms.passes,
            input=window * terms.passes if window else None,
            requests=sum(uses) if self.server_tools and len(uses) == len(self.server_tools) else None,
        )
        problems = check_usage(reply.get("usage"), caps)
        if not problems:
            return reply
        err = ModelError(
            f"malformed reply: {malformed_usage(problems)}; charged at the request's worst case, as the API may "
            "have billed it",
            reason="malformed reply",
        )
        err.maybe_billed = True  # type: ignore[attr-defined]
        raise err

    async def _streamed(
        self, client: Any, params: dict[str, Any], timeout: float, request: ModelRequest, secrets: tuple[str, ...]
    ) -> dict[str, Any]:
        """One streamed call through the SDK's stream: each fragment to ``request.on_delta`` as it arrives,
        the SDK's assembled message at the end."""
        import httpx2

        on_delta = request.on_delta
        acc = StreamAssembler()
        request_id = None
        err: AgentlabError
        try:
            stream = await client.beta.messages.create(**params, stream=True, timeout=timeout)
            request_id = stream.response.headers.get("request-id")
            acc = StreamAssembler(stream.response.request.headers)
            async with stream:  # closed on any exit, inside this event loop
                async for event in stream:
                    delta = acc.feed(event)
                    if delta is not None and on_delta is not None:
                        on_delta(*delta)
            if not acc.stopped:
                raise httpx2.RemoteProtocolError("the stream ended before message_stop")
            return {**acc.result(), "request_id": request_id}
        except MalformedReply:
            raise
        except Exception as exc:
            err = sdk_error(
                exc,
                secrets=secrets,
                timeout=timeout,
                request_bytes=_size(params),
                shown=acc.deltas,
                began=acc.began,
                sent=True,
            )
        raise err  # outside the except block: no SDK exception (and its auth headers) chained

    async def count_tokens(self, request: ModelRequest) -> int:
        """The exact input tokens of ``request`` (the API's free ``count_tokens``), for the hard cost guard."""
        from .counting import count_input_tokens

        check_url(str(self.client.base_url))
        timeout = self.timeout if request.timeout is None else max(request.timeout, 0.001)
        with self._in_flight():
            return await count_input_tokens(
                self._client_here(),
                self.build_params(request),
                timeout=timeout,
                secrets=_secrets(self.client),
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
        next call on this loop opens a fresh pool. A custom ``http_client`` is
        not closed: its idle connections are (the caller's client stays usable).
        """
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
        shuts down. A client given with a custom ``http_client`` (proxies, a
        company CA bundle) is used as is, and the connections its pool opened on
        a loop are closed when that loop shuts down (the pool itself stays
        usable): a later run on a new loop opens its own, instead of failing
        on a dead one after the server may already have answered.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            bound = self._clients.get(loop)
            if bound is None:
                if not self._per_loop:
                    name = "agentlab: close this loop's connections of the custom http_client"
                    closer = loop.create_task(_drop_connections_when_loop_ends(self.client._client), name=name)
                    bound = self._clients[loop] = (self.client, closer)
                else:
                    import anthropic

                    http = anthropic.DefaultAsyncHttpxClient(
                        event_hooks={"request": [_guard_request]}, verify=_verifying_context()
                    )
                    closer = loop.create_task(_close_when_loop_ends(http), name="agentlab: close the Messages API pool")
                    bound = self._clients[loop] = (
                        self.client.copy(http_client=http),
                        closer,
                    )  # the loop keeps no task alive
        return bound[0]


_SSL_CONTEXTS: dict[tuple[str | None, str | None], Any] = {}
_SSL_LOCK = threading.Lock()


def _verifying_context() -> Any:
    """The SSL context a fresh pool verifies with: the one ``verify=True`` builds, built once a process.

    Building it loads the CA bundle (~20 ms, most of a short run), and each ``agentlab.run()`` runs on a
    fresh event loop with a fresh pool. One per ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` (what it reads), so a
    change of bundle is still seen; an ``SSLContext`` may be shared by connections, threads and loops.
    """
    import os

    import httpx2

    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _SSL_LOCK:
        ctx = _SSL_CONTEXTS.get(key)
        if ctx is None:
            ctx = _SSL_CONTEXTS[key] = httpx2.create_ssl_context(verify=True)
    return ctx


async def _guard_request(request: Any) -> None:
    """Every request the pool sends (redirects included) passes the local-only check."""
    check_url(str(request.url))


def _close_pools_of_a_dropped_model(clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]) -> None:
    """Cancel each loop's pool closer, on its own loop's thread: its cancellation closes the pool there."""
    for loop, (_client, closer) in list(clients.items()):
        with contextlib.suppress(RuntimeError):  # that loop is closed already: its tasks were cancelled then
            loop.call_soon_threadsafe(closer.cancel)


async def _close_when_loop_ends(http: Any) -> None:
    """Wait until the loop cancels every task on shutdown (``asyncio.run`` does), then close the pool.

    Only a cancellation closes it: a coroutine closed without its loop (collected on a loop closed without
    cancelling it) can await nothing, and the pool's sockets then close as they are collected."""
    try:
        await asyncio.get_running_loop().create_future()
    except asyncio.CancelledError:
        await http.aclose()
        raise


async def _drop_connections_when_loop_ends(http: Any) -> None:
    """On loop shutdown, close the idle connections of a custom ``http_client``'s pools.

    This run's calls are over, so its connections are idle; they belong to a
    loop that is ending and would fail the next run. Connections in use (the
    caller's own calls on another loop) are left alone, and the pool itself
    stays usable, so the caller's client keeps working.
    """
    try:
        await asyncio.get_running_loop().create_future()
    except asyncio.CancelledError:  # (as in _close_when_loop_ends: a coroutine closed without its loop awaits nothing)
        transports = [getattr(http, "_transport", None), *getattr(http, "_mounts", {}).values()]
        for transport in transports:
            pool = getattr(transport, "_pool", None)
            connections = getattr(pool, "_connections", None)
            if not isinstance(connections, list):
                continue
            with getattr(pool, "_optional_thread_lock", contextlib.nullcontext()):
                idle = [c for c in connections if callable(getattr(c, "is_idle", None)) and c.is_idle()]
                for c in idle:
                    connections.remove(c)
            for c in idle:
                with contextlib.suppress(Exception):
                    await c.aclose()
        raise


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
        return {**message, "content": [*content[:i], {**block, "cache_control": dict(mark)}, *content[i + 1 :]]}
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


def _size(params: Mapping[str, Any]) -> int:
    """The request body's size in bytes, as the API measures it for its 413 limit."""
    try:
        return len(json.dumps(params, separators=(",", ":"), default=str).encode())
    except (TypeError, ValueError):
        return 0


MIN_THINKING_BUDGET = 1024


def _fit_thinking(thinking: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """The thinking setting, its budget kept below ``max_tokens`` as the API requires.

    The hard cost guard may lower ``max_tokens`` under the configured budget;
    the budget then shrinks with it, down to the API's minimum, below which
    the call runs without extended thinking rather than being refused, and a
    warning names both numbers.
    """
    budget = thinking.get("budget_tokens")
    if thinking.get("type") != "enabled" or not isinstance(budget, int) or budget < max_tokens:
        return thinking
    if max_tokens - 1 >= MIN_THINKING_BUDGET:
        return {**thinking, "budget_tokens": max_tokens - 1}
    warnings.warn(
        f"this call runs without extended thinking: max_tokens={max_tokens} (lowered by the cost guard or the run) "
        f"leaves no room for the thinking budget ({budget} tokens; the API's minimum is {MIN_THINKING_BUDGET})",
        UserWarning,
        stacklevel=2,
    )
    return {"type": "disabled"}


def _check_thinking(thinking: Mapping[str, Any], max_tokens: int) -> None:
    budget = thinking.get("budget_tokens")
    if thinking.get("type") == "enabled" and isinstance(budget, int) and budget >= max_tokens:
        raise ValueError(
            f"thinking budget_tokens={budget} must be below max_tokens={max_tokens} (the API refuses it otherwise); "
            "raise max_tokens or lower the budget"
        )


COMPACTION_TRIGGER = 150_000
"""Input tokens at which the API compacts when a ``compact_*`` edit names no trigger (the SDK's documented default)."""


def _typed_params(
    betas: Sequence[str] | None,
    tool_choice: Mapping[str, Any] | None,
    speed: str | None,
    inference_geo: str | None,
    output_format: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The typed request arguments as ``messages.create`` takes them, each checked."""
    out: dict[str, Any] = {}
    if betas is not None:
        if isinstance(betas, str) or not all(isinstance(b, str) and b for b in betas):
            raise TypeError(f"betas must be a list of beta names, got {betas!r}")
        out["betas"] = list(betas)
    if tool_choice is not None:
        if not isinstance(tool_choice, Mapping) or tool_choice.get("type") not in ("auto", "any", "tool", "none"):
            raise ValueError(
                f"tool_choice must be {{'type': 'auto' | 'any' | 'tool' | 'none', ...}}, got {tool_choice!r}"
            )
        if tool_choice.get("type") == "tool" and not tool_choice.get("name"):
            raise ValueError("tool_choice {'type': 'tool'} needs the tool's 'name'")
        out["tool_choice"] = dict(tool_choice)
    if speed is not None:
        if speed not in ("standard", "fast"):
            raise ValueError(f"speed must be 'standard' or 'fast', got {speed!r}")
        out["speed"] = speed
    if inference_geo is not None:
        if not isinstance(inference_geo, str) or not inference_geo:
            raise ValueError(f"inference_geo must be a region name such as 'us' or 'global', got {inference_geo!r}")
        out["inference_geo"] = inference_geo
    if output_format is not None:
        if (
            not isinstance(output_format, Mapping)
            or output_format.get("type") != "json_schema"
            or not isinstance(output_format.get("schema"), Mapping)
        ):
            raise ValueError(
                f"output_format must be {{'type': 'json_schema', 'schema': {{...}}}}, got {output_format!r}"
            )
        out["output_config"] = {"format": dict(output_format)}
    return out


def _with_parsed(reply: dict[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The reply with its answer parsed (``parsed``) when the request asked for a JSON schema output.

    The answer that does not parse is a :class:`MalformedReply` (charged, like any reply with usage).
    """
    config = params.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    if (
        not isinstance(fmt, Mapping)
        or fmt.get("type") != "json_schema"
        or reply.get("stop_reason") not in ("end_turn", "stop_sequence")
    ):
        return reply
    text = "".join(
        b.get("text", "") for b in reply.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"
    )
    try:
        return {**reply, "parsed": json.loads(text)}
    except ValueError as exc:
        raise MalformedReply(
            f"the answer is not the JSON the output format asked for ({exc}): {text[:120]!r}", reply
        ) from None


def _tool_ran(messages: list[Message]) -> bool:
    """Has a tool's result been sent in this conversation (after the model's first call)?"""
    for m in messages:
        content = m.get("content")
        if (
            m.get("role") == "user"
            and isinstance(content, list)
            and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        ):
            return True
    return False


def _async_client(client: Any) -> Any:
    """The async client to use for ``client``: an async one as is; a sync ``Anthropic`` as its async twin."""
    import anthropic

    if isinstance(client, (anthropic.AsyncAnthropic, anthropic.AsyncAnthropicBedrock, anthropic.AsyncAnthropicVertex)):
        return client
    if isinstance(client, anthropic.Anthropic):
        if not _owns_sync_default_pool(client):
            warnings.warn(
                "the sync client's custom http_client cannot be used from asyncio; AnthropicModel makes an "
                "anthropic.AsyncAnthropic with the same key, URL, headers and timeout (pass an AsyncAnthropic "
                "with http_client=httpx2.AsyncClient(...) to keep proxies or CA settings)",
                UserWarning,
                stacklevel=3,
            )
        return anthropic.AsyncAnthropic(
            api_key=client.api_key,
            auth_token=client.auth_token,
            base_url=client.base_url,
            default_headers=dict(client._custom_headers),
            timeout=client.timeout,
            max_retries=client.max_retries,
        )
    sync_twins = {"AnthropicBedrock": "AsyncAnthropicBedrock", "AnthropicVertex": "AsyncAnthropicVertex"}
    twin = sync_twins.get(type(client).__name__)
    if twin:
        raise TypeError(
            f"client: agentlab calls Claude from asyncio; pass anthropic.{twin}(...) instead of {type(client).__name__}"
        )
    raise TypeError(
        "client must be an anthropic client (AsyncAnthropic, Anthropic, AsyncAnthropicBedrock, AsyncAnthropicVertex, "
        f"AsyncAnthropicFoundry), got {type(client).__name__}"
    )


def _owns_sync_default_pool(client: Any) -> bool:
    from anthropic._base_client import SyncHttpxClientWrapper

    return type(getattr(client, "_client", None)) is SyncHttpxClientWrapper


# ------------------------------------------------------------------ helpers
def _secrets(client: Any) -> tuple[str, ...]:
    return tuple(s for s in (getattr(client, "api_key", None), getattr(client, "auth_token", None)) if s)


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.netloc.rsplit("@", 1)[-1] or url

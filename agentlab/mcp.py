"""Tools that live in an MCP server, used as agentlab tools.

``agentlab.mcp_tools("python server.py")`` (a stdio command) or
``agentlab.mcp_tools("http://127.0.0.1:8000/mcp")`` (streamable HTTP)
connects with the official ``mcp`` SDK and returns the server's tools with
their names, descriptions and input schemas. What the engine needs to know
is mapped from MCP's own vocabulary:

* ``readOnlyHint: true`` makes a tool a *read* (runs alongside other reads),
  but only for a server the user calls trusted (``trusted=True``): a hint is
  the server's claim, and a wrong "read" would let writes run concurrently.
  Everything else is a *write* (alone, in order).
* A result with ``isError`` is recoverable: the model gets the server's text.
* A write runs once. A connection that drops (or a per-call ``timeout``
  that passes) after a call was sent leaves its outcome unknown: the call is
  retried (on a new connection) only for a tool that is safe to repeat,
  ``readOnlyHint`` or ``idempotentHint`` on a trusted server; for any other
  the run stops with :class:`~agentlab.errors.OutcomeUnknown` saying so, and
  nothing is sent twice. The same rule holds over stdio and streamable HTTP.
* What the server sends is checked as it arrives: a line that is not
  JSON-RPC or an answer to a request never sent is a :class:`ProtocolError`,
  named at once (no waiting out the deadline), and the connection is closed.
* A tool the server says it does not know is fatal.
* The run's deadline bounds every call (a cancelled call is cancelled on
  the connection too); ``timeout`` adds a per-call limit of its own.

Why a thread: the SDK's client lives in an anyio task group that must be
entered and left by one task, while ``agentlab.run()`` starts a fresh event
loop for every run. The connection therefore runs on its own event loop in a
daemon thread, and tool calls from any run's loop are handed over to it.

Its life: held in a ``with`` (or ``async with``) block, the connection
serves every run inside the block and closes at its end. Not held, it
follows the run: it closes when the event loop of the run that used it
ends (``agentlab.run()`` gives each run its own loop), and opens again if
another run calls one of its tools. In a notebook the kernel's loop never
ends, so there hold it in a ``with`` block or call ``close()``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import shlex
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from .errors import FatalError, OutcomeUnknown, RetryableError, ToolError, UnknownTool
from .tools import SchemaTool, Tool

try:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCError, JSONRPCRequest, JSONRPCResponse
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("agentlab.mcp needs the MCP SDK: pip install 'agentlab-loop[mcp]'") from exc

__all__ = ["MCPConnection", "ProtocolError", "mcp_tools"]

_DROPPED = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
    BrokenPipeError,
    EOFError,
)
_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001


class ProtocolError(FatalError):
    """The MCP server broke JSON-RPC (a line that is not a message, an answer to a request never sent)."""


def server_parameters(server: Any, *, env: dict[str, str] | None = None, cwd: str | None = None) -> Any:
    """What to connect to: an ``http(s)://`` URL, a command line (str or list), or SDK parameters."""
    if isinstance(server, StdioServerParameters):
        return server
    if isinstance(server, str):
        if server.startswith(("http://", "https://")):
            return server
        parts = shlex.split(server)
    elif isinstance(server, Sequence) and server and all(isinstance(p, str) for p in server):
        parts = list(server)
    else:
        raise TypeError(
            "mcp_tools: server must be an http(s) URL, a command line (a string or a list of strings) "
            f"or mcp.StdioServerParameters, got {server!r}"
        )
    if not parts:
        raise ValueError("mcp_tools: the server command is empty")
    return StdioServerParameters(command=parts[0], args=parts[1:], env=env, cwd=cwd)


class MCPConnection:
    """A live connection to one MCP server and the agentlab tools it offers.

    Iterating it yields the tools, so it can be passed as ``tools=``. Use it
    as a context manager (``with`` or ``async with``) to bound its life.
    """

    def __init__(
        self,
        server: Any,
        *,
        trusted: bool = False,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        self.params = server_parameters(server, env=env, cwd=cwd)
        self.trusted = bool(trusted)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.tools: list[Tool] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._serving: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._held = False  # inside a with block: the block, not the run, ends it
        self._watched: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        self._watchers: set[asyncio.Task[None]] = set()
        self._repeatable: set[str] = set()  # tools safe to send again after a drop (trusted read-only/idempotent hints)
        self._fault: str | None = None  # the protocol error that ended the current connection, if one did

    # ---------------------------------------------------------- lifetime
    def open(self) -> MCPConnection:
        """Start the server (or reach the URL) and list its tools. Idempotent."""
        if self._thread is not None:
            return self
        self._closing = self._lock = self._serving = None  # fresh for the new loop (a reopen)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="agentlab-mcp", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            listing = asyncio.run_coroutine_threadsafe(self._connect(), loop).result(self.connect_timeout)
        except BaseException as exc:
            self.close()
            raise ConnectionError(
                f"mcp_tools: could not connect to {self._where()}: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            self.tools = [self._tool(t) for t in listing]
        except BaseException:  # a tool we cannot offer (a name the API refuses) closes what was opened
            self.close()
            raise
        atexit.register(self.close)
        return self

    def close(self) -> None:
        """Close the connection (a stdio server is stopped) and its thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        atexit.unregister(self.close)
        if loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(10)
            except Exception:
                pass
            loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if not loop.is_running():
            loop.close()

    @property
    def is_open(self) -> bool:
        return self._thread is not None

    def __enter__(self) -> MCPConnection:
        self._held = True
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self._held = False
        self.close()

    async def __aenter__(self) -> MCPConnection:
        self._held = True
        return await asyncio.to_thread(self.open)

    async def __aexit__(self, *exc: object) -> None:
        self._held = False
        await asyncio.to_thread(self.close)

    def _follow(self, loop: asyncio.AbstractEventLoop) -> None:
        """Not held: close when ``loop`` (the run's) shuts down and cancels its tasks."""
        if self._held or loop in self._watched:
            return
        self._watched.add(loop)

        async def until_the_loop_ends() -> None:
            try:
                await loop.create_future()  # never set: only the loop's shutdown cancels this
            except asyncio.CancelledError:
                self._watched.discard(loop)
                if not self._held:
                    self.close()
                raise

        task = loop.create_task(until_the_loop_ends(), name="agentlab-mcp-follows-run")
        self._watchers.add(task)  # a strong reference: a pending task nobody holds is garbage-collected
        task.add_done_callback(self._watchers.discard)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    def __repr__(self) -> str:
        state = "open" if self._thread is not None else "closed"
        return f"<MCPConnection {self._where()} {state}: {', '.join(t.name for t in self.tools) or 'no tools'}>"

    def _where(self) -> str:
        p = self.params
        return p if isinstance(p, str) else " ".join([p.command, *p.args])

    # ------------------------------------------ on the connection's loop
    async def _connect(self) -> list[Any]:
        """Start the task that owns the client; wait until it has listed the tools."""
        self._closing = self._closing or asyncio.Event()
        self._lock = self._lock or asyncio.Lock()
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._serving = asyncio.get_running_loop().create_task(self._serve(ready))
        return await ready

    async def _serve(self, ready: asyncio.Future[list[Any]]) -> None:
        assert self._closing is not None
        self._fault = None
        transport = streamable_http_client(self.params) if isinstance(self.params, str) else stdio_client(self.params)
        try:
            async with Client(_checked(transport, self._broken)) as client:
                tools, cursor = [], None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self._client = client
                ready.set_result(tools)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError(str(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None

    def _broken(self, problem: str | None) -> None:
        """The connection ended under us: a protocol error (``problem``) or a drop (``None``).

        Called on the connection's loop as soon as it is seen; calls in flight
        already failed (their answers can no longer come). The serving task is
        ended, so the server process and the transport close now.
        """
        if problem is not None and self._fault is None:
            self._fault = problem
        self._client = None
        serving = self._serving
        if serving is not None and not serving.done():
            asyncio.get_running_loop().call_soon(serving.cancel)

    async def _shutdown(self) -> None:
        if self._closing is not None:
            self._closing.set()
        if self._serving is not None:
            try:
                await asyncio.wait_for(self._serving, 5)
            except BaseException:
                pass

    async def _call_here(self, name: str, args: dict[str, Any]) -> str:
        assert self._lock is not None
        async with self._lock:  # one reconnect at a time after a drop
            if self._client is None:
                try:
                    await self._connect()
                except Exception as exc:
                    raise RetryableError(f"the MCP server {self._where()} is unreachable: {exc}") from exc
        client = self._client
        try:
            result = await client.call_tool(name, args, read_timeout_seconds=self.timeout)
        except MCPError as exc:
            if self._fault is not None:
                raise self._protocol_error(name) from None
            if "unknown tool" in exc.message.lower():
                raise UnknownTool(f"the MCP server does not know a tool named {name!r}: {exc.message}") from None
            if exc.code == _CONNECTION_CLOSED or "closed" in exc.message.lower():
                self._client = None
                raise self._lost(
                    name, f"the connection to the MCP server dropped during {name}: {exc.message}"
                ) from None
            if exc.code == _REQUEST_TIMEOUT:
                raise self._lost(
                    name, f"{name} got no answer from the MCP server within its {self.timeout}s timeout"
                ) from None
            raise ToolError(f"{name} failed on the MCP server: {exc.message}") from None
        except _DROPPED as exc:
            if self._fault is not None:
                raise self._protocol_error(name) from None
            self._client = None
            raise self._lost(
                name, f"the connection to the MCP server dropped during {name}: {type(exc).__name__}"
            ) from None
        text = result_text(result)
        if result.is_error:
            if text.lower().startswith("unknown tool"):
                raise UnknownTool(f"the MCP server does not know a tool named {name!r}: {text}")
            raise ToolError(text or f"{name} failed on the MCP server (no message)")
        return text

    def _lost(self, name: str, what: str) -> Exception:
        """A call sent whose answer will not come: retried only if ``name`` is safe to send again."""
        if name in self._repeatable:
            return RetryableError(what)
        return OutcomeUnknown(
            f"{what}, after the call was sent: its outcome is unknown (the server may or may not have done it). "
            f"Not sent again: {name} is not marked safe to repeat (readOnlyHint or idempotentHint on a "
            "trusted server); check its effect before running it again"
        )

    def _protocol_error(self, name: str) -> ProtocolError:
        return ProtocolError(
            f"the MCP server {self._where()} broke the protocol during {name}: {self._fault}; the connection "
            "is closed (the call's outcome is unknown)"
        )

    # ------------------------------------------------ on the run's loop
    async def call(self, name: str, args: dict[str, Any]) -> str:
        """Call a tool from any event loop; cancelling this cancels the remote call."""
        if self._loop is None:  # closed with an earlier run's loop: open again for this one
            try:
                await asyncio.to_thread(self.open)
            except ConnectionError as exc:
                raise RetryableError(str(exc)) from exc
        self._follow(asyncio.get_running_loop())
        loop = self._loop
        assert loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._call_here(name, args), loop))

    def _tool(self, spec: Any) -> Tool:
        hints = spec.annotations
        read = self.trusted and hints is not None and hints.read_only_hint is True
        name = spec.name
        if read or (self.trusted and hints is not None and hints.idempotent_hint is True):
            self._repeatable.add(name)

        async def call(**kwargs: Any) -> str:
            return await self.call(name, kwargs)

        call.__name__ = name
        return SchemaTool(
            call,
            name=name,
            description=spec.description or spec.title or name,
            input_schema=dict(spec.input_schema or {}),
            mode="read" if read else "write",
        )


@contextlib.asynccontextmanager
async def _checked(transport: Any, broken: Callable[[str | None], None]) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's transport, with what the server sends checked as it arrives.

    The SDK drops a line it cannot parse and an answer to an unknown request
    id with a debug log, so a call would wait out the whole deadline. Here
    either is a protocol error: ``broken(problem)`` is told at once and the
    session sees the stream end, which fails every call in flight. A stream
    that ends or fails (the server died, the HTTP connection broke) is a drop:
    ``broken(None)``.
    """
    async with transport as (read, write):
        to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        sent: set[Any] = set()

        async def inbound() -> None:
            problem: str | None = None
            async with to_session:
                try:
                    async for item in read:
                        problem = _problem(item, sent)
                        if problem is not None or isinstance(item, Exception):
                            break
                        await to_session.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                    pass
            broken(problem)

        async def outbound() -> None:
            async with from_session:
                async for item in from_session:
                    if isinstance(item.message, JSONRPCRequest):
                        sent.add(item.message.id)
                    await write.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(inbound)
            tg.start_soon(outbound)
            try:
                yield from_server, to_server
            finally:
                tg.cancel_scope.cancel()


def _problem(item: Any, sent: set[Any]) -> str | None:
    """What is wrong with one item the server sent, as a protocol error; ``None`` if nothing (or a drop)."""
    if isinstance(item, ValueError):  # the transport could not parse a line (pydantic errors are ValueErrors)
        first = str(item).splitlines()[0] if str(item) else type(item).__name__
        return f"it sent something that is not a JSON-RPC message ({first[:200]})"
    if isinstance(item, Exception):
        return None  # the connection failed: a drop, not the server's words
    message = item.message
    if isinstance(message, (JSONRPCResponse, JSONRPCError)):
        if message.id is None or message.id not in sent:
            return f"it answered a request that was never sent (id {message.id!r})"
        sent.discard(message.id)
    return None


def result_text(result: Any) -> str:
    """What the model sees of an MCP result: its text blocks, else its structured content."""
    parts = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
        else:
            parts.append(f"[{getattr(block, 'type', 'content')} content]")
    if parts:
        return "\n".join(parts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return ""


def mcp_tools(
    server: Any,
    *,
    trusted: bool = False,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> MCPConnection:
    """Connect to an MCP server and return its tools (an open :class:`MCPConnection`).

    ``server``: a command line (``"python server.py"`` or a list) started
    over stdio, or an ``http(s)://`` URL for streamable HTTP.
    ``trusted``: believe the server's ``readOnlyHint`` (reads run in
    parallel); otherwise every tool is a write.
    ``timeout``: a per-call limit in seconds, besides the run's deadline.
    """
    return MCPConnection(server, trusted=trusted, timeout=timeout, env=env, cwd=cwd).open()

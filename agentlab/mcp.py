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
* A dropped connection is retryable (the next attempt reconnects).
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
import json
import shlex
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from .errors import RetryableError, ToolError, UnknownTool
from .tools import SchemaTool, Tool

try:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("agentlab.mcp needs the MCP SDK: pip install 'agentlab-loop[mcp]'") from exc

__all__ = ["MCPConnection", "mcp_tools"]

_DROPPED = (
    anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionError, BrokenPipeError, EOFError,
)
_CONNECTION_CLOSED = -32000


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
        self, server: Any, *, trusted: bool = False, timeout: float | None = None,
        env: dict[str, str] | None = None, cwd: str | None = None, connect_timeout: float = 30.0,
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
            raise ConnectionError(f"mcp_tools: could not connect to {self._where()}: {type(exc).__name__}: {exc}") from exc
        self.tools = [self._tool(t) for t in listing]
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
        try:
            async with Client(self.params) as client:
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
            if "unknown tool" in exc.message.lower():
                raise UnknownTool(f"the MCP server does not know a tool named {name!r}: {exc.message}") from None
            if exc.code == _CONNECTION_CLOSED or "closed" in exc.message.lower():
                self._client = None
                raise RetryableError(f"the connection to the MCP server dropped during {name}: {exc.message}") from None
            raise ToolError(f"{name} failed on the MCP server: {exc.message}") from None
        except _DROPPED as exc:
            self._client = None
            raise RetryableError(f"the connection to the MCP server dropped during {name}: {type(exc).__name__}") from None
        text = result_text(result)
        if result.is_error:
            if text.lower().startswith("unknown tool"):
                raise UnknownTool(f"the MCP server does not know a tool named {name!r}: {text}")
            raise ToolError(text or f"{name} failed on the MCP server (no message)")
        return text

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

        async def call(**kwargs: Any) -> str:
            return await self.call(name, kwargs)

        call.__name__ = name
        return SchemaTool(
            call, name=name, description=spec.description or spec.title or name,
            input_schema=dict(spec.input_schema or {}), mode="read" if read else "write",
        )


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
    server: Any, *, trusted: bool = False, timeout: float | None = None,
    env: dict[str, str] | None = None, cwd: str | None = None,
) -> MCPConnection:
    """Connect to an MCP server and return its tools (an open :class:`MCPConnection`).

    ``server``: a command line (``"python server.py"`` or a list) started
    over stdio, or an ``http(s)://`` URL for streamable HTTP.
    ``trusted``: believe the server's ``readOnlyHint`` (reads run in
    parallel); otherwise every tool is a write.
    ``timeout``: a per-call limit in seconds, besides the run's deadline.
    """
    return MCPConnection(server, trusted=trusted, timeout=timeout, env=env, cwd=cwd).open()

"""A small MCP server for the tests, written with the ``mcp`` SDK's server API; run over stdio.

``pair_a``/``pair_b`` are reads that wait (up to 2 s) for each other: they answer
"together" only when both were in flight at once. ``append`` is a write that
logs its start and end; ``history`` reads the log. ``broken`` answers with an
error, ``slow`` takes a minute, ``crash`` kills the server.
``record_then_die`` is a write that reaches the server (it appends to the
file ``$AGENTLAB_MCP_LOG``) and then kills it, before any answer;
``lookup_then_die`` is a read-only, idempotent tool that does the same on its
first call only. ``garbage``, ``wrong_id`` and ``half_line`` break JSON-RPC:
a line that is not JSON-RPC, an answer to a request never sent, half a line.
Run with ``--http PORT`` it serves streamable HTTP instead of stdio;
``--bad-name`` also advertises a tool whose name the Messages API refuses.
"""

import asyncio
import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("agentlab-test")
READ = ToolAnnotations(read_only_hint=True)
arrived: list[str] = []
log: list[str] = []
WIRE = os.dup(1)
"""The client's end of stdout, taken before the SDK diverts fd 1 (it keeps stray prints off the wire):
the protocol-breaking tools write to it directly."""


_both = asyncio.Event()


async def _pair(name: str) -> str:
    """ "together" when the other half arrives while this one is still running (the reads ran at once)."""
    arrived.append(name)
    if {"a", "b"} <= set(arrived):
        _both.set()
    try:
        await asyncio.wait_for(_both.wait(), 10)  # only a failing test waits this long
    except TimeoutError:
        return "alone"
    return "together"


@server.tool(annotations=READ)
async def pair_a() -> str:
    """Read half a of the pair."""
    return await _pair("a")


@server.tool(annotations=READ)
async def pair_b() -> str:
    """Read half b of the pair."""
    return await _pair("b")


@server.tool()
async def append(item: str) -> str:
    """Append an item to the log (a write)."""
    log.append(f"start {item}")
    await asyncio.sleep(0.05)
    log.append(f"end {item}")
    return f"appended {item}"


@server.tool(annotations=READ)
def history() -> str:
    """The log so far."""
    return ", ".join(log)


@server.tool(annotations=READ)
def broken(order_id: int) -> str:
    """Always fails, with a message for the model."""
    raise ToolError(f"order {order_id} does not exist; list orders first")


@server.tool(annotations=READ)
async def slow() -> str:
    """Takes a minute."""
    await asyncio.Event().wait()  # never answers
    return "finally"


@server.tool()
def crash() -> str:
    """Kills the server process."""
    os._exit(3)


def _record(line: str) -> int:
    path = os.environ["AGENTLAB_MCP_LOG"]
    with open(path, "a") as f:
        f.write(line + "\n")
    with open(path) as f:
        return len(f.read().splitlines())


@server.tool()
def record_then_die(item: str) -> str:
    """A write: records the item, then the server dies before it answers."""
    _record(f"write {item}")
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def lookup_then_die(key: str) -> str:
    """A read-only, idempotent lookup whose first call kills the server before it answers."""
    if _record(f"lookup {key}") == 1:
        os._exit(3)
    return f"{key} = 42"


@server.tool()
async def garbage() -> str:
    """Writes a line that is not JSON-RPC, then says nothing more."""
    os.write(WIRE, b"this is not JSON-RPC at all\n")
    await asyncio.Event().wait()  # never answers
    return "late"


@server.tool()
async def wrong_id() -> str:
    """Answers a request that was never sent, then says nothing more."""
    os.write(WIRE, b'{"jsonrpc":"2.0","id":987654,"result":{"content":[]}}\n')
    await asyncio.Event().wait()  # never answers
    return "late"


@server.tool()
def half_line() -> str:
    """Writes half a JSON-RPC line; its real answer then lands on the same line."""
    os.write(WIRE, b'{"jsonrpc":"2.0","id":')
    return "half"


if __name__ == "__main__":
    import sys

    if "--bad-name" in sys.argv:
        sys.argv.remove("--bad-name")
        server.tool(name="has spaces!")(lambda: "never")

    if len(sys.argv) > 2 and sys.argv[1] == "--http":  # streamable HTTP on 127.0.0.1:<port>/mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()

"""A small MCP server for the tests, written with the ``mcp`` SDK's server API; run over stdio.

``pair_a``/``pair_b`` are reads that wait (up to 2 s) for each other: they answer
"together" only when both were in flight at once. ``append`` is a write that
logs its start and end; ``history`` reads the log. ``broken`` answers with an
error, ``slow`` takes a minute, ``crash`` kills the server.
Run with ``--http PORT`` it serves streamable HTTP instead of stdio.
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


async def _pair(name: str) -> str:
    arrived.append(name)
    for _ in range(200):
        if {"a", "b"} <= set(arrived):
            return "together"
        await asyncio.sleep(0.01)
    return "alone"


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
    await asyncio.sleep(60)
    return "finally"


@server.tool()
def crash() -> str:
    """Kills the server process."""
    os._exit(3)


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 2 and sys.argv[1] == "--http":  # streamable HTTP on 127.0.0.1:<port>/mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()

"""The shared workload: N steps of one instant tool call each, then an answer.

The same replies drive agentlab and the bare loop, so the two do the same
work and differ only in what the library adds: budgets, validation, the
loop guard, events, the trace.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import agentlab as al


def lookup(key: str) -> str:
    """Look a key up (returns at once: the benchmark times the loop, not the tool)."""
    return "value of " + key


async def lookup_async(key: str) -> str:
    """The same lookup as a coroutine: runs on the event loop, no thread hop."""
    return "value of " + key


SYNC_TOOL = al.tool(mode="read", name="lookup")(lookup)
ASYNC_TOOL = al.tool(mode="read", name="lookup")(lookup_async)


def script(steps: int) -> list[dict[str, Any]]:
    """``steps`` replies asking for one lookup each (distinct keys), then a final answer.

    Ids are filled in here so the bare loop and agentlab see identical replies.
    """
    replies = []
    for i in range(steps):
        r = al.reply(None, ("lookup", {"key": f"k{i}"}))
        r["content"][0]["id"] = f"toolu_{i:05d}"
        replies.append(r)
    replies.append(al.reply(f"Looked up {steps} keys."))
    return replies


def run_options(steps: int) -> dict[str, Any]:
    """Budgets a user would set: all three on, none of them reached."""
    return {"max_steps": steps + 1, "max_cost": 1000.0, "deadline_s": 3600.0}


def bare_loop(replies: list[dict[str, Any]], tools: dict[str, Callable[..., Any]], task: str) -> tuple[str, int]:
    """The loop with nothing around it: call the model, dispatch tools, append messages."""
    script_iter = iter(replies)

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return next(script_iter)

    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    steps = 0
    while True:
        r = model(messages)
        steps += 1
        messages.append({"role": "assistant", "content": r["content"]})
        if r["stop_reason"] != "tool_use":
            return "".join(b["text"] for b in r["content"] if b["type"] == "text"), steps
        results = []
        for block in r["content"]:
            if block["type"] != "tool_use":
                continue
            fn = tools.get(block["name"])
            try:
                if fn is None:
                    raise KeyError(f"unknown tool {block['name']}")
                out, error = str(fn(**block["input"])), False
            except Exception as exc:
                out, error = str(exc), True
            results.append({"type": "tool_result", "tool_use_id": block["id"], "content": out, "is_error": error})
        messages.append({"role": "user", "content": results})


def bare_seconds_per_step(steps: int, inner: int) -> float:
    """Seconds per step of the bare loop, averaged over ``inner`` runs (one run is too short to time)."""
    scripts = [script(steps) for _ in range(inner)]
    tools = {"lookup": lookup}
    t0 = time.perf_counter()
    for replies in scripts:
        bare_loop(replies, tools, "look up the keys")
    return (time.perf_counter() - t0) / inner / (steps + 1)


async def agentlab_seconds_per_step(steps: int, trace: Any, tool: al.Tool = SYNC_TOOL) -> float:
    """Seconds per step of one whole ``al.arun`` (Run built, run to Done, trace file closed)."""
    model = al.ScriptedModel(script(steps))
    t0 = time.perf_counter()
    result = await al.arun("look up the keys", [tool], model=model, trace=trace, **run_options(steps))
    elapsed = time.perf_counter() - t0
    if not isinstance(result, al.Done) or result.steps != steps + 1:
        raise RuntimeError(f"the benchmark run did not finish as scripted: {result!r}")
    return elapsed / (steps + 1)


def median(xs: list[float]) -> float:
    return statistics.median(xs)

"""Tracing's share of a W1 step: the same runs with the trace on and off, alternated run by run in one process.

``python -m benchmarks.trace_share [--pairs N]`` prints, for an async and a sync tool, the median CPU
milliseconds a step with the trace on and off and the median of the paired differences (the share),
with the load beside them. The runs are the peer harness's W1 (``../shared/peers``): 50 steps of one
instant ``lookup``, then an answer, through the public ``arun``/``run`` with a ``FunctionModel``; the
default trace (a ``TraceWriter`` made by the call, one file per run in ``./runs`` of a scratch folder).

Pairs rather than two series: on a shared, noisy machine a burst of load hits both halves of a pair, and
CPU time leaves out the time other processes take the core. Compare commits by running this on each in
turn, several times, in the same minutes (docs/benchmarks.md, "The tracing share of a step").
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import agentlab as al

STEPS = 50


def _model(steps: int) -> tuple[Any, Callable[[], None]]:
    """A FunctionModel that asks for ``lookup`` ``steps`` times, then answers; and its reset."""
    turn = [0]

    def fake(messages: Any, tools: Any = None, *a: Any, **k: Any) -> dict[str, Any]:
        t = turn[0]
        turn[0] = t + 1
        if t < steps:
            content = [{"type": "tool_use", "id": f"call_{t}", "name": "lookup", "input": {"key": f"k{t}"}}]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "done"}], "end_turn"
        return {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": content,
            "stop_reason": stop,
            "usage": {"input_tokens": 100, "output_tokens": 10},
        }

    return al.FunctionModel(fake), lambda: turn.__setitem__(0, 0)


def _tool(mode: str) -> Any:
    if mode == "async":

        async def lookup(key: str) -> str:
            """Look up a key and return its value."""
            return "v:" + key

        return al.tool(mode="read")(lookup)

    def lookup_sync(key: str) -> str:
        """Look up a key and return its value."""
        return "v:" + key

    return al.tool(mode="read", name="lookup")(lookup_sync)


def share(mode: str, pairs: int, seed: int = 0) -> dict[str, float]:
    """CPU ms a step with the trace on and off, and the median paired difference (µs)."""
    model, reset = _model(STEPS)
    tool = _tool(mode)
    limits = dict(max_steps=10_000, max_cost=1e6, deadline_s=3600)

    def once(trace: bool) -> float:
        reset()
        gc.collect()
        c = time.process_time()
        if mode == "async":
            asyncio.run(al.arun("go", tools=[tool], model=model, trace=trace, **limits))
        else:
            al.run("go", tools=[tool], model=model, trace=trace, **limits)
        return (time.process_time() - c) / (STEPS + 1) * 1e3

    for _ in range(3):
        once(True), once(False)
    rnd = random.Random(seed)
    on, off = [], []
    for _ in range(pairs):
        first = rnd.random() < 0.5
        a = once(first)
        b = once(not first)
        on.append(a if first else b)
        off.append(b if first else a)
    m = statistics.median
    return {"on_ms": m(on), "off_ms": m(off), "share_us": 1e3 * m(x - y for x, y in zip(on, off, strict=True))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=150)
    p.add_argument("--modes", default="async,sync")
    args = p.parse_args()
    os.chdir(tempfile.mkdtemp(prefix="agentlab-trace-share-"))
    for mode in args.modes.split(","):
        r = share(mode, args.pairs)
        print(
            f"W1 {mode:5} tool: tracing on {r['on_ms']:.4f} ms/step, off {r['off_ms']:.4f}, "
            f"share {r['share_us']:.1f} µs/step (CPU, median of {args.pairs} pairs; "
            f"load {os.getloadavg()[0]:.2f})"
        )


if __name__ == "__main__":
    main()

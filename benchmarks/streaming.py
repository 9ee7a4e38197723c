"""Streaming: what it costs to watch a reply arrive, and how soon the watcher sees it.

Both figures use the real stack: the ``anthropic`` SDK and agentlab's adapter
talking to the local Messages API server (``agentlab.testing.MessagesServer``)
on 127.0.0.1, through a one-step ``Run`` with one subscriber.

* **Overhead**: a 2,000-token reply (6,000 characters, in fragments of 12
  characters, ~500 deltas as the API sends a few tokens per delta), streamed
  with a ``model_delta`` event per fragment, against the same reply sent
  whole. Interleaved pairs, median of the per-pair ratios.
* **First fragment**: from the moment the server writes the first
  ``content_block_delta`` to its socket to the moment the first ``model_delta``
  reaches the subscriber (both read from ``time.perf_counter``, which is
  CLOCK_MONOTONIC on Linux). Median over the replies.

The server runs in its own process (:mod:`benchmarks.stream_server`), as the
API would: in this process its thread would hold the GIL against the client.
"""

from __future__ import annotations

import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .report import Row, fmt, judged, missing

REPLY_TOKENS = 2000
CHUNK_CHARS = 12
OVERHEAD_GOAL = 0.05
FIRST_DELTA_GOAL_MS = 5.0


def _text(tokens: int) -> str:
    words = "the parcel left the depot and reached the sorting centre before noon ".split()
    out, i = [], 0
    while sum(len(w) + 1 for w in out) < tokens * 3:
        out.append(words[i % len(words)])
        i += 1
    return " ".join(out)[: tokens * 3]


async def _one(model: Any, stamps: list[float]) -> float:
    import agentlab as al

    first: list[float] = []

    def watch(event: Any) -> None:
        if event.kind == "model_delta" and not first:
            first.append(time.perf_counter())

    t0 = time.perf_counter()
    result = await al.arun("Tell me.", model=model, trace=False, max_cost=None, max_tokens=4096,
                           deadline_s=60, subscribers=[watch])
    took = time.perf_counter() - t0
    if not isinstance(result, al.Done):
        raise RuntimeError(f"the streamed run did not finish: {result!r}")
    stamps.extend(first)
    return took


async def streaming_rows(reps: int) -> list[Row]:
    label_o = f"Streaming: a {REPLY_TOKENS:,}-token reply streamed ÷ sent whole"
    label_f = "Streaming: first fragment at the socket → first model_delta at a subscriber"
    if any(importlib.util.find_spec(m) is None for m in ("agentlab.testing", "agentlab.models.streaming")):
        return [missing("stream.overhead", label_o, "≤ 1.05"), missing("stream.first_delta", label_f, "≤ 5 ms")]
    import asyncio

    import anthropic

    from agentlab.models.anthropic import AnthropicModel

    chars = REPLY_TOKENS * 3
    total = 2 * (reps + 1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.stream_server", str(chars), str(CHUNK_CHARS), str(total)],
        stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert proc.stdout is not None
        url = await asyncio.to_thread(proc.stdout.readline)
        client = anthropic.AsyncAnthropic(base_url=url.strip(), api_key="sk-ant-bench", max_retries=0)
        streaming = AnthropicModel(client=client, stream=True, cache=False)
        whole = AnthropicModel(client=client, stream=False, cache=False)
        ratios, whole_s, stream_s, seen, sent = [], [], [], [], []
        for i in range(reps + 1):  # the first pair warms both paths (pools, imports)
            s = await _one(streaming, seen)
            sent.append(float(await asyncio.to_thread(proc.stdout.readline)))
            w = await _one(whole, [])
            if i:
                ratios.append(s / w)
                whole_s.append(w)
                stream_s.append(s)
    finally:
        proc.kill()
        proc.wait()
    lags = [(a - b) * 1000 for a, b in zip(seen[1:], sent[1:], strict=True)]
    ratio = statistics.median(ratios)
    first_ms = statistics.median(lags)
    deltas = -(-chars // CHUNK_CHARS)
    extra_ms = (statistics.median(stream_s) - statistics.median(whole_s)) * 1000
    return [
        Row("stream.overhead", label_o, ratio, "ratio",
            f"{ratio:.3f} ({fmt(statistics.median(stream_s) * 1000)} ms vs {fmt(statistics.median(whole_s) * 1000)} ms)",
            "≤ 1.05", judged(ratio <= 1 + OVERHEAD_GOAL),
            note=(f"{deltas} fragments of {CHUNK_CHARS} chars sent back to back, each a model_delta: "
                  f"~{fmt(extra_ms / deltas * 1000)} µs per fragment; the API spaces them over seconds"),
            extra={"ratios": ratios, "stream_s": stream_s, "whole_s": whole_s, "per_fragment_us": extra_ms / deltas * 1000}),
        Row("stream.first_delta", label_f, first_ms, "ms", f"{fmt(first_ms)} ms", "≤ 5 ms",
            judged(first_ms <= FIRST_DELTA_GOAL_MS), note="median; the server runs in its own process",
            extra={"samples_ms": lags}),
    ]

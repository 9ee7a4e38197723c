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
  reaches the subscriber (both read from ``time.perf_counter``; the server is a
  thread of the same process). Median over the replies.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
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


async def _one(model: Any, server: Any, item: Any, stamps: list[float]) -> float:
    import agentlab as al

    first: list[float] = []

    def watch(event: Any) -> None:
        if event.kind == "model_delta" and not first:
            first.append(time.perf_counter())

    server.add(item)
    t0 = time.perf_counter()
    result = await al.arun("Tell me.", model=model, trace=False, max_cost=None, max_tokens=4096,
                           deadline_s=60, subscribers=[watch])
    took = time.perf_counter() - t0
    if not isinstance(result, al.Done):
        raise RuntimeError(f"the streamed run did not finish: {result!r}")
    if first:
        stamps.append(first[0])
    return took


async def streaming_rows(reps: int) -> list[Row]:
    label_o = f"Streaming: a {REPLY_TOKENS:,}-token reply streamed ÷ sent whole"
    label_f = "Streaming: first fragment at the socket → first model_delta at a subscriber"
    if any(importlib.util.find_spec(m) is None for m in ("agentlab.testing", "agentlab.models.streaming")):
        return [missing("stream.overhead", label_o, "≤ 1.05"), missing("stream.first_delta", label_f, "≤ 5 ms")]
    from agentlab.models.anthropic import AnthropicModel
    from agentlab.testing import MessagesServer, reply, streamed

    text = _text(REPLY_TOKENS)
    usage = {"input_tokens": 20, "output_tokens": REPLY_TOKENS}
    item = streamed({**reply(text), "usage": usage}, chunk=CHUNK_CHARS)
    ratios, whole_s, stream_s, stamps = [], [], [], []
    with MessagesServer() as server:
        streaming = AnthropicModel(client=server.client(), stream=True, cache=False)
        whole = AnthropicModel(client=server.client(), stream=False, cache=False)
        for m in (streaming, whole):  # warm both paths (pools, imports)
            await _one(m, server, item, [])
        for _ in range(reps):
            server.first_delta_sent.clear()
            s = await _one(streaming, server, item, stamps)
            sent = server.first_delta_sent[0]
            stamps[-1] -= sent
            w = await _one(whole, server, item, [])
            ratios.append(s / w)
            whole_s.append(w)
            stream_s.append(s)
    ratio = statistics.median(ratios)
    first_ms = statistics.median(stamps) * 1000
    deltas = -(-len(text) // CHUNK_CHARS)
    return [
        Row("stream.overhead", label_o, ratio, "ratio",
            f"{ratio:.3f} ({fmt(statistics.median(stream_s) * 1000)} ms vs {fmt(statistics.median(whole_s) * 1000)} ms)",
            "≤ 1.05", judged(ratio <= 1 + OVERHEAD_GOAL),
            note=f"{deltas} fragments of {CHUNK_CHARS} chars, each a model_delta; server and client share the machine",
            extra={"ratios": ratios, "stream_s": stream_s, "whole_s": whole_s}),
        Row("stream.first_delta", label_f, first_ms, "ms", f"{fmt(first_ms)} ms", "≤ 5 ms",
            judged(first_ms <= FIRST_DELTA_GOAL_MS), note="median over the streamed replies",
            extra={"samples_ms": [x * 1000 for x in stamps]}),
    ]

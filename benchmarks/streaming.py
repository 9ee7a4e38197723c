"""Streaming: what it costs to watch a reply arrive, and how soon the watcher sees it.

Both figures use the real stack: the ``anthropic`` SDK and agentlab's adapter
talking to the local Messages API server (``agentlab.testing.MessagesServer``)
on 127.0.0.1, through a one-step ``Run`` with one subscriber.

* **Overhead**: a 2,000-token reply (6,000 characters, in fragments of 12
  characters, ~500 deltas as the API sends a few tokens per delta), streamed
  with a ``model_delta`` event per fragment, against the same reply sent
  whole. Interleaved pairs, median of the per-pair ratios.
* **Paced**: the same reply with its events 5 ms apart, as the API spaces
  them while it generates (~200 fragments a second), against the whole reply
  held back by the server for as long as that stream took to send. Both take
  the same generation time; the ratio is what watching costs in a real run.
  Fewer pairs (each is ~5 s).
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
PACE_S = 0.005
PACED_REPS = 5


def _text(tokens: int) -> str:
    words = "the parcel left the depot and reached the sorting centre before noon ".split()
    out, i = [], 0
    while sum(len(w) + 1 for w in out) < tokens * 3:
        out.append(words[i % len(words)])
        i += 1
    return " ".join(out)[: tokens * 3]


async def _one(model: Any, stamps: list[float], cpu: list[float]) -> float:
    import agentlab as al

    first: list[float] = []

    def watch(event: Any) -> None:
        if event.kind == "model_delta" and not first:
            first.append(time.perf_counter())

    t0, c0 = time.perf_counter(), time.thread_time()
    result = await al.arun(
        "Tell me.", model=model, trace=False, max_cost=None, max_tokens=4096, deadline_s=60, subscribers=[watch]
    )
    took = time.perf_counter() - t0
    cpu.append(time.thread_time() - c0)  # the client's own CPU (the server is another process)
    if not isinstance(result, al.Done):
        raise RuntimeError(f"the streamed run did not finish: {result!r}")
    stamps.extend(first)
    return took


async def _pairs(reps: int, pause: float) -> dict[str, list[float]]:
    """``reps`` interleaved (streamed, whole) runs against a server process, after one warm-up pair."""
    import asyncio

    import anthropic

    from agentlab.models.anthropic import AnthropicModel

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.stream_server",
            str(REPLY_TOKENS * 3),
            str(CHUNK_CHARS),
            str(2 * (reps + 1)),
            str(pause),
        ],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    out: dict[str, list[float]] = {
        k: [] for k in ("ratios", "stream_s", "whole_s", "stream_cpu", "whole_cpu", "seen", "sent")
    }
    try:
        assert proc.stdout is not None
        url = await asyncio.to_thread(proc.stdout.readline)
        client = anthropic.AsyncAnthropic(base_url=url.strip(), api_key="sk-ant-bench", max_retries=0)
        streaming = AnthropicModel(client=client, stream=True, cache=False)
        whole = AnthropicModel(client=client, stream=False, cache=False)
        for i in range(reps + 1):  # the first pair warms both paths (pools, imports)
            seen: list[float] = []
            s_cpu: list[float] = []
            w_cpu: list[float] = []
            s = await _one(streaming, seen, s_cpu)
            sent = float(await asyncio.to_thread(proc.stdout.readline))
            w = await _one(whole, [], w_cpu)
            if i:
                out["ratios"].append(s / w)
                out["stream_s"].append(s)
                out["whole_s"].append(w)
                out["stream_cpu"].extend(s_cpu)
                out["whole_cpu"].extend(w_cpu)
                out["seen"].extend(seen)
                out["sent"].append(sent)
    finally:
        proc.kill()
        proc.wait()
    return out


async def streaming_rows(reps: int) -> list[Row]:
    label_o = f"Streaming: a {REPLY_TOKENS:,}-token reply streamed ÷ sent whole"
    label_p = f"Streaming, paced like the API (1 fragment / {PACE_S * 1000:g} ms): streamed ÷ whole after the same wait"
    label_f = "Streaming: first fragment at the socket → first model_delta at a subscriber"
    if any(importlib.util.find_spec(m) is None for m in ("agentlab.testing", "agentlab.models.streaming")):
        return [
            missing("stream.overhead", label_o, "≤ 1.05"),
            missing("stream.paced", label_p, "≤ 1.05"),
            missing("stream.first_delta", label_f, "≤ 5 ms"),
        ]
    import asyncio

    # Each part on its own event loop, ended when it is done: agentlab's per-loop SDK clients
    # (and their pools) close with it instead of lingering into the next part.
    burst = await asyncio.to_thread(asyncio.run, _pairs(reps, 0.0))
    paced = await asyncio.to_thread(asyncio.run, _pairs(min(reps, PACED_REPS), PACE_S))
    med = statistics.median
    deltas = -(-REPLY_TOKENS * 3 // CHUNK_CHARS)
    lags = [(a - b) * 1000 for a, b in zip(burst["seen"], burst["sent"], strict=True)]
    first_ms = med(lags)
    ratio, paced_ratio = med(burst["ratios"]), med(paced["ratios"])
    extra_ms = (med(burst["stream_s"]) - med(burst["whole_s"])) * 1000
    cpu_us = (med(burst["stream_cpu"]) - med(burst["whole_cpu"])) * 1e6 / deltas
    paced_extra_ms = (med(paced["stream_s"]) - med(paced["whole_s"])) * 1000
    return [
        Row(
            "stream.overhead",
            label_o,
            ratio,
            "ratio",
            f"{ratio:.3f} ({fmt(med(burst['stream_s']) * 1000)} ms vs {fmt(med(burst['whole_s']) * 1000)} ms)",
            "≤ 1.05",
            judged(ratio <= 1 + OVERHEAD_GOAL),
            note=(
                f"{deltas} fragments of {CHUNK_CHARS} chars sent back to back, each a model_delta: "
                f"~{fmt(extra_ms / deltas * 1000)} µs per fragment of wall time, ~{fmt(cpu_us)} µs of client CPU "
                "(mostly the HTTP stack's per-chunk parsing; the local server's own pace is the rest)"
            ),
            extra={k: burst[k] for k in ("ratios", "stream_s", "whole_s", "stream_cpu", "whole_cpu")}
            | {"per_fragment_us": extra_ms / deltas * 1000, "client_cpu_per_fragment_us": cpu_us},
        ),
        Row(
            "stream.paced",
            label_p,
            paced_ratio,
            "ratio",
            f"{paced_ratio:.3f} ({fmt(med(paced['stream_s']) * 1000)} ms vs {fmt(med(paced['whole_s']) * 1000)} ms)",
            "≤ 1.05",
            judged(paced_ratio <= 1 + OVERHEAD_GOAL),
            note=f"{deltas} fragments 5 ms apart; streamed minus whole: {fmt(paced_extra_ms)} ms (medians)",
            extra={k: paced[k] for k in ("ratios", "stream_s", "whole_s", "stream_cpu", "whole_cpu")},
        ),
        Row(
            "stream.first_delta",
            label_f,
            first_ms,
            "ms",
            f"{fmt(first_ms)} ms",
            "≤ 5 ms",
            judged(first_ms <= FIRST_DELTA_GOAL_MS),
            note="median; the server runs in its own process",
            extra={"samples_ms": lags},
        ),
    ]

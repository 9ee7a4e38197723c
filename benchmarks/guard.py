"""What the hard cost guard's exact counts cost: extra requests and latency per step.

A 20-step run (each step reads ~3 KB of base64, which tokenizes densely)
through the real ``anthropic`` SDK against the local Messages API server in
its dense mode (~1.7 bytes per token). First without a cost limit, to learn
the run's full cost; then with ``max_cost`` at 25 %, 50 %, 100 % and 1,000 %
of it. The guard asks for an exact count only when its provable bound cannot
clear a call, so a budget far from the run's cost should cost no counts at
all, and a budget that bites at most one count per pre-call check.
"""

from __future__ import annotations

import base64
import importlib.util
import random
import statistics
from typing import Any

from .report import Row, fmt, judged, missing

MODEL = "claude-sonnet-4-5"
SHARES = (0.25, 0.5, 1.0, 10.0)
READ_CHARS = 3000


def _payload(n: int, seed: int) -> str:
    return base64.b64encode(random.Random(seed).randbytes(n)).decode()[:n]


def _script(steps: int) -> list[dict[str, Any]]:
    import agentlab as al

    replies = [al.reply(f"Reading part {i}.", ("read_part", {"part": i})) for i in range(steps - 1)]
    return [*replies, al.reply("All parts read; here is the summary.")]


async def _one(steps: int, max_cost: float | None) -> dict[str, Any]:
    import agentlab as al
    from agentlab.models.anthropic import AnthropicModel
    from agentlab.testing import MessagesServer

    @al.tool(mode="read")
    def read_part(part: int) -> str:
        """Return one part of a large file."""
        return _payload(READ_CHARS, part)

    import anthropic

    events: list[Any] = []
    with MessagesServer(_script(steps), tokenizer="dense") as server:
        # A pool of our own, closed here: one run per server, all on this event loop.
        client = server.client(http_client=anthropic.DefaultAsyncHttpxClient())
        try:
            result = await al.arun(
                "Read every part of the file and summarise it.",
                [read_part],
                model=AnthropicModel(MODEL, client=client),
                trace=False,
                max_steps=steps,
                max_cost=max_cost,
                deadline_s=120,
                subscribers=[events.append],
            )
        finally:
            await client.close()
        counts = sum(1 for r in server.requests if r.path.startswith("/v1/messages/count_tokens"))
    requests = [e.data for e in events if e.kind == "model_request"]
    finished = next(e.data for e in events if e.kind == "run_finished")
    checks = [*requests, finished["last_guard_check"]] if result.reason == "budget" else requests
    count_latency = [d["count_latency"] for d in checks if "count_latency" in d]
    call_latency = [e.data["latency"] for e in events if e.kind == "model_called"]
    counted_steps = [i + 1 for i, d in enumerate(checks) if "count_latency" in d]
    return {
        "result": result,
        "counts": counts,
        "checks": len(checks),
        "steps": result.steps,
        "count_latency": count_latency,
        "call_latency": call_latency,
        "counted_steps": counted_steps,
    }


async def guard_rows(steps: int) -> list[Row]:
    label = f"Cost guard: exact counts in a {steps}-step dense run"
    needed = ("agentlab.models.counting", "agentlab.testing.tokens")
    if any(importlib.util.find_spec(m) is None for m in needed):
        return [missing("guard.counts", label, "")]
    full = await _one(steps, None)
    full_cost = float(full["result"].spent)
    rows: list[Row] = []
    call_p50 = statistics.median(full["call_latency"])
    for share in SHARES:
        r = await _one(steps, full_cost * share)
        res = r["result"]
        per_step_ms = 1000 * sum(r["count_latency"]) / max(1, r["checks"])
        count_p50 = 1000 * statistics.median(r["count_latency"]) if r["count_latency"] else 0.0
        first = r["counted_steps"][0] if r["counted_steps"] else None
        over = res.spent > full_cost * share
        ok = not over and r["counts"] <= r["checks"] and (share < 10 or r["counts"] == 0)
        rows.append(
            Row(
                f"guard.counts_{int(share * 100)}",
                f"{label}, max_cost = {share:.0%} of its cost",
                r["counts"],
                "requests",
                f"{r['counts']} counts in {r['checks']} checks ({res.steps} steps, {res.reason}"
                + (f", first at check {first}" if first else "")
                + f"); +{per_step_ms:.2f} ms/step "
                f"(count p50 {count_p50:.2f} ms, call p50 {1000 * call_p50:.2f} ms); spent ${fmt(res.spent)}",
                "no counts far from the limit; <= 1 count per step near it; never over max_cost",
                judged(ok),
                note="real SDK, local dense server (~1.7 bytes/token)",
                extra={
                    "share": share,
                    "checks": r["checks"],
                    "steps": res.steps,
                    "reason": str(res.reason),
                    "counted_steps": r["counted_steps"],
                    "added_ms_per_step": per_step_ms,
                    "count_p50_ms": count_p50,
                    "call_p50_ms": 1000 * call_p50,
                    "full_cost_usd": full_cost,
                    "spent_usd": res.spent,
                    "max_cost_usd": full_cost * share,
                },
            )
        )
    return rows

"""Cost as performance: a recorded shop run repriced with and without cache reads.

The run is real end to end except the model: the shop's SQLite tools, the
``anthropic`` SDK and agentlab's adapter with prompt caching on, talking to
the local Messages API server (``agentlab.testing.MessagesServer``) on
127.0.0.1, whose prompt-cache simulation reports ``usage`` with uncached,
cache-write and cache-read tokens. The recorded trace is then loaded and
repriced twice with :func:`agentlab.analysis.reprice`: as recorded, and with
every context token priced as plain input.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

from .report import Row, fmt, missing

MODEL = "claude-sonnet-4-5"
MIN_CACHE_TOKENS = 1024
"""The API does not cache prefixes shorter than this for Sonnet models."""

SYSTEM = (
    "You are the support agent of a small online shop. Answer the customer's question about their orders "
    "from the shop's records only: look orders and customers up with the tools, never guess an order's "
    "status, a date or an amount. When an order is late, say why if the shipment record gives a reason, "
    "and what happens next. Keep answers short and concrete: order numbers, dates, amounts. Do not change "
    "an order unless the customer asks for it, and never refund without the billing role."
)


def _script(steps: int) -> list[dict[str, Any]]:
    """``steps - 1`` lookups across orders and customers, then the answer."""
    import agentlab as al

    replies = []
    for i in range(steps - 1):
        if i % 3 == 2:
            replies.append(al.reply(None, ("get_customer", {"customer_id": 1 + (i * 7) % 40})))
        else:
            replies.append(al.reply("Let me check the next order.", ("get_order", {"order_id": 1001 + i * 7})))
    replies.append(al.reply(f"I checked {steps - 1} records; here is what I found."))
    return replies


async def caching_rows(steps: int) -> list[Row]:
    label = f"Cost: {steps}-step shop run, with cache reads ÷ without"
    needed = ("agentlab.shop", "agentlab.models.anthropic", "agentlab.testing", "agentlab.analysis")
    if any(importlib.util.find_spec(m) is None for m in needed):
        return [missing("cost.cache_ratio", label, "")]
    import agentlab as al
    from agentlab.analysis import reprice
    from agentlab.models.anthropic import AnthropicModel
    from agentlab.shop import Shop
    from agentlab.testing import MessagesServer
    from agentlab.trace import load_runs

    shop = Shop()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="agentlab-bench-") as d,
            MessagesServer(_script(steps), min_cache_tokens=MIN_CACHE_TOKENS) as server,
        ):
            model = AnthropicModel(MODEL, client=server.client(), cache=True)
            result = await al.arun(
                "Which of my orders are late, and why?",
                shop.tools(),
                model=model,
                system=SYSTEM,
                trace=Path(d),
                max_steps=steps,
                max_cost=None,
                deadline_s=120,
            )
            if not isinstance(result, al.Done) or result.steps != steps:
                raise RuntimeError(f"the shop run did not finish as scripted: {result!r}")
            recorded = load_runs(Path(d)).steps
    finally:
        shop.close()
    cached = float(reprice(recorded, MODEL).cost.sum())
    plain = float(reprice(recorded, MODEL, caching=False).cost.sum())
    ideal = float(reprice(recorded, MODEL, caching=True).cost.sum())
    ratio = cached / plain
    return [
        Row(
            "cost.cache_ratio",
            label,
            ratio,
            "ratio",
            f"{ratio:.2f} (${fmt(cached)} vs ${fmt(plain)}; an ideal cache: {ideal / plain:.2f})",
            note=f"{MODEL} prices; prefixes under {MIN_CACHE_TOKENS} tokens are not cached, as on the API",
            extra={
                "with_cache_usd": cached,
                "without_cache_usd": plain,
                "ideal_cache_usd": ideal,
                "read_tokens": int(recorded.cache_read_tokens.sum()),
                "write_tokens": int(recorded.cache_write_tokens.sum()),
                "uncached_tokens": int(recorded.input_tokens.sum()),
            },
        ),
    ]

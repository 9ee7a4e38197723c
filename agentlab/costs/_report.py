"""The report's lines on where a run's money went: its biggest carriers and its cache waste (pure text)."""

from __future__ import annotations

from typing import Any

from .._safe_text import usd
from ._busts import cache_busts
from ._carried import carried_cost, input_cost


def money_lines(trace: Any, top: int = 5) -> list[str]:
    """A table of the ``top`` items by carried cost (a ``carried`` column beside each item), then the cache waste:
    the run total beside the cost, and each bust with its cause."""
    spent = trace.summary.get("cost", float("nan"))
    if spent != spent:  # NaN: no price is known for the run's model, so no dollar figure here would be true
        return ["Where the money went: no price is known for this run's model, so its input cannot be itemised."]
    df = carried_cost(trace)
    lines = [
        f"Where the money went: input {usd(input_cost(trace))}, carried by these items (split by size, an estimate)"
    ]
    lines.append(f"{'carried':>10}  {'calls':>5}  {'tokens':>8}  item")
    for r in df.nlargest(top, "carried_cost").itertuples():
        lines.append(f"{usd(r.carried_cost):>10}  {r.calls:>5}  {r.tokens:>8,}  {r.kind}: {r.label} (step {r.step})")
    busts = cache_busts(trace)
    hit = busts[busts.bust]
    waste = float(hit.waste.sum(skipna=False))  # NaN (shown $?), not $0, when a bust's model has no price
    lines.append(f"cache waste: {usd(waste)} of {usd(spent)} spent, in {len(hit)} bust(s)")
    for r in hit.itertuples():
        lines.append(f"  step {r.step}: {r.cause} ({r.detail}); {r.missed:,} tokens re-billed, {usd(r.waste)} wasted")
    return lines

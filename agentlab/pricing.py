"""Dollars from token usage.

Prices come from ``genai-prices`` (a maintained table that works offline with
its bundled data), resolved *once* per model into a :class:`Prices` value:
``calc_price`` costs ~90 µs a call here, more than the loop's whole per-step
budget, while the arithmetic below costs well under a microsecond. A test
checks the two agree.

Anthropic reports ``input_tokens`` *without* the cached tokens; genai-prices
counts input *with* them. :func:`Prices.cost` takes Anthropic's shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .messages import Usage

PER_MTOK = 1_000_000
WEB_SEARCH_USD = 10 / 1000
"""Web search is billed $10 per 1,000 requests, on every Claude model."""
ONE_HOUR_WRITE = 2.0
"""A one-hour cache write costs 2x base input (a five-minute write 1.25x)."""

FALLBACK_ALIASES = {
    "claude-mythos-5-1": "claude-fable-5-1",
    "claude-mythos-5": "claude-fable-5",
    "claude-mythos-preview": "claude-mythos-5-2",
}
"""SDK model ids genai-prices 0.2.3 lacks, priced as the model it documents the same rates for.

genai-prices notes that each Mythos release is the same model and pricing as
the Fable release of its number (limited availability, so its importer skips
them); ``claude-mythos-preview`` is priced as the newest Mythos. Used only when
the table has no entry of its own: a newer genai-prices wins.
"""


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per million tokens for one model.

    ``tier_start``/``tier_*`` describe long-context pricing: when a request's
    whole input (uncached + cache read + cache write) exceeds ``tier_start``
    tokens, every token of that call is priced at the tier's rates.

    ``cache_write`` is the five-minute write rate; ``cache_write_1h`` the
    one-hour one (2x base input where the table lacks it). ``web_search`` and
    ``web_fetch`` are USD *per request* of those server tools (web fetch has
    no fee beyond its tokens).
    """

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    tier_start: int | None = None
    tier_input: float | None = None
    tier_output: float | None = None
    tier_cache_read: float | None = None
    tier_cache_write: float | None = None
    cache_write_1h: float | None = None
    web_search: float = WEB_SEARCH_USD
    web_fetch: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input", "output"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise ValueError(f"Prices.{name} must be a number >= 0, got {value!r}")

    def _rates(self, total_input: int) -> tuple[float, float, float, float]:
        tiered = self.tier_start is not None and total_input > self.tier_start
        inp = (self.tier_input if tiered else None) or self.input
        out = (self.tier_output if tiered else None) or self.output
        read = (self.tier_cache_read if tiered else None) or self.cache_read
        write = (self.tier_cache_write if tiered else None) or self.cache_write
        return inp, out, read if read is not None else inp, write if write is not None else inp

    def cost(self, usage: Usage) -> float:
        """USD of one call with Anthropic-shaped ``usage``: tokens plus server-tool fees."""
        total_in = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        inp, out, read, write = self._rates(total_in)
        one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
        return (
            usage.input_tokens * inp
            + usage.output_tokens * out
            + usage.cache_read_input_tokens * read
            + (usage.cache_creation_input_tokens - one_hour) * write
            + one_hour * self.write_1h_rate(total_in)
        ) / PER_MTOK + self.server_tool_cost(usage)

    def write_1h_rate(self, total_input: int = 0) -> float:
        """USD per million tokens of a one-hour cache write (the tier's base input x2 past the threshold)."""
        tiered = self.tier_start is not None and total_input > self.tier_start
        if self.cache_write_1h is not None and not tiered:
            return self.cache_write_1h
        return ONE_HOUR_WRITE * self._rates(total_input)[0]

    def server_tool_cost(self, usage: Usage) -> float:
        """USD of the server-tool requests in ``usage`` (web search, web fetch), billed per request."""
        return usage.web_search_requests * self.web_search + usage.web_fetch_requests * self.web_fetch

    def worst_rates(self, est_input_tokens: int, caching: bool | str) -> tuple[float, float]:
        """(input, output) USD per token at their dearest for a call of this size.

        For the hard cost guard. The long-context tier counts once the estimate
        is within 10% of its threshold; cache writes (dearer than plain input)
        count only for a model that writes to the cache, at the one-hour rate
        when ``caching == "1h"``.
        """
        tiered = self.tier_start is not None and est_input_tokens > 0.9 * self.tier_start
        total = self.tier_start + 1 if tiered and self.tier_start is not None else 0
        inp, out, _, write = self._rates(total)
        if caching == "1h":
            write = max(write, self.write_1h_rate(total))
        return (max(inp, write) if caching else inp) / PER_MTOK, out / PER_MTOK


def _base(tp: object) -> tuple[float | None, int | None, float | None]:
    """(base, tier start, tier price) of a genai-prices price that may be tiered."""
    if tp is None:
        return None, None, None
    base = getattr(tp, "base", None)
    if base is None:
        return float(tp), None, None  # type: ignore[arg-type]
    tiers = getattr(tp, "tiers", None) or []
    if tiers:
        return float(base), int(tiers[0].start), float(tiers[0].price)
    return float(base), None, None


@lru_cache(maxsize=256)
def lookup_prices(model_id: str) -> Prices | None:
    """Prices of an Anthropic model id from genai-prices (or its :data:`FALLBACK_ALIASES` entry), else ``None``."""
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    calc = None
    for ref in (model_id, FALLBACK_ALIASES.get(model_id)):
        if ref is None:
            continue
        try:
            calc = calc_price(GUsage(input_tokens=1, output_tokens=1), model_ref=ref, provider_id="anthropic")
            break
        except LookupError:
            continue
    if calc is None:
        return None
    return _from_model_price(calc.model_price)


def _from_model_price(mp: Any) -> Prices | None:
    """A genai-prices ``ModelPrice`` as :class:`Prices` (``None`` without input and output rates)."""
    inp, start, t_inp = _base(mp.input_mtok)
    out, _, t_out = _base(mp.output_mtok)
    read, _, t_read = _base(mp.cache_read_mtok)
    write, _, t_write = _base(mp.cache_write_mtok)
    write_1h, _, _ = _base(getattr(mp, "cache_write_1h_mtok", None))
    searches, _, _ = _base(getattr(mp, "web_searches_kcount", None))
    if inp is None or out is None:
        return None
    return Prices(
        input=inp, output=out, cache_read=read, cache_write=write,
        tier_start=start, tier_input=t_inp, tier_output=t_out,
        tier_cache_read=t_read, tier_cache_write=t_write,
        cache_write_1h=write_1h, web_search=searches / 1000 if searches is not None else WEB_SEARCH_USD,
    )


@lru_cache(maxsize=512)
def provider_prices(model_ref: str, provider_id: str | None = None) -> Prices | None:
    """Prices of any model genai-prices knows, from one provider's table (``"openrouter"``,
    ``"google"``, ``"openai"``…) or, with ``provider_id=None``, whichever provider it matches.

    Recorded runs name models as their agent saw them (``x-ai/grok-4-fast`` through
    OpenRouter, ``gemini-2.5-pro``); :func:`lookup_prices` stays Anthropic-only because
    the engine's own model ids are Anthropic's.
    """
    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    try:
        calc = calc_price(GUsage(input_tokens=1, output_tokens=1), model_ref=model_ref, provider_id=provider_id)
    except (LookupError, ValueError):
        return None
    return _from_model_price(calc.model_price)


def resolve_prices(model_id: str, prices: Prices | None) -> Prices | None:
    """The caller's ``prices`` if given, else the table's for ``model_id`` (memoized on disk,
    see :mod:`agentlab._price_cache`: a cold start need not import the price data)."""
    if prices is not None:
        return prices
    from ._price_cache import cached

    found: Prices | None = cached(model_id, Prices, lookup_prices)
    return found

"""Dollars from token usage.

Prices come from ``genai-prices`` (a maintained table that works offline with
its bundled data), resolved *once* per model into a :class:`Prices` value, so
each call is priced by the arithmetic below rather than a table lookup. A test
checks the two agree.

Anthropic reports ``input_tokens`` *without* the cached tokens; genai-prices
counts input *with* them. :func:`Prices.cost` takes Anthropic's shape.

This module owns the price of a call: :meth:`Prices.cost` is the answer for
*everything the usage says* (tokens, long-context tier, cache TTLs, server
tools, fast mode, inference geography, compaction and advisor passes), and
:meth:`Prices.worst_rates` builds the hard cost guard's worst case from the
same rules before the call (:class:`RequestTerms` says what the request asked
for). Where genai-prices has no rule, the rule is in one table here with its
source (:data:`GEO_MULTIPLIERS`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

from ._checks import is_whole
from ._price_cache import holds, today, window_of
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


GEO_MULTIPLIERS: Mapping[str, float] = {"us": 1.1}
"""The inference regions that cost more, by ``usage.inference_geo`` (genai-prices 0.2.3 has no such rule).

Source: Anthropic's pricing page, "Data residency pricing"
(https://platform.claude.com/docs/en/about-claude/pricing#data-residency-pricing):
US-only inference (``inference_geo: "us"``) is 1.1x on input, output and cache
tokens; global is standard. Server-tool fees are not multiplied. Only a region
listed here costs more: ``"global"``, ``"not_available"`` (what a model without
data residency reports) and any other value are standard rates (a value never
seen before is named in a warning, priced at standard rates).
"""
GEO_SOURCE = "https://platform.claude.com/docs/en/about-claude/pricing#data-residency-pricing"
STANDARD_GEOS = frozenset({"global", "not_available"})
"""Values of ``inference_geo`` known to carry no multiplier: global routing, and a model without data residency."""


def geo_multiplier(geo: str | None) -> float:
    """The token-price multiplier of an inference region (:data:`GEO_MULTIPLIERS`; 1.0 for any other)."""
    if geo is None or geo in STANDARD_GEOS:
        return 1.0
    found = GEO_MULTIPLIERS.get(geo)
    if found is None:
        warnings.warn(
            f"inference_geo={geo!r} is a region agentlab.pricing has not seen: priced at standard rates, as only the "
            f"regions in GEO_MULTIPLIERS cost more (source: {GEO_SOURCE})",
            UserWarning,
            stacklevel=3,
        )
        return 1.0
    return found


@dataclass(frozen=True, slots=True)
class RequestTerms:
    """What a request asks for that changes its price, so the guard's worst case can include it.

    ``speed="fast"`` prices at the fast variant; ``inference_geo`` at its
    multiplier (:data:`GEO_MULTIPLIERS`); ``compaction_at`` is the input size
    from which the API may run a compaction pass inside the call (its trigger),
    ``None`` when compaction is off; ``models`` are server-side fallback models
    that may serve the call instead (the guard takes the dearest).
    """

    speed: str | None = None
    inference_geo: str | None = None
    compaction_at: int | None = None
    models: tuple[str, ...] = ()
    passes: int = 1
    """The most sampling passes the request's server tools can trigger (:func:`server_tool_passes`)."""
    pass_input: int = 0
    """The most input tokens those tools' results add to the passes after the first."""
    unbounded: str | None = None
    """Why no worst case holds for this request (a server tool with no cap): the hard guard refuses it."""


MANY_TOKENS = 10**9
"""A size past every long-context tier: the rates of a pass whose input the guard cannot know in advance."""


def pass_rates(inp: float, out: float, n: int, passes: int, added: int) -> tuple[float, float]:
    """Per-token rates that price every pass of a server-tool loop when applied to one pass's input and output.

    ``passes`` passes (:func:`server_tool_passes`), each reading at most the request's ``n`` input tokens, the
    output of the passes before it (each at most ``max_tokens`` = m) and the tool results so far (``added``
    tokens in all), each writing at most m: input at most ``passes*n + m*passes*(passes-1)/2 + (passes-1)*added``
    tokens, output at most ``passes*m``. So the worst case ``n*input + m*output`` of
    :func:`agentlab.budget.worst_case_cost` covers every pass with input rate
    ``inp*(passes + (passes-1)*added/n)`` and output rate ``out*passes + inp*passes*(passes-1)/2``.
    """
    reread = inp * passes * (passes - 1) / 2
    return inp * (passes + (passes - 1) * added / max(n, 1)), out * passes + reread


SERVER_TOOL_INPUT: Mapping[str, str | int | None] = {
    "web_search": None,
    "web_fetch": "max_content_tokens",
    "code_execution": None,
    "bash_code_execution": None,
    "text_editor_code_execution": None,
    "advisor": "max_tokens",
    "tool_search_tool": 0,
    "mcp_toolset": None,
}
"""How much input one use of a server tool adds to the passes after it, by tool type prefix: a cap the tool
definition carries (its field name), a number of tokens, or ``None`` when nothing documented caps it.

Sources: the web fetch tool's ``max_content_tokens`` ("If the fetched content exceeds this limit, it will be
truncated", the web fetch tool page); an advisor's answer is at most its ``max_tokens``; tool search loads
definitions the request already carries (counted in its input). The web search, code execution and MCP tool
pages document no cap on the results they add, so under ``cost_guard="hard"`` a request with them is refused.
Each use may start one more sampling pass, up to the tool's ``max_uses`` (the SDK's ``max_tokens`` docstring:
"A request that uses server tools can call the model more than once").
"""

CLIENT_TOOL_TYPES = ("custom", "bash_", "text_editor_", "computer_", "memory_")
"""Tool types the caller's code runs (Anthropic-defined client tools): no pass inside the call."""


def server_tool_passes(tools: Any) -> tuple[int, int, str | None]:
    """``(passes, added_input, unbounded)`` of a request's server tools: the most sampling passes the call can
    run (1 + the tools' ``max_uses``), the most input their results add, and why no bound holds (``None``: one
    does). A tool without ``max_uses``, or whose results have no documented cap (:data:`SERVER_TOOL_INPUT`), or
    a server tool the table does not know, leaves the call unbounded, named in the sentence."""
    passes, added = 1, 0
    for tool in tools or ():
        kind = str(tool.get("type") or "") if isinstance(tool, Mapping) else ""
        if not kind or kind.startswith(CLIENT_TOOL_TYPES):
            continue
        name = tool.get("name") or kind
        prefix = next((p for p in SERVER_TOOL_INPUT if kind.startswith(p)), None)
        if prefix is None:
            return passes, added, f"the server tool {name!r} ({kind}) is one agentlab cannot bound"
        uses = tool.get("max_uses")
        if not is_whole(uses, 0):
            return passes, added, f"the server tool {name!r} ({kind}) has no max_uses, so nothing caps its passes"
        cap = SERVER_TOOL_INPUT[prefix]
        each = tool.get(cap) if isinstance(cap, str) else cap
        if not is_whole(each, 0):
            what = f"without {cap}" if isinstance(cap, str) else "with no documented cap"
            return passes, added, f"the server tool {name!r} ({kind}) adds results {what} to every later pass"
        passes += uses
        added += uses * each
    return passes, added, None


def hard_guard_refusal(terms: RequestTerms | None) -> str | None:
    """The sentence a hard cost guard refuses an unbounded request with, or ``None`` (the request is bounded)."""
    if terms is None or terms.unbounded is None:
        return None
    return (
        f'cost_guard="hard" cannot bound this request: {terms.unbounded}. Nothing was sent. Cap the tool '
        '(max_uses, and max_content_tokens for web_fetch), remove it, or run with cost_guard="estimate" '
        "(the worst case estimated, the overspend reported)"
    )


COMPACTION_PASSES = 2
"""A call with compaction may sample twice: the compaction pass (its input at most the request's, its summary at
most ``max_tokens``: the project's rule, as the API documents no cap of its own) and the reply itself."""


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
    variants: dict[str, dict[str, float]] | None = field(default=None, hash=False)
    """Rates that replace these under a request context genai-prices knows (``"speed=fast"``: fast mode)."""

    def __post_init__(self) -> None:
        for name in ("input", "output"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise ValueError(f"Prices.{name} must be a number >= 0, got {value!r}")

    def at_tier(self, total_input: int) -> bool:
        """Is a request whose whole input (uncached + cache read + cache write) is ``total_input`` tokens billed at
        the long-context tier? (The cost guard's "might it be", from an estimate, is :meth:`_tiered`.)"""
        return self.tier_start is not None and total_input > self.tier_start

    def _rates(self, total_input: int) -> tuple[float, float, float, float]:
        tiered = self.at_tier(total_input)
        inp = (self.tier_input if tiered else None) or self.input
        out = (self.tier_output if tiered else None) or self.output
        read = (self.tier_cache_read if tiered else None) or self.cache_read
        write = (self.tier_cache_write if tiered else None) or self.cache_write
        return inp, out, read if read is not None else inp, write if write is not None else inp

    def at_speed(self, speed: str | None) -> Prices:
        """These prices under ``speed`` (``"fast"``: the variant genai-prices lists, when it lists one)."""
        if not speed or speed == "standard":
            return self
        return self._variant(f"speed={speed}", f"no {speed!r} speed price is known for these prices")

    def in_batch(self) -> Prices:
        """These prices for a Message Batches result (``service_tier: "batch"``): genai-prices' batch variant,
        half the standard rates on every token (web search keeps its fee); half these prices when the table
        lists no variant (Anthropic's batch pricing: 50 % of standard, caching multipliers stacked)."""
        if self.variants and "processing=batch" in self.variants:
            return self._variant("processing=batch", "")
        halved = {
            name: (None if getattr(self, name) is None else getattr(self, name) / 2)
            for name in ("input", "output", "cache_read", "cache_write", "cache_write_1h")
        }
        tier = {
            name: (None if getattr(self, name) is None else getattr(self, name) / 2)
            for name in ("tier_input", "tier_output", "tier_cache_read", "tier_cache_write")
        }
        return replace(self, **halved, **tier, variants=None)  # type: ignore[arg-type]  # rate fields, by name

    def _variant(self, key: str, missing: str) -> Prices:
        found = (self.variants or {}).get(key)
        if found is None:
            warnings.warn(f"{missing}; priced at standard rates", UserWarning, stacklevel=4)
            return self
        return replace(self, **found, variants=None)  # type: ignore[arg-type]  # rate fields, by name

    def cost(self, usage: Usage) -> float:
        """USD of one call with Anthropic-shaped ``usage``: everything it says.

        Tokens (at the fast variant when ``usage.speed`` says so), times the
        inference-geography multiplier, plus the compaction and advisor passes
        in ``usage.iterations`` (not in the top-level counts; an advisor pass at
        its model's rates), plus server-tool fees.
        """
        p = self if usage.speed is None else self.at_speed(usage.speed)
        if usage.service_tier == "batch":
            p = p.in_batch()
        tokens = p.token_cost(usage)
        if usage.iterations:  # (the usual reply has none, nor a region: x 1.0 is left out, the same number)
            for it in usage.extra_iterations:
                rates = p
                if it.kind == "advisor_message" and it.model:
                    rates = resolve_prices(it.model, None) or _unpriced_advisor(it.model, p)
                tokens += rates.token_cost(it.usage)
        if usage.inference_geo is not None:
            tokens *= geo_multiplier(usage.inference_geo)
        return tokens + p.server_tool_cost(usage)

    def token_cost(self, usage: Usage) -> float:
        """USD of ``usage``'s top-level token counts at these rates (no multiplier, no iterations, no fees)."""
        total_in = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        inp, out, read, write = self._rates(total_in)
        one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
        return (
            usage.input_tokens * inp
            + usage.output_tokens * out
            + usage.cache_read_input_tokens * read
            + (usage.cache_creation_input_tokens - one_hour) * write
            + one_hour * self.write_1h_rate(total_in)
        ) / PER_MTOK

    def write_1h_rate(self, total_input: int = 0) -> float:
        """USD per million tokens of a one-hour cache write (the tier's base input x2 past the threshold)."""
        if self.cache_write_1h is not None and not self.at_tier(total_input):
            return self.cache_write_1h
        return ONE_HOUR_WRITE * self._rates(total_input)[0]

    def server_tool_cost(self, usage: Usage) -> float:
        """USD of the server-tool requests in ``usage`` (web search, web fetch), billed per request."""
        return usage.web_search_requests * self.web_search + usage.web_fetch_requests * self.web_fetch

    def worst_rates(
        self, est_input_tokens: int, caching: bool | str, terms: RequestTerms | None = None
    ) -> tuple[float, float]:
        """(input, output) USD per token at their dearest for a call of this size, under ``terms``.

        For the hard cost guard, from the same rules as :meth:`cost`. The
        long-context tier counts once the estimate is within 10% of its
        threshold; cache writes (dearer than plain input) count only for a model
        that writes to the cache, at the one-hour rate when ``caching == "1h"``;
        fast mode at its variant; the geography's multiplier; a call that may
        compact at :data:`COMPACTION_PASSES` passes; fallback models at the
        dearest of them.
        """
        if terms is None:
            return self._worst(est_input_tokens, caching)
        p = self.at_speed(terms.speed)
        size = est_input_tokens if terms.passes == 1 else MANY_TOKENS  # a tool loop's later passes read more
        inp, out = p._worst(size, caching)
        for model in terms.models:
            other = resolve_prices(model, None)
            if other is None:
                raise ValueError(
                    f"no price is known for the fallback model {model!r}: the cost guard cannot bound the call"
                )
            o_in, o_out = other.at_speed(terms.speed)._worst(size, caching)
            inp, out = max(inp, o_in), max(out, o_out)
        if terms.passes > 1:
            inp, out = pass_rates(inp, out, est_input_tokens, terms.passes, terms.pass_input)
        k = geo_multiplier(terms.inference_geo)
        if terms.compaction_at is not None and est_input_tokens >= terms.compaction_at:
            k *= COMPACTION_PASSES
        return inp * k, out * k

    def rates_by_size(
        self, caching: bool | str, terms: RequestTerms | None = None
    ) -> Callable[[int], tuple[float, float]]:
        """:meth:`worst_rates` under one request's ``caching`` and ``terms``, as a function of the call's size.

        The cost guard asks for these rates twice a step. Without ``terms`` they change with the size only
        across the long-context tier's threshold (:meth:`_worst`), so each side of it is worked out once,
        when first asked; with ``terms`` (fast mode, fallback models, compaction: more thresholds, and
        warnings to give) each call works them out as :meth:`worst_rates` does.
        """
        if terms is not None:
            return lambda n: self.worst_rates(n, caching, terms)
        worst, near = self._worst, self._near_tier()  # (_tiered's test, written out: a call less, twice a step)
        sides: list[tuple[float, float] | None] = [None, None]  # [below the tier, within 10% of it or past it]

        def rates(est_input_tokens: int) -> tuple[float, float]:
            side = 1 if near is not None and est_input_tokens > near else 0
            found = sides[side]
            if found is None:
                found = sides[side] = worst(est_input_tokens, caching)
            return found

        return rates

    def _tiered(self, est_input_tokens: int) -> bool:
        """Might a call of about this size be billed at the long-context tier (within 10 % of it, or past it)?"""
        near = self._near_tier()
        return near is not None and est_input_tokens > near

    def _near_tier(self) -> float | None:
        """Above how many input tokens a call's estimate counts as at the long-context tier: within 10 % of its
        start (an estimate can be short by that much); ``None``: no tier."""
        return None if self.tier_start is None else 0.9 * self.tier_start

    def _worst(self, est_input_tokens: int, caching: bool | str) -> tuple[float, float]:
        tiered = self._tiered(est_input_tokens)
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


def _unpriced_advisor(model: str, fallback: Prices) -> Prices:
    warnings.warn(
        f"no price is known for the advisor model {model!r}; its pass is priced at the call's own rates",
        UserWarning,
        stacklevel=4,
    )
    return fallback


PROVIDERS = ("anthropic", None, "aws", "google")
"""Where a model id is looked up, in order: Anthropic's own table, then any provider genai-prices knows
(``None`` lets it pick the best match: ``gpt-4o`` is OpenAI's, ``gemini-2.5-pro`` Google's), then the
cloud platforms that serve Claude under their own ids (Bedrock's ``global.anthropic.claude-...``)."""


def lookup_prices(model_id: str, platform: str | None = None, on: str | None = None) -> Prices | None:
    """Prices of a model id from genai-prices, else ``None``.

    Anthropic's table first (with :data:`FALLBACK_ALIASES`), then every other
    provider genai-prices knows (:data:`PROVIDERS`), so a ``FunctionModel``
    driving another provider's model is priced too. With ``platform`` (a
    genai-prices provider id: ``"aws"``, ``"google"``), only that provider's table. Price variants genai-prices
    lists (fast mode) ride along in :attr:`Prices.variants`. ``on`` (an ISO date, today by default): the prices
    of that day, as a recorded call was billed.
    """
    return _lookup_prices(model_id, platform, on or today())


@lru_cache(maxsize=256)
def _lookup_prices(model_id: str, platform: str | None, on: str) -> Prices | None:
    calc = _find(model_id, platform, on)
    if calc is None:
        return None
    found = _from_model_price(calc.model_price)
    if found is None:
        return None
    variants = {}
    for variant in getattr(calc.model, "price_variants", None) or ():
        if len(variant.when) == 1 and set(variant.when) <= {"speed", "processing"}:  # fast mode, batch
            rates = _rate_fields(variant.prices)
            if rates:
                ((name, value),) = variant.when.items()
                variants[f"{name}={value}"] = rates
    return replace(found, variants=variants or None)


def _price_window(model_id: str, platform: str | None = None) -> tuple[str | None, str | None]:
    """The days today's price of ``model_id`` holds: from the table's last price change on or before today to
    its next one after (ISO dates; ``None`` where there is none)."""
    day = today()
    calc = _find(model_id, platform, day)
    return (None, None) if calc is None else _window(calc, day)


def _window(calc: Any, day: str) -> tuple[str | None, str | None]:
    changes = sorted(
        str(c.constraint.start_date)
        for c in (calc.model.prices if isinstance(calc.model.prices, list) else ())
        if getattr(c.constraint, "start_date", None) is not None
    )
    before = [d for d in changes if d <= day]
    after = [d for d in changes if d > day]
    return (before[-1] if before else None, after[0] if after else None)


@lru_cache(maxsize=256)
def _find(model_id: str, platform: str | None, on: str) -> Any:
    """genai-prices' calculation for ``model_id`` on day ``on`` (ISO), where :func:`lookup_prices` looks: the
    platform's table, else :data:`PROVIDERS` in order; ``None`` when no table knows it. Cached: a memo's miss asks
    for the price and then for the days it holds, one calculation."""
    for provider in (platform,) if platform else PROVIDERS:
        for ref in (model_id, FALLBACK_ALIASES.get(model_id) if provider == "anthropic" else None):
            if ref is None:
                continue
            try:
                return _calc_at_any_hour(ref, provider, on)
            except LookupError:
                continue
    return None


def _rate_fields(mp: Any) -> dict[str, Any]:
    """The :class:`Prices` fields a genai-prices (partial) ``ModelPrice`` sets, for a variant's overrides."""
    out: dict[str, Any] = {}
    for name, attr in (
        ("input", "input_mtok"),
        ("output", "output_mtok"),
        ("cache_read", "cache_read_mtok"),
        ("cache_write", "cache_write_mtok"),
        ("cache_write_1h", "cache_write_1h_mtok"),
    ):
        base, start, tier = _base(getattr(mp, attr, None))
        if base is None:
            continue
        out[name] = base
        if tier is not None and name != "cache_write_1h":
            out[f"tier_{name}"] = tier
            out["tier_start"] = start
    return out


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
        input=inp,
        output=out,
        cache_read=read,
        cache_write=write,
        tier_start=start,
        tier_input=t_inp,
        tier_output=t_out,
        tier_cache_read=t_read,
        tier_cache_write=t_write,
        cache_write_1h=write_1h,
        web_search=searches / 1000 if searches is not None else WEB_SEARCH_USD,
    )


_as_dict_once = lru_cache(maxsize=256)(asdict)


def prices_dict(prices: Prices) -> dict[str, Any]:
    """``dataclasses.asdict(prices)``, a fresh dict each call (a run's ``run_started`` holds it), made once per
    price table without ``variants`` (the usual case)."""
    if prices.variants is not None:
        return asdict(prices)
    return dict(_as_dict_once(prices))


def served_prices(prices: Prices | None, requested: str, served: str | None) -> Prices | None:
    """The prices of the model that served a reply (a server-side fallback may serve another than requested).

    When the run is priced by the table's entry for ``requested`` and the
    reply names another model the table knows, that model's prices; prices
    the caller gave stay the caller's.
    """
    if prices is None or not served or served == requested:
        return prices
    if prices != resolve_prices(requested, None):
        return prices
    return resolve_prices(served, None) or prices


def provider_prices(model_ref: str, provider_id: str | None = None, on: str | None = None) -> Prices | None:
    """Prices of any model genai-prices knows, from one provider's table (``"openrouter"``,
    ``"google"``, ``"openai"``…) or, with ``provider_id=None``, whichever provider it matches;
    ``on`` (an ISO date, today by default): that day's prices.

    Recorded runs name models as their agent saw them (``x-ai/grok-4-fast`` through
    OpenRouter, ``gemini-2.5-pro``). :func:`lookup_prices` answers the engine's own
    model ids: Anthropic's table first, then the others (:data:`PROVIDERS`).
    """
    return _provider_prices(model_ref, provider_id, on or today())


@lru_cache(maxsize=512)
def _provider_prices(model_ref: str, provider_id: str | None, on: str) -> Prices | None:
    try:
        calc = _calc_at_any_hour(model_ref, provider_id, on)
    except (LookupError, ValueError):
        return None
    return _from_model_price(calc.model_price)


def _calc_at_any_hour(model_ref: str, provider_id: str | None, on: str) -> Any:
    """genai-prices' price of one input and one output token of ``model_ref`` on day ``on`` (ISO), the same
    whatever the hour.

    The table prices a few models by the time of day (DeepSeek's off-peak discount, half price from 16:30 to 00:30
    UTC), and a lookup without a time is priced at the moment it runs: the same recorded run read 2x dearer at noon
    than in the evening, and the on-disk memo kept whichever came first. Where the day's prices differ, the dearest
    is taken: what a call may cost at most, so a guard built on it stays hard and a record with no hour on it is
    never priced below what it may have cost. Raises ``LookupError`` for a model the table does not know.
    """
    from datetime import UTC, date, datetime, time, timedelta

    from genai_prices import Usage as GUsage
    from genai_prices import calc_price

    one = GUsage(input_tokens=1, output_tokens=1)
    day = date.fromisoformat(on)
    calc = calc_price(
        one, model_ref=model_ref, provider_id=provider_id, genai_request_timestamp=datetime.combine(day, time(12), UTC)
    )
    hours = {
        edge
        for conditional in (calc.model.prices if isinstance(calc.model.prices, list) else ())
        for edge in (
            getattr(conditional.constraint, "start_time", None),
            getattr(conditional.constraint, "end_time", None),
        )
        if edge is not None
    }
    for edge in sorted(hours):  # both sides of each time-of-day window's edges: every price the day holds
        at_edge = datetime.combine(day, edge.replace(tzinfo=None), tzinfo=edge.tzinfo or UTC)
        for at in (at_edge, at_edge - timedelta(minutes=1)):
            priced = calc_price(one, model_ref=model_ref, provider_id=provider_id, genai_request_timestamp=at)
            if priced.total_price > calc.total_price:
                calc = priced
    return calc


def resolve_prices(
    model_id: str, prices: Prices | None, platform: str | None = None, on: str | None = None
) -> Prices | None:
    """The caller's ``prices`` if given, else the table's for ``model_id`` (memoized on disk,
    see :mod:`agentlab._price_cache`: a cold start need not import the price data).

    ``platform`` is the genai-prices provider the model is reached through
    (``"aws"`` for Bedrock, ``"google"`` for Vertex: ``AnthropicModel.platform``),
    whose prices win where they differ; other providers are the fall-through. ``on`` (an ISO date; today by
    default) is the day the call was made: a recorded call is priced as it was billed, before a price change
    the table dates.
    """
    if prices is not None:
        return prices
    if platform and platform != "anthropic":
        key = f"{platform}:{model_id}"
        on_platform, held = window_of(
            key, Prices, lambda _: lookup_prices(model_id, platform), lambda _: _price_window(model_id, platform)
        )
        if on is not None and not holds(held, on):
            on_platform = lookup_prices(model_id, platform, on)
        if on_platform is not None:
            return on_platform
    found, held = window_of(model_id, Prices, lookup_prices, _price_window)
    if on is not None and not holds(held, on):
        return lookup_prices(model_id, None, on)
    return found

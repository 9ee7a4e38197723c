"""What the lab makes of every field the Messages API can send or be sent, and the check a usage passes first.

:data:`FIELDS` is the one table: each field of a reply's ``usage`` (the SDK's
``Usage``, ``BetaUsage``, the streamed ``MessageDeltaUsage``, every
``usage.iterations`` entry, server-tool usage, output details, fallback credit)
and each ``messages.create`` parameter is *priced* (the cost or the cost guard
reads it), *shown* (kept in the trace and the views, no price of its own) or
*ignored* (with the reason beside it). A test walks the installed SDK's types
and fails on any field missing here, so a newer SDK's field is one failing test
that names it, not a wrong bill; the docs' list of supported fields is made
from this table (:func:`fields_markdown`).

:func:`check_usage` is the check a usage passes before anything is priced:
every count a whole number, at least 0, and plausible (at most the request's
caps when they are known, and :data:`MOST_TOKENS` in any case). A reply whose
usage fails is malformed: the engine charges it at the request's worst case
(the API may have billed it), never at what the usage claims, so a negative
count cannot lower what was spent. The recorded-run importers call the same
function on what they read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._checks import is_whole

Kind = Literal["priced", "shown", "ignored"]


@dataclass(frozen=True, slots=True)
class Field:
    """One field the lab knows: where it is (``usage.x.y``, ``usage.iterations[].x``, ``request.x``), what the
    lab does with it, and why."""

    path: str
    kind: Kind
    why: str


_COUNT = "a token count; priced at the model's rate for it"
_ITER = "the same count for one sampling pass; compaction and advisor passes are billed on top of the top-level usage"

FIELDS: tuple[Field, ...] = (
    # ------------------------------------------------------------ reply usage
    Field("usage.input_tokens", "priced", _COUNT + " (uncached input)"),
    Field("usage.output_tokens", "priced", _COUNT + " (all passes of the call, thinking included)"),
    Field("usage.cache_creation_input_tokens", "priced", _COUNT + " (cache writes)"),
    Field("usage.cache_read_input_tokens", "priced", _COUNT + " (cache reads)"),
    Field("usage.cache_creation", "priced", "the cache writes split by TTL"),
    Field("usage.cache_creation.ephemeral_5m_input_tokens", "priced", "five-minute cache writes (1.25x input)"),
    Field("usage.cache_creation.ephemeral_1h_input_tokens", "priced", "one-hour cache writes (2x input)"),
    Field("usage.server_tool_use", "priced", "server-tool requests, billed per request"),
    Field("usage.server_tool_use.web_search_requests", "priced", "web search: $10 per 1,000 requests"),
    Field("usage.server_tool_use.web_fetch_requests", "priced", "web fetch: no fee beyond its tokens"),
    Field("usage.service_tier", "priced", "'batch' is billed at genai-prices' batch variant (half price)"),
    Field("usage.speed", "priced", "'fast' is billed at genai-prices' fast variant"),
    Field("usage.inference_geo", "priced", "a region that costs more carries its multiplier (pricing.GEO_MULTIPLIERS)"),
    Field("usage.iterations", "priced", "the sampling passes of the call; the context size is the last message pass"),
    Field("usage.iterations[].type", "priced", "message / fallback_message (in the top level), compaction / advisor"),
    Field("usage.iterations[].model", "priced", "an advisor pass is billed at its model's rates"),
    Field("usage.iterations[].input_tokens", "priced", _ITER),
    Field("usage.iterations[].output_tokens", "priced", _ITER),
    Field("usage.iterations[].cache_creation_input_tokens", "priced", _ITER),
    Field("usage.iterations[].cache_read_input_tokens", "priced", _ITER),
    Field("usage.iterations[].cache_creation", "priced", "a pass's cache writes split by TTL"),
    Field("usage.iterations[].cache_creation.ephemeral_5m_input_tokens", "priced", "five-minute cache writes"),
    Field("usage.iterations[].cache_creation.ephemeral_1h_input_tokens", "priced", "one-hour cache writes"),
    Field("usage.output_tokens_details", "shown", "a breakdown of output_tokens, already priced in it"),
    Field(
        "usage.output_tokens_details.thinking_tokens",
        "shown",
        "how much of the output was reasoning: the steps frame's thinking_tokens column, the panel, the report",
    ),
    Field(
        "usage.fallback_credit",
        "ignored",
        "the outcome of a fallback_credit_token: a reprice made on Anthropic's bill that the reply's counts do "
        "not carry; the lab prices the served model's usage",
    ),
    Field("usage.fallback_credit.status", "ignored", "redeemed or not_applied (see usage.fallback_credit)"),
    Field("usage.fallback_credit.status.type", "ignored", "see usage.fallback_credit"),
    Field("usage.fallback_credit.status.reason", "ignored", "see usage.fallback_credit"),
    Field("usage.fallback_credit.status.remove_to_redeem", "ignored", "see usage.fallback_credit"),
    # ------------------------------------------------------- request parameters
    Field("request.model", "priced", "the model whose prices the call is billed at"),
    Field("request.max_tokens", "priced", "the output cap of each pass; the hard guard lowers it to fit"),
    Field("request.messages", "priced", "the input: bounded or counted by the cost guard"),
    Field("request.system", "priced", "input, with the messages"),
    Field("request.tools", "priced", "input; server tools add fees and passes (pricing.server_tool_passes)"),
    Field("request.thinking", "priced", "thinking output is output; its type is checked per model"),
    Field("request.speed", "priced", "fast mode: the fast variant in the guard and the bill"),
    Field("request.inference_geo", "priced", "the region's multiplier in the guard and the bill"),
    Field("request.service_tier", "priced", "'auto' / 'standard_only': standard rates; batch replies are halved"),
    Field("request.context_management", "priced", "a compact_* edit may add a compaction pass"),
    Field("request.compaction", "priced", "server-side compaction settings: a compaction pass"),
    Field("request.fallbacks", "priced", "fallback models: the guard takes the dearest"),
    Field("request.cache_control", "priced", "automatic caching: cache writes in the guard"),
    Field("request.container", "shown", "the code-execution container id, carried to the next request"),
    Field("request.betas", "shown", "beta names sent as a header; no price of their own"),
    Field("request.tool_choice", "shown", "checked against the thinking setting; no price of its own"),
    Field("request.output_config", "shown", "structured output: the answer is parsed"),
    Field("request.stop_sequences", "shown", "passed through; no price of its own"),
    Field("request.metadata", "ignored", "the caller's tag for Anthropic's records; no price"),
    Field("request.diagnostics", "ignored", "cache diagnostics the API reports; no price"),
    Field("request.user_profile_id", "ignored", "whose profile is billed, not what is billed"),
    Field("request.workspace_id", "ignored", "which workspace is billed, not what is billed"),
    Field("request.billing_policy", "ignored", "who pays, not what is billed"),
    Field("request.fallback_credit_token", "ignored", "see usage.fallback_credit"),
    Field("request.mcp_servers", "ignored", "MCP connector servers: their tools' results are input, counted by usage"),
    Field("request.thread", "ignored", "a managed thread reference; its usage is reported like any call's"),
)
"""Every field the lab knows, by path. One owner: the docs' list and the SDK sentinel test read this tuple."""

BY_PATH: Mapping[str, Field] = {f.path: f for f in FIELDS}


def fields_markdown() -> str:
    """The docs' list of supported fields: one table row per field of :data:`FIELDS`."""
    rows = ["| field | what the lab does | why |", "| --- | --- | --- |"]
    rows += [f"| `{f.path}` | {f.kind} | {f.why} |" for f in FIELDS]
    return "\n".join(rows)


MOST_TOKENS = 100_000_000
"""The most any one count may say when nothing tighter is known: 100 times the largest context window (1M
tokens) a Claude model has, so a server-tool loop of many passes fits and ``1e30`` does not."""

MOST_REQUESTS = 10_000
"""The most server-tool requests one call may report when its tools' ``max_uses`` are not known."""

COUNTS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
INPUT_COUNTS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
SPLIT = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
SERVER = ("web_search_requests", "web_fetch_requests")


@dataclass(frozen=True, slots=True)
class Caps:
    """What one request allows, when known: the most output (``max_tokens`` x its passes), the most input
    (its context window x its passes), the most server-tool requests (their ``max_uses``)."""

    output: int | None = None
    input: int | None = None
    requests: int | None = None


def _count_problem(where: str, value: Any, most: int) -> str | None:
    if value is None:
        return None
    if not is_whole(value):
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            why = "a float, not a whole number"
        else:
            why = "not a whole number"
        return f"{where} is {value!r}: {why}"
    if value < 0:
        return f"{where} is {value}: a count is never negative"
    if value > most:
        return f"{where} is {value}: more than the {most:,} this request allows"
    return None


def check_usage(raw: Any, caps: Caps | None = None, *, where: str = "usage") -> list[str]:
    """The problems of a reply's (or a record's) usage, each a sentence naming the field; ``[]`` when sound.

    Every token and request count must be an ``int`` (not a ``bool``, a float or a string), at least 0, and
    at most ``caps`` (the request's) or :data:`MOST_TOKENS`; ``thinking_tokens`` at most ``output_tokens``;
    the cache-write split at most the cache writes. Unknown fields are not problems here (they are the
    sentinel's and the gate's warning).
    """
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        return [f"{where} is {type(raw).__name__}, not an object"]
    caps = caps or Caps()
    most_in = min(caps.input, MOST_TOKENS) if caps.input is not None else MOST_TOKENS
    most_out = min(caps.output, MOST_TOKENS) if caps.output is not None else MOST_TOKENS
    problems = _counts_problems(raw, where, most_in, most_out)
    details = raw.get("output_tokens_details")
    if details is not None:
        if not isinstance(details, Mapping):
            problems.append(f"{where}.output_tokens_details is not an object")
        else:
            thinking = details.get("thinking_tokens")
            found = _count_problem(f"{where}.output_tokens_details.thinking_tokens", thinking, most_out)
            if found:
                problems.append(found)
            elif isinstance(thinking, int) and _is_count(raw.get("output_tokens")) and thinking > raw["output_tokens"]:
                problems.append(
                    f"{where}.output_tokens_details.thinking_tokens is {thinking}: more than output_tokens "
                    f"({raw['output_tokens']}), which includes it"
                )
    server = raw.get("server_tool_use")
    if server is not None:
        if not isinstance(server, Mapping):
            problems.append(f"{where}.server_tool_use is not an object")
        else:
            most = caps.requests if caps.requests is not None else MOST_REQUESTS
            for key in SERVER:
                found = _count_problem(f"{where}.server_tool_use.{key}", server.get(key), most)
                if found:
                    problems.append(found)
    iterations = raw.get("iterations")
    if iterations is not None:
        if not isinstance(iterations, list):
            problems.append(f"{where}.iterations is not a list")
        else:
            for i, it in enumerate(iterations):
                if not isinstance(it, Mapping):
                    problems.append(f"{where}.iterations[{i}] is not an object")
                    continue
                # a compaction or advisor pass writes a summary or an answer that max_tokens does not cap
                own = most_out if it.get("type") in ("message", "fallback_message") else MOST_TOKENS
                problems += _counts_problems(it, f"{where}.iterations[{i}]", most_in, own)
    return problems


def _is_count(value: Any) -> bool:
    return is_whole(value)


def _counts_problems(raw: Mapping[str, Any], where: str, most_in: int, most_out: int) -> list[str]:
    problems = []
    for key in COUNTS:
        found = _count_problem(f"{where}.{key}", raw.get(key), most_out if key == "output_tokens" else most_in)
        if found:
            problems.append(found)
    read = sum(raw.get(k) or 0 for k in INPUT_COUNTS) if not problems else 0
    if read > most_in:
        problems.append(f"{where}'s input counts add up to {read}: more than the {most_in:,} this request allows")
    split = raw.get("cache_creation")
    if split is not None:
        if not isinstance(split, Mapping):
            problems.append(f"{where}.cache_creation is not an object")
        else:
            for key in SPLIT:
                found = _count_problem(f"{where}.cache_creation.{key}", split.get(key), most_in)
                if found:
                    problems.append(found)
    return problems


def malformed_usage(problems: list[str]) -> str:
    """The one sentence a refused usage is reported with (the reply's error, an importer's warning)."""
    return "the usage cannot be believed (" + "; ".join(problems[:3]) + (" ..." if len(problems) > 3 else "") + ")"


START, END = "<!-- usage-fields:start -->", "<!-- usage-fields:end -->"


def with_fields_table(page: str) -> str:
    """``page`` with the text between :data:`START` and :data:`END` replaced by :func:`fields_markdown`."""
    head, _, rest = page.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{fields_markdown()}\n{END}{tail}"


if __name__ == "__main__":  # python -m agentlab.usage_fields docs/claude.md: regenerate the docs' list
    import sys
    from pathlib import Path

    for name in sys.argv[1:]:
        path = Path(name)
        path.write_text(with_fields_table(path.read_text()))

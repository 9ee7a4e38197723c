"""Recorded calls -> the event records a native run writes (pure logic, no I/O).

Every importer reads its format into :class:`RecordedStep` values (one per
model call: the reply, its usage in Anthropic's shape, what the user or the
tools answered, timestamps) and hands them to :func:`build_run`, which emits
the same kinds and fields the engine emits (``agentlab/events.py``). A trace
built here is therefore read, plotted, reported and replayed by the same code
as a native one, and nothing downstream needs to know where it came from.

What cannot be known from a record is said, not invented: a step whose model
has no known price gets ``cost: None`` (NaN in the frames, not $0) and the run
says so in ``run_started.recorded.notes``; usage that was not recorded is
estimated from the text and marked ``estimated``.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from ..messages import Block, Message, Usage, estimate_tokens
from ..pricing import Prices, provider_prices, resolve_prices
from ..redact import Redactor
from ..trace.schema import record
from ..vocab import EventKind, Outcome
from .audit import audit_run

TOOL_RESULT = "tool_result"


@dataclass
class RecordedStep:
    """One recorded model call and what answered it.

    ``usage`` is Anthropic-shaped (``input_tokens`` excludes cached tokens) or
    ``None`` when the record has none; ``after`` is the content of the user
    message that followed (tool results and/or text), ``None`` when nothing did.
    Times are seconds since the run's first record, ``None`` when unknown.
    """

    content: list[Block]
    usage: dict[str, int] | None
    model: str
    stop_reason: str | None = None
    requested_at: float | None = None
    replied_at: float | None = None
    recorded_cost: float | None = None
    request_id: str | None = None
    after: list[Block] | None = None
    after_at: float | None = None
    cache_write_by_ttl: dict[str, int] | None = None
    tool_times: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    line: int | None = None
    """Where the call is in its file (the line of a JSONL record, the event of an inspect sample), for the audit."""
    replayed: bool = False
    """The reply came from the agent's own local cache, not the API (inspect's ``cache: "read"``): no
    call was made, nothing was paid ($0, not a model call)."""
    output_estimated: bool = False
    """The recorded output count is known not to be the final one (Claude Code 2.1.16-2.1.51 write the
    streaming start's): the step's output is estimated from its content (never below the recorded count)."""


@dataclass
class RecordedRun:
    """A recorded run, before it becomes events."""

    run_id: str
    format: str
    source: str
    messages: list[Message]
    steps: list[RecordedStep]
    task: str = ""
    system: str | None = None
    model: str = ""
    started_at: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    outcome: str = "done"
    reason: str = ""
    detail: str = ""
    recorded_cost: float | None = None
    parent: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    ended_at: float | None = None
    tool_steps: dict[str, int] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)
    """The record's own run totals, where it keeps them: ``model_calls``, ``input_tokens``
    (all prompt tokens sent), ``output_tokens`` and ``cost``. Estimates are scaled to
    them, and a run whose replies do not add up to them takes its figures from them."""


def recorded_run(
    file: Path, run_id: str, format: str, messages: list[Message], steps: list[RecordedStep], **rest: Any
) -> RecordedRun:
    """A run of a record that keeps no stop reasons: each step's is read off its content, and the task is the
    first user text (the formats that store neither build their runs through this one place)."""
    for s in steps:
        s.stop_reason = stop_reason_of(s.content, None)
    return RecordedRun(
        run_id=run_id,
        format=format,
        source=str(file),
        messages=messages,
        steps=steps,
        task=first_text(messages)[:500],
        **rest,
    )


# ------------------------------------------------------------------ usage
def count(value: Any) -> int | float:
    """A recorded token count: an ``int`` when it is a whole number (``12``, ``12.0``, ``"12"``),
    ``0`` when absent, and otherwise the number as written (``2.5``, ``-3``, NaN for text).

    Nothing is rounded or clamped away: the import's audit holds every count to
    :func:`agentlab.usage_fields.check_usage` (the lab's one usage rule) and reports the
    ones that fail, rather than pricing them as if they were right."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        return math.nan
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        try:
            return count(float(value))
        except ValueError:
            return math.nan
    return math.nan


def usage_from_anthropic(u: dict[str, Any] | None) -> dict[str, Any] | None:
    """Anthropic usage as the engine keeps it (extra fields dropped)."""
    if not isinstance(u, dict):
        return None
    return {
        "input_tokens": count(u.get("input_tokens")),
        "output_tokens": count(u.get("output_tokens")),
        "cache_creation_input_tokens": count(u.get("cache_creation_input_tokens")),
        "cache_read_input_tokens": count(u.get("cache_read_input_tokens")),
    }  # a count that is not whole stays visible for the audit


def cache_ttl(u: dict[str, Any] | None) -> dict[str, int] | None:
    """Cache writes split by time-to-live (``{"5m": n, "1h": n}``) where the record says."""
    cc = (u or {}).get("cache_creation")
    if not isinstance(cc, dict):
        return None
    return {
        "5m": int(count(cc.get("ephemeral_5m_input_tokens")) or 0),
        "1h": int(count(cc.get("ephemeral_1h_input_tokens")) or 0),
    }


def usage_from_openai(u: dict[str, Any] | None) -> dict[str, Any] | None:
    """OpenAI-form usage (``prompt_tokens`` includes cached tokens) in Anthropic's shape.

    Cached tokens come from ``prompt_tokens_details.cached_tokens``, or the
    provider fields DeepSeek (``prompt_cache_hit_tokens``) and Anthropic-via-proxy
    (``cache_read_input_tokens``/``cache_creation_input_tokens``) write.
    """
    if not isinstance(u, dict):
        return None
    if "prompt_tokens" not in u and "input_tokens" in u:
        return usage_from_anthropic(u)
    prompt = count(u.get("prompt_tokens"))
    details = u.get("prompt_tokens_details") or {}
    read = count(
        (details.get("cached_tokens") if isinstance(details, dict) else 0)
        or u.get("prompt_cache_hit_tokens")
        or u.get("cache_read_input_tokens")
    )
    write = count(u.get("cache_creation_input_tokens"))
    return {
        "input_tokens": max(prompt - read - write, 0),
        "output_tokens": count(u.get("completion_tokens")),
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
    }  # a count that is not whole stays visible for the audit


# ------------------------------------------------------------------ prices
_PREFIXES = ("anthropic/", "google/", "gemini/", "deepseek/", "openai/", "litellm/", "bedrock/", "vertex_ai/", "azure/")


def prices_for(model: str, on: str | None = None) -> Prices | None:
    """Prices for a recorded model id on day ``on`` (ISO; today when ``None``): Anthropic's table first, then
    OpenRouter's for a routed id (``openrouter/x-ai/grok-4-fast``, ``qwen/qwen3-coder``), then any provider
    genai-prices knows. A call is priced as it was billed the day it was made: the table dates its price
    changes (o3 cost five times today's price before 2025-06-10)."""
    if not model or model == "<synthetic>":
        return None
    found = resolve_prices(model, None, on=on)
    if found is not None:
        return found
    name = model
    if name.startswith("openrouter/"):
        name = name.removeprefix("openrouter/")
        return provider_prices(name, "openrouter", on) or _plain(name.rsplit("/", 1)[-1], on)
    for p in _PREFIXES:
        if name.startswith(p):
            return _plain(name[len(p) :], on)
    if "/" in name:  # vendor/model: how OpenRouter names what it routes
        return provider_prices(name, "openrouter", on) or _plain(name.rsplit("/", 1)[-1], on)
    return _plain(name, on)


def _plain(name: str, on: str | None) -> Prices | None:
    return resolve_prices(name, None, on=on) or provider_prices(name, None, on)


def day_of(start: float | None, offset: float | None) -> str | None:
    """The UTC day (ISO) of a moment ``offset`` seconds after a run's start (:func:`seconds` of its
    ``started_at``); ``None`` when the record has no start time, or none a calendar holds (a hostile file's year
    99999, a NaN offset): priced at today's rates then, like a record without one."""
    if start is None:
        return None
    try:
        return datetime.fromtimestamp(start + (offset or 0.0), UTC).date().isoformat()
    except (OverflowError, ValueError, OSError):
        return None


ROUTERS: dict[str, tuple[str, ...]] = {
    "auto": ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-3-pro-preview", "gemini-3-flash-preview"),
    "auto-gemini-2.5": ("gemini-2.5-pro", "gemini-2.5-flash"),
    "auto-gemini-3": ("gemini-3-pro-preview", "gemini-3-flash-preview"),
}
"""Model names that are routers, not models: Gemini CLI's ``auto`` aliases send each request to one of
these models (the CLI's docs, "Model aliases": ``auto`` is ``auto-gemini-2.5`` or, with preview features on,
``auto-gemini-3``; each routes between the Pro and the Flash model of its generation). A call recorded under
the alias has no one price: it is left unpriced (NaN) and said so, and the calls that name a model keep theirs."""


def unpriced_why(model: str) -> str:
    """Why ``model``'s calls have no price, for the run's notes."""
    if model in ROUTERS:
        return (
            f"{model!r} is Gemini CLI's router, which sends each request to {' or '.join(ROUTERS[model])}; "
            "the record does not say which, so these calls are not priced"
        )
    return f"no price for model {model or '(no model named)'!r}"


# ------------------------------------------------------------------ events
def build_run(
    run: RecordedRun,
    *,
    prices: Prices | dict[str, Prices] | None = None,
    redactor: Redactor | None = None,
    price_memo: dict[tuple[str, str | None], Prices | None] | None = None,
) -> list[dict[str, Any]]:
    """The event records of a native trace for ``run`` (redacted like a native trace).

    Values ``redactor`` learns while redacting this run apply to this run only.
    ``price_memo`` keeps the table's prices by model and day across the runs of one import
    (a lookup costs a fraction of a millisecond; a folder holds hundreds of runs). Each call is priced on the day
    it was made (:func:`prices_for`)."""
    # the records repeat each tool input and result: each string is redacted once
    redactor = (redactor or Redactor()).for_run(repeats=True)
    out: list[dict[str, Any]] = []
    seq = 0

    def emit(kind: str, step: int, t: float | None, **data: Any) -> None:
        nonlocal seq
        seq += 1
        out.append(record(run.run_id, seq, step, round(t or 0.0, 6), kind, data))

    price_cache: dict[tuple[str, str | None], Prices | None] = price_memo if price_memo is not None else {}
    start_s = seconds(run.started_at)
    run_day = day_of(start_s, 0.0)

    def price(model: str, day: str | None = run_day) -> Prices | None:
        if isinstance(prices, Prices):
            return prices
        if isinstance(prices, dict) and model in prices:
            return prices[model]
        if (model, day) not in price_cache:
            price_cache[model, day] = prices_for(model, day)
        return price_cache[model, day]

    run_prices = price(run.model)
    unpriced: Counter[str] = Counter()
    notes: list[str] = []
    usages, scale_notes = _usages(run, price)
    notes += scale_notes
    estimated_steps = sum(s.usage is None for s in run.steps)
    partial_output = sum(s.usage is not None and s.output_estimated for s in run.steps)
    flags = [not s.replayed and (s.usage is None or s.output_estimated) for s in run.steps]
    replayed = sum(s.replayed for s in run.steps)
    recorded = {
        "format": run.format,
        "source": run.source,
        "skipped_lines": dict(run.skipped),
        "recorded_cost": run.recorded_cost,
        **run.meta,
    }
    start: dict[str, Any] = {
        "task": run.task,
        "started_at": run.started_at,
        "model": run.model,
        "model_name": None,
        "system": run.system,
        "budget": {"max_steps": None, "max_cost": None, "deadline_s": None, "cost_guard": "off"},
        # the agent's max_tokens is not in its records: the largest recorded reply stands in,
        # so a budget what-if never cuts off a reply the real run received whole (a fork
        # uses its own max_tokens, see forking.fork)
        "max_tokens": max([u["output_tokens"] for u in usages] + [1]),
        "tools": run.tools or _used_tools(run.steps),
        "prices": None if run_prices is None else _asdict(run_prices),
        "caches": any(u.get("cache_read_input_tokens") for u in usages),
        "messages": run.messages,
        "recorded": recorded,
    }
    if run.parent is not None:
        start["parent"] = run.parent
    emit(EventKind.RUN_STARTED, 0, 0.0, **start)
    # the spend is unknown (None: NaN in the frames, never $0) from the first step no price covers
    spent: float | None = 0.0
    recorded_spent = 0.0
    t = 0.0
    for k, (s, usage) in enumerate(zip(run.steps, usages, strict=True), 1):
        t_req = s.requested_at if s.requested_at is not None else t
        estimated = flags[k - 1]
        # the record knows the input exactly, so it is also the "estimate" a what-if's cost guard reads
        context = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
        emit(EventKind.MODEL_REQUEST, k, t_req, max_tokens=start["max_tokens"], estimated_input_tokens=context)
        p = price(s.model, day_of(start_s, s.requested_at))
        cost: float | None
        if p is None:
            cost = spent = None
            unpriced[s.model] += 1
        else:
            cost = p.cost(Usage(**cast(dict[str, Any], usage)))
            spent = None if spent is None else spent + cost
        if s.recorded_cost is not None:
            recorded_spent += s.recorded_cost
        t_rep = s.replied_at if s.replied_at is not None else t_req
        called: dict[str, Any] = {
            "content": s.content,
            "stop_reason": s.stop_reason,
            "usage": usage,
            "estimated": estimated,
            "cost": cost,
            "spent": spent,
            "latency": max(t_rep - t_req, 0.0),
            "request_id": s.request_id,
            "context_tokens": context,
            "max_tokens": start["max_tokens"],
            "model": s.model,
        }
        if s.recorded_cost is not None:
            called["recorded_cost"] = s.recorded_cost
        if s.cache_write_by_ttl is not None:
            called["cache_write_by_ttl"] = s.cache_write_by_ttl
        emit(EventKind.MODEL_CALLED, k, t_rep, **called)
        uses = [b for b in s.content if isinstance(b, dict) and b.get("type") == "tool_use"]
        results = {
            b.get("tool_use_id"): b for b in (s.after or []) if isinstance(b, dict) and b.get("type") == TOOL_RESULT
        }
        t_end = s.after_at if s.after_at is not None else t_rep
        for i, b in enumerate(uses):
            cid = b.get("id", "")
            start_t, end_t = s.tool_times.get(cid, (t_rep, t_end))
            start_t = t_rep if start_t is None else start_t
            name = b.get("name", "")
            call = {"call_id": cid, "tool": name, "mode": recorded_mode(name), "args": b.get("input") or {}, "index": i}
            emit(EventKind.TOOL_STARTED, k, start_t, **call)
            res = results.get(cid)
            if res is None:
                continue  # asked for, never answered: the calls frame shows it "unfinished"
            end_t = t_end if end_t is None else end_t
            is_error = bool(res.get("is_error"))
            emit(
                EventKind.TOOL_FINISHED,
                k,
                end_t,
                **call,
                outcome=Outcome.RECOVERABLE if is_error else Outcome.OK,
                attempts=1,
                result=_result_text(res.get("content")),
                is_error=is_error,
                start=start_t,
                end=end_t,
                error=None,
            )
        if s.after is not None:
            emit(EventKind.TOOL_RESULTS, k, t_end, content=s.after)
        t = max(t, t_rep, t_end)
        emit(EventKind.STEP_FINISHED, k, t, spent=spent, elapsed=t, budget=start["budget"])
    if unpriced:
        which = "; ".join(f"{unpriced_why(m)} ({n} step{'s' * (n != 1)})" for m, n in unpriced.items())
        notes.append(f"{which}: the run's cost is unknown (NaN), not $0")
    if estimated_steps:
        notes.append(f"{estimated_steps} step(s) had no recorded usage: their tokens are estimated from the text")
    if partial_output:
        notes.append(
            f"{partial_output} step(s) recorded an output count that is not the final one (this agent version "
            "writes the count from the start of the stream): their output is estimated from the reply"
        )
    if run.recorded_cost is None and recorded_spent:
        recorded["recorded_cost"] = recorded_spent
    model_calls = len(run.steps) - replayed
    if replayed:
        notes.append(
            f"{replayed} step(s) were replayed from the agent's local cache: no API call, priced $0 "
            "and not counted as model calls"
        )
    priced = spent  # the lab's price of the calls it holds, before a record's own counters overrule it
    found_calls = run.totals.get("model_calls")
    if isinstance(found_calls, (int, float)) and int(found_calls) != len(run.steps):
        model_calls = int(found_calls)
        total_cost = run.totals.get("cost")
        notes.append(
            f"the record counts {model_calls} API calls but holds {len(run.steps)} replies: the run's model_calls "
            + (
                f"and cost are the record's ({model_calls}, ${total_cost:.4f})"
                if total_cost is not None
                else f"is the record's ({model_calls})"
            )
        )
        if total_cost is not None:
            spent = float(total_cost)
        recorded["calls_found"] = len(run.steps)
    recorded["notes"] = notes
    recorded["audit"] = audit_run(run, usages, flags, priced)
    recorded["unpriced_steps"] = sum(unpriced.values())
    recorded["unpriced_models"] = sorted(unpriced)
    if run.ended_at is not None:
        t = max(t, run.ended_at)
    last = run.steps[-1] if run.steps else None
    text = "".join(
        b.get("text", "") for b in (last.content if last else []) if isinstance(b, dict) and b.get("type") == "text"
    )
    emit(
        EventKind.RUN_FINISHED,
        len(run.steps),
        t,
        outcome=run.outcome,
        reason=run.reason,
        detail=run.detail,
        text=text,
        steps=len(run.steps),
        spent=spent,
        elapsed=t,
        model_calls=model_calls,
        nudges=0,
        error=None,
    )
    return [_redacted(r, redactor) for r in out]


def _usages(run: RecordedRun, price: Any) -> tuple[list[dict[str, int]], list[str]]:
    """Each step's usage as it is priced: the recorded one (its one-hour cache writes named), else an
    estimate from the text in the cache shape of its recorded neighbours, scaled to the record's own
    totals where it keeps them (and the notes saying by how much).

    An estimate counts the history the model was sent and the reply it wrote
    (``messages.estimate_tokens``); text-only estimates run 2-10x off a real
    tokenizer, so where the record holds the run's tokens sent/received (or only
    its cost) the estimated steps are scaled to make the totals agree. A call
    beside calls that read most of their prompt from the cache did too: an
    estimate that priced its whole prompt as fresh input would cost several
    times the recorded call next to it.
    """
    history = estimate_tokens(run.system or "") + sum(estimate_tokens(m) for m in run.messages)
    out: list[dict[str, int]] = []
    for s in run.steps:
        if s.replayed:
            u = Usage().as_dict()
        elif s.usage is None:
            u = Usage(input_tokens=history, output_tokens=estimate_tokens(s.content)).as_dict()
        else:
            u = dict(s.usage)
            long = (s.cache_write_by_ttl or {}).get("1h", 0)
            if long and isinstance(u["cache_creation_input_tokens"], int):
                u["cache_creation_1h_input_tokens"] = min(long, u["cache_creation_input_tokens"])
            if s.output_estimated and isinstance(u["output_tokens"], int):
                u["output_tokens"] = max(u["output_tokens"], estimate_tokens(s.content))
        out.append(u)
        history = _context(u) + _num(u["output_tokens"])
        if s.after is not None:
            history += estimate_tokens(s.after)
    est = [i for i, s in enumerate(run.steps) if s.usage is None and not s.replayed]
    if not est:
        return out, []
    known_steps = [i for i, s in enumerate(run.steps) if s.usage is not None and not s.replayed]
    for i in est:  # the cache shape of the nearest recorded call of the same model (the one before first)
        near = [j for j in known_steps if run.steps[j].model == run.steps[i].model] or known_steps
        j = max((j for j in near if j < i), default=None)
        j = min((j for j in near if j > i), default=None) if j is None else j
        ctx = _context(out[j]) if j is not None else 0
        if j is not None and ctx > 0:
            read = round(out[i]["input_tokens"] * _num(out[j]["cache_read_input_tokens"]) / ctx)
            out[i] = {**out[i], "input_tokens": out[i]["input_tokens"] - read, "cache_read_input_tokens": read}
    notes: list[str] = []
    factors: dict[str, float] = {}
    for key, total_key, label in (
        ("context", "input_tokens", "tokens sent"),
        ("output_tokens", "output_tokens", "tokens received"),
    ):
        total = run.totals.get(total_key)
        if not isinstance(total, (int, float)) or total <= 0:
            continue
        size = _context if key == "context" else (lambda u: _num(u["output_tokens"]))
        known = sum(size(out[i]) for i in known_steps)
        guessed = sum(size(out[i]) for i in est)
        if guessed > 0 and total > known:
            factors[key] = (total - known) / guessed
            what = "input tokens" if key == "context" else "output tokens"
            notes.append(f"estimated {what} scaled x{factors[key]:.3g} to the record's {label} ({int(total):,})")
    cost_total = run.totals.get("cost")
    if not factors and isinstance(cost_total, (int, float)) and cost_total > 0:
        p = price(run.model)
        if p is not None:
            guessed_cost = sum(p.cost(Usage(**out[i])) for i in est)  # type: ignore[arg-type]  # token counts only
            known_cost = sum(p.cost(Usage(**out[i])) for i in known_steps)  # type: ignore[arg-type]
            if guessed_cost > 0 and cost_total > known_cost:
                f = (cost_total - known_cost) / guessed_cost
                factors = {"context": f, "output_tokens": f}
                notes.append(
                    f"estimated tokens scaled x{f:.3g} so the repriced run costs the record's ${cost_total:.4f}"
                )
    for i in est:
        out[i] = {
            k: round(v * factors.get("output_tokens" if k == "output_tokens" else "context", 1))
            for k, v in out[i].items()
        }
    if not factors:
        notes.append("the record keeps no totals to check the estimates against: they may be 2-10x off")
    return out, notes


def _num(v: Any) -> int:
    return v if isinstance(v, int) else 0


def _context(u: dict[str, Any]) -> int:
    """All prompt tokens of a call (fresh input, cache reads, cache writes)."""
    return _num(u["input_tokens"]) + _num(u["cache_read_input_tokens"]) + _num(u["cache_creation_input_tokens"])


def _redacted(record: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """``record`` with secrets redacted, checked block by block: a long session holds
    many blocks and few secrets, and redacting only the blocks that need it keeps
    an import of tens of megabytes within seconds."""
    if record["kind"] in (EventKind.MODEL_REQUEST, EventKind.STEP_FINISHED):
        return record
    out = dict(record)
    for k, v in record.items():
        if isinstance(v, list):
            out[k] = [redactor.clean(x) for x in v]
        elif isinstance(v, (dict, str)):
            out.update(redactor.clean({k: v}))
    return out


READS = frozenset(
    # Claude Code's built-in tools that change nothing
    ["Read", "Glob", "Grep", "LS", "NotebookRead", "WebFetch", "WebSearch"]
    # Gemini CLI's
    + [
        "read_file",
        "read_many_files",
        "glob",
        "search_file_content",
        "list_directory",
        "web_fetch",
        "google_web_search",
    ]
)
"""Recorded tool names known to be reads (Claude Code's and Gemini CLI's built-in tools that only look)."""


def recorded_mode(name: str) -> str | None:
    """``"read"`` for a tool known to change nothing, else ``None``: a record does not say, and a replay
    treats an unknown mode as a write (run alone), the safe side."""
    return "read" if name in READS else None


def _used_tools(steps: list[RecordedStep]) -> list[dict[str, Any]]:
    """The tools a record's replies called, in first-use order (the record lists no definitions)."""
    names = dict.fromkeys(
        b.get("name", "") for s in steps for b in s.content if isinstance(b, dict) and b.get("type") == "tool_use"
    )
    return [
        {"name": n, "mode": recorded_mode(n), "description": "", "input_schema": {"type": "object", "properties": {}}}
        for n in names
        if n
    ]


def _asdict(p: Prices) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(p)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return "" if content is None else str(content)


# ------------------------------------------------------------------ helpers for importers
def seconds(ts: Any) -> float | None:
    """Seconds since the epoch from an ISO-8601 string or a number, ``None`` if neither."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return float(ts)
    if isinstance(ts, str) and ts:
        try:
            return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def blocks(content: Any) -> list[Block]:
    """Message content as a list of blocks (a string becomes one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b if isinstance(b, dict) else {"type": "text", "text": str(b)} for b in content]
    return []


def stop_reason_of(content: list[Block], recorded: str | None) -> str:
    """The recorded stop reason, else the one the content implies (streamed lines often record none)."""
    if recorded:
        return recorded
    return "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"


def first_text(messages: list[Message]) -> str:
    for m in messages:
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            for b in c or []:
                if isinstance(b, dict) and b.get("type") == "text":
                    return str(b.get("text", ""))
    return ""


def drop_leading(run: RecordedRun, n: int) -> RecordedRun:
    """``run`` without its first ``n`` steps, which become history (calls another file already counts)."""
    history = list(run.messages)
    for s in run.steps[:n]:
        history.append({"role": "assistant", "content": s.content})
        if s.after is not None:
            history.append({"role": "user", "content": s.after})
    return replace(run, messages=history, steps=run.steps[n:], recorded_cost=None, totals={})


def split_by_model(run: RecordedRun) -> list[RecordedRun]:
    """``run`` cut where the model changes (a fallback model, a ``/model`` switch): one model,
    one price list per run, as for Claude Code sessions. Each later part starts from
    the whole history before it and names the part it follows (``recorded.previous``)."""
    parts: list[list[RecordedStep]] = []
    for s in run.steps:
        if parts and s.model and parts[-1][-1].model and s.model != parts[-1][-1].model:
            parts.append([s])
        elif parts:
            parts[-1].append(s)
        else:
            parts.append([s])
    if len(parts) <= 1:
        return [run]
    out: list[RecordedRun] = []
    history = list(run.messages)
    for n, steps in enumerate(parts):
        rid = run.run_id if n == 0 else f"{run.run_id}-seg{n}"
        meta = {
            **run.meta,
            "segment": n,
            "boundary": None if n == 0 else "model switch",
            "previous": out[-1].run_id if out else None,
        }
        part = replace(
            run,
            run_id=rid,
            messages=list(history),
            steps=steps,
            model=steps[0].model or run.model,
            meta=meta,
            recorded_cost=run.recorded_cost if n == 0 else None,
            totals=run.totals if n == 0 else {},
        )
        if n + 1 < len(parts):
            part.outcome, part.reason = "done", ""
            part.detail = "the model changed; the run continues in the next segment"
        out.append(part)
        for s in steps:
            history.append({"role": "assistant", "content": s.content})
            if s.after is not None:
                history.append({"role": "user", "content": s.after})
    return out

"""A run's model calls and the items each one sent, read from its trace (pure logic, one pass).

Every cost analysis here starts from the same picture: the history a run
carried, cut into *items* (each tool definition, the system prompt, each user
turn, each assistant reply, each tool result, each image), and its model calls,
each sending the first ``n_items`` of them with the usage the API reported.
The trace stores each step once (what it added), so the picture is built in one
pass over the events, for native and imported runs alike.

An item's size is an estimate (``messages.estimate_tokens``: the API reports
token totals per call, never per item); an image counts as at most
:data:`IMAGE_TOKENS`, the size the API gives a full-size image.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from .._safe_text import without_lone_surrogates
from .._shorten import shorten
from ..messages import Usage, estimate_tokens
from ..pricing import Prices, geo_multiplier, resolve_prices, served_prices
from ..vocab import EventKind

IMAGE_TOKENS = 1_600
"""The most tokens one image is counted as (about what the API bills a full-size ~1.15 megapixel image)."""

SKILL_TOOLS = frozenset({"Skill", "SlashCommand"})
"""Claude Code's tools that load a skill or a command: their results are grouped by the skill's name."""


@dataclass(frozen=True, slots=True)
class Item:
    """One thing a run carried: it was sent with every call from the step it was added on."""

    index: int
    kind: str
    """``tool definition`` | ``system prompt`` | ``user turn`` | ``assistant reply`` | ``tool result`` | ``image``"""
    label: str
    tool: str | None
    group: str | None
    """The Claude Code skill, or the MCP server or plugin, the item came from (``None``: none recorded)."""
    tokens: int
    step: int
    """The step whose call first sent it (0 for what the run started with: it is sent from the first call)."""
    key: str
    """A fingerprint of the item's content, to tell whether it changed between two requests."""
    thinking: bool = False
    """An assistant reply holding thinking blocks (the API drops those of earlier turns at a new user turn)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One model call: what it sent (the first ``n_items`` items), what the API reported, at what rates."""

    step: int
    t: float
    t_request: float
    model: str
    usage: Usage
    n_items: int
    prices: Prices | None
    compaction: bool
    """The reply carried a compaction block or the API's account of context edits: the next prefix differs."""
    diagnostics: dict[str, Any] | None

    @property
    def context(self) -> int:
        return self.usage.context_tokens

    def state_rates(self) -> tuple[float, float, float, float] | None:
        """USD per token of this call's input by cache state: (uncached, cache read, 5-minute write, 1-hour write).

        Each is :meth:`Prices.token_cost` of the whole input in that one state, so the tier (set by the call's
        size), the speed and the region's multiplier are the pricing module's, not a copy of its rules.
        """
        p = self.prices
        n = self.context
        if p is None or n <= 0:
            return None
        p = p.at_speed(self.usage.speed) if self.usage.speed else p
        k = geo_multiplier(self.usage.inference_geo) / n
        return (
            p.token_cost(Usage(input_tokens=n)) * k,
            p.token_cost(Usage(cache_read_input_tokens=n)) * k,
            p.token_cost(Usage(cache_creation_input_tokens=n)) * k,
            p.token_cost(Usage(cache_creation_input_tokens=n, cache_creation_1h_input_tokens=n)) * k,
        )

    def input_cost(self) -> float:
        """The call's input-side USD: uncached input + cache writes + cache reads, at its rates."""
        rates = self.state_rates()
        if rates is None:
            return 0.0 if self.context == 0 else float("nan")
        u = self.usage
        one_hour = min(u.cache_creation_1h_input_tokens, u.cache_creation_input_tokens)
        return (
            u.input_tokens * rates[0]
            + u.cache_read_input_tokens * rates[1]
            + (u.cache_creation_input_tokens - one_hour) * rates[2]
            + one_hour * rates[3]
        )


@dataclass
class RunCalls:
    """One run as the cost analyses read it."""

    run_id: str
    agent: str
    """``main``, or the sub-agent's name (a run started inside a tool, or a Claude Code sidechain)."""
    model: str
    items: list[Item] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    def request(self, n: int) -> list[Item]:
        """The items call ``n`` (0-based) sent."""
        return self.items[: self.calls[n].n_items]


def _key(obj: Any) -> str:
    # a tool's text may hold half a UTF-16 pair; the key is of the text as shown, which encodes
    shown = without_lone_surrogates(obj)
    return hashlib.blake2b(orjson.dumps(shown, option=orjson.OPT_SORT_KEYS, default=str), digest_size=8).hexdigest()


def _size(obj: Any) -> int:
    if isinstance(obj, dict) and obj.get("type") == "image":
        return min(estimate_tokens(obj), IMAGE_TOKENS)
    return estimate_tokens(obj)


def _group(tool: str | None, args: Any) -> str | None:
    """The skill (Claude Code's Skill tool), MCP server or plugin (``mcp__<server>__<tool>``) a tool belongs to."""
    if not tool:
        return None
    if tool in SKILL_TOOLS and isinstance(args, dict):
        name = args.get("skill") or args.get("command") or args.get("name")
        return f"skill:{name}" if name else None
    if tool.startswith("mcp__"):
        server = tool.split("__")[1] if tool.count("__") >= 2 else tool
        return f"plugin:{server.removeprefix('plugin_')}" if server.startswith("plugin_") else f"mcp:{server}"
    return None


def _text_label(content: Any, width: int = 60) -> str:
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(str(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    else:
        text = ""
    return shorten(text, width, flat=True)


class _Builder:
    def __init__(self, run: RunCalls) -> None:
        self.run = run
        self.uses: dict[str, tuple[str, Any]] = {}  # tool_use id -> (tool, args)

    def add(
        self, kind: str, label: str, content: Any, step: int, tool: str | None = None, group: str | None = None
    ) -> None:
        items = self.run.items
        thinking = kind == "assistant reply" and any(
            isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking") for b in content or []
        )
        items.append(Item(len(items), kind, label, tool, group, _size(content), step, _key(content), thinking))

    def message(self, message: Any, step: int, results: dict[str, Any]) -> None:
        if not isinstance(message, dict):
            return
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            blocks = content if isinstance(content, list) else []
            for b in blocks:
                if (
                    isinstance(b, dict)
                    and b.get("type") in ("tool_use", "server_tool_use")
                    and isinstance(b.get("id"), str)
                ):
                    self.uses[b["id"]] = (str(b.get("name") or ""), b.get("input"))
            names = [str(b.get("name")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            label = _text_label(content) or ("calls " + ", ".join(names) if names else "(reply)")
            self.add("assistant reply", label, content, step)
            return
        if isinstance(content, str) or not isinstance(content, list):
            self.add("user turn", _text_label(content), content, step)
            return
        text: list[Any] = []
        for b in content:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "tool_result":
                if b.get("content_ref") == "tool_finished":
                    b = {
                        **{k: v for k, v in b.items() if k != "content_ref"},
                        "content": results.get(b.get("tool_use_id"), ""),
                    }
                tool, args = self.uses.get(str(b.get("tool_use_id")), (None, None))
                inner = b.get("content")
                images = (
                    [x for x in inner if isinstance(x, dict) and x.get("type") == "image"]
                    if isinstance(inner, list)
                    else []
                )
                rest = {**b, "content": [x for x in inner if x not in images]} if images else b
                self.add("tool result", f"{tool or 'tool'} result", rest, step, tool, _group(tool, args))
                for im in images:
                    self.add("image", f"image from {tool or 'a tool'}", im, step, tool, _group(tool, args))
            elif kind == "image":
                self.add("image", "image", b, step)
            else:
                text.append(b)
        if text:
            self.add("user turn", _text_label(text) or "(user content)", text, step)


def prices_of(start: dict[str, Any]) -> Prices | None:
    """A run's prices, from its ``run_started`` data (those it recorded, else its model's)."""
    found = start.get("prices")
    if isinstance(found, dict):
        try:
            return Prices(**found)
        except TypeError:
            pass
    model = str(start.get("model") or "")
    return resolve_prices(model, None) if model else None


def count(raw: dict[str, Any], key: str) -> int:
    """A usage count as the cost analyses read it: a number (not a bool) as an int, anything else 0."""
    v = raw.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def usage_of(raw: dict[str, Any], by_ttl: Any = None) -> Usage:
    """A ``model_called``'s usage as the cost analyses price it (an import's TTL split ``by_ttl`` kept)."""

    def n(key: str) -> int:
        return count(raw, key)

    return Usage(
        input_tokens=n("input_tokens"),
        output_tokens=n("output_tokens"),
        cache_creation_input_tokens=n("cache_creation_input_tokens"),
        cache_read_input_tokens=n("cache_read_input_tokens"),
        cache_creation_1h_input_tokens=n("cache_creation_1h_input_tokens")
        or (int(by_ttl.get("1h") or 0) if isinstance(by_ttl, dict) else 0),  # an import keeps the TTL split apart
        speed=raw.get("speed") if isinstance(raw.get("speed"), str) else None,
        inference_geo=raw.get("inference_geo") if isinstance(raw.get("inference_geo"), str) else None,
    )


def _agent(start: dict[str, Any]) -> str:
    found = start.get("recorded")
    recorded: dict[str, Any] = found if isinstance(found, dict) else {}
    agent = recorded.get("agent_id") or recorded.get("agent")
    if agent:
        return f"sub-agent {agent}"
    parent = start.get("parent")
    if isinstance(parent, dict) and parent.get("tool_use_id"):
        return f"sub-run of {parent.get('run_id')}"
    return "main"


def run_calls(trace: Any) -> RunCalls:
    """The items and calls of one run (a :class:`~agentlab.trace.Trace`), in one pass over its events."""
    records: list[dict[str, Any]] = trace.records
    start = next((e for e in records if e.get("kind") == EventKind.RUN_STARTED), {})
    model = str(start.get("model") or "")
    run = RunCalls(trace.run_id, _agent(start), model)
    build = _Builder(run)
    base = prices_of(start)
    for tool in start.get("tools") or []:
        if isinstance(tool, dict):
            name = str(tool.get("name") or "")
            spec = {k: tool.get(k) for k in ("name", "description", "input_schema") if k in tool}
            build.add("tool definition", f"{name} definition", spec, 0, name, _group(name, None))
    system = start.get("system")
    if system:
        build.add("system prompt", "system prompt", system, 0)
    results: dict[str, Any] = {}
    for m in start.get("messages") or []:
        build.message(m, 0, results)
    requested: dict[int, tuple[int, float]] = {}
    prices_by_model: dict[str, Prices | None] = {}
    for e in records:
        kind = e.get("kind")
        if kind == EventKind.TOOL_FINISHED and isinstance(e.get("call_id"), str):
            results[e["call_id"]] = e.get("result")
        elif kind == EventKind.MODEL_REQUEST:
            requested[e.get("step", 0)] = (len(run.items), float(e.get("t") or 0.0))
        elif kind == EventKind.MODEL_CALLED:
            usage = e.get("usage")
            step = int(e.get("step") or 0)
            n, t_req = requested.get(step, (len(run.items), float(e.get("t") or 0.0)))
            if isinstance(usage, dict):
                served = str(e.get("model") or model)
                if served not in prices_by_model:
                    prices_by_model[served] = served_prices(base, model, served)
                content: list[Any] = e["content"] if isinstance(e.get("content"), list) else []
                compacted = any(isinstance(b, dict) and b.get("type") == "compaction" for b in content) or bool(
                    (e.get("context_management") or {}).get("applied_edits")
                    if isinstance(e.get("context_management"), dict)
                    else False
                )
                diag = e.get("diagnostics")
                run.calls.append(
                    Call(
                        step,
                        float(e.get("t") or 0.0),
                        t_req,
                        served,
                        usage_of(usage, e.get("cache_write_by_ttl")),
                        n,
                        prices_by_model[served],
                        compacted,
                        diag if isinstance(diag, dict) else None,
                    )
                )
            if "content" in e and isinstance(e.get("content"), list):
                build.message({"role": "assistant", "content": e["content"]}, step, results)
        elif kind == EventKind.TOOL_RESULTS and isinstance(e.get("content"), list):
            build.message({"role": "user", "content": e["content"]}, int(e.get("step") or 0), results)
    if start.get("recorded") and not system:
        _add_unrecorded_prefix(run)
    return run


UNRECORDED = "not in the record: the agent's own system prompt and tool definitions"


def _add_unrecorded_prefix(run: RunCalls) -> None:
    """An imported record that keeps no system prompt (Claude Code's transcripts) still sent one, with the
    agent's tool definitions: the first call's input beyond what the record's items account for is that
    prefix, carried by every call. Without this item its cost would be spread over the items that were kept."""
    if not run.calls:
        return
    first = run.calls[0]
    known = sum(it.tokens for it in run.items[: first.n_items])
    gap = first.context - known
    if gap <= 0:
        return
    items = [Item(0, "system prompt", UNRECORDED, None, None, gap, 0, "unrecorded")]
    items += [replace(it, index=it.index + 1) for it in run.items]
    run.items = items
    run.calls = [replace(c, n_items=c.n_items + 1) for c in run.calls]


def runs_of(runs: Any) -> list[Any]:
    """The :class:`~agentlab.trace.Trace` objects of a Trace, a Traces, a path or a list of them."""
    from pathlib import Path

    from ..trace.runs import Trace, Traces

    if isinstance(runs, Trace):
        return [runs]
    if isinstance(runs, Traces):
        return list(runs.traces)
    if isinstance(runs, (str, Path)):
        from ..trace.reader import load_run, load_runs

        path = Path(runs)
        return list(load_runs(path).traces) if path.is_dir() else [load_run(str(path))]
    if isinstance(runs, (list, tuple)):
        return [t for r in runs for t in runs_of(r)]
    raise TypeError(f"expected a Trace, Traces, a trace file or folder, or a list of them; got {type(runs).__name__}")

"""The Messages API shape, which every model and the engine share.

Messages and content blocks stay plain dicts exactly as the Anthropic API has
them, so a real response and a scripted one travel the same code path and a
history can be sent back to the API unchanged (blocks the engine does not
interpret, such as ``thinking``, are kept as they came).

:func:`normalize_reply` is the one gate a reply passes: it accepts a dict or
an ``anthropic.types.Message`` and returns a :class:`Reply`, or raises
:class:`MalformedReply` saying what is wrong.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import AgentlabError
from .usage_fields import BY_PATH, MOST_TOKENS, check_usage, malformed_usage

Message = dict[str, Any]
Block = dict[str, Any]


def text_of(content: Any) -> str:
    """The text of a message's content: a string as is, else its ``text`` blocks joined.

    The one place that joins text blocks (replies, results, trace views and
    the offline behaviours all read text through it).
    """
    if isinstance(content, str):
        return content
    if not content:
        return ""
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


class MalformedReply(AgentlabError, ValueError):
    """A model reply that does not have the Messages API shape."""

    def __init__(self, problem: str, raw: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.raw = raw


@dataclass(frozen=True, slots=True)
class Iteration:
    """One entry of ``usage.iterations``: a sampling pass the API ran inside one call.

    ``kind`` is the API's ``type``: ``"message"`` and ``"fallback_message"``
    passes are already in the top-level counts; ``"compaction"`` (the
    server-side summary of a closed context) and ``"advisor_message"`` (a
    sub-inference billed at ``model``'s rates) are not, and are charged on
    top (:meth:`agentlab.pricing.Prices.cost`).
    """

    kind: str
    usage: Usage
    model: str | None = None

    @property
    def extra(self) -> bool:
        """Billed on top of the top-level usage (compaction, advisor), not inside it."""
        return self.kind in EXTRA_ITERATIONS

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, **self.usage.as_dict()}
        if self.model:
            out["model"] = self.model
        return out


EXTRA_ITERATIONS = frozenset({"compaction", "advisor_message"})
"""Iteration kinds whose tokens the top-level usage leaves out (the SDK's ``BetaIterationsUsage`` says so for
compaction; advisor passes are billed at the advisor model's rates)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one call, in Anthropic's shape (input excludes cache).

    ``cache_creation_1h_input_tokens`` is the part of the cache writes made
    with a one-hour TTL (``usage.cache_creation.ephemeral_1h_input_tokens``),
    dearer than five-minute writes. ``web_search_requests`` and
    ``web_fetch_requests`` are the server-tool requests the API ran for this
    call (``usage.server_tool_use``), billed per request, not per token.
    ``speed`` (``"fast"`` is billed at premium rates), ``inference_geo``
    (a region other than global carries a multiplier) and ``iterations``
    (compaction and advisor passes billed on top) change the price; see
    :mod:`agentlab.pricing`.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0
    web_search_requests: int = 0
    web_fetch_requests: int = 0
    speed: str | None = None
    inference_geo: str | None = None
    iterations: tuple[Iteration, ...] = ()
    service_tier: str | None = None
    """``"batch"`` is billed at half price (a Message Batches result); ``None`` for the standard tier."""
    thinking_tokens: int = 0
    """The part of ``output_tokens`` that was reasoning (``usage.output_tokens_details``): shown, not priced again."""

    @property
    def context_tokens(self) -> int:
        """The size of the context the model read: the last ``message`` pass's input when the call ran several
        (the top-level counts add the passes up), never a ``compaction`` pass's (the SDK's ``BetaIterationsUsage``
        says so); else the top-level input."""
        if self.iterations:
            for it in reversed(self.iterations):
                if it.kind in ("message", "fallback_message"):
                    u = it.usage
                    return u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def billed_input_tokens(self) -> int:
        """Every input token the call was billed for: the top-level counts (which add up the sampling passes)
        and the passes billed on top of them. A run's ``input_tokens`` total adds these; the context a call
        read is :attr:`context_tokens`."""
        passes = [self, *(it.usage for it in self.extra_iterations)]
        return sum(u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens for u in passes)

    @property
    def extra_iterations(self) -> tuple[Iteration, ...]:
        """The passes billed on top of the top-level counts (compaction, advisor)."""
        return tuple(it for it in self.iterations if it.extra)

    def as_dict(self) -> dict[str, Any]:
        """The four token counts, plus the TTL split, server-tool requests, speed, geography and
        iterations when there are any."""
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }
        if not (
            self.cache_creation_1h_input_tokens
            or self.web_search_requests
            or self.web_fetch_requests
            or self.speed
            or self.inference_geo
            or self.iterations
            or self.service_tier
            or self.thinking_tokens
        ):
            return out  # the usual usage: the four counts (the loop below would add nothing)
        for name in (
            "cache_creation_1h_input_tokens",
            "web_search_requests",
            "web_fetch_requests",
            "speed",
            "inference_geo",
            "service_tier",
            "thinking_tokens",
        ):
            value = getattr(self, name)
            if value:
                out[name] = value
        if self.iterations:
            out["iterations"] = [it.as_dict() for it in self.iterations]
        return out


@dataclass(frozen=True, slots=True)
class Reply:
    """One model reply: content blocks, why it stopped, and what it cost in tokens.

    ``usage`` is ``None`` when the model did not report it (offline replies may
    omit it); the engine then estimates it from the request and the reply.
    """

    content: list[Block]
    stop_reason: str | None
    usage: Usage | None = None
    model: str | None = None
    request_id: str | None = None
    container: str | None = None
    stop_details: dict[str, Any] | None = None
    context_management: dict[str, Any] | None = None
    """The API's account of the context edits it applied (``applied_edits``: cleared tool uses, thinking)."""
    parsed: Any = None
    """The answer parsed as the request's structured output format (a model that asked for one sets ``parsed``)."""
    diagnostics: dict[str, Any] | None = None
    """The API's cache diagnostics (``cache_miss_reason``), when the request asked for them and the prefix diverged."""

    @property
    def text(self) -> str:
        return text_of(self.content)

    @property
    def tool_calls(self) -> list[Block]:
        return [b for b in self.content if b.get("type") == "tool_use"]

    @property
    def kept(self) -> list[Block]:
        """The blocks the history keeps (see :func:`sendable`): valid to send back later."""
        return sendable(self.content)

    @property
    def stop_note(self) -> str:
        """``": category (explanation)"`` from a refusal's ``stop_details``, or ``""``."""
        return refusal_note(self.stop_details)


def _to_dict(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    dump = getattr(raw, "model_dump", None)  # anthropic.types.Message and friends
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise MalformedReply(f"a reply must be a dict or an anthropic Message, got {type(raw).__name__}", raw)


KNOWN_USAGE_FIELDS = frozenset(p.split(".")[1] for p in BY_PATH if p.startswith("usage.") and p.count(".") == 1)
"""The ``usage`` fields the lab prices, shows or ignores with a reason (:data:`agentlab.usage_fields.FIELDS`).
Any other field is a warning that names it: a price the lab may be missing is never silent."""
_PLAIN_KEYS = frozenset({"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"})
KNOWN_SERVER_TOOL_FIELDS = frozenset(p.rsplit(".", 1)[1] for p in BY_PATH if p.startswith("usage.server_tool_use."))


def _int(raw: dict[str, Any], key: str) -> int:
    return int(raw.get(key) or 0)


def _counts(raw: dict[str, Any], **extra: Any) -> Usage:
    split = raw.get("cache_creation")
    split = split if isinstance(split, dict) else {}
    one_hour = int(split.get("ephemeral_1h_input_tokens") or 0)
    writes = _int(raw, "cache_creation_input_tokens")
    if split and not writes:  # only the breakdown was given
        writes = one_hour + int(split.get("ephemeral_5m_input_tokens") or 0)
    return Usage(
        input_tokens=_int(raw, "input_tokens"),
        output_tokens=_int(raw, "output_tokens"),
        cache_creation_input_tokens=writes,
        cache_read_input_tokens=_int(raw, "cache_read_input_tokens"),
        cache_creation_1h_input_tokens=min(one_hour, writes),
        **extra,
    )


def _not_understood(what: str) -> None:
    warnings.warn(
        f"the reply's usage has {what}, which agentlab does not understand: its cost (if any) is not counted; "
        "upgrade agentlab or check the call's price by hand",
        UserWarning,
        stacklevel=4,
    )


def _usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise MalformedReply("'usage' must be an object", raw)
    i, o = raw.get("input_tokens", 0), raw.get("output_tokens", 0)
    w, r = raw.get("cache_creation_input_tokens", 0), raw.get("cache_read_input_tokens", 0)
    if (
        type(i) is int
        and type(o) is int
        and type(w) is int
        and type(r) is int
        and raw.keys() <= _PLAIN_KEYS
        and 0 <= i <= MOST_TOKENS
        and 0 <= o <= MOST_TOKENS
        and 0 <= w <= MOST_TOKENS
        and 0 <= r <= MOST_TOKENS
    ):
        return Usage(i, o, w, r)  # the usual shape (four sound counts): what the checks below make of it, for less
    problems = check_usage(raw)
    if problems:
        raise MalformedReply(malformed_usage(problems), raw)
    for key in raw:
        if key not in KNOWN_USAGE_FIELDS and raw[key] is not None:
            _not_understood(f"the field {key!r}")
    server = raw.get("server_tool_use")
    server = server if isinstance(server, dict) else {}
    for key in server:
        if key not in KNOWN_SERVER_TOOL_FIELDS and server[key]:
            _not_understood(f"the server-tool count {key!r}")
    split = raw.get("cache_creation")
    split = split if isinstance(split, dict) else {}
    for key in split:
        if key not in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens") and split[key]:
            _not_understood(f"the cache-write split {key!r}")
    tier = raw.get("service_tier")
    if tier not in (None, "standard", "batch", "priority"):
        _not_understood(f"service_tier={tier!r} (priced here at standard rates)")
    details = raw.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, dict) else None
    speed, geo = raw.get("speed"), raw.get("inference_geo")
    if speed not in (None, "standard", "fast"):
        _not_understood(f"speed={speed!r} (priced here at standard rates)")
    try:
        iterations = tuple(_iteration(it) for it in (raw.get("iterations") or ()) if isinstance(it, dict))
        return _counts(
            raw,
            web_search_requests=int(server.get("web_search_requests") or 0),
            web_fetch_requests=int(server.get("web_fetch_requests") or 0),
            speed=speed if isinstance(speed, str) and speed != "standard" else None,
            inference_geo=geo if isinstance(geo, str) and geo else None,
            iterations=iterations,
            service_tier="batch" if tier == "batch" else None,
            thinking_tokens=thinking if isinstance(thinking, int) else 0,
        )
    except (TypeError, ValueError) as exc:
        raise MalformedReply(f"'usage' has a non-integer count: {exc}", raw) from None


KNOWN_ITERATIONS = frozenset({"message", "fallback_message", *EXTRA_ITERATIONS})


def _iteration(raw: dict[str, Any]) -> Iteration:
    kind = str(raw.get("type") or "")
    if kind not in KNOWN_ITERATIONS:
        _not_understood(f"an iteration of type {kind!r}")
    model = raw.get("model")
    return Iteration(kind, _counts(raw), model if isinstance(model, str) else None)


def normalize_reply(raw: Any) -> Reply:
    """Check a reply's shape and return it as a :class:`Reply`."""
    data = raw if type(raw) is dict else _to_dict(raw)  # (a dict, the usual reply, is taken as it is)
    get = data.get
    content = get("content")
    if not isinstance(content, list) or (not content and get("stop_reason") != "end_turn"):
        # `content: []` with `end_turn` is valid: the model had nothing to add.
        raise MalformedReply("the reply has no content blocks", data)
    blocks: list[Block] = []
    calls = False
    for i, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(kind, str):
            raise MalformedReply(f"content block {i} has no 'type'", data)
        if kind == "tool_use":
            calls = True
            if not isinstance(block.get("id"), str) or not block["id"]:
                raise MalformedReply(f"tool_use block {i} has no 'id'", data)
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise MalformedReply(f"tool_use block {i} has no 'name'", data)
            args = block.get("input", {})
            if not isinstance(args, dict):
                raise MalformedReply(f"tool_use block {i} ({block['name']}): 'input' is not an object", data)
            block = {**block, "input": args}
        elif kind == "text" and not isinstance(block.get("text"), str):
            raise MalformedReply(f"text block {i} has no 'text'", data)
        blocks.append(block)
    stop = get("stop_reason")
    if stop is None:
        stop = "tool_use" if calls else "end_turn"
    if not isinstance(stop, str):
        raise MalformedReply("'stop_reason' must be a string", data)
    details, context, diagnostics = get("stop_details"), get("context_management"), get("diagnostics")
    container = get("container")
    return Reply(
        blocks,
        stop,
        _usage(get("usage")),
        get("model"),
        get("_request_id") or get("request_id"),
        None if container is None else _container_id(container),
        details if isinstance(details, dict) else None,
        context if isinstance(context, dict) else None,
        get("parsed"),
        diagnostics if isinstance(diagnostics, dict) else None,
    )


def billed_usage(raw: Any) -> Usage | None:
    """The usage of a reply the gate refused (:class:`MalformedReply`'s ``raw``), or ``None``.

    The API billed a reply that arrived with usage whatever the lab then makes
    of it, so the engine charges it; a usage that cannot be read gives ``None``.
    """
    try:
        data = _to_dict(raw)
        return _usage(data.get("usage"))
    except (MalformedReply, AttributeError):
        return None


def _container_id(raw: Any) -> str | None:
    """The id of the reply's code-execution container (an object with ``id``, or a bare id)."""
    if isinstance(raw, dict) and isinstance(raw.get("id"), str):
        return raw["id"]
    return raw if isinstance(raw, str) and raw else None


def sendable(content: list[Block]) -> list[Block]:
    """A reply's blocks as the history keeps them: without empty text blocks at the end,
    which the API refuses in a later request (a refusal may end with one)."""
    end = len(content)
    while end and content[end - 1].get("type") == "text" and not content[end - 1].get("text"):
        end -= 1
    return content if end == len(content) else content[:end]


def refusal_note(details: dict[str, Any] | None) -> str:
    """``": category (explanation)"`` from a refusal's ``stop_details``, or ``""``."""
    if not details:
        return ""
    category = details.get("category") or "no category"
    explanation = details.get("explanation")
    return f": {category}" + (f" ({explanation})" if explanation else "")


# --- token estimates ------------------------------------------------------
# One token is about three characters of JSON-ish text (DESIGN.md, measured
# against real usage). The same rule prices offline replies and the hard cost
# guard's pre-call estimate, so offline cost grows with context exactly as a
# real run's does.

CHARS_PER_TOKEN = 3


def estimate_tokens(obj: Any) -> int:
    """Rough token count of any JSON-able value (strings by length, the rest by UTF-8 JSON size, as orjson
    writes it: the same size the cost guard's bound measures)."""
    if isinstance(obj, str):
        n = len(obj)
    elif (size := json_size(obj)) is not None:
        n = size
    else:  # e.g. an int too large for orjson, or nesting deeper than it writes
        n = _walked_size(obj)
    return tokens_for_size(n)


def _walked_size(obj: Any) -> int:
    """About the bytes of ``obj``'s JSON, walked without recursion (a hostile record may nest past any
    recursion limit): each string or key by its UTF-8 length, each other scalar by its text, two bytes of
    punctuation for each item."""
    n, stack = 0, [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            n += len(item.encode(errors="replace")) + 2
        elif isinstance(item, dict):
            n += 2
            for k, v in item.items():
                n += len(str(k).encode(errors="replace")) + 4
                stack.append(v)
        elif isinstance(item, (list, tuple)):
            n += 2 + len(item)
            stack.extend(item)
        elif isinstance(item, int):  # str() refuses an int of more than 4,300 digits
            n += max(1, int(item.bit_length() * 0.302) + 1)
        else:
            n += len(str(item))
    return n


def json_size(obj: Any) -> int | None:
    """Bytes of ``obj``'s compact UTF-8 JSON as orjson writes it, what the token estimate and the cost guard's
    bound both measure (:func:`agentlab.budget.input_bound`); ``None`` when orjson cannot write it (an int
    too large, say: each measure then falls back on its own)."""
    try:
        return len(orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:
        return None


def tokens_for_size(n: int) -> int:
    """The estimate of ``n`` characters (or UTF-8 JSON bytes): one token per :data:`CHARS_PER_TOKEN`, at least 1."""
    return max(1, -(-n // CHARS_PER_TOKEN))

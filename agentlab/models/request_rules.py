"""What the Messages API refuses, checked before anything is sent: one table per API version and per model.

A request the API would answer with a 400 costs a round trip at best; inside
an experiment it fails a cell after others have spent. :func:`check_request`
reads a ``messages.create`` body against the rules below and returns every
problem as a sentence (``[]``: none); :class:`~agentlab.models.anthropic.AnthropicModel`
checks its settings when it is made and each request before it is sent (a
refusal costs $0), and an ``Experiment`` checks every config's model before
its first cell (:func:`check_settings`).

Sources, named per rule: the API version ``2026-10-21`` migration guide and the
release notes of 2026-10-21 (sampling parameters, document blocks in assistant
messages, citations on user text blocks: each a 400 under that version); the
extended-thinking page (``tool_choice`` ``any``/``tool`` is refused while
thinking is on); the adaptive-thinking page (adaptive thinking only on Opus 4.6,
Sonnet 4.6 and later; earlier models take ``enabled`` with a budget); the
models overview (the largest ``max_tokens`` per model); genai-prices' model
table (the context window, and fast mode's end on Opus 4.8 on 2026-11-30).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from .._checks import is_whole

API_VERSION = "2026-10-21"
"""The API version the installed SDK sends (``anthropic._constants.ANTHROPIC_API_VERSION`` in 2.x)."""

SAMPLING = ("temperature", "top_p", "top_k")
"""Refused under ``2026-10-21`` even at their defaults (the migration guide), and not parameters of SDK 2.x."""

VERSION_SOURCE = "the API version 2026-10-21 migration guide"


@dataclass(frozen=True, slots=True)
class ModelRules:
    """What one model family accepts (``None``: not known here, so not checked)."""

    max_tokens: int | None = None
    thinking: frozenset[str] | None = None
    fast_until: date | None = None


_BEFORE_ADAPTIVE = frozenset({"enabled", "disabled"})
_NO_THINKING = frozenset({"disabled"})

MODEL_RULES: Mapping[str, ModelRules] = {
    "claude-3-haiku": ModelRules(max_tokens=4_096, thinking=_NO_THINKING),
    "claude-3-5-haiku": ModelRules(max_tokens=8_192, thinking=_NO_THINKING),
    "claude-3-7-sonnet": ModelRules(max_tokens=64_000, thinking=_BEFORE_ADAPTIVE),
    "claude-sonnet-4-0": ModelRules(max_tokens=64_000, thinking=_BEFORE_ADAPTIVE),
    "claude-sonnet-4-2025": ModelRules(max_tokens=64_000, thinking=_BEFORE_ADAPTIVE),
    "claude-sonnet-4-5": ModelRules(max_tokens=64_000, thinking=_BEFORE_ADAPTIVE),
    "claude-haiku-4-5": ModelRules(max_tokens=64_000, thinking=_BEFORE_ADAPTIVE),
    "claude-opus-4-0": ModelRules(max_tokens=32_000, thinking=_BEFORE_ADAPTIVE),
    "claude-opus-4-2025": ModelRules(max_tokens=32_000, thinking=_BEFORE_ADAPTIVE),
    "claude-opus-4-1": ModelRules(max_tokens=32_000, thinking=_BEFORE_ADAPTIVE),
    "claude-opus-4-5": ModelRules(max_tokens=64_000, thinking=_BEFORE_ADAPTIVE),
    "claude-opus-4-6": ModelRules(max_tokens=128_000),
    "claude-sonnet-4-6": ModelRules(max_tokens=64_000),
    "claude-opus-4-8": ModelRules(fast_until=date(2026, 11, 30)),
}
"""Per model id prefix (the longest match wins; a dated id matches its family). Sources: the models overview
(``max_tokens``), the adaptive-thinking page (``thinking`` types), genai-prices' note on Opus 4.8 (fast mode
removed on 2026-11-30)."""


def rules_for(model: str) -> ModelRules:
    """The rules of ``model`` (a family prefix of :data:`MODEL_RULES`), else none known."""
    found = [prefix for prefix in MODEL_RULES if model.startswith(prefix)]
    return MODEL_RULES[max(found, key=len)] if found else ModelRules()


def check_settings(params: Mapping[str, Any], *, today: date | None = None) -> list[str]:
    """The problems of a request's settings, without its messages (what a model or a grid cell fixes)."""
    problems: list[str] = []
    model = params.get("model")
    model = model if isinstance(model, str) else ""
    rules = rules_for(model)
    for name in SAMPLING:
        if name in params:
            problems.append(
                f"{name}: the Messages API version {API_VERSION} refuses sampling parameters (400, even at their "
                f"defaults; {VERSION_SOURCE}) and anthropic SDK 2.x has no such argument; remove it"
            )
    thinking = params.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if isinstance(kind, str) and rules.thinking is not None and kind not in rules.thinking:
        problems.append(
            f"thinking type {kind!r} is not accepted by {model} (it takes {sorted(rules.thinking)}; "
            "the adaptive-thinking page)"
        )
    choice = params.get("tool_choice")
    if (
        isinstance(choice, Mapping)
        and choice.get("type") in ("any", "tool")
        and kind in ("enabled", "adaptive", "between_tools")
    ):
        problems.append(
            f"tool_choice {{'type': {choice.get('type')!r}}} is refused while thinking is on (the extended-thinking "
            "page: only 'auto' or 'none'); use tool_choice 'auto' or turn thinking off"
        )
    if params.get("speed") == "fast" and rules.fast_until is not None and (today or date.today()) >= rules.fast_until:
        problems.append(
            f"speed='fast': fast mode on {model} ended on {rules.fast_until.isoformat()} (genai-prices' price notes); "
            "remove speed or pick a model that offers it"
        )
    max_tokens = params.get("max_tokens")
    if is_whole(max_tokens):
        window = context_window(model)
        most = min(x for x in (rules.max_tokens, window) if x is not None) if (rules.max_tokens or window) else None
        if most is not None and max_tokens > most:
            problems.append(
                f"max_tokens={max_tokens} is more than {model} allows ({most:,}: "
                + ("its largest output, the models overview" if most == rules.max_tokens else "its context window")
                + ")"
            )
    return problems


def check_request(params: Mapping[str, Any], *, today: date | None = None) -> list[str]:
    """Every problem of a ``messages.create`` body the API version and the model would refuse (``[]``: none)."""
    problems = check_settings(params, today=today)
    for i, message in enumerate(params.get("messages") or ()):
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), list):
            continue
        role = message.get("role")
        for j, block in enumerate(message["content"]):
            if not isinstance(block, Mapping):
                continue
            if role == "assistant" and block.get("type") == "document":
                problems.append(
                    f"messages[{i}].content[{j}]: a document block inside an assistant message is refused under "
                    f"{API_VERSION} ({VERSION_SOURCE}); move the document to a user message"
                )
            if role == "user" and block.get("type") == "text" and block.get("citations"):
                problems.append(
                    f"messages[{i}].content[{j}]: citations on a text block in a user message are refused under "
                    f"{API_VERSION} ({VERSION_SOURCE}); drop the block's citations (a replayed, forked or imported "
                    "history can carry them)"
                )
    return problems


def context_window(model: str) -> int | None:
    """The model's context window in tokens, from genai-prices' model table (``None``: not listed)."""
    if not model:
        return None
    return _windows().get(_family(model))


def _family(model: str) -> str:
    windows = _windows()
    if model in windows:
        return model
    found = [m for m in windows if model.startswith(m)]
    return max(found, key=len) if found else model


# A model whose price table has a long-context tier is served past its listed window with the 1M-token
# context beta (the models overview; the tier prices what lies past 200k), so a reply's input may reach it.
LONG_CONTEXT_WINDOW = 1_000_000


def input_window(model: str) -> int | None:
    """The most input tokens one pass of ``model`` can read: its context window, or the long-context beta's
    window where its prices have a long-context tier (``None``: not listed)."""
    window = context_window(model)
    if window is None:
        return None
    return max(window, LONG_CONTEXT_WINDOW) if _family(model) in _tiered() else window


_WINDOWS: dict[str, int] | None = None
_TIERED: set[str] | None = None


def _tiered() -> set[str]:
    global _TIERED
    if _TIERED is None:
        from genai_prices import data, types

        _TIERED = {
            m.id
            for p in data.providers
            if p.id == "anthropic"
            for m in p.models
            for prices in ([m.prices] if not isinstance(m.prices, list) else [c.prices for c in m.prices])
            if isinstance(getattr(prices, "input_mtok", None), types.TieredPrices)
        }
    return _TIERED


def _windows() -> dict[str, int]:
    global _WINDOWS
    if _WINDOWS is None:
        from genai_prices import data

        _WINDOWS = {
            m.id: m.context_window
            for p in data.providers
            if p.id == "anthropic"
            for m in p.models
            if isinstance(m.context_window, int)
        }
    return _WINDOWS


def check_cell(config: str, model: Any, params: Mapping[str, Any]) -> None:
    """Refuse an experiment config whose requests the API (or the hard cost guard) would refuse, before any cell
    runs: ``ValueError`` naming the config. ``model`` is the config's model (an ``AnthropicModel``, a model id,
    or anything else, which is not checked here: a factory is made per cell)."""
    settings: dict[str, Any] = {}
    if isinstance(model, str) and model.startswith("claude-"):
        settings = {"model": model}
    elif isinstance(getattr(model, "model", None), str) and isinstance(getattr(model, "params", None), Mapping):
        settings = {"model": model.model, **({"thinking": model.thinking} if getattr(model, "thinking", None) else {})}
        settings.update(model.params)
        if params.get("cost_guard", "hard") == "hard":
            from ..pricing import hard_guard_refusal

            refusal = hard_guard_refusal(getattr(model, "request_terms", None))
            if refusal:
                raise ValueError(f"config {config!r}: {refusal}")
    if not settings:
        return
    if isinstance(params.get("max_tokens"), int):
        cap = getattr(model, "max_tokens", None)
        settings["max_tokens"] = min(params["max_tokens"], cap) if isinstance(cap, int) else params["max_tokens"]
    problems = check_settings(settings)
    if problems:
        raise ValueError(f"config {config!r}: the Messages API would refuse its requests: " + "; ".join(problems))

"""Turn a ``model=`` argument into a model: an id as Claude, ``"offline"`` as an offline model.

Offline is asked for, never slipped in: ``model="claude-haiku-4-5"`` with no
``ANTHROPIC_API_KEY`` is an error that says how to go offline, so a result
reading ``done`` under a Claude model id was answered by Claude. A lesson or
demo that must run on a machine with no key (a classroom, CI) and still use
Claude when one is set asks for that explicitly with ``fallback=``; the
returned one-line notice says what was chosen, and the caller shows it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from ..errors import AgentlabError
from ..pricing import lookup_prices
from .base import ModelRequest
from .offline import DEFAULT_PRICED_AS, FunctionModel

KEY_ENV = "ANTHROPIC_API_KEY"
OFFLINE = "offline"
"""``model="offline"`` (or ``"offline:claude-haiku-4-5"`` to price it as that model): one reply, no tool call,
the same on the command line and in Python."""
OFFLINE_SHOP = "offline-shop"
"""The command line's scripted shop assistant (``agentlab run --tools shop --model offline-shop``): it calls the
example shop's tools, so it is a name of its own, never what ``"offline"`` means in one place and not the other."""


class ModelNotCallable(AgentlabError, ValueError):
    """A model string that cannot be run here: the message says what the string is and what would run."""


class MissingAPIKey(ModelNotCallable):
    """A Claude model id was given but no ``ANTHROPIC_API_KEY`` is set (the message says how to go offline)."""


class ModelId(NamedTuple):
    """What a model string is: a Claude id, another provider's id the price table knows, or unknown."""

    kind: Literal["claude", "other", "unknown"]
    provider: str | None
    """The provider's name in the price table (``"OpenAI"``) for ``"other"``."""
    close: tuple[str, ...]
    """Known strings close to it (``"offline"`` and the price table's Claude ids), best first."""


class Resolved(NamedTuple):
    """The chosen model, and a one-line notice when it is not the one asked for."""

    model: Any
    notice: str | None


def resolve_model(
    spec: Any,
    *,
    fallback: Any = None,
    environ: Mapping[str, str] | None = None,
    **options: Any,
) -> Resolved:
    """``spec`` as a model: a model object as is, ``"offline"`` offline, a model id as Claude.

    Args:
        spec: a model (anything with ``model`` and ``complete``), a model id
            such as ``"claude-sonnet-4-5"``, or ``"offline"`` /
            ``"offline:<model id>"`` (priced as that id).
        fallback: what to run when ``spec`` is a model id and
            ``ANTHROPIC_API_KEY`` is not set, for a demo or lesson that must
            run without a key: a model, or a function returning one. The
            notice then says so. Without it, a missing key is an error.
        environ: the environment to read (default ``os.environ``).
        options: passed to :class:`~agentlab.models.anthropic.AnthropicModel`.

    Raises:
        MissingAPIKey: ``spec`` is a model id, no key is set and no fallback given.
    """
    if not isinstance(spec, str):
        if not isinstance(getattr(spec, "model", None), str) or not callable(getattr(spec, "complete", None)):
            raise TypeError(f"spec must be a model id string or a model, got {type(spec).__name__}")
        return Resolved(spec, None)
    if not spec.strip():
        raise ValueError("spec must be a non-empty model id, e.g. 'claude-sonnet-4-5', or 'offline'")
    if spec == OFFLINE or spec.startswith(OFFLINE + ":"):
        return Resolved(_offline(fallback) or offline_model(spec.partition(":")[2] or DEFAULT_PRICED_AS), None)
    env = os.environ if environ is None else environ
    if spec == OFFLINE_SHOP:
        raise ModelNotCallable(
            f"model={spec!r} is the command line's offline shop assistant (agentlab run TASK --tools shop "
            f"--model {OFFLINE_SHOP}); in Python, model='{OFFLINE}' answers once without tools, and a scenario "
            "plays a scripted loop: agentlab.scenarios.get('parallel-lookups').setup().run()."
        )
    what = model_id_kind(spec)
    if what.kind != "claude":
        raise ModelNotCallable(not_claude_message(spec, what, keyed=bool(env.get(KEY_ENV))))
    if env.get(KEY_ENV):
        from .anthropic import AnthropicModel

        return Resolved(AnthropicModel(spec, **options), None)
    model = _offline(fallback)
    if model is None:
        raise MissingAPIKey(missing_key_message(spec))
    name = getattr(model, "name", None) or type(model).__name__
    return Resolved(
        model, f"No {KEY_ENV} set: running the offline model {name!r} instead of {spec} (priced as {model.model})."
    )


def model_id_kind(spec: str) -> ModelId:
    """Name what ``spec`` is, from the price table (genai-prices): a Claude id (any id with ``claude`` in it, so a
    Claude model newer than the table is still one), another provider's id it knows, or unknown."""
    from genai_prices import Usage, calc_price

    close = tuple(difflib.get_close_matches(spec, (OFFLINE, *claude_ids()), n=3, cutoff=0.6))
    if "claude" in spec.lower():
        return ModelId("claude", "Anthropic", close)
    try:
        found = calc_price(Usage(input_tokens=1, output_tokens=1), model_ref=spec)
    except LookupError:
        return ModelId("unknown", None, close)
    if found.provider.id == "anthropic":
        return ModelId("claude", "Anthropic", close)
    return ModelId("other", found.provider.name, close)


@lru_cache(maxsize=1)
def claude_ids() -> tuple[str, ...]:
    """The Claude model ids the price table knows (each can be priced, so ``offline:<id>`` runs)."""
    from genai_prices.data_snapshot import get_snapshot

    return tuple(m.id for p in get_snapshot().providers if p.id == "anthropic" for m in p.models)


def near_claude_ids(spec: str) -> tuple[str, ...]:
    """The priced Claude ids closest to ``spec`` (a typo's likely meaning), closest first; none if nothing is close."""
    return tuple(c for c in model_id_kind(spec).close if c != OFFLINE)


def _did_you_mean(close: tuple[str, ...], keyed: bool = False) -> str:
    """Only strings that run as written: ``'offline'``, and a priced Claude id as itself with a key, as
    ``'offline:<id>'`` without one."""
    runnable = [c if c == OFFLINE or keyed else f"{OFFLINE}:{c}" for c in close]
    return f" Did you mean {' or '.join(repr(r) for r in runnable)}?" if runnable else ""


def not_claude_message(spec: str, what: ModelId, keyed: bool = False) -> str:
    """What ``spec`` is when it is not a Claude id, and what would run instead (``keyed``: a key is set)."""
    if what.kind == "other":
        return (
            f"model={spec!r} is one of {what.provider}'s models (the price table knows it), and agentlab calls "
            "only Claude models itself. To drive it, wrap its client in "
            f"agentlab.FunctionModel(fn, model={spec!r}) (priced as {spec}); to run offline priced as it: "
            f"model='{OFFLINE}:{spec}'."
        )
    return (
        f"model={spec!r} is not a model id agentlab knows (not a Claude id, and not in the price table)."
        f"{_did_you_mean(what.close, keyed)} "
        f"Claude ids look like 'claude-sonnet-4-5'; model='{OFFLINE}' runs with no key."
    )


def missing_key_message(spec: str) -> str:
    """What to do when a Claude model id is asked for with no key: set one, or go offline (and how).

    Each offline string it names runs as written: ``offline:<id>`` only for an id the price table can price.
    """
    if lookup_prices(spec) is not None:
        what, priced = "is a Claude model", f"; 'offline:{spec}' prices it as {spec}"
    else:  # a Claude id newer than the price table, or a typo of one it knows
        near = near_claude_ids(spec)
        maybe = f"a typo of {near[0]!r}" if near else "a typo"
        what = f"looks like a Claude id but is not one the price table knows (a newer model, or {maybe})"
        priced = f"; no price is known for {spec!r}" + (f", 'offline:{near[0]}' prices it as {near[0]}" if near else "")
    return (
        f"model={spec!r} {what}, and no {KEY_ENV} is set, so it cannot be called. "
        f"Set {KEY_ENV} to run with Claude, or run offline: model='offline' (an offline model that answers "
        f"once, without tools{priced}), a scripted model "
        "(agentlab.ScriptedModel, agentlab.FunctionModel), or a scenario (agentlab scenarios)."
    )


def _offline(fallback: Any) -> Any:
    model = fallback() if callable(fallback) and not hasattr(fallback, "complete") else fallback
    if model is not None and (
        not isinstance(getattr(model, "model", None), str) or not callable(getattr(model, "complete", None))
    ):
        raise TypeError(f"fallback must be a model or a function returning one, got {type(model).__name__}")
    return model


def offline_model(priced_as: str = DEFAULT_PRICED_AS) -> FunctionModel:
    """The model ``model="offline"`` runs: it answers once, without tools, saying no real model answered.

    Priced as ``priced_as`` (when prices for it are known), so costs still read true.
    """
    if lookup_prices(priced_as) is None:
        raise ModelNotCallable(
            f"model='{OFFLINE}:{priced_as}': no price is known for {priced_as!r}, so the offline model cannot be "
            f"priced as it.{_did_you_mean(model_id_kind(priced_as).close)} model='{OFFLINE}' prices it as "
            f"{DEFAULT_PRICED_AS}."
        )

    def offline(messages: list[dict[str, Any]], tools: list[dict[str, Any]], request: ModelRequest) -> dict[str, Any]:
        text = (
            "(offline model: no real model answered. "
            f"Set {KEY_ENV} and pass a Claude model id to run this with Claude, or use an agentlab scenario for a "
            "scripted run.)"
        )
        return {"role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}

    return FunctionModel(offline, model=priced_as, name=OFFLINE)

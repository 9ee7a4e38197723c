"""Turn a ``model=`` argument into a model: an id as Claude, ``"offline"`` as an offline model.

Offline is asked for, never slipped in: ``model="claude-haiku-4-5"`` with no
``ANTHROPIC_API_KEY`` is an error that says how to go offline, so a result
reading ``done`` under a Claude model id was answered by Claude. A lesson or
demo that must run on a machine with no key (a classroom, CI) and still use
Claude when one is set asks for that explicitly with ``fallback=``; the
returned one-line notice says what was chosen, and the caller shows it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..errors import AgentlabError
from .base import ModelRequest
from .offline import DEFAULT_PRICED_AS, FunctionModel

KEY_ENV = "ANTHROPIC_API_KEY"
OFFLINE = "offline"
"""``model="offline"`` (or ``"offline:claude-haiku-4-5"`` to price it as that model)."""


class MissingAPIKey(AgentlabError, ValueError):
    """A Claude model id was given but no ``ANTHROPIC_API_KEY`` is set (the message says how to go offline)."""


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


def missing_key_message(spec: str) -> str:
    """What to do when a Claude model id is asked for with no key: set one, or go offline (and how)."""
    return (
        f"model={spec!r} is a Claude model, and no {KEY_ENV} is set, so it cannot be called. "
        f"Set {KEY_ENV} to run with Claude, or run offline: model='offline' (an offline model that answers "
        f"once, without tools; 'offline:{spec}' prices it as {spec}), a scripted model "
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
    from ..pricing import lookup_prices

    if lookup_prices(priced_as) is None:
        raise ValueError(f"no price is known for {priced_as!r}: use 'offline' or 'offline:<a Claude model id>'")

    def offline(messages: list[dict[str, Any]], tools: list[dict[str, Any]], request: ModelRequest) -> dict[str, Any]:
        text = (
            "(offline model: no real model answered. "
            f"Set {KEY_ENV} and pass a Claude model id to run this with Claude, or use an agentlab scenario for a "
            "scripted run.)"
        )
        return {"role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}

    return FunctionModel(offline, model=priced_as, name=OFFLINE)

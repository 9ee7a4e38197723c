"""Pick the model for a demo or a notebook: Claude when a key is set, offline otherwise.

A lesson must run on a machine with no API key (a classroom, CI), and still
use the real model when one is available, without editing the notebook.
:func:`resolve_model` makes that choice in one place and returns a one-line
notice saying what happened; the caller decides how to show it (a print, a
log line, a banner in the panel).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from .base import ModelRequest
from .offline import DEFAULT_PRICED_AS, FunctionModel

KEY_ENV = "ANTHROPIC_API_KEY"


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
    """``spec`` as a model: a model object as is; a model id string as Claude, or offline.

    Args:
        spec: a model (anything with ``model`` and ``complete``) or a model id
            such as ``"claude-sonnet-4-5"``.
        fallback: the offline model to use when ``ANTHROPIC_API_KEY`` is not
            set: a model, or a function returning one. By default, a stand-in
            that answers without tools, priced as ``spec``.
        environ: the environment to read (default ``os.environ``).
        options: passed to :class:`~agentlab.models.anthropic.AnthropicModel`.
    """
    if not isinstance(spec, str):
        if not isinstance(getattr(spec, "model", None), str) or not callable(getattr(spec, "complete", None)):
            raise TypeError(f"spec must be a model id string or a model, got {type(spec).__name__}")
        return Resolved(spec, None)
    if not spec.strip():
        raise ValueError("spec must be a non-empty model id, e.g. 'claude-sonnet-4-5'")
    env = os.environ if environ is None else environ
    if env.get(KEY_ENV):
        from .anthropic import AnthropicModel

        return Resolved(AnthropicModel(spec, **options), None)
    model = fallback() if callable(fallback) and not hasattr(fallback, "complete") else fallback
    if model is None:
        model = offline_stand_in(spec)
    elif not isinstance(getattr(model, "model", None), str) or not callable(getattr(model, "complete", None)):
        raise TypeError(f"fallback must be a model or a function returning one, got {type(model).__name__}")
    name = getattr(model, "name", None) or type(model).__name__
    return Resolved(model, f"No {KEY_ENV} set: running the offline model {name!r} instead of {spec} (priced as {model.model}).")


def offline_stand_in(spec: str) -> FunctionModel:
    """An offline model that says, in its one reply, that it is not ``spec``.

    Priced as ``spec`` when prices for it are known, so costs still read true.
    """
    from ..pricing import lookup_prices

    priced_as = spec if lookup_prices(spec) is not None else DEFAULT_PRICED_AS

    def stand_in(messages: list[dict[str, Any]], tools: list[dict[str, Any]], request: ModelRequest) -> dict[str, Any]:
        text = (
            f"(offline stand-in for {spec}: no API key is set, so no real model answered. "
            f"Set {KEY_ENV} to run this with Claude, or use an agentlab scenario for a scripted run.)"
        )
        return {"role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}

    return FunctionModel(stand_in, model=priced_as, name="offline stand-in")


"""How a run's model is named wherever it is shown: one rule for "offline, priced as".

An offline model (a scenario's scripted model, a ``FunctionModel``, a replay
of a record) is charged at a Claude model's prices so its costs teach, but
Claude never ran. Shown bare, its priced id would say it did. A run records
both ids in ``run_started``: ``model`` (the id its prices come from) and
``model_name`` (the model's own label). A real Claude model's label is its
id (or there is none, in an imported record, where the recorded model did
run), so a label that differs from the priced id marks a stand-in. Panels,
plot legends, reports and the OpenTelemetry provider all ask this module.

The trace records no other mark of a stand-in, so an ``AnthropicModel``
given a ``name=`` of its own is shown as one; leave Claude models unnamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_offline(model: str | None, name: str | None) -> bool:
    """Whether a run with priced id ``model`` and label ``name`` was served by a stand-in, not that model."""
    return isinstance(name, str) and bool(name) and name != (model or "")


def model_label(model: str | None, name: str | None = None) -> str:
    """``"claude-sonnet-4-5"`` for Claude, ``"offline ping-pong (priced as claude-sonnet-4-5)"`` for a stand-in."""
    model = model or ""
    if not is_offline(model, name):
        return model or "—"
    assert name is not None
    shown = name.removeprefix("offline").lstrip(" :")
    who = f"offline {shown}" if shown else "offline"
    return f"{who} (priced as {model})" if model else who


def started_label(started: Mapping[str, Any] | None) -> str:
    """The label of the run whose ``run_started`` event is ``started``."""
    started = started or {}
    model, name = started.get("model"), started.get("model_name")
    return model_label(model if isinstance(model, str) else None, name if isinstance(name, str) else None)

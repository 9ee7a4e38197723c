"""How a run's model is named wherever it is shown: one rule for "offline, priced as".

An offline model (a scenario's scripted model, a ``FunctionModel``, a replay
of a record) is charged at a Claude model's prices so its costs teach, but
Claude never ran. Shown bare, its priced id would say it did. A run records
both ids in ``run_started``: ``model`` (the id its prices come from) and
``model_name`` (the model's own label). A real Claude model's label is its
id (or there is none, in an imported record, where the recorded model did
run), so a label that differs from the priced id marks a stand-in. Panels,
plot legends, reports and the OpenTelemetry provider all ask this module.

Since ``run_started`` records ``billed`` (the model's ``bills`` capability:
the real API bills each call, a stand-in bills nothing), that mark decides;
the label rule above is for traces written before it, and for imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_offline(model: str | None, name: str | None, billed: bool | None = None) -> bool:
    """Whether a run with priced id ``model`` and label ``name`` was served by a stand-in, not that model.

    ``billed`` (recorded since runs say so) decides when known; otherwise a label that differs from the id.
    """
    if billed is not None:
        return not billed
    return isinstance(name, str) and bool(name) and name != (model or "")


def model_label(model: str | None, name: str | None = None, *, billed: bool | None = None) -> str:
    """``"claude-sonnet-4-5"`` for Claude, ``"offline ping-pong (priced as claude-sonnet-4-5)"`` for a stand-in."""
    model = model or ""
    if not is_offline(model, name, billed):
        return model or "—"
    shown = (name or "").removeprefix("offline").lstrip(" :")
    who = f"offline {shown}" if shown else "offline"
    return f"{who} (priced as {model})" if model else who


def started_label(started: Mapping[str, Any] | None) -> str:
    """The label of the run whose ``run_started`` event is ``started``."""
    started = started or {}
    model, name, billed = started.get("model"), started.get("model_name"), started.get("billed")
    return model_label(
        model if isinstance(model, str) else None,
        name if isinstance(name, str) else None,
        billed=billed if isinstance(billed, bool) else None,
    )

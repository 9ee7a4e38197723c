"""The model protocol: one async method and a model id for prices."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..messages import Message


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs.

    ``timeout`` is the time left before the run's deadline: an adapter passes
    it to its transport so no call outlives the run. ``max_tokens`` may be
    lower than configured when the hard cost guard clamped it.

    ``on_delta(index, kind, text)``, when set, is called for each fragment of
    the reply as it arrives (``kind`` is ``"text"``, ``"thinking"`` or
    ``"tool_input"``); a model that streams calls it, one that does not may
    ignore it. The engine sets it to emit ``model_delta`` events.
    """

    system: str | None
    messages: list[Message]
    tools: list[dict[str, Any]]
    max_tokens: int
    timeout: float | None = None
    on_delta: Callable[[int, str, str], None] | None = None


@runtime_checkable
class Model(Protocol):
    """What the engine calls. ``model`` is the id used to look up prices."""

    model: str

    async def complete(self, request: ModelRequest) -> Any:
        """Return a reply: a dict in Messages API shape or an ``anthropic`` Message.

        Raise :class:`agentlab.RetryableError` for transient trouble (the
        engine retries within the deadline), :class:`agentlab.FatalError`
        subclasses for what no retry fixes, and :class:`agentlab.ModelError`
        for a refused request.
        """
        ...

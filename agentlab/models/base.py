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
    """What the engine calls. ``model`` is the id used to look up prices.

    Only ``model`` and ``complete`` are required. A model may also offer any of the optional
    capabilities that :class:`Capabilities` lists (``name``, ``caches``, ``server_tools``,
    ``count_tokens``, ``user_turn``); the engine reads them once, through :func:`capabilities`,
    and nowhere else.
    """

    model: str

    async def complete(self, request: ModelRequest) -> Any:
        """Return a reply: a dict in Messages API shape or an ``anthropic`` Message.

        Raise :class:`agentlab.RetryableError` for transient trouble (the
        engine retries within the deadline), :class:`agentlab.FatalError`
        subclasses for what no retry fixes, and :class:`agentlab.ModelError`
        for a refused request.
        """
        ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The optional parts of a model, read once when a run starts (absent means the default).

    Attributes:
        name: a label to show beside the priced model id (``"offline"``, a scenario's name).
        caches: the model writes and reads the prompt cache, so the guard's worst case counts
            cache-write rates.
        server_tools: tool definitions the model adds to every request (web search, code
            execution): their fees are part of the worst case.
        count_tokens: ``async count_tokens(request) -> int``, an exact input count the hard
            guard asks for near the limit.
        user_turn: ``user_turn() -> blocks | None``, the user's next words in a replayed record.
    """

    name: str | None = None
    caches: bool = False
    server_tools: tuple[dict[str, Any], ...] = ()
    count_tokens: Callable[..., Any] | None = None
    user_turn: Callable[[], Any] | None = None


def capabilities(model: object) -> Capabilities:
    """The one place that probes a model for its optional capabilities."""
    count = getattr(model, "count_tokens", None)
    turn = getattr(model, "user_turn", None)
    name = getattr(model, "name", None)
    return Capabilities(
        name=name if isinstance(name, str) else None,
        caches=bool(getattr(model, "caches", False)),
        server_tools=tuple(getattr(model, "server_tools", ()) or ()),
        count_tokens=count if callable(count) else None,
        user_turn=turn if callable(turn) else None,
    )

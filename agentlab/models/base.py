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
    ``count_tokens``, ``user_turn``, ``request_terms``, ``bills``); the engine reads them once,
    through :func:`capabilities`, and nowhere else.
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
            cache-write rates (``"1h"``: one-hour writes, at their dearer rate).
        server_tools: tool definitions the model adds to every request (web search, code
            execution): their fees are part of the worst case.
        count_tokens: ``async count_tokens(request) -> int``, an exact input count the hard
            guard asks for near the limit.
        user_turn: ``user_turn() -> blocks | None``, the user's next words in a replayed record.
        request_terms: a :class:`agentlab.pricing.RequestTerms`: what the model's requests ask for
            that changes their price (fast mode, inference region, compaction, fallback models), so
            the guard's worst case includes it.
        bills: each request reaches an API that may bill it once sent (the real Messages API). A call
            Stop or the deadline abandons in flight, before any of its reply arrived, is then charged
            at the guard's worst case: nothing says what the API billed. A model that answers locally
            (offline, scripted, a replayed record) bills nothing, so its abandoned calls cost $0.
    """

    name: str | None = None
    caches: bool | str = False
    server_tools: tuple[dict[str, Any], ...] = ()
    count_tokens: Callable[..., Any] | None = None
    user_turn: Callable[[], Any] | None = None
    request_terms: Any = None
    bills: bool = False


def capabilities(model: object) -> Capabilities:
    """The one place that probes a model for its optional capabilities."""
    count = getattr(model, "count_tokens", None)
    turn = getattr(model, "user_turn", None)
    name = getattr(model, "name", None)
    return Capabilities(
        name=name if isinstance(name, str) else None,
        caches=_caching(getattr(model, "caches", False)),
        server_tools=tuple(getattr(model, "server_tools", ()) or ()),
        count_tokens=count if callable(count) else None,
        user_turn=turn if callable(turn) else None,
        request_terms=getattr(model, "request_terms", None),
        bills=getattr(model, "bills", False) is True,
    )


def _caching(value: object) -> bool | str:
    """``"1h"`` kept as is (one-hour cache writes cost 2x base input, not 1.25x), anything else as a bool."""
    return "1h" if value == "1h" else bool(value)

"""A model that answers with a recorded run's replies, in order.

``ReplayModel(trace)`` lets a recorded run (native or imported) be stepped
through offline, in the panel or a script: each call returns the next recorded
reply with its recorded usage, so the engine prices it exactly as the record
did and the gauges show the recorded spend. It does not look at the request:
a replay is the record, not a simulation. Asking for more replies than the
record holds stops the run with a ``model error`` that says so.

A recorded conversation has two sides: :meth:`ReplayModel.user_turn` gives
what the user said after the reply last given (a new prompt after a final
reply, an interruption appended to tool results), and the engine appends it to
the history as the record did. A session in which the user spoke again after
an ``end_turn`` reply therefore replays whole, turn after turn, with the steps
numbered on as they were recorded.
"""

from __future__ import annotations

from typing import Any

from ..errors import ModelError
from ..messages import Block
from ..pricing import Prices
from .base import ModelRequest

TOOL_RESULT = "tool_result"
NOTHING_SAID = "[not in the record: nothing was said here; the model spoke again]"
"""The user message a replay sends between two recorded replies in a row (a reply that ended its turn, then
another with no user words between, as agents record a retried or continued reply): the API needs a user
turn there, and the record holds the next reply, so the replay goes on instead of ending ``done`` early."""


class ReplayModel:
    """The recorded replies of ``trace`` (a :class:`~agentlab.trace.Trace`), one per call.

    ``prices`` are the record's (``run_started.prices``), so a run built with
    ``prices=model.prices`` spends exactly what the record spent. ``start``
    skips that many recorded replies (a fork replays from there).
    """

    def __init__(self, trace: Any, *, start: int = 0) -> None:
        started = trace.started or {}
        self.run_id: str = trace.run_id
        self.model: str = started.get("model") or "replay"
        self.name = f"replay of {trace.run_id}"
        self.caches = bool(started.get("caches"))
        p = started.get("prices")
        self.prices: Prices | None = Prices(**p) if isinstance(p, dict) else None
        answered: dict[int, list[Block]] = {}  # step -> the user message that followed its reply
        for e in trace.records:
            if e.get("kind") == "tool_results":
                answered[e.get("step", 0)] = list(e.get("content") or [])
        self.replies: list[dict[str, Any]] = []
        self.said: list[list[Block]] = []
        """For each recorded reply, what the user (not the tools) said after it; usually nothing."""
        for e in trace.records:
            if e.get("kind") == "model_called" and "content" in e:
                self.replies.append(
                    {
                        "content": e["content"],
                        "stop_reason": e.get("stop_reason"),
                        "usage": e.get("usage"),
                        "id": e.get("request_id"),
                    }
                )
                self.said.append(
                    [
                        b
                        for b in answered.get(e.get("step", 0), [])
                        if not (isinstance(b, dict) and b.get("type") == TOOL_RESULT)
                    ]
                )
        self.calls = start

    @property
    def remaining(self) -> int:
        """Recorded replies not yet given."""
        return max(len(self.replies) - self.calls, 0)

    async def complete(self, request: ModelRequest) -> dict[str, Any]:
        """The next recorded reply, with its recorded usage (a model error past the record's last reply)."""
        if self.calls >= len(self.replies):
            raise ModelError(
                f"the record of run {self.run_id} has {len(self.replies)} replies and call {self.calls + 1} "
                "asked for another: a replay cannot go beyond what was recorded (fork the run to continue live)",
            )
        reply = dict(self.replies[self.calls])
        self.calls += 1
        if reply.get("usage") is None:
            reply.pop("usage")
        else:
            reply["usage"] = _api_usage(reply["usage"])
        return reply

    def user_turn(self) -> list[Block] | None:
        """What the user said after the reply last given, as recorded; ``None`` when nothing.

        The engine asks after each reply: after tool results, the blocks are
        added to the results' user message; after a reply that ended the turn,
        they are the next user message and the run goes on (only while the record
        holds another reply: a session whose last words were the user's ends done,
        as its record does). A reply that ended its turn and is followed in the
        record by another reply, with no words between, gets :data:`NOTHING_SAID`:
        the replay plays every recorded reply, not only those before the first such pair.
        """
        if self.calls == 0 or self.calls > len(self.replies):
            return None
        said = self.said[self.calls - 1]
        ended = self.replies[self.calls - 1].get("stop_reason") != "tool_use"
        if not said:
            if ended and self.remaining > 0:  # the model spoke again with nothing said between: go on
                return [{"type": "text", "text": NOTHING_SAID}]
            return None
        if ended and self.remaining == 0:
            return None
        return [dict(b) for b in said]

    def __repr__(self) -> str:
        return f"<ReplayModel {self.run_id}: {self.calls}/{len(self.replies)} replies given>"


def _api_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """A trace's usage as the API writes it: the one-hour part of the cache writes (which the trace
    keeps as ``cache_creation_1h_input_tokens``) in ``cache_creation``, so it is priced at the 1h rate."""
    if "cache_creation_1h_input_tokens" not in usage:
        return usage
    out = dict(usage)
    long = int(out.pop("cache_creation_1h_input_tokens") or 0)
    writes = int(out.get("cache_creation_input_tokens") or 0)
    out["cache_creation"] = {"ephemeral_5m_input_tokens": max(writes - long, 0), "ephemeral_1h_input_tokens": long}
    return out

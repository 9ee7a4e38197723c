"""Runs built to bust the prompt cache for a named reason: the real SDK against MessagesServer, on a fake clock."""

from __future__ import annotations

from typing import Any

import agentlab as al
from agentlab.models.anthropic import AnthropicModel
from agentlab.testing import MessagesServer

CAUSES = ("steady", "TTL ran out", "model changed", "system prompt changed", "tools changed", "messages changed")
OTHER_MODEL = "claude-haiku-4-5"
EXTRA_TOOL = {"name": "extra", "description": "A tool added mid-run.", "input_schema": {"type": "object"}}


class Busting(AnthropicModel):
    """An adapter that changes one thing about its requests from call ``at`` on, and asks for cache diagnostics."""

    def __init__(self, cause: str, at: int, **kw: Any) -> None:
        super().__init__(stream=False, **kw)
        self.cause, self.at, self.calls = cause, at, 0
        self.previous: str | None = None
        self.diagnostics: list[dict[str, Any] | None] = []

    def build_params(self, request: Any) -> dict[str, Any]:
        self.calls += 1
        late = self.calls >= self.at
        if late and self.cause == "system prompt changed":
            request = type(request)(**{**_fields(request), "system": request.system + " Today is Tuesday."})
        if late and self.cause == "tools changed":
            request = type(request)(**{**_fields(request), "tools": [*request.tools, EXTRA_TOOL]})
        if late and self.cause == "messages changed":
            first = {"role": "user", "content": "Please, " + str(request.messages[0]["content"])}
            request = type(request)(**{**_fields(request), "messages": [first, *request.messages[1:]]})
        params = super().build_params(request)
        if late and self.cause == "model changed":
            params["model"] = OTHER_MODEL
        params["diagnostics"] = {"previous_message_id": self.previous}
        return params

    async def complete(self, request: Any) -> dict[str, Any]:
        reply = await super().complete(request)
        self.previous = reply.get("id")
        self.diagnostics.append(reply.get("diagnostics"))
        return reply


def _fields(request: Any) -> dict[str, Any]:
    return {k: getattr(request, k) for k in ("system", "messages", "tools", "max_tokens", "timeout", "on_delta")}


def busting_run(
    cause: str, *, steps: int = 6, at: int = 4, tmp: Any, subscribers: Any = ()
) -> tuple[Any, Busting, MessagesServer]:
    """A run of ``steps`` calls whose call ``at`` busts the cache for ``cause`` ("steady": none does).

    Returns the trace, the adapter (its replies' diagnostics) and the server (its requests); ``subscribers`` see
    the run's events as they happen."""
    clock = al.FakeClock()

    @al.tool(mode="read")
    def note(n: int) -> str:
        """Read note n."""
        if cause == "TTL ran out" and n == at - 1:
            clock.advance(400)  # a slow tool: the five-minute entry has expired before the next call
        return f"note {n}: " + "the depot held the parcel for inspection; " * 40

    replies = [al.reply(None, ("note", {"n": i})) for i in range(1, steps)] + [al.reply("Done.")]
    server = MessagesServer(replies, clock=clock.now).start()
    model = Busting(cause, at, model="claude-sonnet-4-5", client=server.client())
    system = "You answer questions about orders. " + "Be careful and exact. " * 60
    result = al.run(
        "Why was order 1042 late?",
        [note],
        model=model,
        system=system,
        clock=clock,
        max_steps=steps + 2,
        trace=tmp,
        max_cost=5.0,
        deadline_s=3600,
        subscribers=list(subscribers),
    )
    server.close()
    return result.trace, model, server

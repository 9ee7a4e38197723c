"""What an offline model reads from its history: the pure part of a behaviour.

A scenario's model decides its next reply from the tool results it received,
as a real model would. These helpers turn the Messages-API history into
plain values (which call got which result) so each behaviour reads like the
reasoning it imitates, with no parsing in the way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..messages import text_of

NUDGE_MARK = "[agentlab]"
"""Text the engine puts in a nudge (see ``agentlab._engine.loopguard.nudge_text``)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One tool call and what came back."""

    call_id: str
    name: str
    args: dict[str, Any]
    text: str
    is_error: bool

    @property
    def data(self) -> Any:
        """The result parsed as JSON, or ``None`` when it is not JSON (an error, a nudge)."""
        try:
            return json.loads(self.text)
        except ValueError:
            return None

    @property
    def nudged(self) -> bool:
        return NUDGE_MARK in self.text


class History:
    """A read-only view of the messages a model received."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages

    @property
    def turn(self) -> int:
        """How many replies the model has already given (0 on the first call)."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    @property
    def task(self) -> str:
        content = self.messages[0].get("content") if self.messages else ""
        return text_of(content)

    def outcomes(self) -> list[Outcome]:
        """Every tool call in the history with its result, oldest first."""
        calls: dict[str, dict[str, Any]] = {}
        found: list[Outcome] = []
        for m in self.messages:
            content = m.get("content")
            if not isinstance(content, list):
                continue
            for b in content:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "tool_use":
                    calls[b["id"]] = b
                elif b.get("type") == "tool_result" and b.get("tool_use_id") in calls:
                    call = calls[b["tool_use_id"]]
                    found.append(
                        Outcome(
                            call["id"],
                            call["name"],
                            call.get("input", {}),
                            _text(b.get("content")),
                            bool(b.get("is_error")),
                        )
                    )
        return found

    def latest(self) -> list[Outcome]:
        """The results of the last turn's calls, in request order."""
        last = self.messages[-1] if self.messages else {}
        if last.get("role") != "user" or not isinstance(last.get("content"), list):
            return []
        ids = {b.get("tool_use_id") for b in last["content"] if isinstance(b, dict)}
        return [o for o in self.outcomes() if o.call_id in ids]

    def last(self, name: str) -> Outcome | None:
        """The most recent result of tool ``name``."""
        for o in reversed(self.outcomes()):
            if o.name == name:
                return o
        return None


def _text(content: Any) -> str:
    if isinstance(content, (str, list)) or content is None:
        return text_of(content)
    return str(content)

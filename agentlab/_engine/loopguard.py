"""Repeat detection: the third identical call gets a nudge, the fourth stops.

A call is keyed by its tool name and the canonical JSON of its arguments
(sorted keys), so ``{"a":1,"b":2}`` and ``{"b":2,"a":1}`` are the same call.
Counting is a dict lookup per call: no scan of the history. Two identical
calls are often legitimate (a retry after a blip); the third is answered with
the earlier result and a nudge instead of being run; one more after the nudge
and the run stops with "loop detected". A successful write changes the
world, so it clears the counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

Verdict = Literal["run", "nudge", "stop"]


def call_key(name: str, args: dict[str, Any]) -> str:
    """The call's identity: its tool and its arguments as canonical JSON (orjson: a tenth of ``json``'s cost)."""
    try:
        return name + "\x00" + orjson.dumps(args, default=str, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # keys that are not strings, an int too large for orjson
        return name + "\x00" + json.dumps(args, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(slots=True)
class LoopGuard:
    """Counts identical calls. ``nudge_at`` is the count that is nudged."""

    nudge_at: int = 3
    counts: dict[str, int] = field(default_factory=dict)
    results: dict[str, tuple[str, bool]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.nudge_at, int) or self.nudge_at < 2:
            raise ValueError("loop_nudge_at must be an int >= 2 (two identical calls are often legitimate)")

    def check(self, key: str) -> tuple[Verdict, int]:
        """Count this call and say what to do with it: run, nudge or stop."""
        n = self.counts.get(key, 0) + 1
        self.counts[key] = n
        if n < self.nudge_at:
            return "run", n
        if n == self.nudge_at and key in self.results:
            return "nudge", n
        if n == self.nudge_at:  # never finished before (say it failed): let it run
            self.counts[key] = n - 1
            return "run", n - 1
        return "stop", n

    def remember(self, key: str, result: str, is_error: bool) -> None:
        self.results[key] = (result, is_error)

    def reset(self) -> None:
        self.counts.clear()
        self.results.clear()


def nudge_text(tool: str, previous: str, count: int) -> str:
    return (
        f"{previous}\n\n[agentlab] You have now asked for {tool} with exactly these arguments "
        f"{count} times; it was not run again, and the result above is what it returned. "
        "Repeating it will not change the answer. Try a different approach: other arguments, "
        "another tool, or answer with what you already know."
    )

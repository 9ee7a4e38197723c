"""The words a step speaks in: the run's phase, and why it must stop (a :class:`Halt`)."""

from __future__ import annotations

from typing import Literal, NamedTuple

from ..vocab import StopReason

Phase = Literal["ready", "calling model", "running tools", "awaiting tools", "done", "stopped"]
"""Where a run stands: ``"awaiting tools"`` is a step paused before its tools (``pause_before_tools``)."""


class Halt(NamedTuple):
    """Why the run stops here: a check returns one, and ``Run._stop(*halt)`` applies it."""

    reason: StopReason | str
    detail: str
    error: BaseException | None = None

"""How a run ended: ``Done`` or ``Stopped``, values that carry their numbers."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from ._safe_text import html_text, no_math_html
from ._shorten import shorten
from .budget import BudgetSnapshot, GuardReport
from .messages import Message, text_of


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What one call of ``Run.step()`` did."""

    step: int
    stop_reason: str | None
    text: str
    tool_calls: list[dict[str, Any]]
    cost: float
    spent: float
    usage: dict[str, Any]
    latency: float
    budget: BudgetSnapshot
    finished: bool
    context_management: dict[str, Any] | None = None
    """The API's account of the context edits it applied to this step's request (``applied_edits``)."""


@dataclass(frozen=True)
class _Result:
    run_id: str
    steps: int
    spent: float
    """Dollars the run spent (its sub-runs' included): the name the run, each step and the events use."""
    messages: list[Message] = field(repr=False)
    budget: BudgetSnapshot
    model_calls: int = 0
    cost_check: GuardReport | None = field(default=None, repr=False)
    """What the cost guard checked before each call (exact, bounded, estimated) and how far off it was."""
    overrun_s: float = 0.0
    """Seconds past ``deadline_s`` when the run ended (0.0 within it, or with no deadline)."""
    overrun_cause: str = ""
    """Why the deadline was overrun, when the watchdog saw the event loop blocked (see agentlab._runtime.watchdog)."""
    abandoned: tuple[str, ...] = ()
    """Work left running when the run ended: a sync tool's thread, a task that ignored its cancellation."""
    input_tokens: int = 0
    """Every input token the run's model calls read (cache reads and writes included)."""
    output_tokens: int = 0
    """Every output token the run's model calls wrote."""

    @property
    def guard(self) -> GuardReport | None:
        """Deprecated: ``result.cost_check`` (the name cannot be confused with ``Run.loop_guard``)."""
        warnings.warn(
            "result.guard is now result.cost_check (the cost guard's report)", DeprecationWarning, stacklevel=2
        )
        return self.cost_check

    @property
    def tokens(self) -> str:
        """``"1,234 in / 56 out"``: the run's tokens, as the reprs and the panel show them."""
        return f"{self.input_tokens:,} in / {self.output_tokens:,} out"

    @property
    def cost(self) -> float:
        """Deprecated: ``result.spent`` (one name for the dollars a run spent, on ``Done`` and ``Stopped`` alike)."""
        warnings.warn(
            "result.cost is now result.spent (the dollars the run spent, as on the run and its events)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.spent

    @property
    def elapsed(self) -> float:
        return self.budget.elapsed

    @property
    def trace(self) -> Any:
        """This run's trace, loaded from the runs folder it was written to."""
        from .trace import load_run

        return load_run(self.run_id)

    def _rows(self) -> list[tuple[str, str]]:
        note = self.cost_check.note() if self.cost_check else ""
        rows = [
            ("run", self.run_id),
            ("tokens", self.tokens),
            ("budgets", str(self.budget)),
            *([("cost guard", note)] if note else []),
        ]
        if self.overrun_s > 0:
            rows.append(("deadline overrun", f"{self.overrun_s:.3f}s {self.overrun_cause}".rstrip()))
        if self.abandoned:
            rows.append(("abandoned", "; ".join(self.abandoned)))
        return rows

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html_text(k)}</th><td style='text-align:left'>{html_text(v)}</td></tr>"
            for k, v in self._rows()
        )
        return no_math_html(f"<table class='agentlab-result'>{rows}</table>")


@dataclass(frozen=True)
class Done(_Result):
    """The model finished: ``text`` is its answer; ``detail`` a note when there is one
    (e.g. the model ended its turn with no content at all)."""

    text: str = ""
    detail: str = ""
    parsed: Any = field(default=None, repr=False)
    """The answer parsed as the request's structured output format asked (``AnthropicModel(output_format=...)``)."""
    outcome = "done"
    reason = "done"

    def __repr__(self) -> str:
        short = shorten(self.text, 60)
        return (
            f"Done({short!r}, steps={self.steps}, tokens={self.tokens}, spent=${self.spent:.4f}, "
            f"run_id={self.run_id!r}; {self.budget})"
        )

    def _rows(self) -> list[tuple[str, str]]:
        return [("outcome", "done"), ("answer", self.text), *super()._rows()]


@dataclass(frozen=True)
class Stopped(_Result):
    """The run was stopped. ``reason`` is the diagnosis, ``detail`` its numbers.

    Reasons are :class:`~agentlab.vocab.StopReason` values: "budget", "deadline",
    "step limit", "loop detected", "fatal", "cancelled", "max_tokens", "refusal",
    "context window", "request too large", "model error", "malformed reply",
    "unexpected stop reason", "experiment budget", "trace write failed".
    """

    reason: str = ""
    detail: str = ""
    error: BaseException | None = field(default=None, repr=False)
    outcome = "stopped"

    @property
    def text(self) -> str:
        """The last text the model wrote before the run stopped (empty if none)."""
        for msg in reversed(self.messages):
            if msg.get("role") == "assistant" and isinstance(msg.get("content"), list):
                return text_of(msg["content"])
        return ""

    def __repr__(self) -> str:
        return (
            f"Stopped({str(self.reason)!r}, {self.detail!r}, steps={self.steps}, tokens={self.tokens}, "
            f"spent=${self.spent:.4f}, run_id={self.run_id!r})"
        )

    def _rows(self) -> list[tuple[str, str]]:
        return [("outcome", "stopped"), ("reason", self.reason), ("detail", self.detail), *super()._rows()]


Result = Done | Stopped

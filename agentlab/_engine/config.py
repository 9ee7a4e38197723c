"""What the user asked for: a run's inputs, checked once and frozen.

:class:`RunConfig` is separate from the run's state (steps, spend, history,
phase) so the engine reads plainly: ``self.config`` never changes while a run
is alive, and an experiment can build, hash and compare configurations
without starting a run.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._checks import whole
from .._options import DEFAULTS
from ..budget import Budget, CostGuard
from ..clock import Clock, SystemClock
from ..errors import Policy
from ..messages import Message
from ..models.base import Model
from ..pricing import Prices, resolve_prices
from ..tools import Tool, as_tools
from ..trace.files import check_name


@dataclass(frozen=True)
class RunConfig:
    """A run's inputs, validated. Build it with :meth:`create` (what ``Run`` does)."""

    model: Model
    tools: Mapping[str, Tool]
    budget: Budget
    task: str
    messages: tuple[Message, ...] = field(repr=False)
    system: str | None = None
    max_tokens: int = DEFAULTS.max_tokens
    policy: Policy = field(default_factory=Policy)
    max_concurrency: int = DEFAULTS.max_concurrency
    loop_nudge_at: int = DEFAULTS.loop_nudge_at
    prices: Prices | None = None
    clock: Clock = field(default_factory=SystemClock, repr=False)
    rng: random.Random = field(default_factory=random.Random, repr=False)
    run_id: str = ""

    @classmethod
    def create(
        cls,
        task: str | Sequence[Message],
        tools: Iterable[Tool | Callable[..., Any]] | dict[str, Any] | None = None,
        *,
        model: Model | str,
        max_steps: int | None = DEFAULTS.max_steps,
        max_cost: float | None = DEFAULTS.max_cost,
        deadline_s: float | None = DEFAULTS.deadline_s,
        cost_guard: CostGuard = DEFAULTS.cost_guard,
        system: str | None = DEFAULTS.system,
        max_tokens: int = DEFAULTS.max_tokens,
        policy: Policy | None = DEFAULTS.policy,
        max_concurrency: int = DEFAULTS.max_concurrency,
        loop_nudge_at: int = DEFAULTS.loop_nudge_at,
        prices: Prices | None = DEFAULTS.prices,
        clock: Clock | None = DEFAULTS.clock,
        rng: random.Random | None = DEFAULTS.rng,
        run_id: str | None = DEFAULTS.run_id,
    ) -> RunConfig:
        """Check every input and name the one that is wrong, before anything runs."""
        budget = Budget(max_steps=max_steps, max_cost=max_cost, deadline_s=deadline_s, cost_guard=cost_guard)
        resolved = _resolve_model(model)
        _check_int("max_tokens", max_tokens)
        _check_int("max_concurrency", max_concurrency)
        if system is not None and not isinstance(system, str):
            raise TypeError(f"system must be a string or None, got {type(system).__name__}")
        found = resolve_prices(resolved.model, prices, getattr(resolved, "platform", None))
        if found is None and max_cost is not None:
            raise ValueError(
                f"max_cost is set but no price is known for model {resolved.model!r}{_near(resolved.model)}: "
                "pass prices=agentlab.Prices(input=..., output=...) (USD per million tokens) or max_cost=None"
            )
        messages = initial_messages(task)
        return cls(
            model=resolved,
            tools=as_tools(tools),
            budget=budget,
            task=task if isinstance(task, str) else _first_text(messages),
            messages=tuple(messages),
            system=system,
            max_tokens=max_tokens,
            policy=policy or Policy(),
            max_concurrency=max_concurrency,
            loop_nudge_at=loop_nudge_at,
            prices=found,
            clock=clock or SystemClock(),
            rng=rng or _fresh_rng(),
            run_id=new_run_id() if run_id is None else check_name(run_id),  # before the run starts
        )


def new_run_id() -> str:
    """12 random hex digits (48 random bits: a run's trace file's name)."""
    return os.urandom(6).hex()


def _fresh_rng() -> random.Random:
    """A retry-jitter generator of the run's own, seeded with 128 random bits (pass ``rng=`` to reproduce)."""
    return random.Random(int.from_bytes(os.urandom(16), "big"))


def _near(model_id: str) -> str:
    """`` (did you mean 'claude-sonnet-4-5'?)`` when a priced Claude id is close to ``model_id``: a typo is the
    likelier reason for a missing price than a model newer than the table."""
    from ..models.resolve import near_claude_ids

    near = near_claude_ids(model_id)
    return f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""


def _resolve_model(model: Model | str) -> Model:
    resolved: Model
    if isinstance(model, str):  # a model id (Claude: needs a key) or "offline"; never a silent stand-in
        from ..models.resolve import resolve_model

        resolved = resolve_model(model).model
    else:
        resolved = model
    if not isinstance(getattr(resolved, "model", None), str) or not callable(getattr(resolved, "complete", None)):
        raise TypeError("model must have a 'model' id (str) and an async complete(request) method")
    return resolved


def _check_int(name: str, value: object) -> None:
    whole(name, value)


def initial_messages(task: str | Sequence[Message]) -> list[Message]:
    """The history a run starts from: the task as one user message, or a copy of the given messages."""
    if isinstance(task, str):
        if not task.strip():
            raise ValueError("task must be a non-empty string (or a list of messages)")
        return [{"role": "user", "content": task}]
    messages: Sequence[Message] = task  # typed local: mypy's isinstance(Sequence) narrowing re-admits str
    if isinstance(messages, Sequence) and messages and all(isinstance(m, dict) and "role" in m for m in messages):
        return [dict(m) for m in messages]
    raise TypeError("task must be a string or a non-empty list of {'role': ..., 'content': ...} messages")


def _first_text(messages: list[Message]) -> str:
    content = messages[0].get("content")
    return content if isinstance(content, str) else str(content)[:200]

"""The run's options: one definition of the keywords every way of starting a run takes.

``run``, ``arun``, ``Run``, ``Lab`` and ``RunConfig.create`` spell these
keywords out as explicit, typed parameters (so editors complete them and
mypy checks them) and take their defaults from :data:`DEFAULTS`;
``tests/test_run_options.py`` fails when any signature drifts from
:class:`RunOptions` (a name, a type or a default). The limits' defaults are
:class:`~agentlab.budget.Budget`'s, the one owner of the budget rules.
Docstrings of those functions end with the list generated here, so
``help(agentlab.run)`` documents every option once, the same way everywhere.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from .budget import Budget, CostGuard

if TYPE_CHECKING:
    from .clock import Clock
    from .errors import Policy
    from .events import Subscriber
    from .pricing import Prices

_LIMITS = Budget()

F = TypeVar("F", bound=Callable[..., Any])


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """The keywords of a run besides its task, tools and model (see the module docstring)."""

    max_steps: int | None = field(default=_LIMITS.max_steps, metadata=_doc("model calls allowed (None: no limit)."))
    max_cost: float | None = field(
        default=_LIMITS.max_cost,
        metadata=_doc(
            "US dollars the run may spend on model calls; never passed under cost_guard='hard' (None: no limit)."
        ),
    )
    deadline_s: float | None = field(
        default=_LIMITS.deadline_s,
        metadata=_doc("seconds of working time (inside step(); set-up counts too) (None: no limit)."),
    )
    cost_guard: CostGuard = field(
        default=_LIMITS.cost_guard,
        metadata=_doc("'hard' (worst case checked before each call), 'estimate' (on a token estimate) or 'after'."),
    )
    system: str | None = field(default=None, metadata=_doc("the system prompt."))
    max_tokens: int = field(
        default=1024,
        metadata=_doc("the most output tokens one reply may use (the guard may lower it)."),
    )
    policy: Policy | None = field(default=None, metadata=_doc("retries and which errors are fatal (agentlab.Policy)."))
    max_concurrency: int = field(
        default=8,
        metadata=_doc("read-only tool calls of one turn run together, at most this many."),
    )
    loop_nudge_at: int = field(
        default=3,
        metadata=_doc("the same call this many times gets a nudge; once more after it stops the run."),
    )
    prices: Prices | None = field(
        default=None, metadata=_doc("USD per million tokens, when the model's are not known.")
    )
    clock: Clock | None = field(
        default=None, metadata=_doc("the clock budgets and retries read (a FakeClock in tests).")
    )
    rng: random.Random | None = field(default=None, metadata=_doc("the randomness of retry jitter."))
    run_id: str | None = field(default=None, metadata=_doc("the run's id (default: 12 random hex digits)."))
    subscribers: Iterable[Subscriber] = field(
        default=(), metadata=_doc("callbacks called with every event of the run.")
    )
    approve: Any = field(
        default=None,
        metadata=_doc(
            "who approves writes before they run: a callback, True (every write) or an agentlab.approval.Ask."
        ),
    )
    approval_stops_clock: bool = field(
        default=False,
        metadata=_doc("time spent waiting for an approval does not count against deadline_s."),
    )


DEFAULTS = RunOptions()
"""Every option at its default: signatures read their defaults from here."""

NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunOptions))
"""Every option, in the order the signatures list them."""

CONFIG_NAMES: tuple[str, ...] = NAMES[: NAMES.index("run_id") + 1]
"""The options :class:`~agentlab._engine.config.RunConfig` holds (the rest wire the run to its watchers)."""


def collect(scope: dict[str, Any]) -> dict[str, Any]:
    """The options among a function's ``locals()``, to pass on as keywords."""
    return {name: scope[name] for name in NAMES if name in scope}


def options_doc() -> str:
    """The options as a docstring section (Google style), generated from :class:`RunOptions`."""
    lines = ["", "Run options (every way of starting a run takes these):"]
    for f in fields(RunOptions):
        default = "()" if f.default == () else repr(f.default)
        lines.append(f"    {f.name} (default {default}): {f.metadata['doc']}")
    return "\n".join(lines) + "\n"


def documented(fn: F) -> F:
    """Append the options' documentation to ``fn``'s docstring."""
    fn.__doc__ = inspect.cleandoc(fn.__doc__ or "") + "\n" + options_doc()
    return fn

"""Offline scenarios: each lesson of the article, reproduced with no API key.

Every scenario is a task, a fresh SQLite shop, a seeded offline model that
reacts to the tool results it gets, and the budgets that make its lesson
show. Use one with ``agentlab.run``, ``agentlab.Lab`` or the CLI::

    from agentlab import scenarios
    scenarios.names()                       # in the article's order
    result = scenarios.run("hanging-tool")  # Stopped('deadline', ...)
    s = scenarios.get("growing-context").setup(max_cost=None)
    agentlab.run(**s.kwargs())
"""

from __future__ import annotations

from typing import Any

from .base import Scenario, Setup
from .catalog import SCENARIOS


def names() -> list[str]:
    """Scenario names, in the order of the article's lessons."""
    return list(SCENARIOS)


def get(name: str) -> Scenario:
    """The scenario called ``name``; a clear error lists the others."""
    if not isinstance(name, str):
        raise TypeError(f"scenario name must be a string, got {type(name).__name__}")
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"no scenario named {name!r}; choose one of: {', '.join(SCENARIOS)}") from None


def all() -> list[Scenario]:  # noqa: A001 - reads well as scenarios.all()
    """Every scenario, in order."""
    return list(SCENARIOS.values())


def run(name: str, *, seed: int = 0, **options: Any) -> Any:
    """Run scenario ``name`` to the end; ``options`` override its run options."""
    return get(name).setup(seed=seed, **options).run()


__all__ = ["SCENARIOS", "Scenario", "Setup", "all", "get", "names", "run"]

"""A scenario: one lesson, as a task, a shop, an offline model and its budgets.

A :class:`Scenario` is a recipe; :meth:`Scenario.setup` makes a fresh
:class:`Setup` (its own shop database, carrier and model state) every time,
so two runs of one scenario never share flakiness or writes. A setup plugs
into anything that takes a run's arguments::

    s = scenarios.get("parallel-lookups").setup()
    agentlab.run(**s.kwargs())       # or s.run()
    agentlab.Lab(**s.kwargs())       # or s.lab()
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._checks import is_whole
from ..models.offline import FunctionModel
from ..shop import CarrierAPI, Shop
from .behaviours import Behaviour


@dataclass(frozen=True)
class Scenario:
    """One lesson of the article, reproduced offline.

    Attributes:
        name: short id used by the CLI (``agentlab run --scenario NAME``).
        title: what happens, in a few words.
        lesson: the point it makes, one or two sentences.
        task: what the user asks.
        expected: the reason the run ends with ("done", "budget", ...).
        behaviour: makes the model's behaviour from a seeded ``random.Random``.
        options: run options (budgets, policy, max_tokens) for ``agentlab.run``.
        shop: options for the scenario's :class:`~agentlab.shop.Shop`.
        carrier: options for its :class:`~agentlab.shop.CarrierAPI`.
    """

    name: str
    title: str
    lesson: str
    task: str
    expected: str
    behaviour: Callable[[random.Random], Behaviour]
    options: dict[str, Any] = field(default_factory=dict)
    shop: dict[str, Any] = field(default_factory=dict)
    carrier: dict[str, Any] = field(default_factory=dict)

    def setup(self, *, seed: int = 0, shop_path: Any = None, **options: Any) -> Setup:
        """A fresh, ready-to-run copy of this scenario.

        ``seed`` fixes the model's choices and the retry jitter; ``options``
        override the scenario's run options (e.g. ``max_cost=None``,
        ``cost_guard="after"``, ``clock=agentlab.FakeClock()``).
        """
        if not is_whole(seed):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        shop = Shop(shop_path, carrier=CarrierAPI(**self.carrier), **self.shop)
        behaviour = self.behaviour(random.Random(seed))
        model = FunctionModel(behaviour, name=f"offline:{self.name}")
        merged: dict[str, Any] = {
            "rng": random.Random(seed),
            "run_id": f"{self.name}-{uuid.uuid4().hex[:6]}",
            **self.options,
            **options,
        }
        return Setup(self, self.task, shop.tools(), model, merged, shop)

    def run(self, *, seed: int = 0, **options: Any) -> Any:
        """Set up and run to the end; returns ``Done`` or ``Stopped``."""
        return self.setup(seed=seed).run(**options)

    def __repr__(self) -> str:
        return f"<Scenario {self.name}: {self.title} → {self.expected}>"


@dataclass
class Setup:
    """Everything one run of a scenario needs, fresh."""

    scenario: Scenario
    task: str
    tools: list[Any]
    model: FunctionModel
    options: dict[str, Any]
    shop: Shop

    def kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Arguments for ``agentlab.run`` / ``agentlab.Run`` / ``agentlab.Lab``."""
        return {"task": self.task, "tools": self.tools, "model": self.model, **self.options, **overrides}

    def run(self, **overrides: Any) -> Any:
        """Run to the end (from a script or inside Jupyter)."""
        from .._facades import run

        try:
            return run(**self.kwargs(**overrides))
        finally:
            self.shop.carrier.release()  # a hanging upstream lets its abandoned thread go

    async def arun(self, **overrides: Any) -> Any:
        """Run to the end in the current event loop."""
        from .._facades import arun

        try:
            return await arun(**self.kwargs(**overrides))
        finally:
            self.shop.carrier.release()

    def engine(self, **overrides: Any) -> Any:
        """An :class:`agentlab.Run` to step yourself (no trace unless you subscribe one)."""
        from ..loop import Run

        return Run(**self.kwargs(**overrides))

    def lab(self, **overrides: Any) -> Any:
        """An :class:`agentlab.Lab` panel for this scenario."""
        from ..lab import Lab

        return Lab(**self.kwargs(**overrides))

    def close(self) -> None:
        """Close the scenario's shop database."""
        self.shop.close()

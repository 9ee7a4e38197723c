"""Recorded offline runs for the analysis and plot tests: a growing context, scripted runs, exact quadratics."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import agentlab as al
from agentlab import reply

from .helpers import PRICES


def load_traces(folder: Path) -> al.Traces:
    """The trace frames of a runs folder, as notebooks load them."""
    return al.load_runs(folder)


@al.tool(mode="read")
def fetch(n: int) -> str:
    """Return n characters: every call adds the same amount to the context."""
    return "x" * n


def growing_script(steps: int, size: int = 3000, answer: str = "All done.") -> list:
    """A run that reads ``size`` characters each step for ``steps - 1`` steps, then answers."""
    return [reply("reading", ("fetch", {"n": size + i})) for i in range(steps - 1)] + [reply(answer)]


def record(folder: Path, script: list, **options) -> al.Done | al.Stopped:
    """Run a script offline with its trace written to ``folder``."""
    opts = {"max_steps": None, "max_cost": None, "deadline_s": None, "prices": PRICES, "loop_nudge_at": 1000, **options}
    return al.run("read everything", [fetch], model=al.ScriptedModel(script), trace=folder, **opts)


def quadratic_steps(a: float, b: float, c: float, n: int, run_id: str = "q") -> pd.DataFrame:
    """A steps frame whose cumulative cost is exactly a·k² + b·k + c."""
    cum = [a * k * k + b * k + c for k in range(1, n + 1)]
    cost = [cum[0]] + [y - x for x, y in zip(cum, cum[1:], strict=False)]
    return pd.DataFrame(
        {
            "run_id": run_id,
            "step": range(1, n + 1),
            "input_tokens": [1000 * k for k in range(1, n + 1)],
            "output_tokens": 100,
            "cache_write_tokens": 0,
            "cache_read_tokens": 0,
            "cost": cost,
            "cumulative_cost": cum,
        }
    )


SCRIPTS = {
    "short": growing_script(3, 1500),
    "long": growing_script(9, 6000),
    "medium": growing_script(6, 3000),
    "verbose": growing_script(4, 3000, answer="a long answer " * 200),
}

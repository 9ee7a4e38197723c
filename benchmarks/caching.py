"""Cost as performance: a recorded shop run repriced with and without cache reads."""

from __future__ import annotations

from .report import Row, missing


async def caching_rows(steps: int) -> list[Row]:
    import importlib.util

    if importlib.util.find_spec("agentlab.shop") is None or importlib.util.find_spec("agentlab.models.anthropic") is None:
        return [missing("cost.cache_ratio", f"Cost: {steps}-step shop run, with cache ÷ without", "")]
    raise NotImplementedError("the shop example landed: wire the reprice in here")

"""An experiment from a TOML file (``agentlab experiment SPEC``).

::

    name = "models"                 # the folder is <folder>/<name>
    folder = "experiments"
    tasks = "tasks.jsonl"           # relative to this file
    tools = "mytools:make_tools"    # module:attribute (a list or a factory), or "shop"
    model = "claude-haiku-4-5"      # an id, or module:factory
    scorer = "includes"             # exact_match | includes
    repeats = 2
    concurrency = 8
    max_total_cost = 2.0            # dollars, all runs together

    [axes]                          # grid(...) of these; or [configs.NAME] tables
    max_steps = [4, 8]
    cost_guard = ["hard", "after"]

``preset = "shop"`` runs the shipped shop study instead (other keys override).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from .._refs import load_object as _load_object
from .experiment import Experiment
from .grid import grid

KEYS = {
    "name",
    "folder",
    "tasks",
    "tools",
    "model",
    "scorer",
    "repeats",
    "concurrency",
    "max_total_cost",
    "deadline_s",
    "axes",
    "configs",
    "preset",
    "backend",
}


def load_spec(path: str | Path, *, name: str | None = None, progress: bool | str = "tqdm") -> Experiment:
    """Build the experiment a TOML spec describes; names the first thing that is wrong."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"spec file {path} does not exist")
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc
    unknown = sorted(set(spec) - KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; known: {sorted(KEYS)}")
    base = path.parent.resolve()
    folder = base / spec.get("folder", "experiments")
    limits = {k: spec[k] for k in ("repeats", "concurrency", "max_total_cost", "deadline_s", "backend") if k in spec}
    if spec.get("preset") == "shop":
        from ..scenarios.shop_study import shop_experiment

        configs = spec.get("configs")
        return shop_experiment(
            folder=folder, name=name or spec.get("name", "shop-study"), configs=configs, progress=progress, **limits
        )
    if "preset" in spec:
        raise ValueError(f"{path}: unknown preset {spec['preset']!r} (known: 'shop')")
    for key in ("tasks",):
        if key not in spec:
            raise ValueError(f"{path}: missing {key!r}")
    tasks = spec["tasks"]
    if isinstance(tasks, str):
        tasks = base / tasks
    tools: Any = spec.get("tools")
    if tools == "shop":
        from ..shop import Shop

        tools = lambda task: Shop().tools()  # noqa: E731 - a fresh shop per run
    elif isinstance(tools, str):
        tools = _load_object(tools, base)
    model: Any = spec.get("model")
    if isinstance(model, str) and ":" in model:
        model = _load_object(model, base)
    if "axes" in spec and "configs" in spec:
        raise ValueError(f"{path}: give [axes] or [configs.NAME], not both")
    configs = grid(**spec["axes"]) if "axes" in spec else spec.get("configs")
    if not configs:
        raise ValueError(f"{path}: needs [axes] or [configs.NAME] tables")
    return Experiment(
        tasks,
        configs,
        tools=tools,
        model=model,
        scorer=spec.get("scorer"),
        folder=folder,
        name=name or spec.get("name"),
        progress=progress,
        **limits,
    )


def summary_text(result: Any) -> str:
    """The summary table as plain text for a terminal."""
    s = result.summary()
    if s.empty:
        return "(no finished runs)"
    show = s[
        [
            "runs",
            "not_run",
            "samples",
            "success",
            "success_lo",
            "success_hi",
            "cost_mean",
            "cost_lo",
            "cost_hi",
            "cost_per_success",
            "steps_mean",
            "stop_reasons",
        ]
    ]
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        return show.to_string(float_format=lambda v: f"{v:.4f}")

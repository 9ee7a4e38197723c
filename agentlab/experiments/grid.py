"""Configurations: named sets of run options, and :func:`grid` to cross axes.

A configuration is any keyword :class:`agentlab.Run` takes, plus ``model``
(an id, a model, or a factory ``model(task, seed, **options)`` whose own
keyword options become config keys too, e.g. ``cache``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..loop import Run

RESERVED = frozenset({"task", "tools", "subscribers", "ledger", "run_id", "rng", "parent"})
"""Run keywords the experiment sets per cell (a config may not)."""

RUN_KEYS = frozenset(inspect.signature(Run.__init__).parameters) - RESERVED - {"self"}


@dataclass(frozen=True)
class Config:
    """One named configuration: ``params`` are run options plus ``model``."""

    name: str
    params: Mapping[str, Any]

    def digest(self) -> str:
        """A hash of the options, to tell a changed config from the one a folder was made with."""
        return hashlib.sha256(json.dumps(describe(self.params), sort_keys=True).encode()).hexdigest()[:16]


def label(value: Any) -> str:
    """A short printable name for an axis value (a model object by its name or id)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return str(value)
    return str(
        getattr(value, "name", None)
        or getattr(value, "model", None)
        or getattr(value, "__name__", None)
        or type(value).__name__
    )


def describe(params: Mapping[str, Any]) -> dict[str, Any]:
    """Options as JSON-able values, for columns, manifests and hashes.

    Plain values stay as they are; value objects (``Prices``, ``Policy``) by
    their repr, so changing one changes the config's hash; anything else
    (a model, a factory) by its label.
    """
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[k] = v
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            out[k] = repr(v)
        else:
            out[k] = label(v)
    return out


def grid(**axes: Iterable[Any]) -> list[Config]:
    """The cross product of the axes, one named :class:`Config` each.

    ``grid(model=["claude-haiku-4-5", "claude-sonnet-4-6"], max_steps=[8, 20])``
    gives four configs named like ``"model=claude-haiku-4-5 max_steps=8"``
    (axes with one value are left out of the name).
    """
    if not axes:
        raise ValueError("grid() needs at least one axis, e.g. grid(max_steps=[4, 8])")
    values = {
        k: list(v) if not isinstance(v, (str, bytes)) and isinstance(v, Iterable) else [v] for k, v in axes.items()
    }
    for k, v in values.items():
        if not v:
            raise ValueError(f"grid axis {k!r} has no values")
    varying = [k for k, v in values.items() if len(v) > 1] or list(values)[:1]
    out = []
    for combo in itertools.product(*values.values()):
        params = dict(zip(values, combo, strict=True))
        out.append(Config(" ".join(f"{k}={label(params[k])}" for k in varying), params))
    return out


def load_configs(configs: Any) -> list[Config]:
    """A grid, a ``{name: options}`` dict or a list of option dicts -> named configs."""
    if isinstance(configs, Mapping):
        out = [Config(str(name), dict(p)) for name, p in configs.items()]
    elif isinstance(configs, Iterable) and not isinstance(configs, (str, bytes)):
        out = []
        for n, c in enumerate(configs):
            if isinstance(c, Config):
                out.append(c)
            elif isinstance(c, Mapping):
                out.append(Config(" ".join(f"{k}={label(v)}" for k, v in c.items()) or f"config{n}", dict(c)))
            else:
                raise TypeError(f"config {n} must be a dict of run options, got {type(c).__name__}")
    else:
        raise TypeError(
            f"configs must be grid(...), a dict of named configs or a list of dicts, got {type(configs).__name__}"
        )
    if not out:
        raise ValueError("the experiment has no configurations")
    names = [c.name for c in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate config names: {dupes}")
    return out


def factory_keys(model: Any) -> frozenset[str]:
    """Keyword options a model factory takes (they are config keys too)."""
    if not is_factory(model):
        return frozenset()
    params = inspect.signature(model).parameters.values()
    return frozenset(p.name for p in params if p.kind == p.KEYWORD_ONLY)


def is_factory(model: Any) -> bool:
    """A model factory is a plain callable without a ``complete`` method."""
    return callable(model) and not hasattr(model, "complete") and not isinstance(model, str)


def check_config(config: Config, default_model: Any) -> None:
    """Name the first option ``Run`` (or the model factory) does not take."""
    model = config.params.get("model", default_model)
    if model is None:
        raise ValueError(f"config {config.name!r} has no model (give model= in the config or to Experiment)")
    allowed = RUN_KEYS | factory_keys(model)
    for key in config.params:
        if key in RESERVED:
            raise ValueError(f"config {config.name!r}: {key!r} is set by the experiment for each cell, not by a config")
        if key not in allowed:
            raise ValueError(
                f"config {config.name!r}: unknown option {key!r} (run() takes: {', '.join(sorted(RUN_KEYS))}"
                + (
                    f"; the model factory takes: {', '.join(sorted(factory_keys(model)))}"
                    if factory_keys(model)
                    else ""
                )
                + ")"
            )

"""The run's options are defined once: every way of starting a run takes them, typed, with the same defaults.

A user sees this as: editors complete ``max_steps`` on ``run``, ``arun``,
``Run`` and ``Lab``; mypy catches a misspelt option or a wrong type (``tests/user_types.py``, checked
by ``make lint``);
``help(agentlab.run)`` lists every option. The drift test compares each
signature against :class:`agentlab._options.RunOptions`.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import agentlab as al
from agentlab._engine.config import RunConfig
from agentlab._options import CONFIG_NAMES, DEFAULTS, NAMES, RunOptions
from agentlab.lab import Lab
from agentlab.loop import Run

ROOT = Path(__file__).resolve().parents[1]
OPTION_TYPES = {name: ann for name, ann in inspect.get_annotations(RunOptions).items()}


@pytest.mark.parametrize(
    ("where", "fn", "names"),
    [
        ("run", al.run, NAMES),
        ("arun", al.arun, NAMES),
        ("Run", Run.__init__, NAMES),
        ("Lab", Lab.__init__, NAMES),
        ("RunConfig.create", RunConfig.create, CONFIG_NAMES),
    ],
)
def test_every_way_of_starting_a_run_takes_the_same_typed_options(
    where: str, fn: object, names: tuple[str, ...]
) -> None:
    params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    assert not [p for p in params.values() if p.kind is p.VAR_KEYWORD], f"{where} hides options behind **kwargs"
    for name in names:
        assert name in params, f"{where} does not take {name}"
        p = params[name]
        assert p.kind is p.KEYWORD_ONLY, f"{where}: {name} must be keyword-only"
        assert p.annotation == OPTION_TYPES[name], (
            f"{where}: {name} is typed {p.annotation}, the options say {OPTION_TYPES[name]}"
        )
        assert p.default == getattr(DEFAULTS, name), (
            f"{where}: {name} defaults to {p.default!r}, not {getattr(DEFAULTS, name)!r}"
        )
    assert params["model"].annotation == "Model | str" and params["model"].default is inspect.Parameter.empty


def test_the_limits_default_to_the_budget_defaults() -> None:
    b = al.Budget()
    assert (
        (DEFAULTS.max_steps, DEFAULTS.max_cost, DEFAULTS.deadline_s)
        == (b.max_steps, b.max_cost, b.deadline_s)
        == (8, 0.50, 60.0)
    )
    r = Run("hi", model="offline")
    assert (r.budget.max_steps, r.budget.max_cost, r.budget.deadline_s, r.max_tokens) == (
        8,
        0.50,
        60.0,
        1024,
    )


def test_help_lists_every_option_with_its_default() -> None:
    for fn in (al.run, al.arun, al.Run, al.Lab):
        doc = inspect.getdoc(fn) or ""
        for name in NAMES:
            assert f"{name} (default " in doc, f"{fn.__name__}'s help does not list {name}"
    assert "max_cost (default 0.5): US dollars" in (inspect.getdoc(al.run) or "")


def test_a_misspelt_option_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="max_stepz"):
        al.run("hi", model="offline", max_stepz=3, trace=False)  # type: ignore[call-arg]


def test_dir_lists_the_lazily_loaded_names() -> None:
    names = dir(al)
    for name in ("Lab", "Experiment", "Trace", "load_run", "plots", "run", "Run"):
        assert name in names
    assert set(al.__all__) <= set(names)


def test_an_experiments_configs_take_the_same_options_and_its_model_is_typed_like_a_runs():
    from agentlab.experiments.grid import RESERVED, RUN_KEYS

    assert set(NAMES) - RESERVED <= RUN_KEYS
    model = inspect.signature(al.Experiment).parameters["model"]
    assert model.annotation == "Model | str | Callable[..., Model] | None" and model.default is None
    with pytest.raises(ValueError, match="max_stepz"):
        al.Experiment(["q"], [{"max_stepz": 3}], model="offline")

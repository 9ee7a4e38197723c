"""Budgets take every real number type users pass, and refuse what is not a limit (issue 14)."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import agentlab as al
from agentlab import reply
from agentlab.budget import Budget


@pytest.mark.parametrize(
    ("kwargs", "field", "expected", "kind"),
    [
        ({"max_steps": np.int64(5)}, "max_steps", 5, int),
        ({"max_steps": np.uint8(3)}, "max_steps", 3, int),
        ({"max_steps": Fraction(4, 1)}, "max_steps", 4, int),
        ({"max_steps": Decimal("6")}, "max_steps", 6, int),
        ({"max_cost": np.float32(0.5)}, "max_cost", 0.5, float),
        ({"max_cost": Decimal("0.25")}, "max_cost", 0.25, float),
        ({"max_cost": Fraction(1, 4)}, "max_cost", 0.25, float),
        ({"deadline_s": np.float64(2.5)}, "deadline_s", 2.5, float),
        ({"deadline_s": Decimal("30")}, "deadline_s", 30.0, float),
    ],
)
def test_any_real_number_type_becomes_a_plain_int_or_float(kwargs, field, expected, kind):
    value = getattr(Budget(**kwargs), field)
    assert value == expected and type(value) is kind


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_cost": 10**400}, "max_cost is too large"),
        ({"max_steps": 10**30}, "max_steps is too large"),
        ({"deadline_s": math.inf}, "deadline_s must be finite"),
        ({"max_cost": math.inf}, "max_cost must be finite"),
        ({"max_cost": Decimal("Infinity")}, "max_cost must be finite"),
        ({"deadline_s": np.float64("nan")}, "deadline_s must be > 0"),
        ({"max_cost": Decimal("NaN")}, "max_cost must be > 0"),
        ({"max_cost": Decimal("sNaN")}, "max_cost must be a number > 0"),
        ({"max_steps": np.int32(0)}, "max_steps must be > 0"),
        ({"max_cost": Fraction(-1, 2)}, "max_cost must be > 0"),
        ({"max_cost": Decimal("1e-400")}, "max_cost must be > 0"),  # > 0, but 0.0 as a float: no limit to keep
        ({"max_steps": 2**63}, "max_steps is too large"),  # past a signed 64-bit integer
        ({"max_cost": 0}, "max_cost must be > 0"),
        ({"deadline_s": -0.0}, "deadline_s must be > 0"),
    ],
)
def test_infinities_nan_and_overflowing_limits_are_value_errors_naming_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Budget(**kwargs)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (True, "must be a number"),
        ("5", "must be a number"),
        (2.5, "whole number"),
        (Decimal("3.0000000000000000001"), "whole number"),  # a float rounds it to 3.0: still not whole
    ],
)
def test_a_non_number_or_fractional_step_limit_is_a_type_error(value, match):
    with pytest.raises(TypeError, match=match):
        Budget(max_steps=value)


def test_a_run_with_numpy_and_decimal_limits_runs_and_writes_a_readable_trace(tmp_path):
    """The limits reach the trace as plain JSON numbers."""
    result = al.run(
        "hi",
        model=al.ScriptedModel([reply("hello")]),
        trace=tmp_path,
        max_steps=np.int64(3),
        max_cost=Decimal("0.5"),
        deadline_s=np.float32(10),
    )
    assert isinstance(result, al.Done)
    run = al.load_run(result.run_id, tmp_path).runs.iloc[0]
    assert (run["max_steps"], run["max_cost"], run["deadline_s"]) == (3.0, 0.5, 10.0)


def test_overflowing_max_cost_through_run_is_a_value_error():
    with pytest.raises(ValueError, match="max_cost"):
        al.run("hi", model=al.ScriptedModel([reply("hello")]), trace=False, max_cost=10**400)


def test_the_largest_signed_64_bit_step_limit_is_a_limit():
    assert Budget(max_steps=2**63 - 1).max_steps == 2**63 - 1
    assert Budget(max_steps=np.float64(2.0**62)).max_steps == 2**62


def test_the_limits_an_event_carries_are_every_field_of_the_budget():
    """``Budget.as_dict`` (what ``run_started``, ``step_finished`` and ``resumed`` carry) names every limit: a new
    field of :class:`Budget` that it forgot would vanish from the trace."""
    import dataclasses

    from agentlab.budget import Budget

    b = Budget(max_steps=3, max_cost=0.25, deadline_s=9.5, cost_guard="estimate")
    assert b.as_dict() == dataclasses.asdict(b)

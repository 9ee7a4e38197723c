"""Each test's tier (unit, integration, slow) follows from what it uses: ``make test-fast`` runs the unit tier."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import tier

HERE = Path(__file__).parent


def item(name: str, *, keywords=(), fixtures=(), function=None):
    return SimpleNamespace(path=HERE / name, keywords=set(keywords), fixturenames=list(fixtures), function=function)


def plain():
    assert 1 + 1 == 2


def starts_a_process():
    import subprocess

    subprocess.run(["true"])


@settings(max_examples=1000)
@given(st.integers())
def long_property(n):
    assert n == n


def test_kernels_browsers_ray_notebooks_docs_and_the_wheel_are_the_slow_tier():
    assert tier(item("test_notebooks.py", function=plain)) == "slow"
    assert tier(item("test_wheel.py", function=plain)) == "slow"
    assert tier(SimpleNamespace(**{**vars(item("x.py", function=plain)), "path": HERE / "browser" / "t.py"})) == "slow"
    assert tier(item("test_report.py", keywords={"kernel"}, function=plain)) == "slow"
    assert tier(item("test_trace_columnar.py", fixtures={"local_ray"}, function=plain)) == "slow"


def test_servers_processes_and_long_property_runs_are_the_integration_tier_and_the_rest_unit():
    assert tier(item("test_anthropic_adapter.py", function=plain)) == "integration"
    assert tier(item("test_budget_numbers.py", function=starts_a_process)) == "integration"
    assert tier(item("test_budget_numbers.py", function=long_property)) == "integration"
    assert tier(item("test_budget_numbers.py", function=plain)) == "unit"

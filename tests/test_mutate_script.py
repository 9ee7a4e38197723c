"""``make mutate``'s mutator: each mutant changes one rule, and the docs describe it as the script does."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mutate():
    spec = importlib.util.spec_from_file_location("mutate_script", ROOT / "scripts" / "mutate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutate_script", module)  # (its dataclass looks its module up)
    spec.loader.exec_module(module)
    return module


SOURCE = '''
"""A docstring is never mutated."""
LIMIT: int = 3


def stop(steps: int, max_steps: int, spent: float) -> bool:
    return steps >= max_steps or spent > LIMIT and not False


def left(total: float, spent: float) -> float:
    return max(total - spent, 0.0)
'''


def test_each_mutant_changes_exactly_one_rule_and_still_compiles():
    mutate = _mutate()
    sites = mutate._sites(ast.parse(SOURCE), SOURCE.splitlines())
    changes = [s.what for s in sites]
    assert ">= -> >" in changes and "> -> >=" in changes and "or -> and" in changes and "max -> min" in changes
    assert "- -> +" in changes and "not dropped" in changes and "3 -> 4" in changes and "0.0 -> 1.0" in changes
    mutants = {mutate.mutant_source(SOURCE, k) for k in range(len(sites))}
    assert len(mutants) == len(sites)  # each one different
    original = ast.unparse(ast.parse(SOURCE))
    for m in mutants:
        compile(m, "m", "exec")
        assert m.strip() != original.strip()
        assert '"""A docstring is never mutated."""' in m and "LIMIT: int" in m


def test_the_benchmarks_page_says_which_tests_a_mutant_runs():
    text = " ".join((ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").split())
    words = {8: "eight", 10: "ten", 5: "five", 12: "twelve"}
    mutate = _mutate()
    assert f"at most {words[mutate.TESTS_PER_MUTANT]} other covering tests" in text
    assert all(f"`{Path(path).name}`" in text for path in mutate.MONEY_TESTS)  # the money files, each named
    assert all((ROOT / path).is_file() for path in mutate.MONEY_TESTS)


def test_a_mutant_runs_a_covering_test_with_all_its_parameters():
    """The coverage run records each test under its pytest node id (a Hypothesis property included)."""
    mutate = _mutate()
    assert mutate._node_id("tests/test_money_rules.py::test_x[below the tier]") == "tests/test_money_rules.py::test_x"
    assert mutate._node_id("tests/test_a.py::TestB::test_c") == "tests/test_a.py::TestB::test_c"
    assert mutate._node_id("") is None  # (lines run at import: no test)

"""The real per-step usage shipped in the package loads as traces with its provenance."""

from __future__ import annotations

import csv

import pytest

from agentlab.datasets import FILES, data_dir, real_usage


def test_real_usage_traces_hold_every_recorded_call_with_its_tokens():
    traces = real_usage()
    rows = []
    for name in FILES.values():
        with open(data_dir() / name, newline="") as f:
            rows += list(csv.DictReader(f))
    steps = traces.steps
    assert len(steps) == len(rows) == 14_314 + 899
    assert len(traces) == 179 + 26
    total_in = sum(int(float(r["input_tokens"])) for r in rows)
    assert int(steps["context_tokens"].sum()) == total_in
    assert int(steps["output_tokens"].sum()) == sum(int(float(r["output_tokens"])) for r in rows)


def test_real_usage_keeps_the_recorded_cost_beside_the_repriced_one():
    mini = real_usage("mini-swe-agent")
    t = mini.traces[0]
    rec = t.started["recorded"]
    assert rec["recorded_cost"] > 0 and rec["dataset"].endswith(".csv")
    assert t.summary["cost"] > 0  # repriced from the price table (deepseek-chat is known)
    assert "MIT" in (data_dir() / "README.md").read_text()


def test_real_usage_rejects_an_unknown_source():
    with pytest.raises(ValueError, match="claude-code"):
        real_usage("gpt")  # type: ignore[arg-type]

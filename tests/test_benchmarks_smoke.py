"""The benchmark suite runs end to end at tiny sizes (no wall-clock assertions: speed is benchmarked, not tested)."""

from __future__ import annotations

import asyncio
import json

import pytest

from benchmarks import __main__ as bench_main
from benchmarks import report, suite
from benchmarks.workload import bare_loop, lookup, script


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One quick run of the whole suite, shared by the tests below."""
    out = tmp_path_factory.mktemp("bench") / "latest.json"
    doc = out.parent / "benchmarks.md"
    doc.write_text(f"# Benchmarks\n\nprose before\n\n{report.START}\nold table\n{report.END}\n\nprose after\n")
    assert bench_main.main(["--quick", "--out", str(out), "--doc", str(doc)]) == 0
    return json.loads(out.read_text()), doc.read_text()


def test_every_row_is_produced_and_none_failed(quick_run):
    """Each benchmark in the issue has its row, and none of them crashed."""
    data, _ = quick_run
    rows = {r["key"]: r for r in data["rows"]}
    assert list(rows) == suite.ROW_KEYS
    failed = [r for r in rows.values() if r["shown"].startswith("failed")]
    assert not failed, failed


def test_measured_rows_carry_numbers_and_missing_ones_say_why(quick_run):
    """A measured row has a numeric value; a row that could not be measured says n/a and why."""
    data, _ = quick_run
    for r in data["rows"]:
        if r["status"] == "n/a":
            assert r["value"] is None and r["shown"].startswith("n/a"), r
        else:
            assert isinstance(r["value"], (int, float)) and r["value"] == r["value"], r
            assert r["status"] in ("met", "missed", "info")


def test_parallel_reads_overlap_and_the_write_runs_alone(quick_run):
    """W2 saw all three reads running at once, and no read overlapped the write."""
    rows = {r["key"]: r for r in quick_run[0]["rows"]}
    assert rows["w2.reads_concurrent"]["value"] == 3
    assert rows["w2.write_alone"]["value"] == 1.0


def test_results_name_the_machine_and_the_sizes(quick_run):
    """The JSON says what it ran on and at which sizes, so a figure is never read alone."""
    data, _ = quick_run
    assert {"cpu", "cores", "python", "agentlab commit"} <= set(data["machine"])
    assert data["config"]["quick"] is True and data["config"]["sizes"]["w1_steps"] == suite.QUICK.w1_steps


def test_the_doc_table_is_replaced_between_markers_and_the_prose_kept(quick_run):
    """--doc swaps only the table between the bench markers."""
    _, doc = quick_run
    assert "prose before" in doc and "prose after" in doc and "old table" not in doc
    assert "| W1 agentlab, tracing on, sync tool |" in doc and "Machine: cpu:" in doc


def test_bare_loop_runs_the_same_script_to_its_answer():
    """The bare loop that W1 compares against does the whole workload: every tool step, then the answer."""
    text, steps = bare_loop(script(7), {"lookup": lookup}, "task")
    assert (text, steps) == ("Looked up 7 keys.", 8)


def test_a_crashing_benchmark_leaves_failed_rows_not_a_hole():
    """One benchmark raising does not lose the others' rows or its own keys."""

    async def boom(_sizes):
        raise RuntimeError("disk full")

    real = suite.benches

    def patched():
        return [("boom", ["x.one", "x.two"], boom)] + [b for b in real() if b[0] == "W3"]

    suite.benches = patched
    try:
        rows = asyncio.run(suite.run_all(suite.QUICK, progress=lambda s: None))
    finally:
        suite.benches = real
    assert [r.key for r in rows] == ["x.one", "x.two", "w3.growth"]
    assert rows[0].shown == "failed: RuntimeError: disk full" and rows[0].status == "n/a"


def test_unknown_only_name_is_refused_by_name(capsys):
    """--only with a benchmark that does not exist fails with a message naming it."""
    with pytest.raises(SystemExit):
        bench_main.main(["--quick", "--only", "W9"])
    assert "W9" in capsys.readouterr().err

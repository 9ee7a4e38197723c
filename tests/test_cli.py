"""The `agentlab` command: demo, run, report, scenarios and a --help that reads well."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentlab import scenarios
from agentlab.cli import format_table, main

PNG = b"\x89PNG\r\n\x1a\n"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_help_names_every_command_and_shows_examples(capsys):
    """`agentlab --help` lists demo, run, report, scenarios and example command lines."""
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for word in (
        "demo",
        "run",
        "report",
        "scenarios",
        'agentlab run "Why was order 1042 late?" --tools shop',
        "agentlab notebooks",
    ):
        assert word in text


def test_no_command_prints_the_help_and_exits_2():
    """Plain `agentlab` explains itself, on stderr, with the usage-error status 2 (as argparse does)."""
    code, out, err = cli()
    assert code == 2 and out == "" and "usage: agentlab" in err and "commands" in err


def test_format_table_aligns_columns():
    """Headers, a rule, and rows padded to the widest cell; numbers right-aligned."""
    text = format_table(["name", "n"], [["a", 1], ["long name", 22]], right=(1,))
    assert text.splitlines() == ["name        n", "---------  --", "a           1", "long name  22"]


def test_demo_subset_prints_one_table_and_writes_traces_plots_and_summary(tmp_path):
    """A demo of three lessons: one table row per run, a trace per run, PNG plots, a CSV, and where to look."""
    runs, out_dir = tmp_path / "runs", tmp_path / "demo"
    code, out, err = cli(
        "demo", "--only", "growing-context", "parallel-lookups", "truncated", "--runs", str(runs), "--out", str(out_dir)
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["scenario", "reason", "steps", "cost", "seconds", "model", "calls", "run", "id"]
    rows = {line.split()[0]: line.split() for line in lines[2:7]}
    assert rows["growing-context"][1] == "budget" and rows["growing-context/after"][1] == "budget"
    assert rows["parallel-lookups"][1] == "done" and rows["truncated"][1] == "max_tokens"
    assert "5/5 runs ended as their lesson says" in out
    assert len(list(runs.glob("*.jsonl"))) == 5
    for name in ("cost-curve.png", "token-growth.png", "cost-guards.png", "tool-timeline.png"):
        assert (out_dir / name).read_bytes().startswith(PNG), name
        assert f"plot:     {out_dir / name}" in out
    with open(out_dir / "summary.csv") as f:
        summary = list(csv.DictReader(f))
    assert [r["scenario"] for r in summary][:2] == ["growing-context", "growing-context/after"]
    assert float(summary[1]["cost"]) > 0.10 >= float(summary[0]["cost"])
    assert "agentlab notebooks DIR" in out and ".venv" not in out
    assert "[1/5] growing-context" in err.replace("[ ", "[")


def test_demo_with_an_unknown_scenario_says_which_exist(tmp_path):
    """A typo in --only is exit status 2 and a list of real names, before anything runs."""
    code, _, err = cli("demo", "--only", "hang", "--runs", str(tmp_path))
    assert code == 2 and "no scenario named 'hang'" in err and "hanging-tool" in err
    assert not list(tmp_path.glob("*.jsonl"))


def test_installed_demo_command_runs_every_scenario(tmp_path):
    """The README's main command, as installed: every run ends as its lesson says, and the plots exist."""
    exe = Path(sys.executable).with_name("agentlab")
    env = {**os.environ, "AGENTLAB_RUNS": str(tmp_path / "runs")}
    done = subprocess.run([str(exe), "demo"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    total = len(scenarios.names()) + 2
    assert f"{total}/{total} runs ended as their lesson says" in done.stdout
    assert len(list((tmp_path / "runs").glob("*.jsonl"))) == total
    assert (tmp_path / "runs" / "demo" / "cost-curve.png").exists()


def test_run_scenario_shows_each_step_as_it_happens(tmp_path):
    """`agentlab run --scenario` prints every model call and tool result, then the answer; exit 0 when done."""
    code, out, err = cli("run", "--scenario", "not-found-hint", "--runs", str(tmp_path))
    assert code == 0
    assert "step 1: model → get_order(order_id=1402)" in err
    assert "get_order(order_id=1402) recoverable" in err and "step 3: model → get_order(order_id=1042)" in err
    assert out.startswith("done: done  ·  4 steps") and "meant order 1042" in out
    assert len(list(tmp_path.glob("not-found-hint-*.jsonl"))) == 1


def test_run_that_stops_exits_1_with_the_diagnosis(tmp_path):
    """A run stopped by its deadline says so with the numbers, and the exit status is 1."""
    code, out, _ = cli("run", "--scenario", "hanging-tool", "--runs", str(tmp_path))
    assert code == 1 and out.startswith("stopped: deadline") and "1.5s deadline" in out


def test_run_budget_flags_override_the_scenario(tmp_path):
    """--max-steps 3 stops ping-pong after three steps instead of eight."""
    code, out, err = cli("run", "--scenario", "ping-pong", "--max-steps", "3", "--runs", str(tmp_path))
    assert code == 1 and "step limit  ·  3 steps" in out
    assert err.count("step ") >= 3


def test_retries_are_shown_as_progress(tmp_path):
    """The flaky carrier's two 503s appear as retry lines; the tool line says it succeeded after 3 attempts."""
    _, _, err = cli("run", "--scenario", "flaky-upstream", "--runs", str(tmp_path))
    assert err.count("503 Service Unavailable") == 2 and "ok after 3 attempts" in err


def test_run_offline_with_the_shop_answers_from_the_database(tmp_path):
    """--model offline-shop: the shop assistant reads order 1042, says it is offline, and the shop DB is created."""
    code, out, err = cli(
        "run", "Why was order 1042 late?", "--tools", "shop", "--model", "offline-shop", "--runs", str(tmp_path)
    )
    assert code == 0
    assert "model: offline shop assistant (priced as claude-sonnet-4-5)" in err
    assert "5 days late" in out and "storm" in out
    assert (tmp_path / "shop.sqlite").exists()


def test_run_with_a_claude_model_and_no_key_is_an_error_that_says_how_to_go_offline(tmp_path, monkeypatch):
    """No silent stand-in: without ANTHROPIC_API_KEY a Claude model id exits 2 and names --model offline."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, out, err = cli("run", "Why was order 1042 late?", "--tools", "shop", "--runs", str(tmp_path))
    assert code == 2 and out == ""
    assert "model='claude-sonnet-4-5' is a Claude model, and no ANTHROPIC_API_KEY is set" in err
    assert "--model offline" in err
    assert not list(tmp_path.glob("*.jsonl"))  # nothing ran


def test_run_with_a_key_uses_claude_through_the_real_sdk(tmp_path, monkeypatch):
    """With ANTHROPIC_API_KEY set the same command drives the real SDK (here against a local Messages server)."""
    from agentlab.testing import MessagesServer, reply

    with MessagesServer(
        [reply(None, ("get_order", {"order_id": 1042})), reply("A storm held it at the hub.")]
    ) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-local")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        code, out, err = cli("run", "Why was order 1042 late?", "--tools", "shop", "--runs", str(tmp_path))
        requests = list(server.requests)
    assert code == 0, err
    assert "A storm held it at the hub." in out and "No ANTHROPIC_API_KEY" not in err
    assert [t["name"] for t in requests[0].body["tools"]][:3] == ["get_order", "search_orders", "get_customer"]
    result = requests[1].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "Avonmouth" in json.dumps(result)


def test_run_needs_a_task_or_a_scenario():
    """`agentlab run` alone is exit status 2 with what to type instead."""
    code, _, err = cli("run")
    assert code == 2 and "give a TASK, or --scenario NAME" in err


def test_bad_budget_flag_is_refused_naming_it(capsys):
    """--max-cost -1 is an argparse error that names the flag."""
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--scenario", "truncated", "--max-cost", "-1"])
    assert exit_.value.code == 2 and "--max-cost" in capsys.readouterr().err


def test_report_reads_a_run_and_exports_a_notebook(tmp_path):
    """`agentlab report RUN_ID` prints the run step by step; --notebook writes a valid notebook."""
    import nbformat

    cli("run", "--scenario", "permission-denied", "--runs", str(tmp_path))
    run_id = next(tmp_path.glob("permission-denied-*.jsonl")).stem
    code, out, _ = cli("report", run_id, "--runs", str(tmp_path))
    assert code == 0 and run_id in out and "fatal" in out and "refund_order" in out
    nb_path = tmp_path / "report.ipynb"
    code, out, _ = cli("report", run_id, "--runs", str(tmp_path), "--notebook", str(nb_path))
    assert code == 0 and str(nb_path) in out
    nbformat.validate(nbformat.read(nb_path, as_version=4))


def test_report_of_an_unknown_run_lists_recent_ones(tmp_path):
    """A wrong run id is exit status 2 with the most recent run ids to choose from."""
    cli("run", "--scenario", "truncated", "--runs", str(tmp_path))
    code, _, err = cli("report", "nope", "--runs", str(tmp_path))
    assert code == 2 and "no trace for run 'nope'" in err and "truncated-" in err


def test_report_finds_a_run_by_a_unique_prefix_like_load_run(tmp_path):
    """`agentlab report` accepts what load_run accepts: a unique prefix of a run id."""
    cli("run", "--scenario", "truncated", "--runs", str(tmp_path))
    run_id = next(tmp_path.glob("truncated-*.jsonl")).stem
    code, out, _ = cli("report", run_id[:12], "--runs", str(tmp_path))
    assert code == 0 and run_id in out


def test_scenarios_lists_every_lesson():
    """`agentlab scenarios -v` names each scenario, how it ends, and its lesson."""
    code, out, _ = cli("scenarios", "-v")
    assert code == 0
    for s in scenarios.all():
        assert s.name in out and s.lesson in out

"""Two runs diffed: aligned step by step, opened at the first divergence; forks part at the fork step, always."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import agentlab as al
from agentlab._safe_text import NO_MATH
from agentlab.cli import main
from agentlab.costs import diff_runs
from agentlab.datasets import claude_code_session
from agentlab.forking import fork
from agentlab.recorded import load_recorded
from agentlab.trace import TraceWriter, load_run

MINI = Path(__file__).parent / "fixtures" / "recorded" / "mini_swe_agent" / "github_issue.traj.json"


@al.tool(mode="read")
def lookup(n: int) -> str:
    """Look n up."""
    return f"record {n}: " + "details " * 200


def _scripted(tmp: Path, calls: list[int], run_id: str) -> al.trace.Trace:
    replies = [al.reply(None, ("lookup", {"n": n})) for n in calls] + [al.reply("Done.")]
    return al.run("Find it.", [lookup], model=al.ScriptedModel(replies), trace=tmp, run_id=run_id).trace


@pytest.mark.parametrize("source", ["session", "mini"])
@pytest.mark.parametrize("k", [0, 1, 4, 9])
def test_a_fork_and_its_parent_part_at_the_fork_step(source: str, k: int, tmp_path: Path) -> None:
    recorded = load_recorded(claude_code_session("multi-turn") if source == "session" else MINI)
    f = fork(
        recorded,
        at_step=k,
        model=al.ScriptedModel([al.reply("Stopping here.")]),
        max_cost=None,
        subscribers=[TraceWriter(tmp_path)],
        task=None if recorded.messages_at(k + 1)[-1]["role"] == "user" else "go",
    )
    asyncio.run(f.run())
    d = diff_runs(recorded, load_run(f.run_id, tmp_path))
    assert d.fork_at == k and d.first_divergence == k + 1
    shared = d.frame[d.frame.step <= k]
    assert shared.same.all() and (shared.b_cost == 0).all()  # inherited steps are the parent's, not billed again


def test_two_runs_that_part_at_step_three_open_there_with_deltas_and_both_requests(tmp_path: Path) -> None:
    a = _scripted(tmp_path, [1, 2, 3, 4], "run-a")
    b = _scripted(tmp_path, [1, 2, 7, 7, 7], "run-b")
    d = diff_runs(a, b)
    assert d.first_divergence == 3
    row = d.frame.set_index("step").loc[3]
    assert row.a_does == 'lookup({"n":3})' and row.b_does == 'lookup({"n":7})'
    assert d.frame.a_cost.sum() == pytest.approx(a.steps.cost.sum())
    assert d.frame.b_cost.sum() == pytest.approx(b.steps.cost.sum())
    assert d.frame.cost_delta.sum() == pytest.approx(b.steps.cost.sum() - a.steps.cost.sum())
    assert set(d.requests) == {3, 4, 5}
    page = d.html()
    assert "<script" not in page and "$" not in page  # no script; no dollar sign MathJax could read as TeX
    assert re.search(r"<details open><summary>step 3:", page)
    assert f'<span class="{NO_MATH}">&#36;' in page  # the one money rule: agentlab._safe_text.usd_html
    ax = d.plot()
    assert [ln.get_label() for ln in ax.get_lines()][:2] == ["A run-a", "B run-b"]
    assert any(t.get_text() == "first divergence: step 3" for t in ax.texts)


def test_the_same_run_twice_never_diverges(tmp_path: Path) -> None:
    a = _scripted(tmp_path, [1, 2], "same-a")
    b = _scripted(tmp_path, [1, 2], "same-b")
    d = diff_runs(a, b)
    assert d.first_divergence is None and d.frame.same.all() and "the same throughout" in d.text()


def test_agentlab_diff_prints_the_divergence_and_writes_the_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _scripted(tmp_path, [1, 2, 3], "cli-a")
    _scripted(tmp_path, [1, 5], "cli-b")
    page = tmp_path / "diff.html"
    assert main(["diff", "cli-a", "cli-b", "--runs", str(tmp_path), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "first divergence at step 2" in out and page.read_text().startswith("<!doctype html>")
    assert main(["diff", "cli-a", "nope", "--runs", str(tmp_path)]) == 2

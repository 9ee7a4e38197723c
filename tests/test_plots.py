"""The plot helpers draw exactly the data they are given, label it, and leave matplotlib's global state alone."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

import agentlab as al
from agentlab import analysis as an
from agentlab import plots, reply

from .analysis_runs import SCRIPTS, load_traces, quadratic_steps, record

DOCS_IMG = Path(__file__).resolve().parents[1] / "docs" / "img"


def save(ax, tmp_path: Path, name: str, *, docs: bool = False) -> Path:
    """Save the figure as a PNG under tmp_path; with AGENTLAB_UPDATE_DOCS_IMG=1 the key ones also refresh docs/img.

    Tests never write into the checkout by default: a CI run leaves the tree clean.
    """
    out = tmp_path / f"{name}.png"
    ax.figure.savefig(out, dpi=100)
    assert out.stat().st_size > 5_000  # a real picture, not an empty canvas
    if docs and os.environ.get("AGENTLAB_UPDATE_DOCS_IMG") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, DOCS_IMG / out.name)
    return out


@pytest.fixture
def traces(tmp_path):
    """Three recorded offline runs of different lengths."""
    for name in ("short", "medium", "long"):
        record(tmp_path / "runs", SCRIPTS[name], run_id=name)
    return load_traces(tmp_path / "runs")


def bars(ax):
    """(x, bottom, height) of every bar of the Axes, in drawing order."""
    return [(round(p.get_x() + p.get_width() / 2, 6), p.get_y(), p.get_height()) for c in ax.containers for p in c]


def line(ax, label_start: str):
    found = [ln for ln in ax.get_lines() if str(ln.get_label()).startswith(label_start)]
    assert len(found) == 1, [ln.get_label() for ln in ax.get_lines()]
    return found[0]


# ------------------------------------------------------------------ tokens
def test_token_growth_stacks_each_steps_tokens(traces, tmp_path):
    """Each step's bar stacks its input and output tokens, so the bars rise with the context."""
    ax = plots.token_growth(traces.steps, "long")
    rows = an.step_costs(traces.steps)
    rows = rows[rows["run_id"] == "long"]
    inp, out = ax.containers
    assert [p.get_height() for p in inp] == rows["input_tokens"].tolist()
    assert [p.get_height() for p in out] == rows["output_tokens"].tolist()
    assert [p.get_y() for p in out] == rows["input_tokens"].tolist()  # stacked on the input
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["input (uncached)", "output"]
    assert ax.get_ylabel() == "tokens per call" and ax.get_xlabel() == "step"
    save(ax, tmp_path, "token_growth", docs=True)


def test_token_growth_of_a_cached_projection_shows_cache_reads(tmp_path):
    """With caching the bars are cache reads (the old history) plus cache writes (what is new)."""
    p = an.CostProjection.growing(caching=True)
    ax = plots.token_growth(p.frame(8))
    read, write, out = ax.containers
    assert [b.get_height() for b in read] == [0] + [p.context(k) for k in range(1, 8)]
    assert [b.get_height() for b in write] == [2000] + [p.added_per_step] * 7
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cache read", "cache write", "output"]
    save(ax, tmp_path, "token_growth_cached", docs=True)


# -------------------------------------------------------------------- cost
def test_cost_curve_plots_the_recorded_points_and_the_fitted_quadratic(tmp_path):
    """The recorded points are the cumulative costs; the dashed fit passes through the known quadratic."""
    steps = quadratic_steps(0.004, 0.002, 0.001, 8)
    ax = plots.cost_curve(steps, max_cost=0.5, max_steps=16, forecast_to=16)
    pts = line(ax, "recorded")
    assert list(pts.get_xdata()) == list(range(1, 9))
    assert list(pts.get_ydata()) == pytest.approx(steps["cumulative_cost"].tolist())
    fit = line(ax, "fit:")
    x, y = fit.get_xdata(), fit.get_ydata()
    assert x[0] == 1 and x[-1] == 16
    assert list(y) == pytest.approx([0.004 * v * v + 0.002 * v + 0.001 for v in x], rel=1e-6)
    assert fit.get_label().startswith("fit: 0.004·n² + 0.002·n + 0.001")
    assert list(line(ax, "max_cost $0.50").get_ydata()) == [0.5, 0.5]
    assert list(line(ax, "max_steps 16").get_xdata()) == [16, 16]
    hit = line(ax, "budget passed at step")
    assert hit.get_label() == "budget passed at step 11"  # 0.004·121 + 0.022 + 0.001 > 0.5 > cost at 10
    assert ax.get_ylabel() == "cumulative cost (USD)"


def test_cost_curve_of_a_real_run_against_a_step_limit(traces, tmp_path):
    """A recorded growing run, forecast to a 20-step limit: the budget line is crossed long before it."""
    ax = plots.cost_curve(traces.steps, "long", max_cost=0.5, max_steps=20)
    hit = int(line(ax, "budget passed at step").get_label().rsplit(" ", 1)[1])
    assert hit < 20
    save(ax, tmp_path, "cost_curve", docs=True)


def test_cost_curve_of_a_single_step_run_says_why_there_is_no_fit(tmp_path):
    """One step cannot be fitted: the point is still drawn, and the title says why there is no curve."""
    steps = quadratic_steps(0.01, 0, 0, 1)
    ax = plots.cost_curve(steps)
    assert len(ax.get_lines()) == 1
    assert ax.get_title(loc="left") == "Cumulative cost — run q: no quadratic fit"
    assert [t.get_text().replace("\n", " ") for t in ax.texts] == [
        "no fit: fitting a quadratic needs at least 3 steps; run 'q' has 1"
    ]
    save(ax, tmp_path, "cost_curve_single")


def test_caching_comparison_draws_both_totals_of_the_articles_run(tmp_path):
    """The article's run (2,000 → 25,000 tokens in 8 steps) with and without caching: both curves, both totals."""
    plain, cached = an.CostProjection.growing(), an.CostProjection.growing(caching=True)
    ax = plots.caching_comparison(plain.frame(8), "claude-sonnet-4-5")
    no = line(ax, "no caching")
    yes = line(ax, "with caching")
    assert list(no.get_ydata()) == pytest.approx([plain.total_cost(n) for n in range(1, 9)])
    assert list(yes.get_ydata()) == pytest.approx([cached.total_cost(n) for n in range(1, 9)])
    assert no.get_label() == f"no caching: ${plain.total_cost(8):.3f}"
    assert f"{1 - cached.total_cost(8) / plain.total_cost(8):.0%} saved" in ax.get_title(loc="left")
    save(ax, tmp_path, "caching", docs=True)


def test_compare_runs_draws_one_cumulative_line_per_run(traces, tmp_path):
    """Each run gets its own line of cumulative cost, labelled with its steps and total."""
    ax = plots.compare_runs(traces.steps, labels={"long": "nine reads"})
    per = an.step_costs(traces.steps)
    for rid in ("short", "medium", "long"):
        rows = per[per["run_id"] == rid]
        ln = line(ax, "nine reads" if rid == "long" else rid)
        assert list(ln.get_ydata()) == pytest.approx(rows["cumulative_cost"].tolist())
        assert ln.get_label().endswith(f"({len(rows)} steps, ${rows['cost'].sum():.3f})")
    with pytest.raises(ValueError, match="run_ids not in steps: 'nope'"):
        plots.compare_runs(traces.steps, ["nope"])
    save(ax, tmp_path, "compare_runs", docs=True)


# -------------------------------------------------------------------- time
def hand_calls() -> pd.DataFrame:
    rows = [
        ("r", 1, 0, "lookup", "read", 0.0, 0.4),
        ("r", 1, 1, "lookup", "read", 0.0, 0.4),
        ("r", 2, 0, "save", "write", 1.0, 1.5),
        ("r", 2, 1, "save", "write", 1.5, 2.0),
    ]
    return pd.DataFrame(rows, columns=["run_id", "step", "index", "tool", "mode", "start", "end"])


def test_tool_timeline_bars_span_each_call_and_tell_reads_from_writes(tmp_path):
    """Each bar runs from a call's start to its end; reads are blue, writes orange, in request order."""
    ax = plots.tool_timeline(hand_calls())
    got = [(p.get_x(), p.get_x() + p.get_width(), to_hex(p.get_facecolor())) for p in ax.containers[0]]
    read, write = plots.MODE_COLORS["read"], plots.MODE_COLORS["write"]
    assert got == [(0.0, 0.4, read), (0.0, 0.4, read), (1.0, 1.5, write), (1.5, 2.0, write)]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "step 1 · lookup",
        "step 1 · lookup",
        "step 2 · save",
        "step 2 · save",
    ]
    assert ax.get_xlabel() == "working time since the run started (s)"


def test_tool_timeline_of_a_real_run_shows_parallel_reads_overlapping_and_writes_alone(tmp_path):
    """In a real run, three reads requested together overlap in time; two writes run one after the other.

    Time is the run's injected clock: each tool and model call "takes" its seconds on it, so the spans
    are exact, and three reads that ran one after another would not overlap."""
    clock = al.FakeClock()
    started, ending = asyncio.Barrier(3), asyncio.Barrier(3)  # the three reads are all running at once

    @al.tool(mode="read")
    async def lookup(key: str) -> str:
        """Takes 0.2 s, side by side with the other two."""
        await asyncio.wait_for(started.wait(), 10)
        if key == "a":
            clock.advance(0.2)  # the 0.2 s the three spend together, counted once
        await asyncio.wait_for(ending.wait(), 10)
        return key

    @al.tool(mode="write")
    async def store(key: str) -> str:
        """Takes 0.15 s."""
        await clock.sleep(0.15)
        return key

    reads = reply(None, *[("lookup", {"key": k}) for k in "abc"])
    writes = reply(None, ("store", {"key": "a"}), ("store", {"key": "b"}))
    script = [reads, writes, reply("done")]

    async def thinking_model(messages, tools):
        await clock.sleep(0.05)  # a model call that takes visible time
        return script[sum(m["role"] == "assistant" for m in messages)]

    al.run(
        "q",
        [lookup, store],
        model=al.FunctionModel(thinking_model),
        trace=tmp_path / "runs",
        max_cost=None,
        run_id="timeline",
        clock=clock,
    )
    tr = load_traces(tmp_path / "runs")
    ax = plots.tool_timeline(tr.calls, steps=tr.steps)
    spans = [(p.get_x(), p.get_x() + p.get_width()) for p in ax.containers[0]]
    assert len(spans) == 5
    r = spans[:3]
    assert max(s for s, _ in r) < min(e for _, e in r)  # all three reads were running at one moment
    (s1, e1), (s2, e2) = spans[3:]
    assert e1 <= s2  # the second write started after the first ended
    model = ax.containers[1]
    assert len(model) == 3  # one grey bar per model call, before its turn's tools
    assert all(p.get_width() >= 0.03 for p in model)
    assert model[0].get_x() + model[0].get_width() <= min(s for s, _ in r) + 1e-6
    assert ax.get_yticklabels()[0].get_text() == "model calls"
    save(ax, tmp_path, "tool_timeline", docs=True)


# ------------------------------------------------------------------ what-if
def test_whatif_grid_colours_each_cell_by_how_the_run_would_have_ended(traces, tmp_path):
    """Each cell of the grid is the run's hypothetical ending under that budget, with the step it happened at."""
    grid = an.budget_whatif(traces, max_steps=[None, 4], max_cost=[None, 0.02])
    ax = plots.whatif_grid(grid)
    image = ax.get_images()[0].get_array()
    runs = [t.get_text() for t in ax.get_yticklabels()]
    budgets = [t.get_text() for t in ax.get_xticklabels()]
    assert runs == ["long", "medium", "short"]
    assert budgets == ["≤4 steps\n$0.02", "≤4 steps", "$0.02", "no limit"]
    texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
    names = list(plots.REASON_COLORS)
    column = {(4.0, 0.02): "≤4 steps\n$0.02", (4.0, None): "≤4 steps", (None, 0.02): "$0.02", (None, None): "no limit"}
    for row in grid.itertuples():
        i = runs.index(row.run_id)
        limits = tuple(None if v != v else float(v) for v in (row.max_steps, row.max_cost))  # NaN: no limit
        j = budgets.index(column[limits])
        expect = "done" if row.outcome == "done" else row.reason
        assert names[image[i][j]] == expect
        assert texts[(i, j)] == f"{expect} @{row.steps}"
    assert texts[(0, 3)] == "done @9" and texts[(0, 1)] == "step limit @4"
    save(ax, tmp_path, "whatif_grid", docs=True)


def test_whatif_rows_of_one_sessions_segments_stay_distinct(traces):
    """Long ids that differ only at the end (one session's segments) are cut in the middle, not to one label."""
    session = "258c7280-ae70-4798-800f-63464d01a85d"
    names = {"long": f"{session}-seg0", "medium": f"{session}-seg1", "short": "short"}
    grid = an.budget_whatif(traces, max_steps=[None, 4])
    grid["run_id"] = grid["run_id"].map(names)
    labels = [t.get_text() for t in plots.whatif_grid(grid).get_yticklabels()]
    assert len(set(labels)) == 3 and all(len(x) <= 18 for x in labels), labels
    assert [x[-4:] for x in labels[:2]] == ["seg0", "seg1"] and labels[0].startswith("258c7280")


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "draw",
    [
        lambda s, c: plots.token_growth(s),
        lambda s, c: plots.cost_curve(s),
        lambda s, c: plots.compare_runs(s),
        lambda s, c: plots.caching_comparison(s, "claude-sonnet-4-5"),
        lambda s, c: plots.tool_timeline(c),
        lambda s, c: plots.whatif_grid(
            an.budget_whatif({"runs": pd.DataFrame(columns=[*an.RUN_COLUMNS, "model", "seconds"]), "steps": s})
        ),
    ],
)
def test_empty_frames_give_an_empty_but_labelled_plot(draw, tmp_path):
    """With no rows every plot still has its title and axis labels, and says there is nothing to show."""
    steps = quadratic_steps(1, 1, 1, 3).iloc[0:0].assign(latency=0.0, t=0.0)
    ax = draw(steps, hand_calls().iloc[0:0])
    assert ax.get_title(loc="left") and ax.get_xlabel()
    assert any(t.get_text().startswith("no ") for t in ax.texts)
    save(ax, tmp_path, "empty")


@pytest.mark.parametrize(
    "draw",
    [
        lambda s, c: plots.token_growth(s),
        lambda s, c: plots.cost_curve(s),
        lambda s, c: plots.compare_runs(s),
        lambda s, c: plots.caching_comparison(s, "claude-sonnet-4-5"),
        lambda s, c: plots.tool_timeline(c),
    ],
)
def test_a_plot_as_the_last_expression_of_a_cell_shows_itself(draw, tmp_path):
    """IPython's display formatter renders what a helper returns as a PNG (not just ``<Axes: ...>``),
    and the value is still a matplotlib Axes to save and compose."""
    from IPython.core.formatters import DisplayFormatter
    from matplotlib.axes import Axes

    steps = quadratic_steps(0.01, 0.001, 0.0, 4).assign(latency=0.5, t=0.0)
    ax = draw(steps, hand_calls())
    data, _ = DisplayFormatter().format(ax)
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n" and len(data["image/png"]) > 5_000
    assert isinstance(ax, Axes) and data["text/plain"].startswith("<")
    save(ax, tmp_path, "shown")


def test_missing_columns_are_named_not_a_pandas_traceback():
    """A frame without the spec's columns raises a ValueError naming the frame and the columns."""
    with pytest.raises(ValueError, match=r"steps is missing column\(s\) 'cost'"):
        plots.cost_curve(quadratic_steps(1, 1, 1, 3).drop(columns="cost"))
    with pytest.raises(ValueError, match=r"calls is missing column\(s\) 'start', 'end'"):
        plots.tool_timeline(hand_calls().drop(columns=["start", "end"]))
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes or None"):
        plots.token_growth(quadratic_steps(1, 1, 1, 3), ax="left")


def test_plots_are_reachable_from_the_package():
    """``agentlab.plots`` and ``agentlab.analysis`` work without importing them separately."""
    assert al.plots is plots and al.analysis is an


def test_plots_draw_on_the_axes_they_are_given():
    """Given an Axes, a helper draws there and returns it, so plots can share one figure."""
    fig = Figure(figsize=(10, 4))
    left, right = fig.subplots(1, 2)
    steps = quadratic_steps(0.01, 0.0, 0.0, 4)
    assert plots.token_growth(steps, ax=left) is left
    assert plots.cost_curve(steps, ax=right) is right
    assert len(fig.axes) == 2


def test_importing_and_plotting_leave_global_matplotlib_state_alone():
    """Importing agentlab loads no matplotlib; drawing every plot never imports pyplot nor changes rcParams."""
    code = """
import sys
import agentlab
from agentlab import analysis
assert 'matplotlib' not in sys.modules and 'pandas' not in sys.modules, 'heavy import at import time'
import matplotlib
before = matplotlib.rcParams.copy()  # .copy(): reading 'backend' through [] would import pyplot
from agentlab import plots
assert 'matplotlib.pyplot' not in sys.modules
p = analysis.CostProjection.growing()
f = p.frame(8)
for ax in (plots.token_growth(f), plots.cost_curve(f, max_cost=0.5), plots.caching_comparison(f, 'claude-sonnet-4-5'),
           plots.compare_runs(f)):
    ax.figure.canvas.draw() if hasattr(ax.figure.canvas, 'draw') else None
assert 'matplotlib.pyplot' not in sys.modules, 'pyplot was imported'
after = matplotlib.rcParams.copy()
assert 'matplotlib.pyplot' not in sys.modules
assert dict.__eq__(after, before), 'rcParams changed'
print('ok')
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


def test_cost_curve_does_not_call_three_steps_quadratic(tmp_path):
    """Any three points lie on a parabola: the title says so instead of claiming the run's cost is quadratic."""
    few = plots.cost_curve(quadratic_steps(0.01, 0.003, 0.0, 3))
    assert few.get_title(loc="left") == (
        "Cumulative cost — run q: a parabola through 3 points (too few steps to call it quadratic)"
    )
    many = plots.cost_curve(quadratic_steps(0.01, 0.003, 0.0, plots.STEPS_TO_CALL_QUADRATIC))
    assert many.get_title(loc="left") == "Cumulative cost — run q: quadratic in the number of steps"

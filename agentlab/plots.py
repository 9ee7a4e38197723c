"""Plots of cost and time: ``f(frame, ..., ax=None) -> Axes``.

Each helper draws the trace DataFrames (docs/traces.md) or the frames of
:mod:`agentlab.analysis` onto ``ax``, or onto a new figure when ``ax`` is
None, and returns the Axes. None of them calls ``plt.show()`` or touches
pyplot or ``rcParams``: a new figure is a plain ``matplotlib.figure.Figure``
whose Axes show themselves (as the last expression of a notebook cell the
plot displays; see :mod:`agentlab._shown`), a script saves it
(``ax.figure.savefig``), and no global state leaks between plots. matplotlib loads
when the first plot is drawn, not when agentlab is imported.

Bad input (missing columns) fails with the frame and the columns named;
an empty frame gives an empty plot that is still titled and labelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import analysis as an
from ._model_label import started_label
from ._shorten import shorten_middle
from .pricing import Prices

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

FIGSIZE = (8.0, 4.5)
"""Inches: 800 px wide at the default 100 dpi, readable at notebook width."""

MODE_COLORS: dict[str | None, str] = {"read": "#1f77b4", "write": "#ff7f0e", None: "#7f7f7f"}
TOKEN_COLORS = {
    "input_tokens": "#4c72b0",
    "cache_read_tokens": "#8fb8de",
    "cache_write_tokens": "#dd8452",
    "output_tokens": "#55a868",
}
TOKEN_LABELS = {
    "input_tokens": "input (uncached)",
    "cache_read_tokens": "cache read",
    "cache_write_tokens": "cache write",
    "output_tokens": "output",
}
REASON_COLORS = {
    "done": "#55a868",
    "budget": "#c44e52",
    "step limit": "#dd8452",
    "deadline": "#8172b3",
    "max_tokens": "#937860",
    "unknown": "#d0d0d0",
    "other": "#8c8c8c",
}


# ------------------------------------------------------------------ plumbing
def _axes(ax: Axes | None, figsize: tuple[float, float] = FIGSIZE) -> Axes:
    """``ax``, or the Axes of a new standalone Figure (never pyplot's current figure)."""
    if ax is not None:
        if not hasattr(ax, "figure") or not hasattr(ax, "plot"):
            raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
        return ax
    from matplotlib.figure import Figure

    from ._shown import ShownAxes

    return Figure(figsize=figsize, layout="constrained").add_subplot(axes_class=ShownAxes)


def _label(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, loc="left")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def _empty(ax: Axes, message: str) -> Axes:
    """An empty plot that still says what it would show and why it is empty."""
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", color="#666666", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def _thousands(ax: Axes, axis: str = "y") -> None:
    from matplotlib.ticker import FuncFormatter

    fmt = FuncFormatter(lambda v, _: f"{v:,.0f}")
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(fmt)


def _cost_axes_done(ax: Axes) -> Axes:
    """The finishing touches every cost-over-steps plot shares."""
    _dollars(ax)
    _integer_steps(ax)
    ax.legend(loc="upper left", frameon=False)
    ax.grid(alpha=0.3)
    return ax


def _dollars(ax: Axes) -> None:
    """Dollar ticks with as many decimals as the axis range needs (call after drawing)."""
    from matplotlib.ticker import FuncFormatter

    top = abs(ax.get_ylim()[1])
    places = 2 if top >= 0.2 else 3 if top >= 0.02 else 4
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.{places}f}"))


def _poly(a: float, b: float, c: float) -> str:
    """``a·n² + b·n + c`` with signs written once (no ``+ -``)."""

    def term(v: float, suffix: str) -> str:
        return f" {'-' if v < 0 else '+'} {abs(v):.2g}{suffix}"

    return f"{a:.2g}·n²{term(b, '·n')}{term(c, '')}"


def _integer_steps(ax: Axes) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _short(run_id: Any, n: int = 24) -> str:
    """A run id in ``n`` characters, cut in the middle so one session's segments stay apart."""
    return shorten_middle(run_id, n)


# ------------------------------------------------------------------- tokens
def token_growth(steps: pd.DataFrame, run_id: str | None = None, *, ax: Axes | None = None) -> Axes:
    """Tokens of each step, stacked: uncached input, cache read, cache write, output.

    The bars' height is what each call read and wrote; their rise from step
    to step is the re-sent history that makes a run's cost quadratic.
    """
    ax = _axes(ax)
    _label(ax, "Tokens per step", "step", "tokens per call")
    rows = an.one_run(an.step_costs(steps), run_id)
    if rows.empty:
        return _empty(ax, "no steps to plot")
    bottom = [0] * len(rows)
    for col in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"):
        values = rows[col].tolist()
        if col != "output_tokens" and not any(values):
            continue  # no legend entries for kinds of token the run never had
        ax.bar(rows["step"], values, bottom=bottom, color=TOKEN_COLORS[col], label=TOKEN_LABELS[col], width=0.7)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_title(
        f"Tokens per step — run {_short(rows['run_id'].iloc[0])}: "
        f"{rows['context_tokens'].iloc[0]:,} → {rows['context_tokens'].iloc[-1]:,} context tokens",
        loc="left",
    )
    _thousands(ax)
    _integer_steps(ax)
    ax.legend(loc="upper left", frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return ax


# --------------------------------------------------------------------- cost
def _recorded_label(steps: pd.DataFrame, run_id: str) -> str:
    """ "recorded", or how many of the points are estimates (imported records without usage)."""
    if "estimated" not in steps.columns:
        return "recorded"
    n = int(steps.loc[steps["run_id"] == run_id, "estimated"].sum())
    total = int((steps["run_id"] == run_id).sum())
    if not n:
        return "recorded"
    return "estimated (no usage recorded)" if n == total else f"recorded ({n} of {total} steps estimated)"


STEPS_TO_CALL_QUADRATIC = 6
"""A quadratic has three coefficients, so it passes through any three points: only with three more steps
than that does a close fit say something about the run, and the plot's title say "quadratic"."""


def cost_curve(
    steps: pd.DataFrame,
    run_id: str | None = None,
    *,
    max_cost: float | None = None,
    max_steps: int | None = None,
    forecast_to: int | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Cumulative cost per step, the fitted quadratic (extended to ``forecast_to``), and the budget.

    ``max_cost`` draws the cost budget as a horizontal line and ``max_steps``
    the step limit as a vertical one: where the parabola crosses the budget
    line well before the step limit, the step limit alone would not have
    bounded the cost.
    """
    import numpy as np

    ax = _axes(ax)
    _label(ax, "Cumulative cost", "step", "cumulative cost (USD)")
    rows = an.one_run(an.step_costs(steps), run_id)
    if rows.empty:
        return _empty(ax, "no steps to plot")
    rid = rows["run_id"].iloc[0]
    ax.plot(rows["step"], rows["cumulative_cost"], "o", color="#4c72b0", label=_recorded_label(steps, rid), zorder=3)
    last = int(rows["step"].max())
    end = max(last, forecast_to or 0, max_steps or 0)
    try:
        fit = an.fit_cost_curve(rows)
    except ValueError as exc:
        import textwrap

        fit = None
        ax.set_title(f"Cumulative cost — run {_short(rid)}: no quadratic fit", loc="left")
        ax.text(
            0.5,
            0.55,
            textwrap.fill(f"no fit: {exc}", 70),
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#666666",
        )
    if fit is not None:
        x = np.linspace(1, end, max(50, 10 * end))
        ax.plot(
            x,
            fit.predict(x),
            "--",
            color="#c44e52",
            label=f"fit: {_poly(fit.a, fit.b, fit.c)}  (R² {fit.r_squared:.3f})",
        )
        n = len(rows)
        shape = (
            "quadratic in the number of steps"
            if n >= STEPS_TO_CALL_QUADRATIC
            else f"a parabola through {n} points (too few steps to call it quadratic)"
        )
        ax.set_title(f"Cumulative cost — run {_short(rid)}: {shape}", loc="left")
    if max_cost is not None:
        ax.axhline(max_cost, color="#333333", lw=1.2, label=f"max_cost ${max_cost:.2f}")
        if fit is not None and (hit := fit.steps_until(max_cost)) is not None and hit <= end:
            ax.plot([hit], [fit.predict(hit)], "X", color="#c44e52", ms=9, label=f"budget passed at step {hit}")
    if max_steps is not None:
        ax.axvline(max_steps, color="#333333", ls=":", lw=1.2, label=f"max_steps {max_steps}")
    ax.set_xlim(0.5, end + 0.5)
    ax.set_ylim(bottom=0)
    return _cost_axes_done(ax)


def caching_comparison(
    steps: pd.DataFrame, prices: Prices | str, run_id: str | None = None, *, ax: Axes | None = None
) -> Axes:
    """One run's cumulative cost at ``prices`` without prompt caching and with an ideal cache.

    Works on a recorded run or on ``CostProjection(...).frame(n)``. The
    labels give each total and the saving.
    """
    ax = _axes(ax)
    _label(ax, "Prompt caching", "step", "cumulative cost (USD)")
    rows = an.one_run(an.step_costs(steps), run_id)
    if rows.empty:
        return _empty(ax, "no steps to plot")
    plain = an.reprice(rows, prices, caching=False)
    cached = an.reprice(rows, prices, caching=True)
    p_total, c_total = plain["cost"].sum(), cached["cost"].sum()
    ax.plot(plain["step"], plain["cumulative_cost"], "o-", color="#c44e52", label=f"no caching: ${p_total:.3f}")
    ax.plot(cached["step"], cached["cumulative_cost"], "s-", color="#4c72b0", label=f"with caching: ${c_total:.3f}")
    saving = f": {1 - c_total / p_total:.0%} saved" if p_total > 0 else ""
    name = f"{prices}'s prices" if isinstance(prices, str) else "the given prices"  # repriced, whoever ran it
    ax.set_title(f"Prompt caching — run {_short(rows['run_id'].iloc[0])}{saving}\nboth curves at {name}", loc="left")
    ax.set_ylim(bottom=0)
    return _cost_axes_done(ax)


def compare_runs(
    steps: pd.DataFrame,
    run_ids: Sequence[str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Cumulative cost per step of several runs on one chart (``labels``: run id → legend text)."""
    ax = _axes(ax)
    _label(ax, "Runs compared", "step", "cumulative cost (USD)")
    per = an.step_costs(steps)
    ids = list(dict.fromkeys(per["run_id"])) if run_ids is None else list(run_ids)
    unknown = [r for r in ids if r not in set(per["run_id"])]
    if unknown:
        raise ValueError(f"run_ids not in steps: {', '.join(map(repr, unknown))}")
    if not ids:
        return _empty(ax, "no runs to compare")
    for rid in ids:
        rows = per[per["run_id"] == rid]
        text = (labels or {}).get(rid, _short(rid, 24))
        ax.plot(
            rows["step"],
            rows["cumulative_cost"],
            "o-",
            ms=4,
            label=f"{text} ({len(rows)} steps, ${rows['cost'].sum():.3f})",
        )
    ax.set_title(f"Runs compared: cumulative cost of {len(ids)} run{'s' if len(ids) != 1 else ''}", loc="left")
    ax.set_ylim(bottom=0)
    _dollars(ax)
    _integer_steps(ax)
    ax.legend(loc="upper left", frameon=False, fontsize="small")
    ax.grid(alpha=0.3)
    return ax


# --------------------------------------------------------------------- time
VISIBLE_FRACTION = 0.005
"""A tool timeline bar narrower than this share of the axis is drawn as a tick mark as well."""


def tool_timeline(
    calls: pd.DataFrame, run_id: str | None = None, *, steps: pd.DataFrame | None = None, ax: Axes | None = None
) -> Axes:
    """One bar per tool call from its start to its end, coloured by read or write, grouped by turn.

    Parallel reads overlap in time; writes stand alone. With ``steps``, the
    model calls are drawn too (grey, top row), so the whole run's working
    time is on one axis.
    """
    from matplotlib.patches import Patch

    ax = _axes(ax)
    _label(ax, "Tool calls over time", "working time since the run started (s)", "")
    an._need(calls, "calls", an.CALL_COLUMNS)
    rows = an.one_run(calls, run_id, name="calls")
    if rows.empty:
        return _empty(ax, "no tool calls to plot")
    sort = ["step", "index"] if "index" in rows.columns else ["step", "start"]
    rows = rows.sort_values(sort).reset_index(drop=True)
    modes = rows["mode"] if "mode" in rows.columns else [None] * len(rows)
    ys = list(range(len(rows), 0, -1))
    widths = (rows["end"].astype(float) - rows["start"].astype(float)).tolist()
    colors = [MODE_COLORS[m if m in ("read", "write") else None] for m in modes]
    ax.barh(ys, widths, left=rows["start"].astype(float), color=colors, height=0.6, edgecolor="white")
    span = max(
        [float(rows["end"].astype(float).max()), 1e-9]
        + ([float(steps["t"].astype(float).max())] if steps is not None and "t" in steps.columns else [])
    )
    visible = span * VISIBLE_FRACTION
    instant = [
        (x, y, c) for x, y, w, c in zip(rows["start"].astype(float), ys, widths, colors, strict=True) if w < visible
    ]
    if instant:  # a nudge (no time) or a 1 ms read would be an invisible bar: mark where it happened
        ax.scatter(
            [x for x, _, _ in instant],
            [y for _, y, _ in instant],
            marker="|",
            s=150,
            c=[c for _, _, c in instant],
            zorder=3,
        )
    labels = [f"step {s} · {t}" for s, t in zip(rows["step"], rows["tool"], strict=True)]
    ticks, ticklabels = list(ys), labels
    # a light band per turn, so the calls of one step read as a group
    for i, (_step, grp) in enumerate(rows.groupby("step", sort=True)):
        if i % 2 == 0:
            top, bottom = ys[grp.index.min()] + 0.5, ys[grp.index.max()] - 0.5
            ax.axhspan(bottom, top, color="#000000", alpha=0.04, lw=0)
    handles = [
        Patch(color=MODE_COLORS["read"], label="read (run together)"),
        Patch(color=MODE_COLORS["write"], label="write (runs alone)"),
    ]
    if steps is not None:
        model = an.one_run(steps, rows["run_id"].iloc[0])
        an._need(model, "steps", ("t", "latency"))
        y_model = len(rows) + 1
        ax.barh(
            [y_model] * len(model),
            model["latency"].astype(float),
            left=(model["t"] - model["latency"]).astype(float),
            color="#b0b0b0",
            height=0.6,
            edgecolor="#808080",
            lw=0.5,
        )
        short = model[model["latency"].astype(float) < visible]
        if len(short):  # an offline model answers in microseconds: a marker, not an invisible bar
            ax.scatter(short["t"].astype(float), [y_model] * len(short), marker="|", s=150, c="#808080", zorder=3)
        ticks.insert(0, y_model)
        ticklabels.insert(0, "model calls")
        handles.append(Patch(color="#b0b0b0", label="model call"))
    ax.set_yticks(ticks, ticklabels, fontsize="small")
    ax.set_title(f"Tool calls over time — run {_short(rows['run_id'].iloc[0])}", loc="left")
    ax.set_xlim(left=-span * 0.02)  # a call or model reply at t=0 stays inside the frame
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    return ax


# ------------------------------------------------------------------ what-if
def _budget_label(ms: float, mc: float, dl: float) -> str:
    import math

    parts = []
    if not math.isnan(ms):
        parts.append(f"≤{ms:g} steps")
    if not math.isnan(mc):
        parts.append(f"${mc:g}")
    if not math.isnan(dl):
        parts.append(f"{dl:g}s")
    return "\n".join(parts) or "no limit"


def whatif_grid(grid: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """The :func:`~agentlab.analysis.budget_whatif` grid: one row per run, one column per budget.

    Each cell is coloured by how the run would have ended and says at which
    step (``budget @3``), so a glance shows which budgets would have cut which runs.
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    an._need(grid, "grid", ("run_id", "max_steps", "max_cost", "deadline_s", "outcome", "reason", "steps"))
    n_runs = grid["run_id"].nunique()
    n_budgets = len(grid[["max_steps", "max_cost", "deadline_s"]].drop_duplicates())
    # A cell must hold "step limit @30": the figure grows with the grid instead of squeezing it.
    ax = _axes(ax, figsize=(max(8.0, 1.5 * n_budgets + 2.0), max(3.0, 0.35 * n_runs + 1.5)))
    _label(ax, "Budget what-if", "hypothetical budget", "run")
    if grid.empty:
        return _empty(ax, "no runs in the grid")
    keys = ["max_steps", "max_cost", "deadline_s"]
    budgets = grid[keys].astype(float).drop_duplicates().sort_values(keys, na_position="last")
    budget_list = [tuple(b) for b in budgets.itertuples(index=False)]
    runs = list(dict.fromkeys(grid["run_id"]))
    names = list(REASON_COLORS)
    codes = [[names.index("unknown")] * len(budget_list) for _ in runs]
    texts = [[""] * len(budget_list) for _ in runs]
    index = {b: j for j, b in enumerate(budget_list)}

    def key(row: Any) -> tuple[float, ...]:
        return tuple(float(getattr(row, k)) for k in keys)

    def same(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
        return all((x == y) or (x != x and y != y) for x, y in zip(a, b, strict=True))

    for row in grid.itertuples(index=False):
        k = key(row)
        j = next(index[b] for b in budget_list if same(b, k))
        i = runs.index(row.run_id)
        if row.outcome == "unknown":
            cat, text = "unknown", "?"
        elif row.outcome == "done":
            cat, text = "done", f"done @{row.steps}"
        else:
            cat = row.reason if row.reason in REASON_COLORS else "other"
            text = f"{row.reason} @{row.steps}"
        codes[i][j] = names.index(cat)
        texts[i][j] = text
    cmap = ListedColormap([REASON_COLORS[n] for n in names])
    ax.imshow(codes, cmap=cmap, vmin=-0.5, vmax=len(names) - 0.5, aspect="auto")
    for i, line in enumerate(texts):
        for j, text in enumerate(line):
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=7,
                color="white" if codes[i][j] not in (names.index("unknown"),) else "#333333",
            )
    ax.set_xticks(range(len(budget_list)), [_budget_label(*b) for b in budget_list], fontsize="small")
    ax.set_yticks(range(len(runs)), [_short(r, 18) for r in runs], fontsize="small")
    ax.set_xticks([x - 0.5 for x in range(1, len(budget_list))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(runs))], minor=True)
    ax.grid(which="minor", color="white", lw=2)
    ax.tick_params(which="minor", length=0)
    used = sorted({c for line in codes for c in line})
    ax.legend(
        handles=[Patch(color=REASON_COLORS[names[c]], label=names[c]) for c in used],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
        fontsize="small",
    )
    ax.set_title(f"Budget what-if — {len(runs)} recorded runs × {len(budget_list)} budgets", loc="left")
    return ax


def fork_curve(parent: Any, *forks: Any, ax: Axes | None = None) -> Axes:
    """A run and its forks on one cumulative-cost curve.

    ``parent`` and each fork are :class:`~agentlab.trace.Trace` objects; a
    fork's ``run_started.parent`` says at which step it left the parent. A
    fork's curve starts from the parent's spend at that step (its history cost
    that much to build) and continues with what the fork spent.
    """
    ax = _axes(ax)
    _label(ax, "Cumulative cost: a run and its forks", "step", "cumulative cost (USD)")
    rows = an.step_costs(parent.steps)
    if rows.empty:
        return _empty(ax, "the parent run has no steps")
    ax.plot(
        rows["step"],
        rows["cumulative_cost"],
        "o-",
        color="#4c72b0",
        label=f"{_short(parent.run_id)} ({_recorded_label(parent.steps, parent.run_id)})",
        zorder=3,
    )
    colors = ["#c44e52", "#55a868", "#8172b3", "#dd8452", "#937860"]
    for i, f in enumerate(forks):
        where = (f.started or {}).get("parent") or {}
        k = where.get("step")
        if where.get("run_id") != parent.run_id or not isinstance(k, int):
            raise ValueError(
                f"run {f.run_id} is not a fork of {parent.run_id} (its run_started.parent is {where or 'missing'})"
            )
        base = float(rows.loc[rows["step"] <= k, "cost"].sum())
        fr = an.step_costs(f.steps)
        xs = [k, *(fr["step"] + k).tolist()]
        ys = [base, *(fr["cumulative_cost"] + base).tolist()]
        c = colors[i % len(colors)]
        ax.plot(xs, ys, "s--", color=c, label=f"fork at step {k}: {started_label(f.started)}")
        ax.axvline(k, color=c, lw=0.8, ls=":")
    _integer_steps(ax)
    ax.set_ylim(bottom=0)
    return _cost_axes_done(ax)

"""Experiment plots; each returns a matplotlib ``Axes`` like :mod:`agentlab.plots`."""

from __future__ import annotations

from typing import Any

import numpy as np


def _ax(ax: Any, size: tuple[float, float] = (8, 4)) -> Any:
    """``ax``, or the Axes of a new standalone Figure: never pyplot's, which a notebook would show a
    second time beside the returned figure."""
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=size, layout="constrained").add_subplot()
    return ax


def cost_vs_success(result: Any, ax: Any = None) -> Any:
    """Mean cost per run against success rate (each with its 95 % bootstrap interval), one point per config."""
    ax = _ax(ax)
    s = result.summary()
    for name, r in s.iterrows():
        ax.errorbar(
            r["cost_mean"],
            r["success"],
            xerr=[[r["cost_mean"] - r["cost_lo"]], [r["cost_hi"] - r["cost_mean"]]],
            yerr=[[r["success"] - r["success_lo"]], [r["success_hi"] - r["success"]]],
            fmt="o",
            capsize=4,
            label=str(name),
        )
    # A legend beside the plot, not labels at the points: configs that cost and succeed alike would
    # print their names over each other.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_xlabel("mean cost per run (USD, 95 % interval)")
    ax.set_ylabel("success rate (95 % interval)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("cost vs success per config")
    return ax


def cost_distribution(result: Any, ax: Any = None) -> Any:
    """Each config's run costs as a box with the runs on top."""
    ax = _ax(ax)
    df = result.runs[result.runs["outcome"] != "not run"]
    names = [c.name for c in result.configs if c.name in set(df["config"])]
    data = [df.loc[df["config"] == n, "cost"].to_numpy() for n in names]
    if data:
        import matplotlib

        old = tuple(int(p) for p in matplotlib.__version__.split(".")[:2]) < (3, 10)
        ax.boxplot(data, showfliers=False, **({"vert": False} if old else {"orientation": "horizontal"}))
        for i, d in enumerate(data, 1):
            ax.scatter(d, np.full(len(d), i) + np.linspace(-0.15, 0.15, len(d)), s=8, alpha=0.6)
        ax.set_yticks(range(1, len(names) + 1), names, fontsize=8)
    ax.set_xlabel("cost per run (USD)")
    ax.set_title("cost distribution per config")
    return ax


def stop_reasons(result: Any, ax: Any = None) -> Any:
    """How each config's runs ended, as stacked bars."""
    ax = _ax(ax)
    df = result.runs
    table = df.groupby(["config", "reason"]).size().unstack(fill_value=0)
    order = [c.name for c in result.configs if c.name in table.index]
    table = table.loc[order]
    left = np.zeros(len(table))
    for reason in table.columns:
        ax.barh(table.index, table[reason], left=left, label=reason)
        left += table[reason].to_numpy()
    ax.set_xlabel("runs")
    ax.legend(
        fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0
    )  # beside the bars, never over them
    ax.set_title("stop reasons per config")
    ax.tick_params(axis="y", labelsize=8)
    return ax


def context_growth(result: Any, ax: Any = None) -> Any:
    """Context tokens per step: each config's median, with the 10-90 % band."""
    ax = _ax(ax)
    steps = result.steps
    for c in result.configs:
        g = steps[steps["config"] == c.name]
        if g.empty:
            continue
        q = g.groupby("step")["context_tokens"].quantile([0.1, 0.5, 0.9]).unstack()
        ax.plot(q.index, q[0.5], marker="o", ms=3, label=c.name)
        ax.fill_between(q.index, q[0.1], q[0.9], alpha=0.15)
    ax.set_xlabel("step")
    ax.set_ylabel("context tokens")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_title("context growth per config (median, 10-90 %)")
    return ax

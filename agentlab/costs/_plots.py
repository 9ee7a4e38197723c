"""The biggest carriers as a bar chart (the style of :mod:`agentlab.plots`: ``f(df, ax=None) -> Axes``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._shorten import shorten

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes


def carriers(df: pd.DataFrame, n: int = 10, *, by: str | None = None, ax: Axes | None = None) -> Axes:
    """The ``n`` items of :func:`~agentlab.costs.carried_cost`'s frame that cost the most, one bar each, stacked by
    cache state (read, written, uncached); ``by="tool"`` (or ``agent``, ``group``, ``kind``) sums by that first."""
    from .. import plots

    ax = plots._axes(ax)
    need = {"carried_cost", "read_cost", "write_cost", "uncached_cost", "label"}
    if not need <= set(df.columns):
        raise ValueError(f"carriers() needs carried_cost()'s frame; missing columns {sorted(need - set(df.columns))}")
    if df.empty:
        return plots._empty(ax, "no model calls: nothing was carried")
    if by is not None:
        grouped = (
            df.fillna({by: "(none)"}).groupby(by)[["read_cost", "write_cost", "uncached_cost", "carried_cost"]].sum()
        )
        top = grouped.nlargest(n, "carried_cost").iloc[::-1]
        labels = [str(i) for i in top.index]
    else:
        top = df.nlargest(n, "carried_cost").iloc[::-1]
        labels = [f"{shorten(str(r.label), 40)} (step {r.step})" for r in top.itertuples()]
    left = None
    for col, name, color in (
        ("read_cost", "cache read", "#4c9f70"),
        ("write_cost", "cache write", "#e39b3b"),
        ("uncached_cost", "uncached", "#c0392b"),
    ):
        ax.barh(labels, top[col], left=left, label=name, color=color)
        left = top[col] if left is None else left + top[col]
    ax.set_title("What the run carried: input dollars each item caused", loc="left")
    ax.set_xlabel("carried cost")
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"${v:,.3f}"))
    ax.legend(loc="lower right", frameon=False)
    return ax

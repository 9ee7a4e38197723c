"""The panel's small live chart: tokens per step and cumulative cost, as PNG bytes.

One ``Figure`` made directly with the Agg canvas, never through pyplot: a
pyplot figure left open duplicates output, leaks memory and turns up in
unrelated cells. Lines are created once and updated with ``set_data``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence


class LiveChart:
    """Two lines on twin axes, redrawn to PNG on demand."""

    def __init__(self, *, width: float = 5.0, height: float = 1.9, dpi: int = 80) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(width, height), dpi=dpi)
        # Fixed margins, not a layout engine: "constrained" doubles the cost of every redraw.
        self.figure.subplots_adjust(left=0.15, right=0.85, bottom=0.24, top=0.95)
        FigureCanvasAgg(self.figure)
        self.ax = self.figure.add_subplot()
        self.ax_cost = self.ax.twinx()
        (self.tokens_line,) = self.ax.plot([], [], color="#1f6feb", marker="o", markersize=3, label="tokens")
        (self.cost_line,) = self.ax_cost.plot([], [], color="#bc4c00", marker=".", markersize=3, label="cost")
        from matplotlib.ticker import MaxNLocator

        self.ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        self.ax.set_xlabel("step", fontsize=8)
        self.ax.set_ylabel("tokens / step", fontsize=8, color="#1f6feb")
        self.ax_cost.set_ylabel("cumulative USD", fontsize=8, color="#bc4c00")
        for ax in (self.ax, self.ax_cost):
            ax.tick_params(labelsize=7)
        self.renders = 0

    def png(self, steps: Sequence[int], tokens: Sequence[int], cost: Sequence[float]) -> bytes:
        """Redraw with these series and return the PNG."""
        self.tokens_line.set_data(steps, tokens)
        self.cost_line.set_data(steps, cost)
        for ax in (self.ax, self.ax_cost):
            ax.relim()
            ax.autoscale_view()
        if steps:
            self.ax.set_xlim(0.5, max(steps) + 0.5)
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png")
        self.renders += 1
        return buf.getvalue()

"""Axes that show themselves: the last expression of a notebook cell draws as a PNG.

:mod:`agentlab.plots` draws on standalone figures (no pyplot, no global
state), which IPython would print as ``<Axes: ...>``. These Axes add
``_repr_png_``, so ``al.plots.cost_curve(steps)`` as a cell's last line shows
the plot, while the value stays an ordinary matplotlib Axes to save
(``ax.figure.savefig(...)``), restyle or draw on. Imported when the first
plot is drawn, with matplotlib.
"""

from __future__ import annotations

import io

from matplotlib.axes import Axes


class ShownAxes(Axes):
    """A matplotlib Axes whose figure IPython displays as a PNG."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", bbox_inches="tight")  # type: ignore[union-attr]  # a Figure: made by plots._axes
        return buf.getvalue()

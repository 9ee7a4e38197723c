"""The panel's small live chart: tokens per step and cumulative cost, as SVG markup the browser draws.

The kernel writes a few hundred bytes of SVG text (a polyline of numbers per series) into an HTML widget; the
browser draws it. No picture is rendered in the kernel, no script runs in the page, and no front-end module is
needed beyond the widgets every front end has, so the same chart shows live in JupyterLab and Notebook 7, from a
notebook's saved widget state, and on the docs site offline. A fresh chart (no step yet) is empty axes that say
so: never a broken image where the chart goes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

W, H, LEFT, RIGHT, TOP, BOTTOM = 400, 160, 48, 52, 18, 28
BLUE, ORANGE, GREY = "#1f6feb", "#bc4c00", "#57606a"


def nice_max(value: float) -> float:
    """The axis top: the smallest 1, 2, 2.5 or 5 × 10ⁿ at or above ``value`` (1 for nothing to show)."""
    if not value > 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)


def _label(value: float, money: bool) -> str:
    if value == 0:
        return "&#36;0" if money else "0"
    if money:  # (&#36;: a bare dollar sign is typeset as math by JupyterLab)
        return "&#36;" + (f"{value:.2f}" if value >= 1 else f"{value:.3f}" if value >= 0.01 else f"{value:.2g}")
    return f"{value / 1e6:.1f}M" if value >= 1e6 else f"{value / 1e3:.0f}k" if value >= 1e4 else f"{value:g}"


def _text(x: float, y: float, text: str, colour: str, anchor: str = "start", size: int = 9, cls: str = "") -> str:
    extra = f' class="{cls}"' if cls else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{colour}" text-anchor="{anchor}"{extra}>{text}</text>'
    )


def chart_svg(steps: Sequence[int], tokens: Sequence[int], cost: Sequence[float]) -> str:
    """The chart as SVG: tokens per step on the left axis, cumulative USD on the right, one point a step."""
    x0, x1, y0, y1 = LEFT, W - RIGHT, H - BOTTOM, TOP
    parts = [
        f'<svg class="agentlab-chart" role="img" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'xmlns="http://www.w3.org/2000/svg"><title>tokens per step and cumulative cost</title>',
        f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="none" stroke="#d0d7de"/>',
        _text((x0 + x1) / 2, H - 4, "step", GREY, "middle", 10),
        _text(x0, 11, "tokens / step", BLUE, size=10),
        _text(x1, 11, "cumulative USD", ORANGE, "end", 10),
    ]
    if not steps:
        parts.append(_text((x0 + x1) / 2, (y0 + y1) / 2, "no step yet", GREY, "middle", 11, "agentlab-chart-empty"))
        return "".join(parts) + "</svg>"
    last, t_max, c_max = max(steps), nice_max(max(tokens)), nice_max(max(cost))

    def sx(s: float) -> float:
        return x0 + (s - 0.5) / max(last, 1) * (x1 - x0)

    for value, top, money, x, anchor, colour in (
        (t_max, y1, False, x0 - 3, "end", BLUE),
        (c_max, y1, True, x1 + 3, "start", ORANGE),
    ):
        parts.append(_text(x, top + 3, _label(value, money), colour, anchor))
        parts.append(_text(x, y0 + 3, _label(0, money), colour, anchor))
    parts.append(_text(sx(1), y0 + 11, "1", GREY, "middle"))
    if last > 1:
        parts.append(_text(sx(last), y0 + 11, str(last), GREY, "middle"))
    series: tuple[tuple[Sequence[float], float, str, str], ...] = (
        (tokens, t_max, BLUE, "tokens"),
        (cost, c_max, ORANGE, "cost"),
    )
    xs = [f"{sx(s):.1f}," for s in steps]  # the two series share their x coordinates: written once
    for values, high, colour, cls in series:
        scale = (y0 - y1) / high
        points = " ".join([x + f"{y0 - v * scale:.1f}" for x, v in zip(xs, values, strict=True)])
        parts.append(
            f'<polyline class="agentlab-chart-{cls}" points="{points}" fill="none" stroke="{colour}" '
            'stroke-width="1.5"/>'
        )
    return "".join(parts) + "</svg>"

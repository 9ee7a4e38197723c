"""Dollars as text and as HTML that no notebook typesets as math.

JupyterLab's MathJax reads ``$...$`` pairs in HTML output as TeX, so two
prices in one cell become a formula. In HTML a dollar is written ``&#36;`` inside
``<span class="tex2jax_ignore">`` (MathJax skips that class). A local rule for
now: the lab's one helper for it is being written elsewhere, and this one is to
be folded into it.
"""

from __future__ import annotations

import math


def usd(x: float) -> str:
    """``$0.0123`` (four decimals under a dollar, two above; ``$?`` for an unknown amount)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "$?"
    sign = "-" if x < 0 else ""
    x = abs(x)
    return f"{sign}${x:,.2f}" if x >= 1 else f"{sign}${x:.4f}"


def usd_html(x: float) -> str:
    """:func:`usd` for HTML: the dollar sign as ``&#36;`` inside a span MathJax ignores."""
    return '<span class="tex2jax_ignore">' + usd(x).replace("$", "&#36;") + "</span>"

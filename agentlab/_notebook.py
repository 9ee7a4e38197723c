"""The one set-up call for a notebook that shows the lab's tables: dollars read as money, text read whole.

``import agentlab`` changes no setting of anyone's session; a notebook that wants
the lab's tables to read right calls :func:`notebook` once, at the top (every
teaching notebook does).
"""

from __future__ import annotations

PANDAS_OPTIONS: dict[str, object] = {
    "display.html.use_mathjax": False,
    "display.max_colwidth": None,
    "display.width": 250,
}
"""What :func:`notebook` sets, and why each:

- ``display.html.use_mathjax`` off: pandas then marks every table's HTML with the classes MathJax skips
  (``tex2jax_ignore mathjax_ignore``, :data:`agentlab._safe_text.NO_MATH`), so a cell such as a budget's
  stop detail ``spent $0.0556 of $0.05 after step 4``, or two prices in one row, is not typeset as LaTeX by
  JupyterLab, Notebook 7, nbconvert's HTML or the docs site. It covers any text a frame holds, the lab's
  own and a tool's result alike.
- ``display.max_colwidth`` unlimited: a detail or an argument is never cut mid-word.
- ``display.width`` 250: a wide frame's text fallback wraps less.
"""


def notebook() -> None:
    """Set up this kernel's pandas display for the lab's tables: dollar amounts read as money, text whole.

    Call it once at the top of a notebook. Without it, JupyterLab typesets a table
    cell holding two ``$`` (a budget's stop detail, ``result.runs["detail"]``) as
    math; the lab's own reprs (results, traces, steps, reports, experiment
    results) need no set-up. It sets the pandas options in :data:`PANDAS_OPTIONS`
    and nothing else; ``import agentlab`` alone changes no setting.
    """
    import pandas as pd

    for name, value in PANDAS_OPTIONS.items():
        pd.set_option(name, value)

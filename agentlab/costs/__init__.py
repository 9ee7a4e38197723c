"""Where the money went: carried cost, cache busts priced, two runs diffed.

Analyses over the trace frames, the same for native runs, experiments and
every imported agent:

- :func:`carried_cost`: for every item a run carried, the input dollars it
  caused across every call that re-sent it (the quadratic bill, itemised);
  :func:`input_cost` is what they add up to.
- :func:`cache_busts`: per call, what the prompt cache should have held
  against what it read; each collapse with its cause and its price;
  :func:`cache_waste` each run's total, :func:`with_cache_waste` the runs
  frame with that total beside the cost, :class:`WasteMeter` the same total
  as a run's events arrive (the notebook panel's).
- :func:`diff_runs`: two runs aligned step by step, opened at the first
  divergence (``agentlab diff A B`` on the command line).
"""

from __future__ import annotations

from ._busts import WasteMeter, cache_busts, cache_waste, with_cache_waste
from ._carried import carried_cost, input_cost, top_carriers
from ._diff import RunDiff, diff_runs
from ._plots import carriers
from ._report import money_lines

__all__ = [
    "RunDiff",
    "WasteMeter",
    "carriers",
    "money_lines",
    "diff_runs",
    "cache_busts",
    "cache_waste",
    "carried_cost",
    "input_cost",
    "top_carriers",
    "with_cache_waste",
]

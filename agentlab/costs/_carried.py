"""Carried cost: the quadratic bill itemised.

Each call re-sends everything before it, so every item a run carried (a tool
definition, the system prompt, a user turn, an assistant reply, a tool result,
an image) is paid for again at every later call: as a cache read, a cache
write or uncached input, at that call's rates. This module charges each call's
input-side dollars to the items it sent.

How a call is split: the API bills a request as one prefix, cache reads first
(the longest cached prefix), then cache writes (one-hour before five-minute, as
the API requires), then uncached input. The items are laid along that prefix in
request order (tools, system, messages), each as long as its estimated size
scaled so they fill the call's reported input exactly, and each is charged for
the stretch of each state it covers. So the split by item is an **estimate**
(the API reports totals per call, never per item), while the **identity** is
exact: the items' carried costs add up to the run's input-side cost (uncached
input + cache writes + cache reads), to rounding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._calls import RunCalls, run_calls, runs_of

if TYPE_CHECKING:
    import pandas as pd

BASIS = "split by estimated item size (the API reports input tokens per call, not per item)"

COLUMNS = (
    "run_id",
    "agent",
    "item",
    "kind",
    "label",
    "tool",
    "group",
    "step",
    "tokens",
    "calls",
    "read_tokens",
    "write_tokens",
    "uncached_tokens",
    "read_cost",
    "write_cost",
    "uncached_cost",
    "carried_cost",
    "basis",
)


def carry(run: RunCalls) -> dict[str, Any]:
    """Per item of ``run``: the tokens and USD it was charged in each cache state, and how many calls sent it."""
    n = len(run.items)
    sizes = np.array([it.tokens for it in run.items], dtype=float)
    out: dict[str, Any] = {
        k: np.zeros(n)
        for k in ("read_tokens", "write_tokens", "uncached_tokens", "read_cost", "write_cost", "uncached_cost")
    }
    calls = np.zeros(n, dtype=np.int64)
    cum_all = np.cumsum(sizes)
    unattributed = 0.0
    for call in run.calls:
        k = call.n_items
        total = call.context
        rates = call.state_rates()
        if total <= 0:
            continue
        if rates is None:
            rates = (np.nan, np.nan, np.nan, np.nan)
        calls[:k] += 1
        est = cum_all[k - 1] if k else 0.0
        if est <= 0:
            unattributed += call.input_cost()
            continue
        u = call.usage
        one_hour = min(u.cache_creation_1h_input_tokens, u.cache_creation_input_tokens)
        r_end = u.cache_read_input_tokens
        w1_end = r_end + one_hour
        w_end = r_end + u.cache_creation_input_tokens
        scale = total / est
        hi = cum_all[:k] * scale
        lo = np.concatenate(([0.0], hi[:-1]))
        hi[-1] = total  # the last item ends the prefix exactly (no rounding left over)

        read = _span(lo, hi, 0.0, r_end)
        w1 = _span(lo, hi, r_end, w1_end)
        w5 = _span(lo, hi, w1_end, w_end)
        unc = _span(lo, hi, w_end, total)
        out["read_tokens"][:k] += read
        out["write_tokens"][:k] += w1 + w5
        out["uncached_tokens"][:k] += unc
        out["read_cost"][:k] += read * rates[1]
        out["write_cost"][:k] += w1 * rates[3] + w5 * rates[2]
        out["uncached_cost"][:k] += unc * rates[0]
    out["calls"] = calls
    out["carried_cost"] = out["read_cost"] + out["write_cost"] + out["uncached_cost"]
    out["unattributed"] = np.array([unattributed])
    return out


def _span(lo: np.ndarray, hi: np.ndarray, a: float, b: float) -> np.ndarray:
    """How much of each item ``[lo, hi)`` lies within ``[a, b)``."""
    return np.clip(np.minimum(hi, b) - np.maximum(lo, a), 0.0, None)


def input_cost(runs: Any) -> float:
    """The input-side USD of ``runs`` (a Trace, Traces, a trace file or a list): uncached input + cache writes +
    cache reads over every model call, at each call's rates. What :func:`carried_cost`'s items add up to."""
    return float(sum(c.input_cost() for t in runs_of(runs) for c in run_calls(t).calls))


def carried_cost(runs: Any) -> pd.DataFrame:
    """One row per item each run carried: the input dollars it caused across every call that sent it.

    ``runs`` is a :class:`~agentlab.trace.Trace`, a :class:`~agentlab.trace.Traces` (from ``load_runs``, an
    experiment's folder, ``load_recorded``), a trace file or a list of them: native and imported runs alike.
    Columns: ``run_id``, ``agent`` (``main`` or the sub-agent), ``item`` (its place in the request), ``kind``,
    ``label``, ``tool`` (for tool definitions, results and their images), ``group`` (the skill, plugin or MCP
    server where recorded), ``step`` (the step it was added on; 0 = the run's start), ``tokens`` (its estimated
    size), ``calls`` (how many calls sent it), tokens and USD by cache state (``read_*``, ``write_*``,
    ``uncached_*``), ``carried_cost`` (their sum) and ``basis`` (how the split was made: an estimate).

    ``carried_cost.sum()`` equals :func:`input_cost` of the same runs (the run's uncached input + cache writes +
    cache reads). Group it as you like: ``df.groupby("tool").carried_cost.sum()``, by ``agent`` or ``group``.
    """
    import pandas as pd

    frames = []
    for trace in runs_of(runs):
        run = run_calls(trace)
        got = carry(run)
        items = run.items
        extra = float(got["unattributed"][0])
        rows: dict[str, Any] = {
            "run_id": [run.run_id] * len(items),
            "agent": [run.agent] * len(items),
            "item": [it.index for it in items],
            "kind": [it.kind for it in items],
            "label": [it.label for it in items],
            "tool": [it.tool for it in items],
            "group": [it.group for it in items],
            "step": [it.step for it in items],
            "tokens": [it.tokens for it in items],
            **{k: got[k] for k in COLUMNS if k in got},
            "basis": [BASIS] * len(items),
        }
        df = pd.DataFrame(rows, columns=list(COLUMNS))
        if extra:  # calls that sent no item the trace knows of (an empty history): one row says so
            df.loc[len(df)] = [
                run.run_id,
                run.agent,
                len(items),
                "request overhead",
                "request overhead",
                None,
                None,
                0,
                0,
                0,
                0.0,
                0.0,
                0.0,
                0.0,
                0.0,
                extra,
                extra,
                BASIS,
            ]
        frames.append(df)
    if not frames:
        return pd.DataFrame({c: [] for c in COLUMNS})
    out = pd.concat(frames, ignore_index=True)
    return out.astype({"step": "int64", "tokens": "int64", "calls": "int64", "item": "int64"})


def top_carriers(df: pd.DataFrame, n: int = 3) -> list[str]:
    """The ``n`` items that cost the most, each as a sentence ("the 12,000-token Read result cost $0.84 over the
    23 calls after it")."""
    from .._safe_text import usd

    out = []
    for _, r in df.nlargest(n, "carried_cost").iterrows():
        out.append(
            f"the {int(r.tokens):,}-token {r.label} (step {int(r.step)}) cost {usd(r.carried_cost)} "
            f"over the {int(r.calls)} call{'s' * (int(r.calls) != 1)} that sent it"
        )
    return out

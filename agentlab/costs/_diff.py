"""Two runs, diffed: aligned step by step, opened at the first divergence.

A step's *signature* is what it did: the tool calls its reply asked for, each
as its tool and canonical arguments (keys sorted), or ``text`` for a reply
with none. Two runs are aligned step for step; the **first divergence** is the
first step whose signatures differ, or where one run has a step the other has
not. A fork is aligned with its parent by the step it forked at: the steps
before it are the parent's own (the fork inherited them, unbilled), and the
first divergence is the fork step, always (from there on the fork made its
own calls).

Per aligned step: each side's input tokens and dollars, their deltas, the
cumulative costs, and the two requests (what each step sent that the previous
step had not, and its reply) side by side in :meth:`RunDiff.html`, a page that
needs no script and survives export.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._safe_text import usd, usd_html
from .._shorten import shorten
from ._calls import runs_of

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

COLUMNS = (
    "step",
    "a_step",
    "b_step",
    "a_does",
    "b_does",
    "same",
    "a_input_tokens",
    "b_input_tokens",
    "input_tokens_delta",
    "a_cost",
    "b_cost",
    "cost_delta",
    "a_cumulative",
    "b_cumulative",
)


def signature(reply: dict[str, Any] | None) -> str:
    """What a step did: ``tool(canonical args)`` for each tool call of its reply, or ``text``."""
    content = (reply or {}).get("content") or []
    uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    if not uses:
        return "text" if reply is not None else "-"
    return "; ".join(
        f"{b.get('name')}({json.dumps(b.get('input'), sort_keys=True, separators=(',', ':'), default=str)})"
        for b in uses
    )


def _steps(trace: Any) -> list[tuple[int | None, str, int, float, dict[str, Any] | None]]:
    """(step, signature, input tokens, cost, the model_called event) for each model call with usage."""
    out: list[tuple[int | None, str, int, float, dict[str, Any] | None]] = []
    for e in trace.records:
        if e.get("kind") == "model_called" and isinstance(e.get("usage"), dict):
            u = e["usage"]
            tokens = sum(
                int(u.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            )
            cost = e.get("cost")
            out.append(
                (
                    int(e["step"]),
                    signature(e),
                    tokens,
                    float(cost) if isinstance(cost, (int, float)) else float("nan"),
                    e,
                )
            )
    return out


@dataclass
class RunDiff:
    """Two runs aligned step by step (:func:`diff_runs`): ``frame``, ``first_divergence``, :meth:`html`,
    :meth:`plot`, :meth:`text`."""

    a: Any
    b: Any
    frame: pd.DataFrame
    first_divergence: int | None
    """The aligned step (1-based) where the runs part; ``None``: they did the same throughout."""
    fork_at: int | None = None
    """When ``b`` is a fork of ``a``: the parent's step it forked after."""
    requests: dict[int, tuple[list[Any], list[Any]]] = field(default_factory=dict, repr=False)

    def text(self, around: int = 3) -> str:
        """The diff as terminal text: the totals, then the steps from the first divergence on."""
        f = self.frame
        lines = [
            f"A {self.a.run_id}: {f.a_step.notna().sum()} steps, {usd(f.a_cost.sum())}",
            f"B {self.b.run_id}: {f.b_step.notna().sum()} steps, {usd(f.b_cost.sum())}"
            + (f" (a fork of A after step {self.fork_at})" if self.fork_at is not None else ""),
            "the same throughout"
            if self.first_divergence is None
            else f"first divergence at step {self.first_divergence}",
            f"{'step':>5}  {'A does':<34} {'B does':<34} {'Δ tokens':>10} {'Δ cost':>10}",
        ]
        start = max((self.first_divergence or 1) - 1, 1)
        for r in f[f.step >= start].itertuples():
            mark = ">" if r.step == self.first_divergence else " "
            lines.append(
                f"{mark}{r.step:>4}  {shorten(r.a_does, 34):<34} {shorten(r.b_does, 34):<34} "
                f"{r.input_tokens_delta:>+10,.0f} {usd(r.cost_delta):>10}"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def html(self) -> str:
        """A self-contained HTML view (no script: it survives export): the totals, a table of every aligned step,
        and the two requests side by side, opened at the first divergence. Dollar amounts never read as TeX."""
        esc = html.escape
        f = self.frame
        head = (
            f"<p><b>A</b> {esc(self.a.run_id)} · {f.a_step.notna().sum()} steps · {usd_html(f.a_cost.sum())}<br>"
            f"<b>B</b> {esc(self.b.run_id)} · {f.b_step.notna().sum()} steps · {usd_html(f.b_cost.sum())}"
            + (f" · a fork of A after step {self.fork_at}" if self.fork_at is not None else "")
            + "<br>"
            + (
                "the same throughout"
                if self.first_divergence is None
                else f"<b>first divergence at step {self.first_divergence}</b>"
            )
            + "</p>"
        )
        rows = []
        for r in f.itertuples():
            style = ' style="background:#fff3cd"' if r.step == self.first_divergence else ""
            rows.append(
                f"<tr{style}><td>{r.step}</td><td><code>{esc(shorten(r.a_does, 80))}</code></td>"
                f"<td><code>{esc(shorten(r.b_does, 80))}</code></td><td>{r.input_tokens_delta:+,.0f}</td>"
                f"<td>{usd_html(r.a_cost)}</td><td>{usd_html(r.b_cost)}</td><td>{usd_html(r.cost_delta)}</td></tr>"
            )
        table = (
            "<table><thead><tr><th>step</th><th>A does</th><th>B does</th><th>Δ input tokens</th><th>A cost</th>"
            "<th>B cost</th><th>Δ cost</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        )
        sides = []
        for step, (ra, rb) in sorted(self.requests.items()):
            opened = " open" if step == self.first_divergence else ""
            sides.append(
                f"<details{opened}><summary>step {step}: the two requests</summary>"
                '<div style="display:flex;gap:1em"><pre style="flex:1;white-space:pre-wrap">'
                + esc(_show(ra))
                + '</pre><pre style="flex:1;white-space:pre-wrap">'
                + esc(_show(rb))
                + "</pre></div></details>"
            )
        return f'<div class="agentlab-diff">{head}{table}{"".join(sides)}</div>'

    def _repr_html_(self) -> str:
        return self.html()

    def plot(self, *, ax: Axes | None = None) -> Axes:
        """The two cumulative cost curves over the aligned steps, the first divergence marked."""
        from .. import plots

        ax = plots._axes(ax)
        f = self.frame
        ax.plot(f.step, f.a_cumulative, marker=".", label=f"A {plots._short(self.a.run_id)}")
        ax.plot(f.step, f.b_cumulative, marker=".", label=f"B {plots._short(self.b.run_id)}")
        if self.first_divergence is not None:
            ax.axvline(self.first_divergence, color="#c0392b", linestyle="--", linewidth=1)
            ax.annotate(
                f"first divergence: step {self.first_divergence}",
                (self.first_divergence, ax.get_ylim()[1]),
                xytext=(4, -12),
                textcoords="offset points",
                color="#c0392b",
                fontsize=9,
            )
        plots._label(ax, "Two runs' cost, step by step", "step", "cumulative cost")
        return plots._cost_axes_done(ax)


def _show(part: list[Any]) -> str:
    return "\n\n".join(
        f"[{m.get('role')}] " + shorten(json.dumps(m.get("content"), ensure_ascii=False, default=str), 2_000)
        if isinstance(m, dict)
        else str(m)
        for m in part
    )


def _one(run: Any) -> Any:
    found = runs_of(run)
    if len(found) != 1:
        raise ValueError(f"a diff compares two runs; got {len(found)} where one was expected")
    return found[0]


def diff_runs(a: Any, b: Any, *, context: int = 3) -> RunDiff:
    """Runs ``a`` and ``b`` (Traces, trace files) aligned step by step, opened at the first divergence.

    When ``b`` is a fork of ``a`` (its ``run_started.parent`` names ``a``), it is aligned after the fork step;
    else step for step. ``context`` steps from the divergence on carry their two requests side by side.
    """
    import pandas as pd

    a, b = _one(a), _one(b)
    sa, sb = _steps(a), _steps(b)
    parent = b.started.get("parent") if isinstance(b.started.get("parent"), dict) else {}
    fork_at = None
    if parent.get("run_id") == a.run_id and isinstance(parent.get("step"), int):
        fork_at = int(parent["step"])
        shared = [s for s in sa if s[0] is not None and s[0] <= fork_at]
        sb = [(None, *s[1:]) for s in shared] + list(sb)  # the fork's inherited steps: the parent's, not billed again
    rows: list[dict[str, Any]] = []
    cum_a = cum_b = 0.0
    first = None
    for i in range(max(len(sa), len(sb))):
        x = sa[i] if i < len(sa) else None
        y = sb[i] if i < len(sb) else None
        inherited = y is not None and y[0] is None
        ca = x[3] if x else 0.0
        cb = 0.0 if inherited or y is None else y[3]
        cum_a += ca
        cum_b += cb
        does_a, does_b = (x[1] if x else "-"), (y[1] if y else "-")
        same = inherited or (x is not None and y is not None and does_a == does_b and fork_at is None)
        if not same and first is None:
            first = i + 1
        rows.append(
            {
                "step": i + 1,
                "a_step": x[0] if x else None,
                "b_step": None if y is None or inherited else y[0],
                "a_does": does_a,
                "b_does": does_b + (" (inherited)" if inherited else ""),
                "same": same,
                "a_input_tokens": x[2] if x else 0,
                "b_input_tokens": (x[2] if inherited and x else y[2] if y else 0),
                "input_tokens_delta": ((x[2] if inherited and x else y[2] if y else 0) - (x[2] if x else 0)),
                "a_cost": ca,
                "b_cost": cb,
                "cost_delta": cb - ca,
                "a_cumulative": cum_a,
                "b_cumulative": cum_b,
            }
        )
    frame = pd.DataFrame(rows, columns=list(COLUMNS)).astype({"a_step": "Int64", "b_step": "Int64"})
    requests: dict[int, tuple[list[Any], list[Any]]] = {}
    if first is not None:
        for row in rows[first - 1 : first - 1 + context]:
            requests[int(row["step"])] = (_request(a, row["a_step"]), _request(b, row["b_step"]))
    return RunDiff(a, b, frame, first, fork_at, requests)


def _request(trace: Any, step: Any) -> list[Any]:
    """What ``step`` sent that its previous step had not, and the reply it got (empty for no step)."""
    if step is None:
        return []
    view = trace.step(int(step))
    reply = [{"role": "assistant", "content": view.reply.get("content")}] if view.reply else []
    return [*view.new, *reply]

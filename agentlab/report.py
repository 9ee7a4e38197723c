"""A run, told: as terminal text, as notebook HTML, and as an exported notebook.

Everything here reads a :class:`~agentlab.trace.Trace` and returns text; no
I/O except :func:`export_notebook`, which writes one ``.ipynb`` file.
``report_text`` is what ``agentlab report RUN_ID`` prints; ``export_notebook``
is what ``agentlab report RUN_ID --notebook out.ipynb`` writes: a markdown
cell per step (messages, calls, results) and code cells that load the run
and plot its cost curve.
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .trace import StepView, Trace, Traces

SHORT = 160
"""Characters of a message or result shown in a terminal line."""
LONG = 4000
"""Characters of a message or result shown in a notebook cell."""


# ------------------------------------------------------------ small pieces
def _clip(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + f"… (+{len(text) - n + 1:,} chars)"


def _one_line(text: str, n: int = SHORT) -> str:
    return _clip(" ".join(str(text).split()), n)


def _args(args: Any, n: int = SHORT) -> str:
    return _clip(json.dumps(args, ensure_ascii=False, default=str), n)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _money(x: float) -> str:
    return f"${x:.4f}"


def _limit(x: float, fmt: str) -> str:
    return "∞" if x != x else format(x, fmt)  # NaN: no limit


def _block_lines(block: Any, n: int) -> list[str]:
    """One content block as short labelled lines."""
    if not isinstance(block, dict):
        return [_clip(str(block), n)]
    kind = block.get("type")
    if kind == "text":
        return [_clip(block.get("text", ""), n)]
    if kind == "tool_use":
        return [f"→ {block.get('name')}({_args(block.get('input', {}), n)})  [{block.get('id', '')}]"]
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            content = " ".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
        err = " (error)" if block.get("is_error") else ""
        return [f"← {block.get('tool_use_id', '')}{err}: {_clip(content, n)}"]
    return [f"[{kind} block]"]


def message_lines(message: dict[str, Any], n: int = SHORT) -> list[str]:
    """A message as ``role: ...`` lines, one per content block."""
    role = message.get("role", "?")
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
    return [f"{role}: {line}" for b in blocks for line in _block_lines(b, n)]


def _call_line(c: dict[str, Any], n: int = SHORT) -> str:
    outcome = c.get("outcome", "")
    attempts = c.get("attempts") or 0
    tries = f", {attempts} attempts" if attempts > 1 else ""
    took = ""
    if c.get("end") is not None and c.get("start") is not None:
        took = f" in {c['end'] - c['start']:.3f}s"
    mode = f" [{c['mode']}]" if c.get("mode") else ""
    head = f"{c.get('tool')}{mode}({_args(c.get('args', {}), n)}) → {outcome}{took}{tries}"
    if outcome == "unfinished":
        return head + f" (started at {c.get('t', 0):.3f}s; no result was recorded)"
    return head + f": {_one_line(c.get('result') or '', n)}"


def _reply_head(view: StepView) -> str:
    r = view.reply
    if r is None:
        return "no reply recorded"
    if "usage" not in r:
        return f"malformed reply: {r.get('error', '')}"
    u = r["usage"]
    cache = ""
    if u.get("cache_read_input_tokens") or u.get("cache_creation_input_tokens"):
        cache = f" (+{u.get('cache_read_input_tokens', 0):,} cache read, {u.get('cache_creation_input_tokens', 0):,} cache write)"
    est = ", estimated" if r.get("estimated") else ""
    return (
        f"stop_reason={r.get('stop_reason')} · {u.get('input_tokens', 0):,} in{cache} / "
        f"{u.get('output_tokens', 0):,} out tokens{est} · {_money(r.get('cost', 0.0))} "
        f"(total {_money(r.get('spent', 0.0))}) · {r.get('latency', 0.0):.3f}s"
    )


def _step_extras(view: StepView) -> list[str]:
    """Retries, nudges and the end of the run, if they happened at this step."""
    out = []
    for e in view.events:
        kind = e.get("kind")
        if kind == "model_retry":
            out.append(f"model retry {e.get('attempt')}: {e.get('error')} (waited {e.get('wait', 0):.2f}s)")
        elif kind == "tool_retry":
            out.append(f"{e.get('tool')} retry {e.get('attempt')}: {e.get('error')} (waited {e.get('wait', 0):.2f}s)")
        elif kind == "nudged":
            out.append(f"loop guard: {e.get('tool')} called {e.get('count')} times with the same arguments; nudged")
        elif kind == "run_finished":
            detail = f" ({e.get('detail')})" if e.get("detail") else ""
            out.append(f"run {e.get('outcome')}: {e.get('reason')}{detail}")
    return out


# ---------------------------------------------------------------- one step
def step_text(view: StepView, n: int = SHORT) -> str:
    """What happened at one step, for a terminal."""
    lines = [f"Step {view.step} of run {view.run_id}"]
    lines.append(f"sent {_sent(view)}:")
    lines += [f"  {line}" for m in view.new for line in message_lines(m, n)]
    lines.append(f"reply: {_reply_head(view)}")
    if view.reply and view.reply.get("content"):
        lines += [f"  {line}" for line in message_lines({"role": "assistant", "content": view.reply["content"]}, n)]
    if view.calls:
        lines.append("tools:")
        for c in view.calls:
            lines.append(f"  {_call_line(c, n)}")
            lines += [f"    {line}" for line in _traceback(c).splitlines()]
    lines += _step_extras(view)
    return "\n".join(lines)


def _sent(view: StepView) -> str:
    if len(view.new) == len(view.sent):
        return _n(len(view.sent), "message")
    return f"{_n(len(view.sent), 'message')}, {len(view.new)} new since the last reply"


TRACEBACK_LINES = 12


def _traceback(call: dict[str, Any]) -> str:
    """The end of a fatal call's traceback: where a bug in a tool is read."""
    error = call.get("error") or {}
    if call.get("outcome") != "fatal" or not error.get("traceback"):
        return ""
    lines = error["traceback"].rstrip().splitlines()
    cut = lines[-TRACEBACK_LINES:]
    return "\n".join((["..."] if len(lines) > len(cut) else []) + cut)


def _fence(text: str) -> str:
    """A fenced block that the text cannot close early."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"


def step_markdown(view: StepView, n: int = LONG) -> str:
    """One step as a notebook markdown cell: messages, the reply, calls and results."""
    parts = [f"## Step {view.step}", f"**Reply:** {_md_escape(_reply_head(view))}"]
    if view.new:
        body = "\n".join(line for m in view.new for line in message_lines(m, n))
        parts.append(f"**Sent** {_sent(view)}:\n\n{_fence(body)}")
    if view.reply and view.reply.get("content"):
        body = "\n".join(message_lines({"role": "assistant", "content": view.reply["content"]}, n))
        parts.append(f"**The model answered:**\n\n{_fence(body)}")
    if view.calls:
        rows = ["| # | tool | mode | arguments | outcome | attempts | seconds | result |", "|---|---|---|---|---|---|---|---|"]
        for c in view.calls:
            secs = f"{c['end'] - c['start']:.3f}" if c.get("end") is not None and c.get("start") is not None else ""
            rows.append(
                f"| {c.get('index', 0)} | {_cell(c.get('tool'))} | {c.get('mode') or ''} | {_cell(_args(c.get('args', {}), 300))} "
                f"| {c.get('outcome')} | {c.get('attempts', 0)} | {secs} | {_cell(_one_line(c.get('result') or '', 300))} |"
            )
        parts.append("**Tool calls:**\n\n" + "\n".join(rows))
        for c in view.calls:
            if tb := _traceback(c):
                parts.append(f"**Traceback of {_md_escape(c.get('tool'))}:**\n\n{_fence(tb)}")
    extras = _step_extras(view)
    if extras:
        parts.append("\n".join(f"- {_md_escape(x)}" for x in extras))
    return "\n\n".join(parts)


def _md_escape(text: object) -> str:
    return html.escape(str(text), quote=False).replace("*", "\\*").replace("_", "\\_").replace("`", "\\`")


def _cell(text: Any) -> str:
    """Text safe inside a markdown table cell."""
    return "`" + str(text).replace("|", "\\|").replace("`", "'").replace("\n", " ") + "`" if text else ""


def step_html(view: StepView) -> str:
    """One step as HTML for a notebook output."""
    e = html.escape
    sent = "".join(f"<li><code>{e(line)}</code></li>" for m in view.new for line in message_lines(m, LONG))
    reply = ""
    if view.reply and view.reply.get("content"):
        reply = "".join(
            f"<li><code>{e(line)}</code></li>"
            for line in message_lines({"role": "assistant", "content": view.reply["content"]}, LONG)
        )
    calls = "".join(f"<li><code>{e(_call_line(c, LONG))}</code></li>" for c in view.calls)
    extras = "".join(f"<li>{e(x)}</li>" for x in _step_extras(view))
    return (
        f"<div class='agentlab-step'><b>Step {view.step}</b> of run <code>{e(view.run_id)}</code>"
        f"<div>sent {e(_sent(view))}:</div><ul>{sent}</ul>"
        f"<div>reply: {e(_reply_head(view))}</div><ul>{reply}</ul>"
        + (f"<div>tools:</div><ul>{calls}</ul>" if calls else "")
        + (f"<ul>{extras}</ul>" if extras else "")
        + "</div>"
    )


# ----------------------------------------------------------------- one run
def _headline(trace: Trace) -> list[str]:
    s = trace.summary
    ending = s["outcome"] if s["outcome"] != "stopped" else f"stopped: {s['reason']}"
    if s["detail"] and s["outcome"] != "done":
        ending += f" ({s['detail']})"
    budget = (
        f"budgets: steps {_limit(s['max_steps'], '.0f')} · cost "
        f"{'∞' if s['max_cost'] != s['max_cost'] else _money(s['max_cost'])} · deadline {_limit(s['deadline_s'], 'g')}s"
    )
    tools = ", ".join(f"{t.get('name')} ({t.get('mode')})" for t in trace.started.get("tools") or []) or "none"
    return [
        f"Run {trace.run_id} · {ending}",
        f"task: {_one_line(s['task'])}",
        f"model {s['model']} · {s['steps']} steps · {_money(s['cost'])} · {s['input_tokens']:,} in / "
        f"{s['output_tokens']:,} out tokens · {s['seconds']:.2f}s · started {s['started_at'] or '?'}",
        f"{budget} · tools: {tools}",
    ]


def _step_table(trace: Trace) -> list[tuple[int, str, str, str, str, str]]:
    """(step, cost, cumulative, tokens, latency, calls) per step, without pandas."""
    _, steps, calls = trace._rows
    per_step: dict[int, list[str]] = defaultdict(list)
    for c in calls:
        per_step[c["step"]].append(f"{c['tool']} {c['outcome']}")
    return [
        (r[1], _money(r[7]), _money(r[8]), f"{r[2] + r[4] + r[5]:,}/{r[3]:,}", f"{r[9]:.3f}s", ", ".join(per_step.get(r[1], [])) or "-")
        for r in steps
    ]


def trace_text(trace: Trace) -> str:
    """A run for a terminal: the headline, then one line per step."""
    if not trace.records:
        return f"Run {trace.run_id}: empty trace ({trace.file})"
    lines = _headline(trace)
    rows = _step_table(trace)
    if rows:
        lines.append(f"{'step':>4}  {'cost':>9}  {'total':>9}  {'tokens in/out':>14}  {'latency':>8}  tools")
        lines += [f"{k:>4}  {c:>9}  {cum:>9}  {tok:>14}  {lat:>8}  {calls}" for k, c, cum, tok, lat, calls in rows]
        last = rows[-1][0]
        lines.append(f"trace.step({min(4, last)}) shows what happened at step {min(4, last)}; file: {trace.file}")
    return "\n".join(lines)


def trace_html(trace: Trace) -> str:
    """A run for a notebook: the headline and a table of steps."""
    e = html.escape
    if not trace.records:
        return f"<div>Run <code>{e(trace.run_id)}</code>: empty trace</div>"
    head = "".join(f"<div>{e(x)}</div>" for x in _headline(trace))
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'>{e(str(v))}</td>" for v in row) + "</tr>"
        for row in _step_table(trace)
    )
    cols = "".join(f"<th style='text-align:left'>{c}</th>" for c in ("step", "cost", "total", "tokens in/out", "latency", "tools"))
    return (
        f"<div class='agentlab-trace'>{head}<table><thead><tr>{cols}</tr></thead><tbody>{body}</tbody></table>"
        "<div><code>trace.step(k)</code> shows what happened at step k.</div></div>"
    )


def traces_text(traces: Traces) -> str:
    """Many runs for a terminal: counts by outcome, then one line per run (the last 20)."""
    rows = traces._rows[0]
    by: dict[str, int] = defaultdict(int)
    for r in rows:
        by[r["outcome"] if r["outcome"] != "stopped" else f"stopped: {r['reason']}"] += 1
    counts = ", ".join(f"{n} {k}" for k, n in sorted(by.items()))
    lines = [f"Traces: {len(rows)} runs in {traces.folder} ({counts or 'none'}) · {_money(sum(r['cost'] for r in rows))}"]
    lines += [
        f"  {r['run_id']}  {r['outcome']:<10} {r['reason']:<14} {r['steps']:>3} steps  {_money(r['cost'])}  {_one_line(r['task'], 50)}"
        for r in rows[-20:]
    ]
    if len(rows) > 20:
        lines.append(f"  ... {len(rows) - 20} earlier runs: see .runs")
    return "\n".join(lines)


def traces_html(traces: Traces) -> str:
    return "<pre>" + html.escape(traces_text(traces)) + "</pre>"


# ------------------------------------------------------------------ public
def report_text(run_id: str, runs: str | os.PathLike[str] | None = None) -> str:
    """A readable terminal report of one run: the headline, the step table, and every step in full."""
    from .trace import load_run

    trace = load_run(run_id, runs)
    parts = [trace_text(trace)]
    parts += [step_text(view) for view in trace]
    if trace.finished is None:
        parts.append(f"The trace ends without a run_finished event: {trace.summary['detail']}.")
    return "\n\n".join(parts) + "\n"


PLOT_CODE = """\
import math

import matplotlib.pyplot as plt

from agentlab.plots import cost_curve

limits = trace.summary
fig, ax = plt.subplots(figsize=(8, 4.5))
cost_curve(
    trace.steps,
    max_cost=None if math.isnan(limits["max_cost"]) else limits["max_cost"],
    max_steps=None if math.isnan(limits["max_steps"]) else int(limits["max_steps"]),
    ax=ax,
)
plt.show()"""

PLAIN_PLOT_CODE = """\
import matplotlib.pyplot as plt

steps = trace.steps
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(steps["step"], steps["cumulative_cost"], marker="o", label="spent")
ax.bar(steps["step"], steps["cost"], alpha=0.3, label="cost of the step")
if trace.summary["max_cost"] == trace.summary["max_cost"]:  # NaN means no limit
    ax.axhline(trace.summary["max_cost"], color="crimson", linestyle="--", label="max_cost")
ax.set_xlabel("step")
ax.set_ylabel("USD")
ax.set_title(f"Cost of run {trace.run_id}")
ax.legend()
plt.show()"""
"""The same plot without agentlab.plots, for an install that lacks it."""


def _plot_code() -> str:
    import importlib.util

    return PLOT_CODE if importlib.util.find_spec("agentlab.plots") is not None else PLAIN_PLOT_CODE


def export_notebook(
    run_id: str, out_path: str | os.PathLike[str], runs: str | os.PathLike[str] | None = None
) -> Path:
    """Write one run as a Jupyter notebook: a summary, a markdown cell per step,
    and code cells that load the run and plot its cost curve. Returns the path.

    The notebook is validated with ``nbformat.validate`` before it is written.
    """
    import nbformat
    from nbformat import v4

    from .trace import load_run

    if not isinstance(out_path, (str, os.PathLike)) or not str(out_path):
        raise TypeError(f"out_path must be a file path, got {out_path!r}")
    out = Path(out_path)
    if out.suffix != ".ipynb":
        raise ValueError(f"out_path must end in .ipynb, got {str(out)!r}")
    trace = load_run(run_id, runs)
    folder = (trace.file.parent if trace.file else Path(".")).resolve()
    s = trace.summary
    intro = "\n\n".join([
        f"# Run `{trace.run_id}`",
        "\n".join(f"- {_md_escape(x)}" for x in _headline(trace)[1:]),
        f"**Ending:** {_md_escape(s['outcome'])}" + (f" — {_md_escape(s['reason'])}" if s["outcome"] != "done" else "")
        + (f": {_md_escape(s['detail'])}" if s["detail"] else ""),
    ])
    system = trace.started.get("system")
    if system:
        intro += f"\n\n**System prompt:**\n\n{_fence(_clip(system, LONG))}"
    cells = [v4.new_markdown_cell(intro)]
    cells.append(v4.new_code_cell(
        f"import agentlab\n\ntrace = agentlab.load_run({trace.run_id!r}, {str(folder)!r})\ntrace"
    ))
    cells += [v4.new_markdown_cell(step_markdown(view)) for view in trace]
    final = trace.finished
    if final is not None:
        answer = final.get("text") or ""
        end = f"## How it ended\n\n**{_md_escape(final.get('outcome'))}**: {_md_escape(final.get('reason'))}"
        if final.get("detail"):
            end += f" — {_md_escape(final.get('detail'))}"
        if answer:
            end += f"\n\n{_fence(_clip(answer, LONG))}"
        if final.get("error"):
            end += f"\n\n**Error:**\n\n{_fence(_clip(final['error'].get('traceback') or final['error'].get('message', ''), LONG))}"
    else:
        end = f"## How it ended\n\nThe trace ends without a result: {_md_escape(s['detail'])}."
    cells.append(v4.new_markdown_cell(end))
    cells.append(v4.new_markdown_cell("## Cost per step"))
    cells.append(v4.new_code_cell("trace.steps"))
    cells.append(v4.new_code_cell(_plot_code()))
    cells.append(v4.new_code_cell("trace.calls"))
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["agentlab"] = {"run_id": trace.run_id, "runs": str(folder)}
    nbformat.validate(nb)
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(out))
    return out

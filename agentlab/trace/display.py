"""A run, told as text: terminal lines, notebook HTML and markdown (pure, no I/O).

The ``repr`` of a :class:`Trace`, :class:`Traces` and :class:`StepView`, and
the pieces :mod:`agentlab.report` assembles into a report or a notebook.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._model_label import started_label
from .._safe_text import NO_MATH, clean, html_text, md_code, md_text, no_math_html, terminal_text, usd
from .._shorten import shorten
from ..vocab import EventKind
from .frames import STEPS_COLUMNS

if TYPE_CHECKING:
    from .runs import StepView, Trace, Traces

SHORT = 160
"""Characters of a message or result shown in a terminal line."""
LONG = 4000
"""Characters of a message or result shown in a notebook cell."""


# ------------------------------------------------------------ small pieces
def seconds(s: float) -> str:
    """A duration a reader can tell from zero: ``1.234s``, ``13.8ms``, ``0.002ms`` (an offline model is that fast)."""
    s = float(s)
    if s >= 1 or s == 0:
        return f"{s:.3f}s"
    ms = s * 1000
    return f"{ms:.1f}ms" if ms >= 1 else f"{ms:.3f}ms"


def clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters by the lab's one rule (:func:`agentlab._shorten.shorten`)."""
    return shorten(text, n)


def _one_line(text: str, n: int = SHORT) -> str:
    return clip(" ".join(str(text).split()), n)


def _args(args: Any, n: int = SHORT) -> str:
    return clip(json.dumps(args, ensure_ascii=False, default=str), n)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _money(x: float | None) -> str:
    """Dollars; an unknown cost (a model with no price: None or NaN) says so instead of failing."""
    return "no price" if x is None or x != x else usd(x)


def _limit(x: float, fmt: str) -> str:
    return "∞" if x != x else format(x, fmt)  # NaN: no limit


def _block_lines(block: Any, n: int) -> list[str]:
    """One content block as short labelled lines."""
    if not isinstance(block, dict):
        return [clip(str(block), n)]
    kind = block.get("type")
    if kind == "text":
        return [clip(block.get("text", ""), n)]
    if kind == "tool_use":
        return [f"→ {block.get('name')}({_args(block.get('input', {}), n)})  [{block.get('id', '')}]"]
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            content = " ".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
        err = " (error)" if block.get("is_error") else ""
        return [f"← {block.get('tool_use_id', '')}{err}: {clip(content, n)}"]
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
        took = f" in {seconds(c['end'] - c['start'])}"
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
        read, write = u.get("cache_read_input_tokens", 0), u.get("cache_creation_input_tokens", 0)
        cache = f" (+{read:,} cache read, {write:,} cache write)"
    est = ", estimated" if r.get("estimated") else ""
    thinking = f" ({u['thinking_tokens']:,} thinking)" if u.get("thinking_tokens") else ""
    return (
        f"stop_reason={r.get('stop_reason')} · {u.get('input_tokens', 0):,} in{cache} / "
        f"{u.get('output_tokens', 0):,} out tokens{thinking}{est} · {_money(r.get('cost', 0.0))} "
        f"(total {_money(r.get('spent', 0.0))}) · {seconds(r.get('latency', 0.0))}"
    )


def _step_extras(view: StepView) -> list[str]:
    """Retries, nudges and the end of the run, if they happened at this step."""
    out = []
    for e in view.events:
        kind = e.get("kind")
        if kind == EventKind.MODEL_RETRY:
            out.append(f"model retry {e.get('attempt')}: {e.get('error')} (waited {e.get('wait', 0):.2f}s)")
        elif kind == EventKind.TOOL_RETRY:
            out.append(f"{e.get('tool')} retry {e.get('attempt')}: {e.get('error')} (waited {e.get('wait', 0):.2f}s)")
        elif kind == EventKind.NUDGED:
            out.append(f"loop guard: {e.get('tool')} called {e.get('count')} times with the same arguments; nudged")
        elif kind == EventKind.RUN_FINISHED:
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
    return terminal_text("\n".join(lines))  # a repr is printed to terminals too


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


def fence(text: str) -> str:
    """A fenced block that the text cannot close early (inside it, nothing is markup)."""
    text = clean(text)
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"


def step_markdown(view: StepView, n: int = LONG) -> str:
    """One step as a notebook markdown cell: messages, the reply, calls and results."""
    parts = [f"## Step {md_escape(view.step)}", f"**Reply:** {md_escape(_reply_head(view))}"]
    if view.new:
        body = "\n".join(line for m in view.new for line in message_lines(m, n))
        parts.append(f"**Sent** {_sent(view)}:\n\n{fence(body)}")
    if view.reply and view.reply.get("content"):
        body = "\n".join(message_lines({"role": "assistant", "content": view.reply["content"]}, n))
        parts.append(f"**The model answered:**\n\n{fence(body)}")
    if view.calls:
        rows = [
            "| # | tool | mode | arguments | outcome | attempts | seconds | result |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in view.calls:
            secs = f"{c['end'] - c['start']:.3f}" if c.get("end") is not None and c.get("start") is not None else ""
            rows.append(
                f"| {_cell(c.get('index', 0))} | {_cell(c.get('tool'))} | {_cell(c.get('mode') or '')} | "
                f"{_cell(_args(c.get('args', {}), 300))} "
                f"| {_cell(c.get('outcome'))} | {_cell(c.get('attempts', 0))} | {secs} | "
                f"{_cell(_one_line(c.get('result') or '', 300))} |"
            )
        parts.append("**Tool calls:**\n\n" + "\n".join(rows))
        for c in view.calls:
            if tb := _traceback(c):
                parts.append(f"**Traceback of {md_escape(c.get('tool'))}:**\n\n{fence(tb)}")
    extras = _step_extras(view)
    if extras:
        parts.append("\n".join(f"- {md_escape(x)}" for x in extras))
    return "\n\n".join(parts)


def md_escape(text: object) -> str:
    """Foreign text in inline markdown: shown as written, never a link, an image or HTML."""
    return md_text(text)


def _cell(text: Any) -> str:
    """Text safe inside a markdown table cell: one literal code span."""
    return md_code(text) if text or text == 0 else ""


STEP_STYLE = "border-top:1px solid #d0d7de;padding:3px 0;font-size:13px"
HEAD_STYLE = "color:#57606a"


def step_block(step: object, head: str, body: Iterable[str]) -> str:
    """The one markup of a step in HTML: the trace's repr of a step and the live panel's log both use it.

    ``head`` and ``body`` are HTML already (each caller escapes its text with
    :func:`agentlab._safe_text.html_text`); the step number is escaped here. One
    class and one ``data-step`` let a page, a stylesheet or a test find a step
    whichever view drew it.
    """
    return (
        f"<div class='agentlab-step {NO_MATH}' data-step='{html_text(step)}' style='{STEP_STYLE}'>"
        f"<div class='agentlab-step-head' style='{HEAD_STYLE}'>{head}</div>{''.join(body)}</div>"
    )


def step_html(view: StepView) -> str:
    """One step as HTML for a notebook output."""
    e = html_text
    sent = "".join(f"<li><code>{e(line)}</code></li>" for m in view.new for line in message_lines(m, LONG))
    reply = ""
    if view.reply and view.reply.get("content"):
        reply = "".join(
            f"<li><code>{e(line)}</code></li>"
            for line in message_lines({"role": "assistant", "content": view.reply["content"]}, LONG)
        )
    calls = "".join(f"<li><code>{e(_call_line(c, LONG))}</code></li>" for c in view.calls)
    extras = "".join(f"<li>{e(x)}</li>" for x in _step_extras(view))
    body = [
        f"<div>sent {e(_sent(view))}:</div><ul>{sent}</ul>",
        f"<div>reply: {e(_reply_head(view))}</div><ul>{reply}</ul>",
    ]
    if calls:
        body.append(f"<div>tools:</div><ul>{calls}</ul>")
    if extras:
        body.append(f"<ul>{extras}</ul>")
    return step_block(view.step, f"<b>Step {e(view.step)}</b> of run <code>{e(view.run_id)}</code>", body)


# ----------------------------------------------------------------- one run
def _tokens_in(s: Any) -> str:
    """Every input token the model read, as the steps' ``tokens in`` counts them: the API's ``input_tokens`` is the
    uncached part only (58 of a cached session's three million), so a cached run shows the split beside it."""
    read, write = int(s.get("cache_read_tokens") or 0), int(s.get("cache_write_tokens") or 0)
    if not (read or write):
        return f"{s['input_tokens']:,} in"
    total = s["input_tokens"] + read + write
    return f"{total:,} in ({s['input_tokens']:,} uncached, {read:,} cache reads, {write:,} cache writes)"


def headline(trace: Trace) -> list[str]:
    s = trace.summary
    ending = s["outcome"] if s["outcome"] != "stopped" else f"stopped: {s['reason']}"
    if s["detail"] and s["outcome"] != "done":
        ending += f" ({s['detail']})"
    budget = (
        f"budgets: steps {_limit(s['max_steps'], '.0f')} · cost "
        f"{'∞' if s['max_cost'] != s['max_cost'] else _money(s['max_cost'])} · deadline {_limit(s['deadline_s'], 'g')}s"
    )
    tools = ", ".join(f"{t.get('name')} ({t.get('mode')})" for t in trace.started.get("tools") or []) or "none"
    unpriced = (trace.started.get("recorded") or {}).get("unpriced_models") or []
    cost_note = (
        [f"no price for model {', '.join(m or '(none named)' for m in unpriced)}: costs are unknown (NaN), not $0"]
        if unpriced
        else []
    )
    audit = (trace.started.get("recorded") or {}).get("audit")
    audit_note = [f"import audit: {_audit_line(audit)}"] if isinstance(audit, dict) else []
    thinking_note = _thinking_line(trace)
    return [
        f"Run {trace.run_id} · {ending}",
        f"task: {_one_line(s['task'])}",
        f"model {started_label(trace.started)} · {s['steps']} steps · {_money(s['cost'])} · {_tokens_in(s)} / "
        f"{s['output_tokens']:,} out tokens · {s['seconds']:.2f}s · started {s['started_at'] or '?'}",
        f"{budget} · tools: {tools}",
        *thinking_note,
        *cost_note,
        *audit_note,
    ]


_THINKING, _OUTPUT = map(list(STEPS_COLUMNS).index, ("thinking_tokens", "output_tokens"))


def _thinking_line(trace: Trace) -> list[str]:
    """How much of the run's output was reasoning (the replies' ``output_tokens_details.thinking_tokens``): one
    line, or none when no reply reported any. Thinking is billed as output at the same rate, so its share of the
    output tokens is its share of the output bill."""
    steps = trace.rows.steps
    thinking = sum(r[_THINKING] for r in steps)
    if not thinking:
        return []
    output = sum(r[_OUTPUT] for r in steps)
    share = f" ({thinking / output:.0%} of the output bill)" if output else ""
    return [f"thinking: {thinking:,} of the {output:,} output tokens were reasoning{share}"]


def _audit_line(audit: dict[str, Any]) -> str:
    """An imported run's audit in one line (the findings themselves: ``trace.started["recorded"]["audit"]``)."""
    found = audit.get("findings") or []
    if found:
        checks = ", ".join(sorted({str(f.get("check")) for f in found if isinstance(f, dict)}))
        return f"{len(found)} finding(s) ({checks}): the figures cannot be vouched for; see agentlab import --check"
    if audit.get("estimated_steps"):
        return f"usage of {audit['estimated_steps']} step(s) estimated, and said so"
    return "ok"


def _step_table(trace: Trace) -> list[tuple[int, str, str, str, str, str]]:
    """(step, cost, cumulative, tokens, latency, calls) per step, without pandas."""
    rows = trace.rows
    per_step: dict[int, list[str]] = defaultdict(list)
    for c in rows.calls:
        per_step[c["step"]].append(f"{c['tool']} {c['outcome']}")
    table = []
    for r in rows.steps:
        s = dict(zip(STEPS_COLUMNS, r, strict=False))
        tokens = f"{s['context_tokens']:,}/{s['output_tokens']:,}"
        calls = ", ".join(per_step.get(s["step"], [])) or "-"
        table.append((s["step"], _money(s["cost"]), _money(s["cumulative_cost"]), tokens, seconds(s["latency"]), calls))
    return table


def trace_text(trace: Trace) -> str:
    """A run for a terminal: the headline, then one line per step."""
    if not trace.records:
        return terminal_text(f"Run {trace.run_id}: empty trace ({trace.file})")
    lines = headline(trace)
    rows = _step_table(trace)
    if rows:
        lines.append(f"{'step':>4}  {'cost':>9}  {'total':>9}  {'tokens in/out':>14}  {'latency':>8}  tools")
        lines += [f"{k:>4}  {c:>9}  {cum:>9}  {tok:>14}  {lat:>8}  {calls}" for k, c, cum, tok, lat, calls in rows]
        last = rows[-1][0]
        lines.append(f"trace.step({min(4, last)}) shows what happened at step {min(4, last)}; file: {trace.file}")
    return terminal_text("\n".join(lines))


def trace_html(trace: Trace) -> str:
    """A run for a notebook: the headline and a table of steps."""
    e = html_text
    if not trace.records:
        return f"<div>Run <code>{e(trace.run_id)}</code>: empty trace</div>"
    head = "".join(f"<div>{e(x)}</div>" for x in headline(trace))
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'>{e(str(v))}</td>" for v in row) + "</tr>"
        for row in _step_table(trace)
    )
    cols = "".join(
        f"<th style='text-align:left'>{c}</th>" for c in ("step", "cost", "total", "tokens in/out", "latency", "tools")
    )
    return no_math_html(
        f"<div class='agentlab-trace'>{head}<table><thead><tr>{cols}</tr></thead><tbody>{body}</tbody></table>"
        "<div><code>trace.step(k)</code> shows what happened at step k.</div></div>"
    )


def traces_text(traces: Traces) -> str:
    """Many runs for a terminal: counts by outcome, then one line per run (the last 20)."""
    rows = traces.run_rows
    by: dict[str, int] = defaultdict(int)
    for r in rows:
        by[r["outcome"] if r["outcome"] != "stopped" else f"stopped: {r['reason']}"] += 1
    counts = ", ".join(f"{n} {k}" for k, n in sorted(by.items()))
    priced = [r["cost"] for r in rows if r["cost"] == r["cost"]]  # NaN: a run whose model has no known price
    unpriced = f" + {len(rows) - len(priced)} run(s) with no price" if len(priced) < len(rows) else ""
    lines = [f"Traces: {len(rows)} runs in {traces.folder} ({counts or 'none'}) · {_money(sum(priced))}{unpriced}"]
    audited = [r.get("audit") for r in rows if r.get("audit")]  # imported runs: each audits itself
    if audited:
        by_status = {k: sum(a == k for a in audited) for k in ("ok", "estimated", "findings")}
        said = ", ".join(f"{n} {k}" for k, n in by_status.items() if n)
        more = " (runs['audit_findings'] counts each run's; agentlab import --check lists them)"
        lines.append(f"import audit of {len(audited)} run(s): {said}" + (more if by_status["findings"] else ""))
    lines += [
        f"  {r['run_id']}  {r['outcome']:<10} {r['reason']:<14} {r['steps']:>3} steps  {_money(r['cost'])}  "
        f"{_one_line(r['task'], 50)}"
        for r in rows[-20:]
    ]
    if len(rows) > 20:
        lines.append(f"  ... {len(rows) - 20} earlier runs: see .runs")
    return terminal_text("\n".join(lines))


def traces_html(traces: Traces) -> str:
    return no_math_html("<pre>" + html_text(traces_text(traces)) + "</pre>")

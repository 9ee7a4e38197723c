"""HTML for the panel's text parts: pure functions from view-model values to strings.

HTML, not ``Label``: a widget label renders ``$...$`` as MathJax, so dollar
amounts must go through an HTML widget (and ``$`` is escaped as ``&#36;``).
Every tool outcome gets its own class *and* inline style, so it reads the same
in JupyterLab, Notebook 7 and VS Code without a stylesheet, and tests can
find it by class.
"""

from __future__ import annotations

import json
from typing import Any

from .._safe_text import html_text, usd
from ..trace.display import step_block
from ._state import CallEntry, Gauge, PanelState, StepEntry

PREVIEW_CHARS = 300
"""Results longer than this are shown cut, with the whole text one click away."""
FULL_CHARS = 20_000
"""Even the "whole" text stops here: a 5 MB tool result must not freeze the browser."""

OUTCOME_STYLE = {
    "requested": "color:#1f6feb;border:1px dashed #1f6feb",
    "running": "color:#1f6feb;border:1px solid #1f6feb",
    "ok": "color:#1a7f37;border:1px solid #1a7f37",
    "retried": "color:#9a6700;border:1px solid #d4a72c;background:#fff8c5",
    "recoverable": "color:#bc4c00;border:1px solid #fb8f44;background:#fff1e5",
    "fatal": "color:#fff;background:#cf222e;border:1px solid #cf222e;font-weight:bold",
    "nudged": "color:#8250df;border:1px solid #8250df;background:#fbefff",
    "cancelled": "color:#57606a;border:1px solid #8c959f;text-decoration:line-through",
}
LEVEL_COLOUR = {"idle": "#57606a", "ok": "#1a7f37", "warn": "#9a6700", "danger": "#cf222e", "stopped": "#cf222e"}
BAR_STYLE = {"idle": "", "ok": "success", "warn": "warning", "danger": "danger", "stopped": "danger"}
"""ipywidgets progress-bar styles for each gauge level."""


def esc(text: Any) -> str:
    """HTML-escape (an element or a quoted attribute), and keep ``$`` away from MathJax."""
    return html_text(text)


def outcome_label(call: CallEntry) -> str:
    """``ok``, ``retried 2×``, ``recoverable``, ``fatal``, ``nudged``..."""
    if call.outcome == "retried":
        return f"retried {max(call.attempts - 1, call.retries)}×"
    if call.outcome == "requested":
        return "awaiting"
    return call.outcome


def _seconds(s: float | None) -> str:
    if s is None:
        return ""
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def result_html(text: str, preview: int = PREVIEW_CHARS) -> str:
    """A result, cut to ``preview`` characters with a ``<details>`` to see it whole."""
    if len(text) <= preview:
        return f"<pre class='agentlab-result' style='{_PRE}'>{esc(text)}</pre>"
    whole = (
        text
        if len(text) <= FULL_CHARS
        else text[:FULL_CHARS] + f"\n… ({len(text) - FULL_CHARS:,} more characters in the trace)"
    )
    return (
        f"<pre class='agentlab-result agentlab-truncated' style='{_PRE}'>{esc(text[:preview])}…</pre>"
        f"<details class='agentlab-full'><summary style='cursor:pointer;color:#1f6feb'>show all {len(text):,} "
        "characters</summary>"
        f"<pre style='{_PRE}'>{esc(whole)}</pre></details>"
    )


_PRE = "white-space:pre-wrap;word-break:break-word;margin:2px 0 2px 1.5em;font-size:12px;max-height:30em;overflow:auto"


_args_json = json.JSONEncoder(ensure_ascii=False, default=str).encode
"""A call's arguments as JSON (``json.dumps`` with these options makes an encoder for each call)."""


def call_html(call: CallEntry) -> str:
    args = _args_json(call.args)
    mode = f"<span class='agentlab-mode' style='color:#57606a'>[{esc(str(call.mode or '?'))}]</span>"
    badge = (
        f"<span class='agentlab-outcome agentlab-outcome-{esc(str(call.outcome))}' "
        f"style='{OUTCOME_STYLE.get(call.outcome, '')};border-radius:3px;padding:0 4px;font-size:11px'>"
        f"{esc(str(outcome_label(call)))}</span>"
    )
    took = f" <span style='color:#57606a'>{_seconds(call.duration)}</span>" if call.duration is not None else ""
    head = f"<div class='agentlab-call'>call <b>{esc(str(call.tool))}</b>({esc(args)}) {mode} {badge}{took}</div>"
    body = result_html(call.result) if call.result else ""
    if call.error and call.outcome == "fatal":
        body += f"<div style='color:#cf222e;margin-left:1.5em'>{esc(call.error)}</div>"
    return head + body


def step_html(entry: StepEntry) -> str:
    """One step of the log: model line, the assistant's text, then each call, in the trace's step markup
    (:func:`agentlab.trace.display.step_block`), so a step reads the same live and read back."""
    bits = [f"<b>step {esc(entry.step)}</b>"]
    if entry.latency is not None:
        bits.append(f"model {_seconds(entry.latency)}")
    if entry.input_tokens or entry.output_tokens:
        thinking = f" (of which thinking {entry.thinking_tokens:,})" if entry.thinking_tokens else ""
        bits.append(f"{entry.context_tokens:,} in / {entry.output_tokens:,} out tokens{thinking}")
    if entry.cost:
        bits.append(usd(entry.cost))
    if entry.model_retries:
        bits.append(f"model retried {entry.model_retries}×")
    if entry.stop_reason:
        bits.append(f"stop_reason={entry.stop_reason}")
    head = bits[0] + ("" if len(bits) == 1 else " · " + esc(" · ".join(bits[1:])))
    out = []
    if entry.thinking:
        out.append(
            "<details class='agentlab-thinking' style='margin-left:1em;color:#57606a'>"
            f"<summary style='cursor:pointer'><i>thinking</i> ({len(entry.thinking):,} chars)</summary>"
            f"<div style='white-space:pre-wrap'>{esc(entry.thinking)}</div></details>"
        )
    if entry.text:
        cursor = "<span class='agentlab-cursor'>▍</span>" if entry.streaming else ""
        out.append(
            "<div class='agentlab-text' style='white-space:pre-wrap;margin-left:1em'><i>said</i> "
            f"{esc(entry.text)}{cursor}</div>"
        )
    for index in sorted(entry.forming):
        out.append(
            f"<div class='agentlab-forming' style='margin-left:1em;color:#57606a'><i>tool call forming</i> "
            f"<code>{esc(entry.forming[index])}</code></div>"
        )
    if entry.error:
        out.append(f"<div style='color:#cf222e;margin-left:1em'>{esc(entry.error)}</div>")
    out.extend(call_html(c) for c in entry.calls)
    return step_block(entry.step, head, out)


def gauge_html(g: Gauge) -> str:
    """The number beside a gauge's bar, coloured by its level."""
    note = " — stopped the run" if g.stopped_run else ""
    return (
        f"<span class='agentlab-gauge-text agentlab-level-{esc(g.level)}' "
        f"style='color:{LEVEL_COLOUR.get(g.level, LEVEL_COLOUR['idle'])};font-family:monospace'>"
        f"{esc(g.text + note)}</span>"
    )


def status_html(s: PanelState) -> str:
    colour = {"done": "#1a7f37", "stopped": "#cf222e"}.get(s.outcome or "", "#1f6feb")
    parts = [
        f"<b>run</b> <code>{esc(s.run_id or '—')}</code>",
        f"<b>model</b> <code>{esc(s.model or '—')}</code>",
        "<b>phase</b> <span class='agentlab-phase' "
        f"style='color:{colour};font-weight:bold'>{esc(s.status_line())}</span>",
    ]
    if s.context_tokens is not None:
        parts.append(f"<b>context</b> <span class='agentlab-context'>{s.context_tokens:,} tokens</span>")
        parts.append(f"<b>output</b> <span class='agentlab-output'>{esc(s.output_line())}</span>")
    line = " · ".join(parts)
    if s.outcome == "done" and s.answer:
        line += f"<div class='agentlab-answer' style='white-space:pre-wrap'><b>answer</b> {esc(s.answer)}</div>"
    if s.error:
        line += f"<div style='color:#cf222e'>{esc(s.error)}</div>"
    return f"<div class='agentlab-status' style='font-size:13px'>{line}</div>"

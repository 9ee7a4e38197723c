"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``).

What the files hold, as found in real rollouts (codex_cli_rs 0.4x-0.6x, codex-tui 0.125):

- every line is ``{"timestamp", "type", "payload"}``; ``type`` is
  ``session_meta`` (first line: id, cwd, cli version, instructions),
  ``turn_context`` (the model and policies for the next call), ``response_item``
  (what went to or came from the model: ``message``, ``reasoning``,
  ``function_call``/``custom_tool_call`` and their ``*_output``) or
  ``event_msg`` (what the terminal showed);
- one API call is one ``event_msg`` of type ``token_count`` whose ``info``
  holds the call's own usage in ``last_token_usage`` and the session's running
  total in ``total_token_usage``. Codex writes the same event again after the
  call's tools ran (same totals): a token event whose total did not move is a
  copy, not a call;
- older rollouts write the call's token event before its output items; newer
  ones (codex-tui 0.125, checked on a real rollout) write the output items
  first and the token event once, when the response completed. Both orders
  give one call per token event; ``input_tokens`` *includes*
  ``cached_input_tokens`` and ``output_tokens`` includes the reasoning tokens
  (OpenAI's usage), mapped onto input / cache read / output.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .audit import token_total_problem
from .build import RecordedRun, RecordedStep, count, recorded_run, seconds, split_by_model
from .claude_code import read_lines

FORMAT = "codex"
LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_OUTPUTS = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
_RESULTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})


def looks_like(obj: dict[str, Any]) -> bool:
    """A rollout line: ``{"timestamp", "type", "payload"}`` with one of Codex's line types."""
    return obj.get("type") in LINE_TYPES and isinstance(obj.get("payload"), dict) and "timestamp" in obj


def _usage(u: dict[str, Any]) -> dict[str, Any]:
    cached = count(u.get("cached_input_tokens"))
    return {
        "input_tokens": max(count(u.get("input_tokens")) - cached, 0),
        "output_tokens": count(u.get("output_tokens")),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
    }


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def _block(p: dict[str, Any]) -> dict[str, Any] | None:
    """A response item the model wrote, as a Messages API content block."""
    t = p.get("type")
    if t == "message":
        text = _text(p.get("content"))
        return {"type": "text", "text": text} if text else None
    if t == "reasoning":
        summary = "\n\n".join(str(s.get("text", "")) for s in p.get("summary") or [] if isinstance(s, dict))
        return {"type": "thinking", "thinking": summary, "signature": ""} if summary else None
    if t == "function_call":
        args: Any = p.get("arguments")
        try:
            args = json.loads(args) if isinstance(args, str) and args.strip() else (args or {})
        except ValueError:
            args = {"arguments": args}
        return {
            "type": "tool_use",
            "id": str(p.get("call_id") or p.get("id") or ""),
            "name": str(p.get("name") or ""),
            "input": args if isinstance(args, dict) else {"value": args},
        }
    if t == "custom_tool_call":
        return {
            "type": "tool_use",
            "id": str(p.get("call_id") or p.get("id") or ""),
            "name": str(p.get("name") or ""),
            "input": {"input": p.get("input")},
        }
    if t == "local_shell_call":
        return {
            "type": "tool_use",
            "id": str(p.get("call_id") or p.get("id") or ""),
            "name": "local_shell",
            "input": p.get("action") if isinstance(p.get("action"), dict) else {},
        }
    if t == "web_search_call":
        return {
            "type": "server_tool_use",
            "id": str(p.get("id") or ""),
            "name": "web_search",
            "input": p.get("action") if isinstance(p.get("action"), dict) else {},
        }
    return None


def _result(p: dict[str, Any]) -> dict[str, Any]:
    out = p.get("output")
    if isinstance(out, dict):  # older rollouts: {"output": "...", "metadata": {...}}
        out = out.get("output", json.dumps(out))
    return {
        "type": "tool_result",
        "tool_use_id": str(p.get("call_id") or ""),
        "content": "" if out is None else str(out),
    }


def parse_file(file: Path) -> list[RecordedRun]:
    lines, _ = read_lines(file)
    meta: dict[str, Any] = {}
    model = ""
    system: str | None = None
    messages: list[dict[str, Any]] = []
    steps: list[RecordedStep] = []
    t0: float | None = None
    last_t: float | None = None
    sent_t: float | None = None  # when the next call's input was complete (a turn context, a result, the user)
    last_total: Any = None
    copies = 0
    open_step: RecordedStep | None = None  # the call whose output items are arriving
    answered = False  # results or user words came after the open call's output
    tool_start: dict[str, float | None] = {}
    cuts: list[tuple[int, str]] = []  # (index of the first step after a compaction, its summary)
    # Codex Desktop writes the user's words only as an ``event_msg`` of type ``user_message``; the CLI
    # writes them twice (that event and a ``response_item`` message), so the event counts only without the other
    words_in_events = not any(
        d.get("type") == "response_item"
        and isinstance(d.get("payload"), dict)
        and d["payload"].get("type") == "message"
        and d["payload"].get("role") == "user"
        for d in lines
    )
    for d in lines:
        if not looks_like(d):
            continue
        p = d["payload"]
        ts = seconds(d.get("timestamp"))
        if ts is not None and t0 is None:
            t0 = ts
        t = None if ts is None or t0 is None else ts - t0
        kind, ptype = d.get("type"), p.get("type")
        if kind == "session_meta":
            meta = {
                k: p.get(k)
                for k in ("id", "cwd", "originator", "cli_version", "model_provider", "source")
                if p.get(k) is not None
            }
            base = p.get("base_instructions")
            inst = p.get("instructions") or (base.get("text") if isinstance(base, dict) else base)
            system = str(inst) if inst else None
            continue
        if kind == "compacted":  # the context was summarised: the next call starts from the summary
            cuts.append((len(steps), str(p.get("message") or "")))
            continue
        if kind == "turn_context":
            model = str(p.get("model") or model)
            sent_t = t if t is not None else sent_t
            continue
        if kind == "event_msg" and ptype == "user_message" and words_in_events:
            kind, ptype = "response_item", "message"
            p = {"type": "message", "role": "user", "content": str(p.get("message") or "")}
        if kind == "event_msg":
            if ptype == "token_count" and isinstance(p.get("info"), dict):
                info = p["info"]
                total = info.get("total_token_usage")
                if total is not None and total == last_total:
                    copies += 1  # written again after the tools ran: the same call
                    continue
                last = info.get("last_token_usage")
                if not isinstance(last, dict):  # older rollouts keep only the running total: the call is its growth
                    last = {
                        k: int((total or {}).get(k) or 0) - int((last_total or {}).get(k) or 0) for k in (total or {})
                    }
                last_total = total
                if open_step is not None and open_step.usage is None and not answered:
                    # newer rollouts (0.1xx) write the call's output items first, then its usage
                    open_step.usage = _usage(last)
                    open_step.replied_at = t if t is not None else open_step.replied_at
                else:  # older ones write the usage first, then the items
                    open_step = RecordedStep(
                        content=[], usage=_usage(last), model=model, requested_at=sent_t, replied_at=t
                    )
                    steps.append(open_step)
                    answered = False
            last_t = t if t is not None else last_t
            continue
        if kind != "response_item":
            continue
        if ptype == "message" and p.get("role") in ("user", "developer", "system"):
            text = _text(p.get("content"))
            text_block: dict[str, Any] = {"type": "text", "text": text}
            if not steps:
                messages.append({"role": "user", "content": [text_block]})
            else:
                steps[-1].after = (steps[-1].after or []) + [text_block]
                steps[-1].after_at = t
                answered = True
            sent_t = t if t is not None else sent_t
        elif ptype in _RESULTS:
            if steps:
                res = _result(p)
                steps[-1].after = (steps[-1].after or []) + [res]
                steps[-1].after_at = t
                cid = res["tool_use_id"]
                steps[-1].tool_times[cid] = (tool_start.pop(cid, steps[-1].replied_at), t)
                answered = True
            sent_t = t if t is not None else sent_t
        elif ptype in _OUTPUTS or (ptype == "message" and p.get("role") == "assistant"):
            block = _block(p)
            if open_step is None or answered:
                # output with no token event of its own (an interrupted turn): a call, usage unknown
                open_step = RecordedStep(content=[], usage=None, model=model, requested_at=sent_t, replied_at=t)
                steps.append(open_step)
                answered = False
            if block is not None:
                open_step.content.append(block)
                if block["type"] == "tool_use":
                    tool_start[block["id"]] = t
        last_t = t if t is not None else last_t
    steps = [s for s in steps if s.content or s.usage]
    if not steps:
        return []
    if copies:
        meta["repeated_usage_events"] = copies
    if isinstance(last_total, dict):  # the session's own running total: every call it counted is a step here
        found = token_total_problem(
            [s.usage for s in steps if s.usage is not None],
            {
                "input_tokens": count(last_total.get("input_tokens")),
                "output_tokens": count(last_total.get("output_tokens")),
            },
            "the rollout's running total (total_token_usage)",
        )
        if found:
            meta["record_total"] = found
    started = None if t0 is None else datetime.fromtimestamp(t0, UTC).isoformat()
    run_id = file.name.removesuffix(".jsonl")
    whole = recorded_run(
        file,
        run_id,
        FORMAT,
        messages,
        steps,
        system=system,
        model=steps[0].model or model,
        started_at=started,
        meta={"session": meta.get("id"), **meta},
        ended_at=last_t,
    )
    return [part for seg in _compactions(whole, cuts) for part in split_by_model(seg)]


def _compactions(run: RecordedRun, cuts: list[tuple[int, str]]) -> list[RecordedRun]:
    """``run`` cut at each compaction: the part after one starts from its summary (the context
    drops there), as Claude Code sessions are cut at ``compact_boundary``."""
    cuts = [(i, text) for i, text in cuts if 0 < i < len(run.steps)]
    if not cuts:
        return [run]
    out: list[RecordedRun] = []
    bounds = [(0, None), *cuts]
    for n, (start, summary) in enumerate(bounds):
        end = bounds[n + 1][0] if n + 1 < len(bounds) else len(run.steps)
        msgs = run.messages if summary is None else [{"role": "user", "content": [{"type": "text", "text": summary}]}]
        out.append(
            replace(
                run,
                run_id=run.run_id if n == 0 else f"{run.run_id}-seg{n}",
                messages=msgs,
                steps=run.steps[start:end],
                meta={
                    **run.meta,
                    "segment": n,
                    "boundary": None if n == 0 else "compact",
                    "previous": out[-1].run_id if out else None,
                },
            )
        )
    return out

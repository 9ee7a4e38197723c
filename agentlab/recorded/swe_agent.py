"""mini-swe-agent ``.traj.json`` and SWE-agent ``.traj`` trajectories.

Both are one JSON document per run with the conversation in OpenAI chat form.

- **mini-swe-agent** (``{"info", "messages", "trajectory_format"}``, or a bare
  list of messages in early versions): each assistant message carries the raw
  response in ``extra.response`` with OpenAI-form ``usage`` (``prompt_tokens``
  *includes* cached tokens, in ``prompt_tokens_details.cached_tokens`` or a
  provider field) and often a per-call ``cost``; ``info`` holds the exit status,
  the model and the run's recorded total cost.
- **SWE-agent** (``{"trajectory", "history", "info"}``): ``history`` holds the
  messages (with OpenAI ``tool_calls`` and ``tool`` replies), ``trajectory`` the
  per-action execution times; only run totals of tokens are recorded
  (``info.model_stats``), so per-step usage is estimated from the text and
  marked ``estimated``.

Text-action agents (the command is a fenced ``bash`` block in the reply) get
that command as a ``tool_use`` block named ``bash`` after the reply's text, and
the observation that followed becomes its ``tool_result``, so the calls frame,
the timeline, replay and fork see tool calls as in a native run. The reply's
text is kept whole.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from . import limits as bounds
from .build import (
    RecordedRun,
    RecordedStep,
    blocks,
    first_text,
    seconds,
    stop_reason_of,
    usage_from_openai,
)

MINI = "mini-swe-agent"
SWE = "swe-agent"
# SWE-agent writes these into the history itself when it stops on an error (context
# window, cost limit...): an assistant message no model wrote, not an API call
_EXIT = re.compile(r"^\s*(?:Exit due to|Exiting due to|Exiting agent due to) ")
_BASH = re.compile(r"```(?:bash|sh)?\s*\n(.*?)\n```", re.DOTALL)


def looks_like(doc: Any) -> str | None:
    """``"mini-swe-agent"``, ``"swe-agent"`` or None for a parsed JSON document."""
    if isinstance(doc, dict):
        if isinstance(doc.get("messages"), list) and (
            "info" in doc or str(doc.get("trajectory_format", "")).startswith("mini-swe-agent")
        ):
            return MINI
        if isinstance(doc.get("trajectory"), list) and ("history" in doc or "info" in doc):
            return SWE
    # early mini-swe-agent: a bare list of chat messages with string content (a list of
    # Anthropic blocks with ts/modelInfo is a Cline history, see cline.looks_like)
    if (
        isinstance(doc, list)
        and doc
        and all(isinstance(m, dict) and "role" in m and isinstance(m.get("content"), str) for m in doc[:3])
    ):
        if not any("request" in m or "ts" in m for m in doc[:3]):
            return MINI
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


def _tool_uses(m: dict[str, Any], k: int) -> list[dict[str, Any]]:
    """The tool calls of an assistant message: OpenAI ``tool_calls``, else the fenced bash command."""
    calls = m.get("tool_calls") or []
    out: list[dict[str, Any]] = []
    for c in calls:
        fn = (c or {}).get("function") or {}
        args: Any = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                args = {"arguments": args}
        out.append(
            {
                "type": "tool_use",
                "id": c.get("id") or f"call-{k}-{len(out)}",
                "name": fn.get("name", ""),
                "input": args if isinstance(args, dict) else {"value": args},
            }
        )
    if out:
        return out
    actions = (m.get("extra") or {}).get("actions")  # mini-swe-agent 2.x: the parsed commands
    if isinstance(actions, list) and actions and all(isinstance(a, dict) and a.get("command") for a in actions):
        return [
            {
                "type": "tool_use",
                "id": str(a.get("tool_call_id") or f"call-{k}-{i}"),
                "name": "bash",
                "input": {"command": str(a["command"]).strip()},
            }
            for i, a in enumerate(actions)
        ]
    action = m.get("action")
    found = _BASH.findall(_text(m.get("content")))
    if len(found) == 1:
        return [{"type": "tool_use", "id": f"call-{k}", "name": "bash", "input": {"command": found[0].strip()}}]
    if isinstance(action, str) and action.strip():
        return [{"type": "tool_use", "id": f"call-{k}", "name": "bash", "input": {"command": action.strip()}}]
    return []


def parse(doc: Any, file: Path, fmt: str) -> RecordedRun:
    """One trajectory document as a recorded run."""
    if isinstance(doc, list):
        doc = {"messages": doc, "info": {}}
    info = doc.get("info") or {}
    messages = doc.get("messages") if fmt == MINI else doc.get("history")
    if not isinstance(messages, list):
        raise ValueError(f"{file}: a {fmt} trajectory without a message list")
    model = _model_name(doc, info)
    durations: list[Any] = [t.get("execution_time") for t in doc.get("trajectory") or [] if isinstance(t, dict)]
    system: str | None = None
    initial: list[dict[str, Any]] = []
    steps: list[RecordedStep] = []
    t0: float | None = None
    exit_extra: dict[str, Any] = {}
    last_assistant = max(
        (i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"), default=-1
    )
    synthetic = 0
    for n, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "assistant" and n == last_assistant and _is_synthetic_exit(m):
            synthetic += 1
            continue
        if role == "system" and not steps and system is None:
            system = _text(m.get("content"))
            continue
        if role == "assistant":
            k = len(steps) + 1
            extra = m.get("extra") or {}
            resp = extra.get("response") or {}
            raw_usage = resp.get("usage") if isinstance(resp, dict) else None
            text = _text(m.get("content"))
            content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            content += _tool_uses(m, k)
            created = seconds(resp.get("created")) if isinstance(resp, dict) else None
            if created is not None and t0 is None:
                t0 = created
            cost = extra.get("cost")
            if cost is None and isinstance(raw_usage, dict):
                cost = raw_usage.get("cost")
            finish = None
            choices = resp.get("choices") if isinstance(resp, dict) else None
            if choices and isinstance(choices[0], dict):
                finish = choices[0].get("finish_reason")
            steps.append(
                RecordedStep(
                    content=content,
                    usage=usage_from_openai(raw_usage),
                    model=(resp.get("model") if isinstance(resp, dict) else None) or model,
                    stop_reason=None if finish in (None, "stop", "tool_calls") else _finish(finish),
                    replied_at=None if created is None or t0 is None else created - t0,
                    recorded_cost=float(cost) if isinstance(cost, (int, float)) else None,
                    request_id=resp.get("id") if isinstance(resp, dict) else None,
                )
            )
            continue
        if role == "exit":  # mini-swe-agent 2.x: how the run ended, not something the model was sent
            exit_extra = m.get("extra") or {}
            continue
        # user or tool messages
        content = _answer(m, steps)
        if not steps:
            initial.append({"role": "user", "content": content})
        else:
            last = steps[-1]
            last.after = (last.after or []) + content
    clock = 0.0  # no timestamps (SWE-agent): the recorded execution times still give a timeline
    for i, s in enumerate(steps):
        s.stop_reason = stop_reason_of(s.content, s.stop_reason)
        if i < len(durations) and isinstance(durations[i], (int, float)):
            cid = next((b["id"] for b in s.content if b.get("type") == "tool_use"), None)
            if s.replied_at is None and t0 is None:
                s.replied_at = clock
            if cid and s.replied_at is not None:
                s.tool_times[cid] = (s.replied_at, s.replied_at + float(durations[i]))
                clock = s.replied_at + float(durations[i])
                s.after_at = clock
    stats = info.get("model_stats") or {}
    exit_status = str(info.get("exit_status") or exit_extra.get("exit_status") or "")
    outcome = "done" if exit_status.lower() in ("submitted", "") else "stopped"
    total = stats.get("instance_cost")
    meta = {
        "exit_status": exit_status,
        "api_calls": stats.get("api_calls"),
        "recorded_tokens_sent": stats.get("tokens_sent"),
        "recorded_tokens_received": stats.get("tokens_received"),
        "trajectory_format": doc.get("trajectory_format"),
        "instance_id": doc.get("instance_id"),
        "synthetic_messages": synthetic or None,
    }
    totals = {
        k: float(v)
        for k, v in (
            ("model_calls", stats.get("api_calls")),
            ("cost", total),
            ("input_tokens", stats.get("tokens_sent")),
            ("output_tokens", stats.get("tokens_received")),
        )
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    }
    return RecordedRun(
        run_id=_run_id(file),
        format=fmt,
        source=str(file),
        messages=initial,
        steps=steps,
        task=first_text(initial)[:500],
        system=system,
        model=model,
        outcome=outcome,
        reason="" if outcome == "done" else exit_status,
        detail=f"exit status: {exit_status}" if exit_status else "",
        recorded_cost=float(total) if isinstance(total, (int, float)) else None,
        meta={k: v for k, v in meta.items() if v is not None},
        totals=totals,
    )


def _is_synthetic_exit(m: dict[str, Any]) -> bool:
    """SWE-agent's own "Exit due to context window" (and kin) message: no tool call, no model response."""
    if m.get("tool_calls"):
        return False
    if (m.get("extra") or {}).get("response"):
        return False
    return bool(_EXIT.match(_text(m.get("content")) or str(m.get("thought") or "")))


def _finish(reason: str) -> str:
    return {"length": "max_tokens", "content_filter": "refusal"}.get(reason, reason)


def _answer(m: dict[str, Any], steps: list[RecordedStep]) -> list[dict[str, Any]]:
    """A user/tool message after a step: tool results for that step's calls, else text blocks."""
    text = _text(m.get("content"))
    if steps:
        ids = [b["id"] for b in steps[-1].content if b.get("type") == "tool_use"]
        answered = {b.get("tool_use_id") for b in steps[-1].after or [] if b.get("type") == "tool_result"}
        wanted = m.get("tool_call_ids") or ([m["tool_call_id"]] if m.get("tool_call_id") else [])
        open_ids = [i for i in ids if i not in answered]
        target = [i for i in wanted if i in open_ids] or open_ids[:1]
        if target and m.get("role") in ("user", "tool"):
            return [{"type": "tool_result", "tool_use_id": target[0], "content": text}]
    return blocks(text)


def _model_name(doc: dict[str, Any], info: dict[str, Any]) -> str:
    cfg = info.get("config") or {}
    name = ((cfg.get("model") or {}).get("model_name")) if isinstance(cfg, dict) else None
    if name:
        return str(name)
    rc = doc.get("replay_config")
    if isinstance(rc, str):
        try:
            rc = json.loads(rc)
        except ValueError:
            rc = None
    if isinstance(rc, dict):
        m = (rc.get("agent") or {}).get("model") or {}
        if m.get("name") or m.get("model_name"):
            return str(m.get("name") or m.get("model_name"))
    for m in doc.get("messages") or []:
        resp = ((m or {}).get("extra") or {}).get("response") if isinstance(m, dict) else None
        if isinstance(resp, dict) and resp.get("model"):
            return str(resp["model"])
    return ""


def _run_id(file: Path) -> str:
    name = file.name
    for suffix in (".traj.json", ".traj", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return file.stem


def parse_file(file: Path) -> list[RecordedRun]:
    """The run(s) of one trajectory file: one, or one per agent of a multi-agent trajectory."""
    doc = bounds.loads(bounds.document(file), file, "the document")
    fmt = looks_like(doc)
    if fmt is None:
        raise ValueError(f"{file}: not a mini-swe-agent or SWE-agent trajectory")
    if fmt == SWE:
        agents = _agents(doc)
        if len(agents) > 1:
            return _multi_agent(doc, file, agents)
    return [parse(doc, file, fmt)]


def _agents(doc: dict[str, Any]) -> list[str]:
    """The agents whose messages a SWE-agent history interleaves, in order of appearance."""
    names = [m.get("agent") for m in doc.get("history") or [] if isinstance(m, dict)]
    return list(dict.fromkeys(str(n) for n in names if n))


def _multi_agent(doc: dict[str, Any], file: Path, agents: list[str]) -> list[RecordedRun]:
    """A CodeR-style trajectory (Manager, Reproducer, Programmer… in one history, each with
    its own system prompt): a run per agent, holding only the messages that agent saw, the
    later agents linked to the first one (the one that hands out the work).

    The record's counters (``api_calls``, ``instance_cost``) cover all agents together, so
    they stay on the first run's ``recorded`` and no single run takes its figures from them.
    """
    runs: list[RecordedRun] = []
    for agent in agents:
        part = {**doc, "history": [m for m in doc["history"] if isinstance(m, dict) and str(m.get("agent")) == agent]}
        part["info"] = {k: v for k, v in (doc.get("info") or {}).items() if k != "model_stats"}
        run = parse(part, file, SWE)
        run.run_id = f"{_run_id(file)}-{agent}"
        run.meta["agent"] = agent
        if runs:
            run.parent = {"run_id": runs[0].run_id, "step": None}
        runs.append(run)
    stats = (doc.get("info") or {}).get("model_stats") or {}
    first = runs[0]
    first.meta.update(
        {
            "agents": agents,
            "api_calls": stats.get("api_calls"),
            "calls_found_all_agents": sum(len(r.steps) for r in runs),
        }
    )
    if isinstance(stats.get("instance_cost"), (int, float)):
        first.meta["instance_cost_all_agents"] = stats["instance_cost"]
    return runs

"""OpenHands evaluation output (``output.jsonl``: one evaluated instance a line).

Each line is an ``EvalOutput``: ``instance_id``, ``instruction``, ``metadata``
(with ``llm_config.model``), ``history`` (the event stream as
``event_to_dict`` writes it: actions ``{"action": "run", "args": …}`` and
observations ``{"observation": "run", "content": …, "cause": <action id>}``)
and ``metrics`` (``accumulated_cost``, ``costs``, ``response_latencies`` by
``response_id`` and, in later versions, ``token_usages`` by ``response_id``).

A model call is one LLM response: the actions it produced carry
``tool_call_metadata.model_response`` (the litellm response: ``id``,
``choices[0].message`` with its ``tool_calls``, ``usage`` in OpenAI form), so
the actions of one response are one step and the observations whose
``tool_call_metadata.tool_call_id`` names one of its calls are its results.
Usage per step comes from ``metrics.token_usages`` for that response id, else
from the response's own ``usage``; an agent message with no response attached
is a call whose usage is estimated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .build import (
    RecordedRun,
    RecordedStep,
    seconds,
    split_by_model,
    stop_reason_of,
    usage_from_openai,
)
from .claude_code import read_lines

FORMAT = "openhands"


def looks_like(obj: dict[str, Any]) -> bool:
    return (
        "instance_id" in obj
        and isinstance(obj.get("history"), list)
        and ("metrics" in obj or "instruction" in obj or "test_result" in obj)
    )


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            v = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"arguments": raw}
        return v if isinstance(v, dict) else {"value": v}
    return {}


def _response_content(resp: dict[str, Any]) -> list[dict[str, Any]]:
    choices = resp.get("choices") or [{}]
    msg = (choices[0] or {}).get("message") or {}
    out: list[dict[str, Any]] = []
    text = msg.get("content")
    if isinstance(text, list):
        text = "".join(str(p.get("text", "")) for p in text if isinstance(p, dict))
    if text:
        out.append({"type": "text", "text": str(text)})
    for c in msg.get("tool_calls") or []:
        fn = (c or {}).get("function") or {}
        out.append(
            {
                "type": "tool_use",
                "id": str(c.get("id") or ""),
                "name": str(fn.get("name") or ""),
                "input": _args(fn.get("arguments")),
            }
        )
    return out


def _usage(u: dict[str, Any]) -> dict[str, int] | None:
    """OpenHands' ``token_usages`` entry (``prompt_tokens`` includes the cached ones) or an OpenAI usage."""
    if "prompt_tokens" not in u:
        return None
    return usage_from_openai(
        {
            "prompt_tokens": u.get("prompt_tokens"),
            "completion_tokens": u.get("completion_tokens"),
            "prompt_tokens_details": {
                "cached_tokens": u.get("cache_read_tokens")
                or (
                    (u.get("prompt_tokens_details") or {}).get("cached_tokens")
                    if isinstance(u.get("prompt_tokens_details"), dict)
                    else 0
                )
                or 0
            },
            "cache_creation_input_tokens": u.get("cache_write_tokens") or u.get("cache_creation_input_tokens") or 0,
        }
    )


def parse_instance(d: dict[str, Any], file: Path, n: int) -> RecordedRun | None:
    history = [e for e in d.get("history") or [] if isinstance(e, dict)]
    metrics: dict[str, Any] = d["metrics"] if isinstance(d.get("metrics"), dict) else {}
    by_response = {
        str(u.get("response_id")): u
        for u in metrics.get("token_usages") or []
        if isinstance(u, dict) and u.get("response_id")
    }
    latency = {
        str(x.get("response_id")): float(x.get("latency") or 0.0)
        for x in metrics.get("response_latencies") or []
        if isinstance(x, dict)
    }
    model = str(((d.get("metadata") or {}).get("llm_config") or {}).get("model") or "")
    t0 = next((seconds(e.get("timestamp")) for e in history if e.get("timestamp")), None)

    def rel(ts: Any) -> float | None:
        s = seconds(ts)
        return None if s is None or t0 is None else s - t0

    system: str | None = None
    messages: list[dict[str, Any]] = []
    steps: list[RecordedStep] = []
    step_of: dict[str, RecordedStep] = {}
    owner: dict[str, RecordedStep] = {}
    last_t: float | None = None
    for e in history:
        t = rel(e.get("timestamp"))
        meta = e.get("tool_call_metadata") if isinstance(e.get("tool_call_metadata"), dict) else None
        if e.get("action") == "system":
            if not steps:
                system = str((e.get("args") or {}).get("content") or "") or system
        elif "action" in e and e.get("source") == "agent":
            resp = (meta or {}).get("model_response") if meta else None
            rid = str(resp.get("id")) if isinstance(resp, dict) and resp.get("id") else None
            if rid is not None and rid in step_of:
                continue  # another action of a response already read
            if rid is not None and isinstance(resp, dict):
                content = _response_content(resp)
                usage = _usage(by_response[rid]) if rid in by_response else _usage(resp.get("usage") or {})
            elif e.get("action") in ("message", "finish", "think"):
                args = e.get("args") or {}
                text = str(
                    args.get("content") or args.get("final_thought") or args.get("thought") or e.get("message") or ""
                )
                content, usage = ([{"type": "text", "text": text}] if text else []), None
            else:
                continue  # an action the system took on the agent's behalf (e.g. a condensation)
            lat = latency.get(rid or "")
            step = RecordedStep(
                content=content,
                usage=usage,
                model=model,
                requested_at=None if t is None or lat is None else t - lat,
                replied_at=t,
                request_id=rid,
            )
            if step.requested_at is None:
                step.requested_at = last_t
            steps.append(step)
            if rid is not None:
                step_of[rid] = step
            for b in content:
                if b.get("type") == "tool_use":
                    owner[b["id"]] = step
        elif "observation" in e:
            cid = str((meta or {}).get("tool_call_id") or "")
            target = owner.get(cid)
            if target is not None:
                res: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": cid,
                    "content": str(e.get("content") or ""),
                }
                if e.get("observation") == "error":
                    res["is_error"] = True
                target.after = (target.after or []) + [res]
                target.after_at = t
                target.tool_times[cid] = (target.replied_at, t)
        elif e.get("source") == "user" and e.get("action") == "message":
            text = str((e.get("args") or {}).get("content") or e.get("message") or "")
            block = {"type": "text", "text": text}
            if not steps:
                messages.append({"role": "user", "content": [block]})
            else:
                steps[-1].after = (steps[-1].after or []) + [block]
                steps[-1].after_at = t
        if t is not None:
            last_t = t
    if not steps:
        return None
    if not messages and d.get("instruction"):
        messages.append({"role": "user", "content": [{"type": "text", "text": str(d["instruction"])}]})
    for s in steps:
        s.stop_reason = stop_reason_of(s.content, None)
    costs = [
        float(c["cost"])
        for c in metrics.get("costs") or []
        if isinstance(c, dict) and isinstance(c.get("cost"), (int, float))
    ]
    if len(costs) == len(steps):  # one cost per completion, in order
        for s, c in zip(steps, costs, strict=True):
            s.recorded_cost = c
    total = metrics.get("accumulated_cost")
    totals: dict[str, float] = {"cost": float(total)} if isinstance(total, (int, float)) and total > 0 else {}
    # every completion is timed, but one that came back without usage (and made no action) is not in
    # the history: a real multi-SWE-bench output times 34 responses and holds 33. The record's count wins.
    timed = len(latency)
    if timed > len(steps):
        totals["model_calls"] = timed
    err = d.get("error")
    iid = str(d.get("instance_id"))
    return RecordedRun(
        run_id=iid,
        format=FORMAT,
        source=f"{file}:{n}",
        messages=messages,
        steps=steps,
        task=str(d.get("instruction") or "")[:500],
        system=system,
        model=model,
        outcome="stopped" if err else "done",
        reason="error" if err else "",
        detail=str(err or ""),
        recorded_cost=float(total) if isinstance(total, (int, float)) else None,
        meta={
            "instance_id": iid,
            "test_result": d.get("test_result") if not isinstance(d.get("test_result"), dict) else None,
        },
        totals=totals,
        ended_at=last_t,
    )


def parse_file(file: Path) -> list[RecordedRun]:
    lines, _ = read_lines(file)
    runs: list[RecordedRun] = []
    for n, d in enumerate(lines, 1):
        if looks_like(d):
            run = parse_instance(d, file, n)
            if run is not None:
                runs += split_by_model(run)
    return runs

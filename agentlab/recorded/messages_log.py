"""Messages API logs: JSONL, one ``{"request": ..., "response": ...}`` pair a line.

This is the shape logging proxies write. Consecutive pairs belong to one run
while each request's messages extend the previous request's (the agent sent
its history back with one more reply and its answer); a request that does not
starts a new run. What the next request added after the previous reply is
that step's answer (tool results, or the user's text).

Timing, when present, is read from ``timestamp``/``started_at`` (when the
request was sent) and ``latency``/``duration_ms``/``latency_ms`` on the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .build import (
    RecordedRun,
    RecordedStep,
    blocks,
    first_text,
    seconds,
    stop_reason_of,
    usage_from_anthropic,
    usage_from_openai,
)
from .claude_code import read_lines

FORMAT = "messages-log"


def looks_like(first: dict[str, Any]) -> bool:
    req, resp = first.get("request"), first.get("response")
    return isinstance(req, dict) and isinstance(req.get("messages"), list) and (resp is None or isinstance(resp, dict))


def _content(resp: dict[str, Any]) -> list[dict[str, Any]]:
    if isinstance(resp.get("content"), list):
        return [b for b in resp["content"] if isinstance(b, dict)]
    choices = resp.get("choices")
    if choices and isinstance(choices[0], dict):  # an OpenAI-form reply through the same proxy
        msg = choices[0].get("message") or {}
        return blocks(msg.get("content") or "")
    return blocks(resp.get("content"))


def _latency(line: dict[str, Any]) -> float | None:
    for key, scale in (("latency", 1.0), ("duration", 1.0), ("latency_ms", 1e-3), ("duration_ms", 1e-3)):
        v = line.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v) * scale
    return None


def parse_file(file: Path) -> list[RecordedRun]:
    lines, _ = read_lines(file)
    runs: list[RecordedRun] = []
    skipped = 0
    prev_msgs: list[Any] | None = None
    cur: RecordedRun | None = None
    t0: float | None = None
    for line in lines:
        req, resp = line.get("request"), line.get("response")
        if not isinstance(req, dict) or not isinstance(req.get("messages"), list) or not isinstance(resp, dict):
            skipped += 1
            continue
        msgs = req["messages"]
        continues = (
            cur is not None
            and prev_msgs is not None
            and len(msgs) > len(prev_msgs) + 1
            and msgs[: len(prev_msgs)] == prev_msgs
        )
        when = seconds(line.get("timestamp") or line.get("started_at") or line.get("time"))
        if not continues:
            t0 = when
            cur = RecordedRun(
                run_id=f"{file.name.removesuffix('.jsonl')}-{len(runs) + 1}",
                format=FORMAT,
                source=str(file),
                messages=list(msgs),
                steps=[],
                task=first_text(msgs)[:500],
                system=req.get("system") if isinstance(req.get("system"), str) else None,
                model=str(req.get("model") or resp.get("model") or ""),
                tools=list(req.get("tools") or []),
            )
            runs.append(cur)
        else:
            assert cur is not None and prev_msgs is not None
            added = msgs[len(prev_msgs) + 1 :]
            answer: list[dict[str, Any]] = []
            for m in added:
                answer += blocks(m.get("content")) if isinstance(m, dict) else []
            cur.steps[-1].after = answer
            cur.steps[-1].after_at = None if when is None or t0 is None else when - t0
        content = _content(resp)
        raw = resp.get("usage")
        usage = (
            usage_from_openai(raw) if isinstance(raw, dict) and "prompt_tokens" in raw else usage_from_anthropic(raw)
        )
        t_req = None if when is None or t0 is None else when - t0
        lat = _latency(line)
        cur.steps.append(
            RecordedStep(
                content=content,
                usage=usage,
                model=str(resp.get("model") or req.get("model") or cur.model),
                stop_reason=stop_reason_of(content, resp.get("stop_reason")),
                requested_at=t_req,
                replied_at=None if t_req is None else t_req + (lat or 0.0),
                request_id=resp.get("id"),
                recorded_cost=line.get("cost") if isinstance(line.get("cost"), (int, float)) else None,
            )
        )
        prev_msgs = msgs
    if skipped and runs:
        runs[0].skipped["not a request/response pair"] += skipped
    return runs

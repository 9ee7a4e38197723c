"""Gemini CLI chat sessions (``~/.gemini/tmp/<project hash>/chats/session-*.json``).

One JSON document per session (newer versions write the same as JSONL: a
metadata line, then a line per message): ``sessionId``, ``projectHash``, ``startTime``,
``messages``. A message of type ``gemini`` is one model response, with
``tokens: {input, output, cached, thoughts, tool, total}`` (the Gemini API's
``usageMetadata``), ``model``, ``thoughts`` and ``toolCalls`` (each with its
``args`` and its ``result``: the ``functionResponse`` parts sent back).
``user`` messages are the user's turns; ``info`` and ``error`` messages are
what the CLI printed (not calls, counted as ignored).

Usage, as Google bills it: ``input`` (promptTokenCount) *includes* ``cached``;
``output`` (candidatesTokenCount) excludes ``thoughts``, which are billed as
output; ``tool`` (toolUsePromptTokenCount) is prompt sent for tool use, billed
as input. So input = input − cached + tool, cache read = cached, output =
output + thoughts.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from . import limits as bounds
from .build import RecordedRun, RecordedStep, count, recorded_run, seconds, split_by_model

FORMAT = "gemini-cli"


def looks_like_line(obj: dict[str, Any]) -> bool:
    """The first line of a JSONL session (newer CLI versions): the session's metadata."""
    return "sessionId" in obj and "projectHash" in obj and "uuid" not in obj and "messages" not in obj


def _document(file: Path) -> Any:
    """The session as one document: a JSON file, or a JSONL one (a metadata line, then one
    line per message; a message written again under the same id replaces the earlier one)."""
    if not file.name.endswith(".jsonl"):
        return bounds.loads(bounds.document(file), file, "the document")
    data = bounds.document(file)
    meta: dict[str, Any] = {}
    by_id: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(data.splitlines()):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        if looks_like_line(obj) and not meta:
            meta = obj
        elif "type" in obj:
            by_id[str(obj.get("id") or f"line-{n}")] = obj
    return {**meta, "messages": list(by_id.values())}


def looks_like(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("messages"), list)
        and "sessionId" in doc
        and (
            "projectHash" in doc or any(isinstance(m, dict) and m.get("type") == "gemini" for m in doc["messages"][:50])
        )
    )


def _usage(tok: dict[str, Any]) -> dict[str, Any]:
    cached = count(tok.get("cached"))
    return {
        "input_tokens": max(count(tok.get("input")) - cached, 0) + count(tok.get("tool")),
        "output_tokens": count(tok.get("output")) + count(tok.get("thoughts")),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
    }


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _args(raw: Any) -> dict[str, Any]:
    """Tool arguments: a dict, or the JSON / Python-repr string some CLI versions write."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        for parse in (json.loads, ast.literal_eval):
            try:
                v = parse(raw)
            except (ValueError, SyntaxError):
                continue
            if isinstance(v, dict):
                return v
        return {"args": raw}
    return {}


def _result_text(result: Any) -> str:
    out: list[str] = []
    for part in result or []:
        fr = part.get("functionResponse") if isinstance(part, dict) else None
        resp = (fr or {}).get("response")
        if isinstance(resp, dict):
            v = resp.get("output", resp.get("error", resp))
            out.append(v if isinstance(v, str) else json.dumps(v))
        elif resp is not None:
            out.append(str(resp))
    return "\n".join(out)


_CALL_ID_MS = re.compile(r"-(\d{12,14})-[0-9a-z]+$")


def _made_at(call: dict[str, Any]) -> float | None:
    """When the CLI made a tool call, from its id (``<tool>-<epoch ms>-<random>``), in seconds."""
    m = _CALL_ID_MS.search(str(call.get("id") or ""))
    return int(m.group(1)) / 1000 if m else None


def _batches(calls: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A message's tool calls, one list per model response.

    When a reply holds only tool calls, the CLI adds them to the last ``gemini``
    message instead of starting a new one (``recordToolCalls`` in its
    chatRecordingService), stamping each batch when it is recorded (after its
    tools ran): calls with the same timestamp came from one response. A new
    timestamp alone does not make a new response: the calls of one streamed
    reply can be stamped a millisecond apart. A later response is asked for
    only after the batch before it was recorded, so a call made (the time in
    its id) no later than that batch's stamp belongs to the same reply.
    """
    out: list[list[dict[str, Any]]] = []
    stamp: object = object()
    stamped: float | None = None
    for c in calls:
        made = _made_at(c)
        same_reply = made is not None and stamped is not None and made <= stamped
        if not out or (c.get("timestamp") != stamp and not same_reply):
            out.append([])
        stamp = c.get("timestamp")
        at = seconds(stamp)
        stamped = at if stamped is None or at is None else max(stamped, at)
        out[-1].append(c)
    return out


def _calls(
    batch: list[dict[str, Any]], m: dict[str, Any], t: float | None, t0: float | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, tuple[float | None, float | None]]]:
    """A batch of tool calls as ``tool_use`` blocks, their results and their (start, end) times."""
    uses: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    times: dict[str, tuple[float | None, float | None]] = {}
    for i, c in enumerate(batch):
        cid = str(c.get("id") or f"{m.get('id', 'call')}-{i}")
        uses.append({"type": "tool_use", "id": cid, "name": str(c.get("name") or ""), "input": _args(c.get("args"))})
        if c.get("result") is not None or c.get("status") in ("error", "cancelled"):
            res: dict[str, Any] = {"type": "tool_result", "tool_use_id": cid, "content": _result_text(c.get("result"))}
            if c.get("status") in ("error", "cancelled"):
                res["is_error"] = True
            results.append(res)
            end = seconds(c.get("timestamp"))
            times[cid] = (t, None if end is None or t0 is None else end - t0)
    return uses, results, times


def parse_file(file: Path) -> list[RecordedRun]:
    doc = _document(file)
    if not looks_like(doc):
        raise ValueError(f"{file}: not a Gemini CLI chat session")
    t0 = seconds(doc.get("startTime"))
    messages: list[dict[str, Any]] = []
    steps: list[RecordedStep] = []
    ignored: Counter[str] = Counter()
    last_t: float | None = None
    merged = 0  # model responses found inside another one's message (tool calls recorded later)
    for m in doc["messages"]:
        if not isinstance(m, dict):
            continue
        ts = seconds(m.get("timestamp"))
        if t0 is None and ts is not None:
            t0 = ts
        t = None if ts is None or t0 is None else ts - t0
        kind = m.get("type")
        if kind == "user":
            block = {"type": "text", "text": _text(m.get("content"))}
            if not steps:
                messages.append({"role": "user", "content": [block]})
            else:
                steps[-1].after = (steps[-1].after or []) + [block]
                steps[-1].after_at = t
        elif kind == "gemini":
            content: list[dict[str, Any]] = []
            thoughts = "\n\n".join(
                f"{th.get('subject', '')}: {th.get('description', '')}".strip(": ")
                for th in m.get("thoughts") or []
                if isinstance(th, dict)
            )
            if thoughts:
                content.append({"type": "thinking", "thinking": thoughts, "signature": ""})
            text = _text(m.get("content"))
            if text:
                content.append({"type": "text", "text": text})
            batches = _batches([c for c in m.get("toolCalls") or [] if isinstance(c, dict)])
            tok = m.get("tokens")
            for n, batch in enumerate(batches or [[]]):
                first_at = seconds(batch[0].get("timestamp")) if n and batch else None
                at = t if first_at is None or t0 is None else first_at - t0
                uses, results, times = _calls(batch, m, at, t0)
                if n:  # a later response whose tool calls the CLI added to this message: its usage is lost
                    merged += 1
                    content = []
                step = RecordedStep(
                    content=content + uses,
                    usage=_usage(tok) if isinstance(tok, dict) and not n else None,
                    model=str(m.get("model") or ""),
                    requested_at=last_t,
                    replied_at=at,
                    request_id=(str(m.get("id") or "") or None) if not n else None,
                    tool_times=times,
                )
                if results:
                    step.after = results
                    step.after_at = max((e for _, e in times.values() if e is not None), default=at)
                steps.append(step)
                last_t = at if at is not None else last_t
            continue
        else:
            ignored[str(kind)] += 1
        last_t = t if t is not None else last_t
    if not steps:
        return []
    models = [s.model for s in steps if s.model]
    return split_by_model(
        recorded_run(
            file,
            file.name.removesuffix(".jsonl").removesuffix(".json"),
            FORMAT,
            messages,
            steps,
            model=models[0] if models else "",
            started_at=doc.get("startTime"),
            meta={
                "session": doc.get("sessionId"),
                "ignored_lines": dict(ignored),
                "summary": doc.get("summary"),
                **({"merged_responses": merged} if merged else {}),
            },
            ended_at=last_t,
        )
    )

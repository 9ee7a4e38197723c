"""Cline / Roo Code task folders (``tasks/<task id>/api_conversation_history.json``).

The history file is the list of Messages API messages the extension sent
(``role``, ``content`` as Anthropic blocks, ``ts`` in milliseconds). Each
``assistant`` message is one API call. Its usage is found in one of two places:

- newer Cline writes it on the message: ``metrics.tokens = {prompt, completion,
  cached}`` where ``prompt`` *includes* ``cached`` (and ``metrics.cost``), with
  the model in ``modelInfo.modelId``;
- otherwise ``ui_messages.json`` beside it holds one ``say: "api_req_started"``
  message per request whose ``text`` is JSON with ``tokensIn`` (uncached
  input), ``tokensOut``, ``cacheWrites``, ``cacheReads`` and ``cost``: the
  n-th one belongs to the n-th assistant message.

The Cline SDK and CLI (2026) keep a session as ``<id>.messages.json``:
``{"version", "agent", "sessionId", "messages", "system_prompt"}``, each
assistant message with ``modelInfo.id`` and ``metrics = {inputTokens,
outputTokens, cacheReadTokens, cacheWriteTokens, cost}``, where ``inputTokens``
is the whole prompt (cache reads included: it grows call by call by what was
added, as a real session in cline/cline's fixtures shows), beside a manifest
``<id>.json`` (``session_id``, ``model``, ``messages_path``, ...). Either file
imports the session.

A list of chat messages is also what early mini-swe-agent wrote; a Cline file
is told apart by its Anthropic content blocks and its ``ts``/``modelInfo``
fields (or its file name), never by the role/content shape alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from . import limits as bounds
from .build import (
    RecordedRun,
    RecordedStep,
    blocks,
    recorded_run,
    split_by_model,
    usage_from_openai,
)

FORMAT = "cline"
HISTORY = "api_conversation_history.json"
UI = "ui_messages.json"
SDK_SUFFIX = ".messages.json"


def _is_sdk_session(doc: Any) -> bool:
    """A Cline SDK ``<id>.messages.json``: a session id and a list of role/content messages."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("sessionId"), str)
        and isinstance(doc.get("messages"), list)
        and all(isinstance(m, dict) and "role" in m for m in doc["messages"][:5])
    )


def _is_sdk_manifest(doc: Any) -> bool:
    """A Cline SDK session manifest ``<id>.json``, which names its messages file."""
    return isinstance(doc, dict) and isinstance(doc.get("session_id"), str) and "messages_path" in doc


def looks_like(doc: Any, name: str = "") -> bool:
    if _is_sdk_session(doc) or _is_sdk_manifest(doc):
        return True
    if not isinstance(doc, list) or not doc or not all(isinstance(m, dict) and "role" in m for m in doc[:5]):
        return False
    block_lists = any(
        isinstance(m.get("content"), list)
        and m["content"]
        and isinstance(m["content"][0], dict)
        and "type" in m["content"][0]
        for m in doc[:5]
    )
    marked = name == HISTORY or any("ts" in m or "modelInfo" in m or "metrics" in m for m in doc[:10])
    return block_lists and marked


def _ui_usage(folder: Path) -> list[dict[str, Any]]:
    f = folder / UI
    if not f.is_file():
        return []
    try:
        ui = orjson.loads(f.read_bytes())
    except orjson.JSONDecodeError:
        return []
    out = []
    for m in ui if isinstance(ui, list) else []:
        if isinstance(m, dict) and m.get("say") == "api_req_started" and isinstance(m.get("text"), str):
            try:
                info = orjson.loads(m["text"])
            except orjson.JSONDecodeError:
                continue
            if isinstance(info, dict) and ("tokensIn" in info or "tokensOut" in info):
                out.append(info | {"ts": m.get("ts")})
    return out


def _clean(b: dict[str, Any]) -> dict[str, Any]:
    if b.get("type") == "file":  # the SDK attaches a file the user named; the API got its text
        return {"type": "text", "text": f"{b.get('path', '')}\n{b.get('content', '')}".strip()}
    if b.get("type") == "tool_use":
        return {
            "type": "tool_use",
            "id": str(b.get("id") or b.get("call_id") or ""),
            "name": str(b.get("name") or ""),
            "input": b.get("input") if isinstance(b.get("input"), dict) else {},
        }
    return b


def _sdk_usage(metrics: dict[str, Any]) -> dict[str, int]:
    read = int(metrics.get("cacheReadTokens") or 0)
    write = int(metrics.get("cacheWriteTokens") or 0)
    return {
        "input_tokens": max(int(metrics.get("inputTokens") or 0) - read - write, 0),
        "output_tokens": int(metrics.get("outputTokens") or 0),
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
    }


def parse_file(file: Path, consumed: set[Path] | None = None) -> list[RecordedRun]:
    doc = bounds.loads(bounds.document(file), file, "the document")
    if not looks_like(doc, file.name):
        raise ValueError(f"{file}: not a Cline / Roo Code api_conversation_history.json")
    if _is_sdk_manifest(doc):  # the manifest: the session is its messages file beside it
        sibling = file.with_name(file.name.removesuffix(".json") + SDK_SUFFIX)
        if consumed is not None:
            consumed.add(sibling)
        return parse_file(sibling, consumed) if sibling.is_file() else []
    system: str | None = None
    run_id = file.parent.name if file.name == HISTORY else file.name.removesuffix(".json")
    if _is_sdk_session(doc):
        manifest = file.with_name(file.name.removesuffix(SDK_SUFFIX) + ".json")
        if consumed is not None and manifest.is_file():
            consumed.add(manifest)
        system = doc.get("system_prompt") if isinstance(doc.get("system_prompt"), str) else None
        run_id = str(doc["sessionId"])
        doc = doc["messages"]
    ui = _ui_usage(file.parent)
    if consumed is not None:  # the task folder's other files are part of this run, not runs of their own
        consumed.update(file.parent / n for n in (UI, "task_metadata.json") if (file.parent / n).is_file())
    t0: float | None = None
    messages: list[dict[str, Any]] = []
    steps: list[RecordedStep] = []
    model = ""
    recorded_cost = 0.0
    any_cost = False
    sent_t: float | None = None  # when the last message before a call was written
    for m in doc:
        if not isinstance(m, dict):
            continue
        raw_ts = m.get("ts")
        ts = raw_ts / 1000 if isinstance(raw_ts, (int, float)) else None
        if t0 is None and ts is not None:
            t0 = ts
        t = None if ts is None or t0 is None else ts - t0
        content = [_clean(b) for b in blocks(m.get("content"))]
        if m.get("role") != "assistant":
            sent_t = t if t is not None else sent_t
            if not steps:
                messages.append({"role": "user", "content": content})
            else:
                steps[-1].after = (steps[-1].after or []) + content
                steps[-1].after_at = t
            continue
        usage = None
        cost = None
        metrics: dict[str, Any] = m["metrics"] if isinstance(m.get("metrics"), dict) else {}
        tokens = metrics.get("tokens")
        if isinstance(tokens, dict):
            usage = usage_from_openai(
                {
                    "prompt_tokens": tokens.get("prompt"),
                    "completion_tokens": tokens.get("completion"),
                    "prompt_tokens_details": {"cached_tokens": tokens.get("cached") or 0},
                }
            )
            cost = metrics.get("cost")
        elif "inputTokens" in metrics or "outputTokens" in metrics:  # the SDK's session files
            usage = _sdk_usage(metrics)
            cost = metrics.get("cost")
        elif len(steps) < len(ui):
            u = ui[len(steps)]
            usage = {
                "input_tokens": int(u.get("tokensIn") or 0),
                "output_tokens": int(u.get("tokensOut") or 0),
                "cache_creation_input_tokens": int(u.get("cacheWrites") or 0),
                "cache_read_input_tokens": int(u.get("cacheReads") or 0),
            }
            cost = u.get("cost")
        info: dict[str, Any] = m["modelInfo"] if isinstance(m.get("modelInfo"), dict) else {}
        model = str(info.get("modelId") or info.get("id") or model)
        if isinstance(cost, (int, float)):
            recorded_cost += float(cost)
            any_cost = True
        prev_t = sent_t
        steps.append(
            RecordedStep(
                content=content,
                usage=usage,
                model=model,
                requested_at=prev_t,
                replied_at=t,
                recorded_cost=float(cost) if isinstance(cost, (int, float)) else None,
            )
        )
    if not steps:
        return []
    return split_by_model(
        recorded_run(
            file,
            run_id,
            FORMAT,
            messages,
            steps,
            system=system,
            model=steps[0].model,
            recorded_cost=recorded_cost if any_cost else None,
            meta={
                "usage_from": "metrics"
                if any(isinstance(m, dict) and isinstance(m.get("metrics"), dict) for m in doc)
                else (UI if ui else None)
            },
        )
    )

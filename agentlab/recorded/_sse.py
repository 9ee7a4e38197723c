"""A Messages API reply recorded as its server-sent-event stream, read back as one message.

Some proxies in front of the TypeScript SDK hand Claude Code the raw stream
instead of the parsed message, and the session line then holds it as a
string: either verbatim (``"event: message_start\\ndata: {...}\\n\\n…"``) or
spread character by character into an object (``{"0": "e", "1": "v", …}``,
what ``{...string}`` does in JavaScript). The real usage is in the stream
(``message_start`` carries the input side, ``message_delta`` the final output
count), so it is read from there rather than estimated from the text.

The event shapes are those of the Messages streaming API (``message_start``,
``content_block_start``/``_delta``/``_stop``, ``message_delta``,
``message_stop``), as the ``anthropic`` SDK's stream accumulator reads them.
"""

from __future__ import annotations

from typing import Any

import orjson


def unspread(value: Any) -> str | None:
    """The string a JavaScript ``{...str}`` spread came from, else ``None``."""
    if not isinstance(value, dict) or "0" not in value:
        return None
    n = len(value)
    try:
        parts = [value[str(i)] for i in range(n)]
    except KeyError:
        return None
    if not all(isinstance(p, str) and len(p) == 1 for p in parts):
        return None
    return "".join(parts)


def looks_like_stream(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith("event:") or head.startswith("data:")


def message_from_stream(text: str) -> dict[str, Any] | None:
    """The message a recorded event stream adds up to (id, model, content, stop_reason, usage)."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, list[str]] = {}
    for chunk in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in chunk.split("\n") if line.startswith("data:"))
        if not data:
            continue
        try:
            ev = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(ev, dict):
            continue
        kind = ev.get("type")
        if kind == "message_start" and isinstance(ev.get("message"), dict):
            message = dict(ev["message"])
            message["usage"] = dict(message.get("usage") or {})
        elif message is None:
            continue
        elif kind == "content_block_start" and isinstance(ev.get("content_block"), dict):
            blocks[int(ev.get("index", len(blocks)))] = dict(ev["content_block"])
        elif kind == "content_block_delta" and isinstance(ev.get("delta"), dict):
            i = int(ev.get("index", 0))
            b = blocks.setdefault(i, {"type": "text", "text": ""})
            d = ev["delta"]
            if d.get("type") == "text_delta":
                b["text"] = b.get("text", "") + str(d.get("text", ""))
            elif d.get("type") == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + str(d.get("thinking", ""))
            elif d.get("type") == "signature_delta":
                b["signature"] = b.get("signature", "") + str(d.get("signature", ""))
            elif d.get("type") == "input_json_delta":
                partial_json.setdefault(i, []).append(str(d.get("partial_json", "")))
        elif kind == "message_delta":
            delta = ev.get("delta") or {}
            if delta.get("stop_reason"):
                message["stop_reason"] = delta["stop_reason"]
            # message_delta's usage is cumulative: its fields replace message_start's
            message["usage"].update({k: v for k, v in (ev.get("usage") or {}).items() if v is not None})
    if message is None:
        return None
    for i, parts in partial_json.items():
        try:
            blocks[i]["input"] = orjson.loads("".join(parts)) if "".join(parts).strip() else {}
        except orjson.JSONDecodeError:
            blocks[i]["input"] = {"partial_json": "".join(parts)}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def as_message(value: Any) -> dict[str, Any] | None:
    """A recorded line's ``message`` as a message dict, whichever of the three forms it takes."""
    if isinstance(value, dict) and "0" not in value:
        return value
    text = value if isinstance(value, str) else unspread(value)
    if text is None or not looks_like_stream(text):
        return None
    return message_from_stream(text)

"""inspect-ai ``.eval`` logs (a zip: ``header.json``, ``samples/<id>_epoch_<n>.json``, …).

Each sample is a run. Its ``events`` hold one ``model`` event per API call
(``output.choices[0].message`` and ``output.usage``, ``timestamp`` when it was
sent and ``completed`` when it came back; older logs, such as inspect 0.3.58's,
have no ``completed`` but the seconds the call took in ``output.time``) and one ``tool`` event per tool call
(``id``, ``function``, ``arguments``, ``result``, its own times). The sample's
``messages`` give what came before the first call (system and user messages).

Usage as inspect records it: ``input_tokens``, ``output_tokens``,
``input_tokens_cache_read``/``_cache_write`` and ``total_tokens``. Providers
differ in whether ``input_tokens`` already includes the cached tokens
(OpenAI's prompt tokens do; Anthropic's input tokens do not); ``total_tokens``
tells which: when it is input + output, the cached tokens are inside the input
and are taken out of it.

Recent inspect versions compress the zip's entries with zstd (method 93), which
Python's ``zipfile`` reads only from 3.14 on: those need the ``zstandard``
package (``pip install agentlab[inspect]``); deflate-compressed logs need nothing.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import Any

import orjson

from .build import RecordedRun, RecordedStep, blocks, seconds, split_by_model, stop_reason_of

FORMAT = "inspect-eval"
_ZSTD = 93


def looks_like(file: Path, head: bytes) -> bool:
    if not head.startswith(b"PK\x03\x04"):
        return False
    try:
        with zipfile.ZipFile(file) as z:
            names = set(z.namelist())
    except zipfile.BadZipFile:
        return False
    return "header.json" in names or "_journal/start.json" in names


def _member(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    if info.compress_type != _ZSTD:
        return z.read(info)
    try:
        import zstandard
    except ImportError as exc:
        raise ValueError(
            f"{z.filename}: this inspect log is zstd-compressed; reading it needs the zstandard package "
            "(pip install 'agentlab[inspect]')"
        ) from exc
    assert z.filename is not None
    with open(z.filename, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        f.seek(info.header_offset + 30 + name_len + extra_len)
        raw = f.read(info.compress_size)
    return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(raw))


def _usage(u: dict[str, Any]) -> dict[str, int]:
    inp, out = int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0)
    read, write = int(u.get("input_tokens_cache_read") or 0), int(u.get("input_tokens_cache_write") or 0)
    total = u.get("total_tokens")
    inclusive = isinstance(total, int) and (read or write) and total < inp + out + read + write
    return {
        "input_tokens": max(inp - read - write, 0) if inclusive else inp,
        "output_tokens": out,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
    }


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    c = message.get("content")
    for part in c if isinstance(c, list) else blocks(c):
        if not isinstance(part, dict):
            continue
        if part.get("type") == "reasoning":
            out.append(
                {
                    "type": "thinking",
                    "thinking": str(part.get("reasoning") or part.get("summary") or ""),
                    "signature": "",
                }
            )
        elif part.get("type") == "text" and part.get("text"):
            out.append({"type": "text", "text": str(part["text"])})
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            args = call.get("arguments")
            out.append(
                {
                    "type": "tool_use",
                    "id": str(call.get("id") or ""),
                    "name": str(call.get("function") or ""),
                    "input": args if isinstance(args, dict) else {"arguments": args},
                }
            )
    return out


def _text(c: Any) -> str:
    if isinstance(c, str):
        return c
    return "".join(str(p.get("text", "")) for p in c or [] if isinstance(p, dict))


def parse_sample(sample: dict[str, Any], file: Path, header: dict[str, Any]) -> RecordedRun | None:
    events = [e for e in sample.get("events") or [] if isinstance(e, dict)]
    t0 = seconds(sample.get("started_at")) or next(
        (seconds(e.get("timestamp")) for e in events if e.get("timestamp")), None
    )

    def rel(ts: Any) -> float | None:
        s = seconds(ts)
        return None if s is None or t0 is None else s - t0

    system: str | None = None
    messages: list[dict[str, Any]] = []
    for m in sample.get("messages") or []:
        if not isinstance(m, dict) or m.get("role") == "assistant":
            break
        if m.get("role") == "system":
            system = _text(m.get("content"))
        elif m.get("role") == "user":
            messages.append({"role": "user", "content": [{"type": "text", "text": _text(m.get("content"))}]})
    steps: list[RecordedStep] = []
    owner: dict[str, RecordedStep] = {}
    for e in events:
        kind = e.get("event")
        if kind == "model":
            output = e.get("output") or {}
            choices = output.get("choices") or [{}]
            msg = choices[0].get("message") or {}
            usage = output.get("usage")
            content = _content(msg)
            cost = (usage or {}).get("total_cost") if isinstance(usage, dict) else None
            step = RecordedStep(
                content=content,
                usage=_usage(usage) if isinstance(usage, dict) else None,
                model=str(output.get("model") or e.get("model") or ""),
                stop_reason=_stop(choices[0].get("stop_reason")),
                requested_at=rel(e.get("timestamp")),
                replied_at=_replied(rel(e.get("timestamp")), rel(e.get("completed")), output.get("time")),
                recorded_cost=float(cost) if isinstance(cost, (int, float)) else None,
            )
            steps.append(step)
            for b in content:
                if b.get("type") == "tool_use":
                    owner[b["id"]] = step
        elif kind == "tool":
            cid = str(e.get("id") or "")
            found = owner.get(cid) or (steps[-1] if steps else None)
            if found is None:
                continue
            err = e.get("error")
            result = e.get("result")
            res: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": cid,
                "content": _text(result) if isinstance(result, list) else ("" if result is None else str(result)),
            }
            if err:
                res["is_error"] = True
                res["content"] = res["content"] or str(
                    (err or {}).get("message", err) if isinstance(err, dict) else err
                )
            found.after = (found.after or []) + [res]
            end = rel(e.get("completed")) or rel(e.get("timestamp"))
            found.after_at = end
            found.tool_times[cid] = (rel(e.get("timestamp")), end)
    if not steps:
        return None
    for s in steps:
        s.stop_reason = stop_reason_of(s.content, s.stop_reason)
    task = str((header.get("eval") or {}).get("task") or file.stem)
    sid = f"{sample.get('id')}_epoch_{sample.get('epoch', 1)}"
    err = sample.get("error")
    return RecordedRun(
        run_id=f"{file.stem}-{sid}",
        format=FORMAT,
        source=f"{file}:samples/{sid}.json",
        messages=messages,
        steps=steps,
        task=messages[0]["content"][0]["text"][:500] if messages else task,
        system=system,
        model=steps[0].model or str((header.get("eval") or {}).get("model") or ""),
        started_at=sample.get("started_at"),
        outcome="stopped" if err else "done",
        reason="error" if err else "",
        detail=str((err or {}).get("message", "")) if isinstance(err, dict) else "",
        meta={"task": task, "sample": sample.get("id"), "epoch": sample.get("epoch"), "scores": sample.get("scores")},
        ended_at=rel(sample.get("completed_at")),
    )


def _stop(reason: Any) -> str | None:
    return (
        {
            "stop": "end_turn",
            "tool_calls": "tool_use",
            "max_tokens": "max_tokens",
            "model_length": "max_tokens",
            "content_filter": "refusal",
        }.get(str(reason))
        if reason
        else None
    )


def _replied(sent: float | None, completed: float | None, took: Any) -> float | None:
    """When a model event's reply came back: its ``completed`` time, else ``timestamp`` + ``output.time``."""
    if completed is not None:
        return completed
    if sent is not None and isinstance(took, (int, float)):
        return sent + float(took)
    return sent


def parse_file(file: Path) -> list[RecordedRun]:
    runs: list[RecordedRun] = []
    with zipfile.ZipFile(file) as z:
        infos = {i.filename: i for i in z.infolist()}
        header = orjson.loads(_member(z, infos["header.json"])) if "header.json" in infos else {}
        for name in sorted(n for n in infos if n.startswith("samples/") and n.endswith(".json")):
            run = parse_sample(orjson.loads(_member(z, infos[name])), file, header)
            if run is not None:
                runs += split_by_model(run)
    return runs

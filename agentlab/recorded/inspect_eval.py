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

from . import limits as bounds
from .build import RecordedRun, RecordedStep, blocks, count, seconds, split_by_model, stop_reason_of

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
        return bounds.inflate(z, info)
    try:
        import zstandard  # noqa: F401  # bounds.inflate reads the member with it
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
    return bounds.inflate(z, info, raw_zstd=raw)


def _usage(u: dict[str, Any]) -> dict[str, Any]:
    """inspect's usage in Anthropic's shape. ``total_tokens`` tells what the provider's counts hold:
    whether ``input_tokens`` includes the cached tokens (OpenAI, Google) or not (Anthropic), and whether
    ``output_tokens`` includes ``reasoning_tokens`` (most) or not (Google's, in inspect versions that
    kept ``candidates_token_count`` as the output): the reading whose parts add up to the total wins."""
    inp, out = count(u.get("input_tokens")), count(u.get("output_tokens"))
    read, write = count(u.get("input_tokens_cache_read")), count(u.get("input_tokens_cache_write"))
    reasoning = count(u.get("reasoning_tokens"))
    total = u.get("total_tokens")
    inclusive, outside = False, False
    readings = [(False, False), (True, False)] + ([(True, True), (False, True)] if reasoning else [])
    for inc, out_r in readings:  # (cached inside the input?, reasoning outside the output?)
        if isinstance(total, int) and inp + out + (0 if inc else read + write) + (reasoning if out_r else 0) == total:
            inclusive, outside = inc, out_r
            break
    else:  # no reading adds up: the cached tokens are inside the input when the total is short of them
        inclusive = isinstance(total, int) and bool(read or write) and total < inp + out + read + write
    return {
        "input_tokens": max(inp - read - write, 0) if inclusive else inp,
        "output_tokens": out + (reasoning if outside else 0),
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


def _resolved(value: Any, attachments: dict[str, Any]) -> Any:
    """``value`` with every ``attachment://<hash>`` string replaced by the text the sample keeps under
    that hash (inspect moves long content out of the events into ``attachments``)."""
    if isinstance(value, str):
        if value.startswith("attachment://"):
            found = attachments.get(value.removeprefix("attachment://"))
            return found if isinstance(found, str) else value
        return value
    if isinstance(value, list):
        return [_resolved(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: _resolved(v, attachments) for k, v in value.items()}
    return value


def parse_sample(sample: dict[str, Any], file: Path, header: dict[str, Any]) -> RecordedRun | None:
    attachments = sample.get("attachments")
    if isinstance(attachments, dict) and attachments:
        sample = _resolved({k: v for k, v in sample.items() if k != "attachments"}, attachments)
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
    unreached = 0
    replayed: dict[str, int] = {"input_tokens": 0, "output_tokens": 0}
    for n, e in enumerate(events, 1):
        kind = e.get("event")
        if kind == "model":
            output = e.get("output") or {}
            choices = output.get("choices") or [{}]
            msg = choices[0].get("message") or {}
            usage = output.get("usage")
            if (e.get("error") or e.get("pending")) and not isinstance(usage, dict):
                unreached += 1  # failed or never finished: no reply, no usage, nothing known to be billed
                continue
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
                line=n,
                replayed=e.get("cache") == "read",
            )
            if step.replayed and step.usage is not None:
                replayed["input_tokens"] += _context_of(step.usage)
                replayed["output_tokens"] += step.usage["output_tokens"]
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
    _later_prompts(sample.get("messages") or [], steps)
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
        meta={
            "task": task,
            "sample": sample.get("id"),
            "epoch": sample.get("epoch"),
            "scores": sample.get("scores"),
            **({"unreached_calls": unreached} if unreached else {}),
            **({"replayed_usage": replayed} if any(replayed.values()) else {}),
        },
        ended_at=rel(sample.get("completed_at")),
        totals=_sample_totals(sample.get("model_usage")),
    )


def _context_of(u: dict[str, int]) -> int:
    return u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]


def _sample_totals(by_model: Any) -> dict[str, float]:
    """The sample's own totals (``model_usage``, by model), read as its events are: tokens sent and received."""
    if not isinstance(by_model, dict) or not by_model:
        return {}
    sent = received = 0
    for u in by_model.values():
        if not isinstance(u, dict):
            return {}
        got = _usage(u)
        sent += _context_of(got)
        received += got["output_tokens"]
    return {"input_tokens": sent, "output_tokens": received}


def _later_prompts(messages: list[Any], steps: list[RecordedStep]) -> None:
    """The user's words after each reply (a sample with several prompts, or an agent's "continue"),
    from the sample's conversation: the k-th assistant message is the k-th reply."""
    k = 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "assistant":
            k += 1
        elif role == "user" and 0 < k <= len(steps):
            step = steps[k - 1]
            step.after = (step.after or []) + [{"type": "text", "text": _text(m.get("content"))}]


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
        header = bounds.loads(_member(z, infos["header.json"]), file, "header.json") if "header.json" in infos else {}
        for name in sorted(n for n in infos if n.startswith("samples/") and n.endswith(".json")):
            run = parse_sample(bounds.loads(_member(z, infos[name]), file, name), file, header)
            if run is not None:
                runs += split_by_model(run)
    return runs

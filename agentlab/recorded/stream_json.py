"""Claude Code's ``-p --output-format stream-json`` output (what a script or CI job saves).

One JSON object a line: a ``system`` line of subtype ``init`` (session id,
model, tools), then ``assistant`` and ``user`` lines holding the Messages API
message as in a session file (``message.id`` shared by the lines of one call,
usage on each), with ``session_id`` and ``parent_tool_use_id`` (set on the
lines of a subagent started by that Task call), and a last ``result`` line
with the run's own totals: ``num_turns``, ``total_cost_usd``, ``usage``,
``duration_ms``. The calls are read as in a session file
(:func:`.claude_code.parse_stream`); the ``result`` line's cost is the
recorded cost. The output has no timestamps, so latencies are unknown
(``duration_api_ms`` gives only the run's total).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from .build import RecordedRun
from .claude_code import parse_stream, read_lines

FORMAT = "claude-code-stream-json"


def looks_like(obj: dict[str, Any]) -> bool:
    """The ``init`` or ``result`` line only stream-json output has (``session_id``, not ``sessionId``)."""
    if "session_id" not in obj or "sessionId" in obj:
        return False
    t = obj.get("type")
    return (t == "system" and obj.get("subtype") == "init") or (
        t == "result" and ("total_cost_usd" in obj or "num_turns" in obj)
    )


def parse_file(file: Path) -> list[RecordedRun]:
    lines, _ = read_lines(file)
    init: dict[str, Any] = {}
    result: dict[str, Any] = {}
    streams: dict[str | None, list[dict[str, Any]]] = {}
    for d in lines:
        t = d.get("type")
        if t == "system" and d.get("subtype") == "init":
            init = d
        elif t == "result":
            result = d
        elif t in ("assistant", "user"):
            parent = d.get("parent_tool_use_id")
            streams.setdefault(parent if isinstance(parent, str) else None, []).append(
                dict(d, sessionId=d.get("session_id"))
            )
    stem = file.name.removesuffix(".jsonl").removesuffix(".json")
    runs: list[RecordedRun] = []
    main = parse_stream(streams.pop(None, []), stem, str(file), skipped=Counter(), ignored=Counter())
    runs += main
    owner = {cid: (r.run_id, k) for r in main for cid, k in r.tool_steps.items()}
    for parent, stream in streams.items():
        assert parent is not None
        for r in parse_stream(stream, f"{stem}-agent-{parent}", str(file), skipped=Counter(), ignored=Counter()):
            r.meta["sidechain"] = True
            rid, k = owner.get(parent, (stem, None))
            r.parent = {"run_id": rid, "step": k, "tool_use_id": parent}
            runs.append(r)
    for r in runs:
        r.format = FORMAT
    if runs and init:
        runs[0].tools = [
            {"name": str(n), "mode": None, "description": "", "input_schema": {"type": "object", "properties": {}}}
            for n in init.get("tools") or []
            if isinstance(n, str)
        ] or runs[0].tools
    if runs and result:
        cost = result.get("total_cost_usd")
        first = runs[0]
        first.recorded_cost = float(cost) if isinstance(cost, (int, float)) else None
        first.meta.update(
            {
                k: result.get(k)
                for k in ("num_turns", "duration_ms", "duration_api_ms", "subtype", "is_error")
                if k in result
            }
        )
        if result.get("is_error"):
            first.outcome, first.reason = "stopped", str(result.get("subtype") or "error")
    return runs

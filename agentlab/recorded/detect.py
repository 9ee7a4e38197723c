"""Which format a recorded file is, from its content (its name only breaks ties).

Each importer says whether a parsed first line (JSONL) or document (JSON)
looks like its format. A file no importer claims raises
:class:`UnrecognizedFormat`, naming the formats tried and showing the start of
the first line, so the user sees at once what the file actually holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ..errors import AgentlabError
from . import claude_code, messages_log, swe_agent

FORMATS = ("claude-code", "mini-swe-agent", "swe-agent", "messages-log")
SUFFIXES = (".jsonl", ".traj.json", ".traj", ".json")


class UnrecognizedFormat(AgentlabError, ValueError):
    """A file none of the importers recognises."""


def _first_line(data: bytes) -> bytes:
    for line in data.splitlines():
        if line.strip():
            return line.strip()
    return b""


def _preview(line: bytes, n: int = 160) -> str:
    text = line.decode("utf-8", "replace")
    return text if len(text) <= n else text[: n - 1] + "…"


def detect(file: Path) -> str:
    """The format of ``file``, one of :data:`FORMATS`."""
    with open(file, "rb") as f:
        head = f.read(1 << 16)
    first = _first_line(head)
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"[") and not file.name.endswith(".jsonl"):
        try:  # a whole-document JSON file (trajectories)
            doc: Any = orjson.loads(file.read_bytes())
        except orjson.JSONDecodeError:
            doc = None
        if doc is not None:
            fmt = swe_agent.looks_like(doc)
            if fmt:
                return fmt
    try:
        obj = orjson.loads(first) if first else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        if claude_code.looks_like(obj):
            return claude_code.FORMAT
        if messages_log.looks_like(obj):
            return messages_log.FORMAT
        # Claude Code files may open with lines of types other importers never write
        for line in head.splitlines()[1:20]:
            try:
                o = orjson.loads(line)
            except orjson.JSONDecodeError:
                break
            if isinstance(o, dict) and claude_code.looks_like(o):
                return claude_code.FORMAT
    raise UnrecognizedFormat(
        f"{file}: not a recorded run this lab can read (tried {', '.join(FORMATS)}); "
        f"the first line is: {_preview(first) if first else '(the file is empty)'}"
    )

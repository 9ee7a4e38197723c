"""Which format a recorded file is, from its content (its name only breaks ties).

Each importer says whether a parsed first line (JSONL) or document (JSON)
looks like its format. A file no importer claims raises
:class:`UnrecognizedFormat`, naming the formats tried and showing the start of
the first line, so the user sees at once what the file actually holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import orjson

from .._shorten import shorten
from ..errors import AgentlabError
from . import (
    claude_code,
    cline,
    codex,
    gemini,
    inspect_eval,
    messages_log,
    openhands,
    stream_json,
    swe_agent,
)
from . import limits as bounds

KnownFormat = Literal[
    "claude-code",
    "claude-code-stream-json",
    "codex",
    "gemini-cli",
    "cline",
    "inspect-eval",
    "openhands",
    "mini-swe-agent",
    "swe-agent",
    "messages-log",
]
"""Every format an importer reads (``recorded.Format`` adds ``"auto"``): the one list, in detection order."""
FORMATS: tuple[str, ...] = get_args(KnownFormat)
SUFFIXES = (".jsonl", ".traj.json", ".traj", ".json", ".eval")
LFS_POINTER = b"version https://git-lfs.github.com/spec/"
"""How a Git LFS pointer file starts: a repository cloned without its LFS objects holds these in place of runs."""


class UnrecognizedFormat(AgentlabError, ValueError):
    """A file none of the importers recognises."""

    def __init__(self, message: str, why: str = "not a recorded run this lab can read") -> None:
        super().__init__(message)
        self.why = why


def _preview(line: bytes, n: int = 160) -> str:
    text = line.decode("utf-8", "replace")
    return shorten(text, n)


_LINES_LOOKED_AT = 200
"""JSONL lines read (however long each is) before a file is called unrecognised."""


def _doc_format(doc: Any, name: str) -> str | None:
    # most specific first: a Cline history is also a list of chat messages
    if cline.looks_like(doc, name):
        return cline.FORMAT
    if gemini.looks_like(doc):
        return gemini.FORMAT
    return swe_agent.looks_like(doc)


def _line_format(obj: dict[str, Any]) -> str | None:
    if claude_code.looks_like(obj):
        return claude_code.FORMAT
    if stream_json.looks_like(obj):
        return stream_json.FORMAT
    if codex.looks_like(obj):
        return codex.FORMAT
    if gemini.looks_like_line(obj):
        return gemini.FORMAT
    if openhands.looks_like(obj):
        return openhands.FORMAT
    if messages_log.looks_like(obj):
        return messages_log.FORMAT
    return None


def detect(file: Path) -> str:
    """The format of ``file``, one of :data:`FORMATS`, from its content.

    A JSON document is recognised by its keys; a JSONL file by its lines, read
    one by one whatever their length (a session can open with a 77 KB
    ``queue-operation`` line), until one only a known format writes.
    """
    with open(file, "rb") as f:
        head = f.read(1 << 16)
    if inspect_eval.looks_like(file, head):
        return inspect_eval.FORMAT
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"[") and not file.name.endswith(".jsonl"):
        try:  # a whole-document JSON file (trajectories, chat sessions)
            doc: Any = bounds.loads(bounds.document(file), file, "the document")
        except orjson.JSONDecodeError:
            doc = None
        if doc is not None:
            fmt = _doc_format(doc, file.name)
            if fmt:
                return fmt
    first = b""
    looked = 0
    with open(file, "rb") as f:
        for n, raw in bounds.bounded_lines(f, file):
            line = raw.strip()
            if not line:
                continue
            first = first or line
            looked += 1
            if looked > _LINES_LOOKED_AT:
                break
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                bounds.too_deep(exc, file, f"line {n}")  # past the nesting limit: refused
                continue
            if isinstance(obj, dict):
                fmt = _line_format(obj)
                if fmt:
                    return fmt
    if first.startswith(LFS_POINTER):
        raise UnrecognizedFormat(
            f"{file}: a Git LFS pointer, not the recorded file: fetch it first (git lfs pull)",
            "a Git LFS pointer, not the recorded file (fetch it with `git lfs pull`)",
        )
    shown = _preview(first) if first else "(the file is empty)"
    raise UnrecognizedFormat(
        f"{file}: not a recorded run this lab can read (tried {', '.join(FORMATS)}); the first line is: {shown}",
        "the file is empty" if not first else f"not a recorded run this lab can read; it starts: {_preview(first, 80)}",
    )

"""Claude Code session files (``~/.claude/projects/<project>/<session>.jsonl``).

What the files hold, as found in real sessions (not only as documented):

- one line per *content block*: a model call that wrote text, then two tool
  calls, is three ``assistant`` lines sharing ``message.id``, each repeating
  the call's usage; the last line has the final output count. They are merged
  into one step, counted once, with the last line's usage;
- tool results (``user`` lines with ``tool_result`` blocks) may arrive
  *between* lines of the same call; they are matched to their call by id;
- ``model: "<synthetic>"`` lines are written by Claude Code itself (errors,
  "no response requested"): no API call, no usage; they are skipped;
- a ``system`` line with subtype ``compact_boundary`` ends one context: the
  next segment starts from the compaction summary, so the context size drops.
  A model switch also starts a segment (one model, one price list per run).
  Segments are separate runs of the same session, linked in
  ``run_started.recorded`` (``session``, ``segment``, ``boundary``, ``previous``);
- sidechains (``isSidechain``, the ``subagents/*.jsonl`` files) are their own
  runs, with ``parent`` naming the session run and step that started them;
- ``progress``, ``file-history-snapshot``, ``queue-operation``, ``summary`` and
  other ``system`` lines are not model calls: counted as ignored; line types
  this importer does not know are skipped and counted as unknown.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..trace.reader import TruncatedTraceWarning
from . import limits as bounds
from ._sse import as_message
from .audit import plausible_output
from .build import (
    RecordedRun,
    RecordedStep,
    blocks,
    cache_ttl,
    first_text,
    seconds,
    stop_reason_of,
    usage_from_anthropic,
)

FORMAT = "claude-code"
KNOWN_IGNORED = frozenset(
    {
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "summary",
        "custom-title",
        "last-prompt",
        "attachment",
        "tag",
        "agent-name",
    }
)
SYNTHETIC = "<synthetic>"
LINE = "@line"
"""The key :func:`read_lines` adds to each record: its line number in the file (for the audit's findings)."""


def looks_like(first: dict[str, Any]) -> bool:
    """True for a line only Claude Code writes (session id plus a Claude Code line type)."""
    t = first.get("type")
    if t in ("file-history-snapshot", "queue-operation", "summary") and (
        "messageId" in first or "sessionId" in first or "leafUuid" in first
    ):
        return True
    return "sessionId" in first and t in ("user", "assistant", "system", "progress") and "uuid" in first


def read_lines(file: Path) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a JSONL file, in order, and how many lines were not JSON.

    A last line cut short (the session was being written) is skipped with a
    :class:`~agentlab.trace.TruncatedTraceWarning`; everything before it is kept.
    Other lines that are not JSON are skipped and named. A line past the import's
    limits (its length, its nesting) refuses the file
    (:class:`~agentlab.recorded.limits.ImportLimit`, naming the line and the limit).
    """
    out: list[dict[str, Any]] = []
    bad: list[int] = []
    loads = orjson.loads
    last = 0
    for n, line in bounds.lines(file):
        last = n
        if not line or line.isspace():
            continue
        try:
            obj = loads(line)
        except orjson.JSONDecodeError as exc:
            bounds.too_deep(exc, file, f"line {n}")  # past the nesting limit: refused, with its own error
            bad.append(n)
            continue
        if isinstance(obj, dict):
            obj[LINE] = n
            out.append(obj)
        else:
            bad.append(n)
    if bad:
        cut = bad == [last]
        where = "the last line" if cut else f"line(s) {', '.join(map(str, bad[:5]))}"
        why = "not complete JSON; was the file still being written?" if cut else "not JSON records"
        warnings.warn(
            f"{file}: skipped {where} ({why}); kept the {len(out)} complete lines before and around it",
            TruncatedTraceWarning,
            stacklevel=3,
        )
    return out, len(bad)


class _Segment:
    def __init__(self, run_id: str, messages: list[dict[str, Any]], boundary: str | None, t0: float | None) -> None:
        self.run_id = run_id
        self.messages = messages
        self.steps: list[RecordedStep] = []
        self.ids: list[str] = []
        self.model = ""
        self.boundary = boundary
        self.t0 = t0
        self.meta: dict[str, Any] = {}
        self.last_t: float | None = None
        self.tool_step: dict[str, int] = {}
        self.tool_start: dict[str, float | None] = {}

    def rel(self, ts: float | None) -> float | None:
        if ts is None:
            return None
        if self.t0 is None:
            self.t0 = ts
        return ts - self.t0

    def history(self) -> list[dict[str, Any]]:
        """Everything this segment's model saw and said, as messages (for the next segment)."""
        out = list(self.messages)
        for s in self.steps:
            out.append({"role": "assistant", "content": s.content})
            if s.after is not None:
                out.append({"role": "user", "content": s.after})
        return out


def _clean_block(b: dict[str, Any]) -> dict[str, Any]:
    """A block as the Messages API takes it back (Claude Code adds fields such as ``caller``)."""
    t = b.get("type")
    if t == "tool_use":
        return {"type": "tool_use", "id": b.get("id", ""), "name": b.get("name", ""), "input": b.get("input") or {}}
    if t == "tool_result":
        out = {"type": "tool_result", "tool_use_id": b.get("tool_use_id", ""), "content": b.get("content", "")}
        if b.get("is_error"):
            out["is_error"] = True
        return out
    return b


def parse_stream(
    lines: list[dict[str, Any]],
    run_id: str,
    source: str,
    *,
    skipped: Counter[str],
    ignored: Counter[str],
) -> list[RecordedRun]:
    """One conversation's lines (a main session or one sidechain) -> its segments as runs."""
    segments: list[_Segment] = []
    seg: _Segment | None = None
    pending_boundary: tuple[str, dict[str, Any]] | None = None
    synthetic = 0
    session_id = ""
    calls: dict[str, RecordedStep] = {}  # request id (else message id) -> its step
    # No line of a call carrying a stop reason means its final usage may never have been written: the
    # versions that write only the count the stream started with, and any call whose count is too small
    # for its reply, are estimated from the reply (never below the recorded count)
    start_counts: set[int] = set()  # id() of those steps
    for d in lines:
        kind = d.get("type")
        session_id = session_id or d.get("sessionId") or ""
        if kind == "system":
            if d.get("subtype") == "compact_boundary":
                pending_boundary = (
                    "compact",
                    {
                        "pre_tokens": (d.get("compactMetadata") or {}).get("preTokens"),
                        "trigger": (d.get("compactMetadata") or {}).get("trigger"),
                    },
                )
            else:
                ignored[f"system/{d.get('subtype')}"] += 1
            continue
        if kind not in ("user", "assistant"):
            if kind in KNOWN_IGNORED:
                ignored[str(kind)] += 1
            else:
                skipped[str(kind)] += 1
            continue
        ts = seconds(d.get("timestamp"))  # only calls and answers are timed (most lines are progress)
        msg = as_message(d.get("message")) or {}
        if kind == "user":
            content = [_clean_block(b) for b in blocks(msg.get("content"))]
            if not content:
                continue
            if seg is None or pending_boundary is not None:
                boundary, info = pending_boundary or (None, {})
                seg = _new_segment(segments, run_id, [], boundary, ts, info)
                pending_boundary = None
            t = seg.rel(ts)
            if not seg.steps:
                seg.messages.append({"role": "user", "content": content})
            else:
                last = seg.steps[-1]
                last.after = (last.after or []) + content
                last.after_at = t
                for b in content:
                    if b.get("type") == "tool_result":
                        cid = b.get("tool_use_id", "")
                        if cid in seg.tool_start:
                            last.tool_times[cid] = (seg.tool_start.pop(cid), t)
            seg.last_t = t
            continue
        # an assistant line
        model = msg.get("model") or ""
        if model == SYNTHETIC:
            synthetic += 1
            continue
        key = call_id(d, msg)
        content = [_clean_block(b) for b in blocks(msg.get("content"))]
        step = calls.get(key) if pending_boundary is None else None
        if step is not None and seg is not None:  # another line of a call already read: one request, one step
            step.content.extend(content)
            step.usage = _larger(step.usage, usage_from_anthropic(msg.get("usage")))
            step.cache_write_by_ttl = cache_ttl(msg.get("usage")) or step.cache_write_by_ttl
            step.stop_reason = msg.get("stop_reason") or step.stop_reason
            step.replied_at = seg.rel(ts)
        else:
            if seg is None or pending_boundary is not None:
                boundary, info = pending_boundary or (None, {})
                seg = _new_segment(
                    segments,
                    run_id,
                    [] if boundary == "compact" else (seg.history() if seg else []),
                    boundary,
                    ts,
                    info,
                )
                pending_boundary = None
            elif seg.model and model and model != seg.model and seg.steps:
                seg = _new_segment(segments, run_id, seg.history(), "model switch", ts, {"from_model": seg.model})
            seg.model = seg.model or model
            t = seg.rel(ts)
            step = RecordedStep(
                content=content,
                usage=usage_from_anthropic(msg.get("usage")),
                model=model,
                stop_reason=msg.get("stop_reason"),
                requested_at=seg.last_t,
                replied_at=t,
                request_id=d.get("requestId") or None,
                cache_write_by_ttl=cache_ttl(msg.get("usage")),
                line=d.get(LINE),
            )
            seg.steps.append(step)
            seg.ids.append(key)
            calls[key] = step
            if _writes_start_counts(d.get("version")):
                start_counts.add(id(step))
        t = seg.rel(ts)
        for b in content:
            if b.get("type") == "tool_use":
                seg.tool_step[b.get("id", "")] = len(seg.steps)
                seg.tool_start[b.get("id", "")] = t
        seg.last_t = t
    runs: list[RecordedRun] = []
    previous = None
    for n, s in enumerate(segments):
        if not s.steps:
            continue
        for st in s.steps:
            st.output_estimated = (
                st.stop_reason is None
                and st.usage is not None
                and (id(st) in start_counts or not plausible_output(st.usage.get("output_tokens"), st.content))
            )
            st.stop_reason = stop_reason_of(st.content, st.stop_reason)
        started = None if s.t0 is None else datetime.fromtimestamp(s.t0, UTC).isoformat()
        meta = {"session": session_id, "segment": n, "boundary": s.boundary, "previous": previous, **s.meta}
        if synthetic and n == 0:
            meta["synthetic_lines"] = synthetic
        runs.append(
            RecordedRun(
                run_id=s.run_id,
                format=FORMAT,
                source=source,
                messages=s.messages,
                steps=s.steps,
                task=first_text(s.messages)[:500],
                model=s.model,
                started_at=started,
                meta=meta,
                skipped=Counter(skipped) if n == 0 else Counter(),
                ended_at=s.last_t,
                detail=""
                if n + 1 == len(segments)
                else "the context ended at a boundary; the session continues in the next segment",
            )
        )
        runs[-1].meta["ignored_lines"] = dict(ignored) if n == 0 else {}
        runs[-1].tool_steps = s.tool_step
        previous = s.run_id
    return runs


START_COUNT_VERSIONS = ((2, 1, 16), (2, 1, 51))
"""Claude Code versions (inclusive) that write each call's usage as the stream started (output 1-30
tokens) and never the final count."""


def _writes_start_counts(version: Any) -> bool:
    try:
        v = tuple(int(x) for x in str(version).split(".")[:3])
    except ValueError:
        return False
    return START_COUNT_VERSIONS[0] <= v <= START_COUNT_VERSIONS[1]


def call_id(d: dict[str, Any], msg: dict[str, Any]) -> str:
    """The API request an assistant line belongs to: its ``requestId`` where it has one (Claude Code
    2.1.45 can write each line's own uuid as ``message.id``), else its ``message.id``, else its uuid."""
    return str(d.get("requestId") or msg.get("id") or d.get("uuid") or "")


def _larger(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, int] | None:
    """The usage of one request from two of its lines: each count the larger (counts only grow
    while a reply streams, so the order the lines are read in does not matter)."""
    if a is None or b is None:
        return a or b
    return {k: max(a.get(k, 0), b.get(k, 0)) for k in a.keys() | b.keys()}


def _new_segment(
    segments: list[_Segment],
    run_id: str,
    messages: list[dict[str, Any]],
    boundary: str | None,
    ts: float | None,
    info: dict[str, Any],
) -> _Segment:
    n = len(segments)
    seg = _Segment(run_id if n == 0 else f"{run_id}-seg{n}", messages, boundary, ts)
    seg.meta.update({k: v for k, v in info.items() if v is not None})
    segments.append(seg)
    return seg


class Seen:
    """The line ``uuid``s and call ``message.id``s already read in one session (its main
    file and every subagent file): a call is counted once, in the file that made it.

    Compaction and side-question helpers (``subagents/agent-acompact-*.jsonl``,
    ``agent-aside_question-*.jsonl``) start with copies of their parent's lines, same
    ``uuid`` and same ``message.id``; the main file is read first, so those copies are
    dropped and only the helper's own call is its run's.
    """

    def __init__(self) -> None:
        self.uuids: set[str] = set()
        self.calls: set[str] = set()
        self.usage: dict[str, dict[str, int] | None] = {}
        """Each counted call's usage (the largest of its lines) and the file that counts it."""
        self.where: dict[str, str] = {}
        self.low: dict[str, list[dict[str, Any]]] = {}
        """By file: lines of calls another file counts, with more usage than it counts (see the audit)."""


def parse_file(
    file: Path, *, run_prefix: str = "", seen: Seen | None = None
) -> tuple[list[RecordedRun], dict[str, str]]:
    """Every run in one Claude Code JSONL file (the session's segments, then its
    sidechains), and which tool call started each subagent (:func:`agent_links`).

    ``seen`` holds what other files of the same session already counted; lines
    copied from them are dropped (counted in ``recorded.copied_lines``).
    """
    lines, _ = read_lines(file)
    if not lines:
        return [], {}
    streams: dict[tuple[bool, str], list[dict[str, Any]]] = {}
    session = seen if seen is not None else Seen()
    before_calls = set(session.calls) if seen is not None else set()
    seen_here: set[str] = set()
    dupes = copies = 0
    low: list[tuple[int | None, str, str]] = []
    for d in lines:
        uid = d.get("uuid")
        if isinstance(uid, str):
            if uid in seen_here:
                dupes += 1
                continue
            if uid in session.uuids:
                copies += 1
                continue
            seen_here.add(uid)
        if d.get("type") == "assistant" and before_calls:
            msg = as_message(d.get("message")) or {}
            cid = call_id(d, msg)
            if cid in before_calls:
                copies += 1
                mine, counted = usage_from_anthropic(msg.get("usage")), session.usage.get(cid)
                if mine and counted and any(mine[k] > counted.get(k, 0) for k in mine):
                    # a line of a call another file counts, with more usage than that file holds:
                    # that file's figure for the call is too low, and the audit says so
                    low.append((d.get(LINE), cid, session.where.get(cid, "another file")))
                continue
        key = (bool(d.get("isSidechain")), str(d.get("agentId") or "") if d.get("isSidechain") else "")
        streams.setdefault(key, []).append(d)
    stem = run_prefix + file.name.removesuffix(".jsonl")
    runs: list[RecordedRun] = []
    skipped: Counter[str] = Counter()
    for (side, agent), stream in streams.items():
        if not side or (agent and stem.endswith(agent)):
            rid = stem  # the session itself, or a subagents/agent-<id>.jsonl file
        else:  # sidechain lines inside a session file (older Claude Code versions)
            rid = f"{stem}-{agent or 'sidechain'}"
        got = parse_stream(stream, rid, str(file), skipped=skipped, ignored=Counter())
        for r in got:
            r.meta["sidechain"] = side
            if side:
                r.meta["agent_id"] = agent or file.name.removesuffix(".jsonl").removeprefix("agent-")
            if dupes:
                r.meta["duplicate_lines"] = dupes
            if copies:
                r.meta["copied_lines"] = copies
        runs.extend(got)
    if low:
        session.low[str(file)] = [{"line": n, "request": c, "counted_in": where} for n, c, where in low]
        if runs:
            runs[0].meta["undercounted_elsewhere"] = session.low[str(file)]
    session.uuids |= seen_here
    for stream in streams.values():
        for d in stream:
            if d.get("type") == "assistant":
                msg = as_message(d.get("message")) or {}
                cid = call_id(d, msg)
                if cid:
                    session.calls.add(cid)
                    session.usage[cid] = _larger(session.usage.get(cid), usage_from_anthropic(msg.get("usage")))
                    session.where.setdefault(cid, str(file))
    return runs, agent_links(lines)


def agent_links(lines: list[dict[str, Any]]) -> dict[str, str]:
    """agentId -> the tool_use id of the Task call that started it, from a main session's lines."""
    links: dict[str, str] = {}
    for d in lines:
        r = d.get("toolUseResult")
        if isinstance(r, dict) and r.get("agentId"):
            for b in (d.get("message") or {}).get("content") or []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    links[str(r["agentId"])] = b.get("tool_use_id", "")
        data = d.get("data")
        if d.get("type") == "progress" and isinstance(data, dict) and data.get("agentId") and d.get("parentToolUseID"):
            links.setdefault(str(data["agentId"]), d["parentToolUseID"])
    return links


def link_sidechains(runs: list[RecordedRun], links: dict[str, str]) -> None:
    """Set ``parent`` (run id and step of the spawning call) on every sidechain run."""
    owner: dict[str, tuple[str, int]] = {}
    main = [r for r in runs if not r.meta.get("sidechain")]
    for r in main:
        for cid, step in r.tool_steps.items():
            owner[cid] = (r.run_id, step)
    for r in runs:
        if r.meta.get("sidechain"):
            call = links.get(str(r.meta.get("agent_id")))
            if call and call in owner:
                rid, step = owner[call]
                r.parent = {"run_id": rid, "step": step, "tool_use_id": call}
            elif main:
                r.parent = {"run_id": main[0].run_id, "step": None}


# ------------------------------------------------------------------ a session's files
_SESSION_ID = re.compile(rb'"sessionId"\s*:\s*"([^"]+)"')


def _session_id(file: Path) -> str | None:
    """The ``sessionId`` the first lines of ``file`` carry (read from the first MiB only)."""
    with open(file, "rb") as f:
        m = _SESSION_ID.search(f.read(1 << 20))
    return m.group(1).decode("utf-8", "replace") if m else None


_TIMESTAMP = re.compile(rb'"timestamp"\s*:\s*"([^"]+)"')


def last_timestamp(file: Path) -> str:
    """The latest ``timestamp`` in ``file``'s last 64 KiB ("" if none; ISO strings sort by time).

    A resumed session starts with copies of the session it resumed (their original
    timestamps too), so when sessions began cannot tell them apart; when they ended can.
    """
    with open(file, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(size - (1 << 16), 0))
        tail = f.read()
    found = _TIMESTAMP.findall(tail)
    return max(found).decode("ascii", "replace") if found else ""


def session_of(file: Path) -> Path | None:
    """The main session file a subagent file belongs to, in either layout.

    Claude Code 2.1 writes subagents to ``<session>/subagents/agent-<id>.jsonl``;
    2.0 wrote ``agent-<id>.jsonl`` beside the session, carrying the parent's
    ``sessionId`` (the session file is ``<sessionId>.jsonl`` in the same folder).
    """
    if not file.name.endswith(".jsonl"):
        return None
    if file.parent.name == "subagents":
        return file.parent.parent.with_suffix(".jsonl")
    if file.name.startswith("agent-"):
        sid = _session_id(file)
        if sid and (file.parent / f"{sid}.jsonl").is_file():
            return file.parent / f"{sid}.jsonl"
    return None


def subagent_files(session: Path) -> list[Path]:
    """The subagent files of a main session file, in both layouts (none for other files)."""
    if session.suffix != ".jsonl" or session.name.startswith("agent-"):
        return []
    out: list[Path] = []
    beside = session.with_suffix("") / "subagents"
    if beside.is_dir():
        out += sorted(beside.glob("*.jsonl"))
    out += [f for f in sorted(session.parent.glob("agent-*.jsonl")) if _session_id(f) == session.stem]
    return out


METADATA_NAMES = ("sessions-index.json",)
"""Files Claude Code writes into a project folder that index its sessions (not sessions)."""


def is_metadata(file: Path) -> bool:
    """Whether ``file`` is one of Claude Code's metadata files, not a run: a project folder's
    ``sessions-index.json``, or a subagent's ``agent-<id>.meta.json`` (its type and description,
    beside ``agent-<id>.jsonl``)."""
    name = file.name
    if name in METADATA_NAMES:
        return True
    return name.endswith(".meta.json") and (
        file.parent.name == "subagents" or file.with_name(name.removesuffix(".meta.json") + ".jsonl").exists()
    )


def why_no_calls(file: Path) -> str:
    """Why a Claude Code file gave no run, in the user's words."""
    data = file.read_bytes()
    synthetic = data.count(b'"model":"<synthetic>"')
    if synthetic:
        replies = "reply" if synthetic == 1 else "replies"
        return f"no API calls in it: only {synthetic} <synthetic> {replies}, written by Claude Code itself"
    return "no API calls in it (no assistant lines, or only copies of lines another file of the session holds)"

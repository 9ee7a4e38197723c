"""Real runs in the lab: other agents' records read as native traces.

``load_recorded(path)`` reads a Claude Code session, a mini-swe-agent or
SWE-agent trajectory, or a Messages API log (recognised by content) and
returns the same :class:`~agentlab.trace.Trace` a native run produces, so
every frame, plot, report, what-if, replay and fork works on it unchanged. A
folder (or a file holding several runs: a session with compactions or
subagents) gives :class:`~agentlab.trace.Traces`.

Each importer turns its records into :class:`~.build.RecordedStep` values;
:func:`~.build.build_run` turns those into the engine's event records,
redacted like a native trace. See ``docs/recorded.md``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from ..pricing import Prices
from ..redact import Redactor
from ..trace import Trace, Traces, TraceWriter
from ..trace.files import SUFFIX, inside, name_from, within
from ..trace.writer import dumps
from . import claude_code, messages_log, swe_agent
from .build import RecordedRun, build_run
from .detect import FORMATS, SUFFIXES, UnrecognizedFormat, detect

Format = Literal["auto", "claude-code", "mini-swe-agent", "swe-agent", "messages-log"]

__all__ = ["FORMATS", "Format", "UnrecognizedFormat", "import_recorded", "load_recorded", "recorded_runs"]


def _files(path: Path) -> list[Path]:
    if path.is_file():
        beside = path.with_suffix("") / "subagents"  # a Claude Code session brings its subagents
        if path.suffix == ".jsonl" and beside.is_dir():
            return [path, *sorted(p for p in beside.glob("*.jsonl") if within(beside, p))]
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"no recorded run at {str(path)!r} (give a file or a folder)")
    # issue 24: a link pointing out of the folder is not followed (a foreign file is never read nor shown)
    found = sorted(p for p in path.rglob("*") if p.name.endswith(SUFFIXES) and within(path, p) and p.is_file())
    if not found:
        raise FileNotFoundError(f"no recorded runs in {str(path)!r} (looked for files ending in {', '.join(SUFFIXES)})")
    return found


def _session_of(file: Path) -> Path | None:
    """The main session file of a Claude Code ``<session>/subagents/agent-*.jsonl`` file."""
    if file.parent.name == "subagents":
        main = file.parent.parent.with_suffix(".jsonl")
        return main
    return None


def recorded_runs(path: str | os.PathLike[str], format: Format = "auto") -> Iterator[RecordedRun]:
    """Every run in ``path`` (a file or a folder), before it becomes events."""
    root = Path(path)
    files = _files(root)
    # main session files first, so a subagent can be linked to the call that started it
    files.sort(key=lambda f: (_session_of(f) is not None, str(f)))
    links: dict[Path, dict[str, str]] = {}
    main_runs: dict[Path, list[RecordedRun]] = {}
    for f in files:
        try:
            fmt = detect(f) if format == "auto" else format
        except UnrecognizedFormat:
            if root.is_dir() and f.stat().st_size == 0:
                continue  # an empty file in a folder holds no run
            if root.is_dir() and not f.name.endswith((".jsonl", ".traj", ".traj.json")):
                continue  # some other .json beside the runs (a config, a report)
            raise
        if fmt not in FORMATS:
            raise ValueError(f"format must be 'auto' or one of {', '.join(FORMATS)}, got {format!r}")
        if fmt == claude_code.FORMAT:
            session = _session_of(f)
            prefix = f"{session.stem}-" if session is not None else ""
            runs, found = claude_code.parse_file(f, run_prefix=prefix)
            if session is None:
                claude_code.link_sidechains(runs, found)
                main_runs[f], links[f] = runs, found
            else:
                if session not in links and session.exists():  # a subagent file read alone: its parent tells the link
                    main_runs[session], links[session] = claude_code.parse_file(session)
                parents = main_runs.get(session)
                for r in runs:
                    r.meta["sidechain"] = True
                    r.meta.setdefault("agent_id", f.name.removesuffix(".jsonl").removeprefix("agent-"))
                claude_code.link_sidechains((parents or []) + runs, links.get(session, {}))
            yield from runs
        elif fmt in (swe_agent.MINI, swe_agent.SWE):
            yield swe_agent.parse_file(f)
        else:
            yield from messages_log.parse_file(f)


def load_recorded(
    path: str | os.PathLike[str],
    format: Format = "auto",
    *,
    prices: Prices | dict[str, Prices] | None = None,
    redactor: Redactor | None = None,
) -> Trace | Traces:
    """Recorded runs as native traces: a :class:`Trace` when ``path`` holds one run, else :class:`Traces`.

    ``prices`` overrides the price table (one :class:`Prices` for every model,
    or a dict by model id) for models it does not know; without a price a
    step's cost is left empty (NaN) and the run's ``recorded.notes`` say so.
    """
    path = Path(path).expanduser()  # "~/.claude/projects/..." as users write it
    redactor = redactor or Redactor()
    traces = [Trace(build_run(r, prices=prices, redactor=redactor), None) for r in recorded_runs(path, format)]
    if not traces:
        raise ValueError(f"{path}: no model calls found in the recorded file(s)")
    if len(traces) == 1 and Path(path).is_file():
        return traces[0]
    root = Path(path)
    return Traces(traces, root if root.is_dir() else root.parent)


def import_recorded(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    format: Format = "auto",
    *,
    prices: Prices | dict[str, Prices] | None = None,
) -> list[Path]:
    """Write each recorded run in ``path`` as a native trace file in ``out`` (default ``./runs``); return the files."""
    path = Path(path).expanduser()
    writer = TraceWriter(out)
    redactor = writer.redactor
    written: list[Path] = []
    writer.dir.mkdir(parents=True, exist_ok=True)
    for r in recorded_runs(path, format):
        r.run_id = name_from(r.run_id)  # issue 24: the file's name comes from us, never from the content
        if r.parent is not None and isinstance(r.parent.get("run_id"), str):
            r.parent = {**r.parent, "run_id": name_from(r.parent["run_id"])}  # the same mapping: the link holds
        records = build_run(r, prices=prices, redactor=redactor)
        file = inside(writer.dir, f"{r.run_id}{SUFFIX}")
        with open(file, "wb") as f:
            for rec in records:
                f.write(dumps(rec))
        written.append(file)
    return written

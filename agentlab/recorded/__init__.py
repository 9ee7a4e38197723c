"""Real runs in the lab: other agents' records read as native traces.

``load_recorded(path)`` reads a Claude Code session (or its ``stream-json``
output), a Codex CLI rollout, a Gemini CLI chat, a Cline / Roo Code task, an
inspect-ai ``.eval`` log, an OpenHands ``output.jsonl``, a mini-swe-agent or
SWE-agent trajectory, or a Messages API log (each recognised by content) and
returns the same :class:`~agentlab.trace.Trace` a native run produces, so
every frame, plot, report, what-if, replay and fork works on it unchanged. A
folder (or a file holding several runs: a session with compactions or
subagents) gives :class:`~agentlab.trace.Traces`.

A folder import never aborts: a file that holds no run is skipped with a
:class:`SkippedFileWarning` and listed in the :class:`ImportReport`.

Each importer turns its records into :class:`~.build.RecordedStep` values;
:func:`~.build.build_run` turns those into the engine's event records,
redacted like a native trace. See ``docs/recorded.md``.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from .._safe_text import html_text, no_math_html
from ..errors import AgentlabError
from ..pricing import Prices
from ..redact import Redactor
from ..trace import Trace, Traces, TraceWriter
from ..trace.files import SUFFIX, inside, name_from, within
from ..trace.writer import dumps
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
from .audit import call_key, run_anchor, undercounted
from .audit import summary as audit_summary
from .build import RecordedRun, build_run, drop_leading
from .detect import FORMATS, SUFFIXES, KnownFormat, UnrecognizedFormat, detect

Format = Literal["auto"] | KnownFormat
"""A format name for ``load_recorded`` / ``agentlab import --format``: one of :data:`FORMATS`, or ``"auto"``."""

__all__ = [
    "FORMATS",
    "Format",
    "ImportReport",
    "NoCalls",
    "SkippedFileWarning",
    "UnrecognizedFormat",
    "import_recorded",
    "load_recorded",
    "recorded_runs",
]


class SkippedFileWarning(UserWarning):
    """A file in a folder import that holds no run this lab can read (it is skipped, the import goes on)."""


class ImportReport(list[Path]):
    """The trace files an import wrote (a list of paths), and what it read and skipped.

    ``files_read`` counts the files looked at, ``runs`` the runs made from them,
    and ``skipped`` lists ``(file, why)`` for every file that gave no run (not a
    recorded run, no API calls in it, unreadable) and every run not written
    (already in the folder without ``force=True``). ``audits`` holds each run's
    audit by run id (see :mod:`agentlab.recorded.audit`; a file that gave no run
    but whose lines show a call counted too low elsewhere, by its path) and
    :attr:`findings` every finding, so an import the lab cannot vouch for says so.
    """

    def __init__(self) -> None:
        super().__init__()
        self.files_read = 0
        self.runs = 0
        self.skipped: list[tuple[Path, str]] = []
        self.audits: dict[str, dict[str, Any]] = {}
        self.metadata: list[Path] = []
        """Files an agent keeps beside its runs that are not runs (Claude Code's ``sessions-index.json``,
        a subagent's ``agent-<id>.meta.json``): passed over without a warning each, counted in :meth:`summary`."""

    @property
    def findings(self) -> list[dict[str, Any]]:
        """Every finding of every run's audit (each a dict: ``run_id``, ``check``, ``message``, ``file``,
        ``line``, ``step``, ``money``)."""
        return [{"run_id": rid, **f} for rid, a in self.audits.items() for f in a.get("findings") or []]

    def summary(self) -> str:
        """One line: files read, runs made, files skipped, and what the audit found."""
        found = self.findings
        estimated = sum(a.get("status") == "estimated" for a in self.audits.values())
        audit = f"; audit: {len(found)} finding(s)" if found else "; audit: ok"
        if estimated:
            audit += f", {estimated} run(s) with estimated usage"
        meta = f", {len(self.metadata)} agent metadata file(s) passed over" if self.metadata else ""
        return f"{self.files_read} file(s) read, {self.runs} run(s) made, {len(self.skipped)} skipped{meta}{audit}"

    SHOWN = 20
    """Rows of each table the notebook display shows (the rest are counted, and in the attributes)."""

    def _repr_html_(self) -> str:
        """The import in a notebook: the summary, each run's audit status, every finding with its file and
        line, and the files skipped. Dollar amounts in findings stay money in every notebook
        (``&#36;`` inside an element of the class every notebook's MathJax skips)."""
        e = html_text

        def table(head: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
            th = "".join(f"<th style='text-align:left'>{e(h)}</th>" for h in head)
            body = "".join(
                "<tr>" + "".join(f"<td style='text-align:left'>{e(v)}</td>" for v in r) + "</tr>"
                for r in rows[: self.SHOWN]
            )
            more = f"<div>... and {len(rows) - self.SHOWN} more</div>" if len(rows) > self.SHOWN else ""
            return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>{more}"

        parts = [f"<div><b>Import</b>: {e(self.summary())}</div>"]
        if self.audits:
            statuses: list[tuple[Any, ...]] = [(rid, audit_summary(a) or "-") for rid, a in self.audits.items()]
            parts.append("<div>audit of each run</div>" + table(("run", "audit"), statuses))
        found = self.findings
        if found:
            rows: list[tuple[Any, ...]] = [
                (
                    f["run_id"],
                    f["check"],
                    f["file"] + (f":{f['line']}" if f.get("line") is not None else ""),
                    "" if f.get("step") is None else f["step"],
                    f["message"],
                )
                for f in found
            ]
            parts.append("<div>findings: figures the lab cannot vouch for</div>")
            parts.append(table(("run", "check", "where", "step", "what"), rows))
        if self.skipped:
            parts.append("<div>skipped</div>" + table(("file", "why"), [(str(f), why) for f, why in self.skipped]))
        return no_math_html("<div class='agentlab-import'>" + "".join(parts) + "</div>")


def _files(path: Path, unreadable: list[tuple[Path, str]] | None = None) -> list[Path]:
    if path.is_file():
        return [
            path,
            *(p for p in claude_code.subagent_files(path) if within(path.parent, p)),
        ]  # its subagents, not links out
    if not path.is_dir():
        raise FileNotFoundError(f"no recorded run at {str(path)!r} (give a file or a folder)")
    # a link pointing out of the folder is not followed (a foreign file is never read nor shown); a link
    # that cannot be followed (a loop, two links naming each other) is skipped with a warning naming it
    bad = unreadable if unreadable is not None else []
    found = sorted(p for p in path.rglob("*") if p.name.endswith(SUFFIXES) and _readable(path, p, bad))
    if not found:
        raise FileNotFoundError(f"no recorded runs in {str(path)!r} (looked for files ending in {', '.join(SUFFIXES)})")
    return found


_SHA256_NAME = re.compile(r"[0-9a-f]{64}")


def _hashed(f: Path) -> bool:
    """Whether ``f`` is under a folder named by a SHA-256 (an agent's copy by project hash)."""
    return any(_SHA256_NAME.fullmatch(p) for p in f.parent.parts)


def _readable(folder: Path, p: Path, bad: list[tuple[Path, str]]) -> bool:
    """Whether a folder import reads ``p``: a file (links followed) inside ``folder``."""
    try:
        return within(folder, p) and p.is_file()
    except (OSError, RuntimeError) as exc:  # a symlink loop: Python 3.11 raises RuntimeError, later OSError
        bad.append((p, f"a link that cannot be followed ({exc})"))
        return False


class _Scan:
    """What one import has seen so far: sessions read, run ids given, files skipped."""

    def __init__(self, report: ImportReport | None, folder: bool, progress: Any = None) -> None:
        self.report = report if report is not None else ImportReport()
        self.folder = folder
        self.progress = progress
        self.ids: set[str] = set()
        self.links: dict[Path, dict[str, str]] = {}
        self.main_runs: dict[Path, list[RecordedRun]] = {}
        # one for the whole import: a resumed session copies the lines of the session it
        # resumed (same uuid, same message.id), and a call is still counted once
        self.seen = claude_code.Seen()
        self.renamed: dict[Path, dict[str, str]] = {}
        self.calls: dict[str, str] = {}  # every call read so far (audit.call_key) -> the run that holds it

    def uncounted(self, runs: list[RecordedRun], file: Path) -> list[RecordedRun]:
        """``runs`` without the calls another file of this import already holds (the same request seen
        twice is one): a run that starts with copies (a moved project's old copy, a resumed session)
        keeps them as history; a run made only of copies is dropped; any other copy is marked for the
        audit."""
        out: list[RecordedRun] = []
        for r in runs:
            anchor = run_anchor(r)
            keys = [call_key(s, anchor) for s in r.steps]
            lead = 0
            while lead < len(keys) and keys[lead] in self.calls:
                lead += 1
            if lead == len(keys):
                r.meta["copy_of"] = self.calls[keys[0]]
                continue
            if lead:
                r = drop_leading(r, lead)
                r.meta["copied_calls"] = lead
                keys = keys[lead:]
            where = f"{r.source} ({r.run_id})"
            for k, key in enumerate(keys, 1):
                if key in self.calls:
                    r.meta.setdefault("counted_elsewhere", {})[str(k)] = self.calls[key]
                else:
                    self.calls[key] = where
            out.append(r)
        if runs and not out:
            raise NoCalls(file, f"every call in it is already counted in {runs[0].meta['copy_of']}")
        return out

    def skip(self, file: Path, why: str) -> None:
        self.report.skipped.append((file, why))
        warnings.warn(f"{file}: skipped ({why})", SkippedFileWarning, stacklevel=4)

    def unique(self, runs: list[RecordedRun], file: Path, group: Path) -> list[RecordedRun]:
        """Give every run an id no other run of this import has (``<folder>-<id>``, then ``-2``…),
        keeping the links between runs of one session (``parent``, ``previous``) right."""
        renamed = self.renamed.setdefault(group, {})
        for r in runs:
            rid = r.run_id
            if rid in self.ids:
                rid = f"{file.parent.name}-{r.run_id}" if file.parent.name else r.run_id
                n = 1
                while rid in self.ids:
                    n += 1
                    rid = f"{file.parent.name}-{r.run_id}-{n}"
                renamed[r.run_id] = rid
                r.meta["renamed_from"] = r.run_id
                r.run_id = rid
            self.ids.add(rid)
        for r in runs:
            if r.parent and r.parent.get("run_id") in renamed:
                r.parent = {**r.parent, "run_id": renamed[r.parent["run_id"]]}
            if r.meta.get("previous") in renamed:
                r.meta["previous"] = renamed[r.meta["previous"]]
        return runs


def recorded_runs(
    path: str | os.PathLike[str],
    format: Format = "auto",
    *,
    report: ImportReport | None = None,
    progress: Any = None,
) -> Iterator[RecordedRun]:
    """Every run in ``path`` (a file or a folder), before it becomes events.

    In a folder, a file that holds no run this lab can read is skipped with a
    :class:`SkippedFileWarning` naming it and why, and recorded in ``report``;
    the import goes on. A single file that holds none raises.
    """
    if format != "auto" and format not in FORMATS:
        raise ValueError(f"format must be 'auto' or one of {', '.join(FORMATS)}, got {format!r}")
    root = Path(path)
    unreadable: list[tuple[Path, str]] = []
    files = _files(root, unreadable)
    # main session files first, so a subagent can be linked to the call that started it
    # and a helper's copies of its parent's lines are recognised as copies
    sessions = {f: claude_code.session_of(f) for f in files}
    # (and, of the main files, the one that ended first first: a call belongs to the session
    # that made it, not to a later one that resumed it and copied its lines)
    # (and a copy the agent left under a folder named by a hash, as Gemini CLI does with a moved
    # project's ``tmp/<sha256>/``, after the copy under the project's name: the call counts there)
    files.sort(
        key=lambda f: (
            sessions[f] is not None,
            _hashed(f),
            claude_code.last_timestamp(f) if f.suffix == ".jsonl" else "",
            str(f),
        )
    )
    scan = _Scan(report, root.is_dir(), progress)
    for f, why in unreadable:
        scan.skip(f, why)
    consumed: set[Path] = set()
    for f in files:
        if claude_code.is_metadata(f):  # an index or a subagent's description: not a run, nothing to warn about
            scan.report.metadata.append(f)
            if progress is not None:
                progress(f)
            continue
        if f in consumed:  # read with another file (a Cline task's ui_messages.json)
            if progress is not None:
                progress(f)
            continue
        scan.report.files_read += 1
        try:
            runs = _read(f, format, sessions[f], scan, consumed)
        except (UnrecognizedFormat, NoCalls) as exc:
            if f == root:
                raise
            scan.skip(f, exc.why)
            runs = []
        except Exception as exc:  # one unreadable file never loses the others of a folder
            if f == root:
                raise
            scan.skip(f, f"could not be read: {type(exc).__name__}: {exc}")
            runs = []
        finally:
            if progress is not None:
                progress(f)
        scan.report.runs += len(runs)
        yield from runs


class NoCalls(AgentlabError, ValueError):
    """A recorded file of a known format that holds no API call (only ``<synthetic>`` replies, or none)."""

    def __init__(self, file: Path, why: str) -> None:
        super().__init__(f"{file}: {why}")
        self.why = why


def _read(f: Path, format: str, session: Path | None, scan: _Scan, consumed: set[Path]) -> list[RecordedRun]:
    fmt = detect(f) if format == "auto" else format
    if fmt == claude_code.FORMAT:
        group = session or f
        seen = scan.seen
        if session is None:
            runs, found = claude_code.parse_file(f, seen=seen)
            claude_code.link_sidechains(runs, found)
            scan.main_runs[f], scan.links[f] = runs, found
        else:
            if session not in scan.links and session.exists():  # a subagent file read alone: its parent tells the link
                scan.main_runs[session], scan.links[session] = claude_code.parse_file(session, seen=seen)
            runs, _ = claude_code.parse_file(f, run_prefix=f"{session.stem}-", seen=seen)
            parents = scan.main_runs.get(session)
            for r in runs:
                r.meta["sidechain"] = True
                r.meta.setdefault("agent_id", f.name.removesuffix(".jsonl").removeprefix("agent-"))
            claude_code.link_sidechains((parents or []) + runs, scan.links.get(session, {}))
        if not runs:
            lows = seen.low.get(str(f))
            if lows:  # no run to carry them: the import's report does
                said = [x.as_dict() for x in undercounted(str(f), lows)]
                scan.report.audits[str(f)] = {"status": "findings", "findings": said, "estimated_steps": 0}
            raise NoCalls(f, claude_code.why_no_calls(f))
        return scan.unique(scan.uncounted(runs, f), f, group)
    runs = _IMPORTERS[fmt](f, consumed)
    if not runs:
        raise NoCalls(f, f"no model calls in this {fmt} record")
    return scan.unique(scan.uncounted(runs, f), f, f)


def _one_run(f: Path, consumed: set[Path]) -> list[RecordedRun]:
    return swe_agent.parse_file(f)


def _messages_log(f: Path, consumed: set[Path]) -> list[RecordedRun]:
    return messages_log.parse_file(f)


_IMPORTERS: dict[str, Callable[[Path, set[Path]], list[RecordedRun]]] = {
    swe_agent.MINI: _one_run,
    swe_agent.SWE: _one_run,
    messages_log.FORMAT: _messages_log,
    codex.FORMAT: lambda f, _: codex.parse_file(f),
    gemini.FORMAT: lambda f, _: gemini.parse_file(f),
    cline.FORMAT: cline.parse_file,
    stream_json.FORMAT: lambda f, _: stream_json.parse_file(f),
    inspect_eval.FORMAT: lambda f, _: inspect_eval.parse_file(f),
    openhands.FORMAT: lambda f, _: openhands.parse_file(f),
}


def load_recorded(
    path: str | os.PathLike[str],
    format: Format = "auto",
    *,
    prices: Prices | dict[str, Prices] | None = None,
    redactor: Redactor | None = None,
    report: ImportReport | None = None,
) -> Trace | Traces:
    """Recorded runs as native traces: a :class:`Trace` when ``path`` holds one run, else :class:`Traces`.

    ``prices`` overrides the price table (one :class:`Prices` for every model,
    or a dict by model id) for models it does not know; without a price a
    run's cost is unknown (NaN, not $0) and its ``recorded.notes`` say so.
    In a folder, files that hold no run are skipped with a
    :class:`SkippedFileWarning` and listed in ``report`` (an :class:`ImportReport`).
    """
    path = Path(path).expanduser()  # "~/.claude/projects/..." as users write it
    redactor = redactor or Redactor()
    report = report if report is not None else ImportReport()
    with _progress(path) as tick:
        runs = recorded_runs(path, format, report=report, progress=tick)
        memo: dict[tuple[str, str | None], Prices | None] = {}
        traces = [Trace(build_run(r, prices=prices, redactor=redactor, price_memo=memo), None) for r in runs]
    for t in traces:
        report.audits[t.run_id] = (t.started.get("recorded") or {}).get("audit") or {}
    if not traces:
        raise NoCalls(path, f"no API calls found in the recorded file(s) ({report.summary()})")
    if len(traces) == 1 and path.is_file():
        return traces[0]
    return Traces(traces, path if path.is_dir() else path.parent)


def import_recorded(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    format: Format = "auto",
    *,
    prices: Prices | dict[str, Prices] | None = None,
    force: bool = False,
) -> ImportReport:
    """Write each recorded run in ``path`` as a native trace file in ``out`` (default ``./runs``).

    Returns the files written (an :class:`ImportReport`: also files read, runs
    made, and what was skipped and why). A run whose file is already in ``out``
    is not overwritten unless ``force=True``; it is listed as skipped instead.
    Raises :class:`NoCalls` when nothing in ``path`` holds an API call.
    """
    path = Path(path).expanduser()
    writer = TraceWriter(out)
    redactor = writer.redactor
    report = ImportReport()
    writer.dir.mkdir(parents=True, exist_ok=True)
    memo: dict[tuple[str, str | None], Prices | None] = {}
    with _progress(path) as tick:
        for r in recorded_runs(path, format, report=report, progress=tick):
            r.run_id = name_from(r.run_id)  # the file's name comes from us, never from the content
            if r.parent is not None and isinstance(r.parent.get("run_id"), str):
                r.parent = {**r.parent, "run_id": name_from(r.parent["run_id"])}  # the same mapping: the link holds
            file = inside(writer.dir, f"{r.run_id}{SUFFIX}")
            if file.exists() and not force:
                report.skipped.append(
                    (file, f"run {r.run_id!r} is already in {writer.dir} (pass --force / force=True to overwrite)")
                )
                continue
            records = build_run(r, prices=prices, redactor=redactor, price_memo=memo)
            report.audits[r.run_id] = records[0]["recorded"]["audit"]
            with open(file, "wb") as f:
                for rec in records:
                    f.write(dumps(rec))
            report.append(file)
    if not report.runs:
        raise NoCalls(path, f"no API calls found in the recorded file(s) ({report.summary()})")
    return report


PROGRESS_AFTER_S = 1.0
"""An import shows its progress bar once it has taken this long (a quick one shows none)."""


@contextmanager
def _progress(path: Path) -> Iterator[Callable[[Path], None] | None]:
    """A progress bar over the bytes of the files read: tqdm in a terminal, a widget in a
    notebook (``tqdm.auto``), shown only for an import that takes more than a second."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the progress extra is not installed: no bar
        yield None
        return
    try:  # the files the import reads: a bar that ends short of its total shows red in a notebook
        total: int | None = sum(f.stat().st_size for f in _files(path))
    except OSError:  # not there: the import itself says so
        total = None
    # in a terminal only when stderr is one (never in CI logs); in a notebook always (its
    # output is not a TTY, and tqdm would otherwise hide the widget)
    in_notebook = any(c.__module__ == "tqdm.notebook" for c in tqdm.__mro__)
    bar = tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        desc="importing",
        delay=PROGRESS_AFTER_S,
        leave=False,
        disable=False if in_notebook else None,
    )

    def tick(f: Path) -> None:
        try:
            bar.update(f.stat().st_size)
        except OSError:
            pass

    try:
        yield tick
    finally:
        bar.close()

"""Writing a trace: a subscriber that appends each event as one JSON line.

Lines reach the operating system (unbuffered ``write``s) at *flush points*,
each writing the lines held before it and its own in one ``write``: three
``write``s a tool step instead of six. Three kinds, each
followed by another event before the engine waits on anything, are held:
``model_called`` (``tool_started``, a retry or a stop follows),
``tool_results`` (``step_finished`` or a stop follows) and ``tool_finished``
when no other call of its run is still running (a finished call is never held
while a sibling runs: a resumed run reads it to know which writes not to run
again). Every other event is a flush point, and so are ``Run.step()``
returning (the engine calls :meth:`TraceWriter.flush_run`: a run paused before
its tools has its reply on disk) and closing the writer. So before any model
call, tool body, approval wait or retry sleep, at every step's end and when
control goes back to the caller, every event so far is on disk, as one write
an event would have put it. A process killed by SIGKILL or a kernel restart
keeps every finished step and every event before the engine's last wait (the
call in flight, the reply of a paused step); it can lose only the events of
the step in progress emitted since: a reply before its calls start (the
engine yields one event-loop turn there), the last call's ``tool_finished``
and the turn's ``tool_results`` before ``step_finished``. Secrets are
redacted before a line is written.

A write that fails (disk full, file size limit, permission lost) raises
:class:`TraceWriteError`, which the engine turns into a stop with reason
``"trace write failed"`` (``on_error="warn"``: warn once and go on). A line cut
short by the failure is truncated away, or, when even that fails, the next
line starts on a fresh line, so a partial line is never glued to an event.
One writer per run: the file is locked while a run writes it.
"""

from __future__ import annotations

import errno
import json
import math
import os
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any, Literal, TypeGuard

import orjson

from ..errors import TraceWriteError
from ..events import Event
from ..redact import Redactor, StreamRedactor
from ._blobs import MARKER, BlobStore
from .files import SUFFIX, UnsafePath, check_name, inside, remember, runs_dir
from .schema import FLOAT_TAG, KINDS, LINE_BASE, PLAIN_KINDS, event_record, kind_field, line_head

try:  # POSIX advisory locks; elsewhere a second writer is not detected
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

STORE_ONCE_CHARS = 2048
"""A tool result at least this long is written once, in ``tool_finished``: the
``tool_results`` block that hands it to the model says ``"content_ref":
"tool_finished"`` instead of repeating it (the reader puts it back)."""
MAX_DEPTH = 128
"""Objects and lists nested deeper than this (a tool input 1,000 levels deep) are written
as their JSON text, a string, so every reader (orjson stops at 1,024 levels, the standard
library near Python's recursion limit) can read the line; nothing is dropped."""
RUN_MEMORIES = 64
"""How many runs' redaction memories a writer keeps (see :meth:`TraceWriter.redactor_for`)."""
"""NaN and infinities are written as ``{"$float": "NaN" | "Infinity" | "-Infinity"}``
(valid JSON; the reader turns them back into floats)."""


_MIN_T, _MAX_T = 1e-4, 1e9
"""Where the common path writes ``t`` (see :meth:`TraceWriter.__call__`); outside (a fake clock's 0.0, 31 years)
the long way does."""
_NEWLINE = orjson.OPT_APPEND_NEWLINE
_OPTIONS = orjson.OPT_NON_STR_KEYS | _NEWLINE
_LONG_WAY = frozenset(("model_delta", "run_started", "run_finished"))
"""Kinds the common path leaves to :meth:`TraceWriter._long_way`: fragments, and a run's first and last event."""
_HELD, _FINISHED, _STARTED = 1, 2, 3
_HOLD = {"model_called": _HELD, "tool_results": _HELD, "tool_finished": _FINISHED, "tool_started": _STARTED}
"""What each kind does to its run's held lines (:func:`_held_back`); any other kind is a flush point."""


def _json_str(text: str) -> bytes:
    return orjson.dumps(text, default=str)


def _long(result: Any) -> TypeGuard[str]:
    """A tool result written once, in ``tool_finished`` (see :data:`STORE_ONCE_CHARS`)."""
    return isinstance(result, str) and len(result) >= STORE_ONCE_CHARS


_HOT: dict[str, tuple[bytes, bool, int]] = {
    k.value: (kind_field(k.value), k.value not in PLAIN_KINDS, _HOLD.get(k.value, 0))
    for k in KINDS
    if k.value not in _LONG_WAY
}
"""The kinds the common path takes, each with its ``,"kind":"<kind>",`` bytes (``data``'s fields follow), whether
its line is tested for secrets (:data:`~agentlab.trace.schema.PLAIN_KINDS` hold numbers only) and what it does to the
held lines (:data:`_HOLD`). A driver's own kind (``Run.note``, rare) takes the long
way."""


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _open_nofollow(path: str, flags: int) -> int:
    """``os.open`` that fails with ``ELOOP`` where the file is a link (see ``TraceWriter._open_file``)."""
    return os.open(path, flags | _NOFOLLOW, 0o666)


class TraceWriteWarning(UserWarning):
    """A trace write failed and the writer was told to warn and go on (``on_error="warn"``)."""


class _File:
    """One run's open trace file: where its last complete line ends, whether a partial line may follow it,
    what every line of the run shares (its first bytes, its redactor), the lines held for the next flush
    point (one ``bytes``: adding a line copies it once, as a list's ``join`` would, with no list to make), and
    how many of the run's tool calls are running."""

    __slots__ = ("calls", "f", "good", "head", "held", "ragged", "redactor", "words_in_head")

    def __init__(self, f: Any, size: int, run_id: str, redactor: Redactor) -> None:
        self.f = f
        self.good = size
        self.ragged = False
        self.held = b""
        self.calls = 0
        self.head = line_head(run_id)
        self.redactor = redactor
        # Do the run's first bytes (its id) hold a secret word, a URL's "://", or anything else the pre-test
        # looks for? Then its lines are tested whole; else those are looked for in data's text only (__call__).
        self.words_in_head = redactor.needs_redaction(self.head) or self.head.find(b"://") >= 0
        if self.good:  # a previous writer may have died mid-line
            with open(f.name, "rb") as r:
                r.seek(self.good - 1)
                self.ragged = r.read(1) != b"\n"


class _Stream:
    """One run's streamed fragments: the redactor holding back each block's tail, and the line not yet written."""

    __slots__ = ("held", "redactor")

    def __init__(self, redactor: StreamRedactor) -> None:
        self.redactor = redactor
        self.held: tuple[Event, Any, dict[str, Any]] | None = None


# ------------------------------------------------------------------ writing
class TraceWriter:
    """A subscriber that appends each event to ``<runs>/<run_id>.jsonl``.

    One writer may serve many runs. A run's file is closed when the run
    finishes (and reopened if the run is resumed), so a long-lived writer
    holds no file handles between runs.

    ``on_error``: ``"stop"`` (default) raises :class:`TraceWriteError` when a
    line cannot be written, and the run stops; ``"warn"`` warns once per run
    and goes on (the trace then misses events: its runs row says so only if
    ``run_finished`` is missing).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        redactor: Redactor | None = None,
        deltas: bool = False,
        on_error: Literal["stop", "warn"] = "stop",
    ) -> None:
        """``deltas=True`` also writes each ``model_delta`` (a streamed reply's fragments, with
        their timing); by default only the assembled reply is stored, once."""
        if on_error not in ("stop", "warn"):
            raise ValueError(f"on_error must be 'stop' or 'warn', got {on_error!r}")
        self.dir = runs_dir(path)
        self._dir = os.fspath(self.dir)
        self.deltas = deltas
        self.redactor = redactor or Redactor()
        self.on_error = on_error
        self._files: dict[str, _File] = {}
        self._long_results: dict[tuple[str, str], str] = {}
        self._warned: set[str] = set()
        self._opened: set[str] = set()  # runs this writer started: only these may be appended to (a resumed run)
        self._streams: dict[str, _Stream] = {}
        self._run_redactors: OrderedDict[str, Redactor] = OrderedDict()
        self._blobs = BlobStore(self.dir)  # images and PDFs: once per run, beside its log (trace/_blobs.py)

    def redactor_for(self, run_id: str) -> Redactor:
        """The redactor of one run: this writer's rules, and a memory of removed values that is that run's
        alone (a writer serving thousands of runs neither slows down nor carries one run's values to the next).
        The last :data:`RUN_MEMORIES` runs are remembered, so a paused or resumed run keeps its memory."""
        r = self._run_redactors.get(run_id)
        if r is None:
            r = self._run_redactors[run_id] = self.redactor.for_run()
            while len(self._run_redactors) > RUN_MEMORIES:
                self._run_redactors.popitem(last=False)
        else:
            self._run_redactors.move_to_end(run_id)
        return r

    def file_of(self, run_id: str) -> Path:
        """Where this writer puts the events of ``run_id``."""
        return self.dir / f"{run_id}{SUFFIX}"

    def __call__(self, event: Event) -> None:
        """Write ``event`` as one line: on disk before this returns, or, for a kind held for the next flush
        point (:data:`_HOLD`, :func:`_held_back`), with the next event that is one (see the module's docstring).

        Every event of a running run but its first and last takes the common path below, which splices the
        line from the run's first bytes, ``seq``, ``step``, ``t``, the kind's bytes and ``data`` as JSON, and
        leaves everything unusual to :meth:`_long_way` (the record, rebuilt and redacted field by field). The
        promise is that both ways write the same bytes (tests/test_trace_writer_lines.py):

        - ``t`` is ``%.6f`` without its trailing zeros, the text ``round(t, 6)`` then orjson would give (both
          round correctly; below :data:`_MAX_T` a float holds all fifteen digits);
        - ``data`` is dumped without ``OPT_NON_STR_KEYS``: a key that is no string raises, and the long way
          writes it;
        - the secret pre-test reads ``data``'s JSON text (``hints_in``), or the whole line when the run's first
          bytes hold a secret word or a URL; a line it flags is redacted the long way;
        - a short write goes on to :meth:`_write_rest`, which owns the rule (finish the line, or cut the file
          back to its last whole line).
        """
        out = self._files.get(event.run_id)
        hot = _HOT.get(event.kind)
        if out is None or hot is None or out.ragged or self._streams or self._long_results:
            self._long_way(event)
            return
        data, seq, step, t = event.data, event.seq, event.step, event.t
        if (
            type(data) is not dict
            or type(seq) is not int  # %d writes an int as orjson does (a bool would be "1", not "true")
            or type(step) is not int
            or type(t) is not float
            or not _MIN_T <= t < _MAX_T  # where "%.6f" stripped writes t as the long way does
            or "t" in data
            or "seq" in data
            or "step" in data
            or "kind" in data
            or "v" in data
            or "run_id" in data
            # (the six of schema.BASE_NAMES; six lookups, where isdisjoint would walk all of data's keys)
        ):
            self._long_way(event)
            return
        try:
            body = orjson.dumps(data, default=str, option=_NEWLINE)
        except (TypeError, orjson.JSONEncodeError):
            self._long_way(event)
            return
        nulls = body.count(b"null")
        if nulls and nulls != (top := (*data.values(),).count(None)) and _nonfinite_below(nulls - top, data):
            self._long_way(event)  # a NaN or an infinity: tagged
            return
        line = (LINE_BASE % (out.head, seq, step, t)).rstrip(b"0")
        if line[-1] == 46:  # ".": 2.0 is written "2.0"
            line += b"0"
        tail, tested, hold = hot
        line = line + tail + body[1:] if len(body) > 3 else b"%b%b}\n" % (line, tail[:-1])  # b"{}\n": no data
        if tested and (
            body.find(MARKER) >= 0
            or out.redactor.needs_redaction(line, json_text=True, hints_in=None if out.words_in_head else body)
            or (event.kind == "tool_finished" and _long(data.get("result")))
        ):
            self._long_way(event)
            return
        if hold and _held_back(out, hold, line):
            return
        if out.held:  # this event is a flush point: the held lines and its own, in one write
            line = out.held + line
            out.held = b""
        start = out.good
        try:
            n = out.f.write(line)  # an OSError here wrote nothing: the file still ends at a line
            if n != len(line):
                n = self._write_rest(out, line, n or 0)
        except OSError as exc:
            self._failed(event.run_id, exc, _first_lost(line, out.good - start))
            return
        out.good += n

    def _long_way(self, event: Event) -> None:
        """Any event, the general way: deltas, a run's first and last event, a record to rebuild (a secret to
        redact, a payload to store once, a long result), a file to open, mend or close."""
        if event.kind == "model_delta":
            if self.deltas:
                self._delta(event)
            return
        if event.run_id in self._streams:
            self._end_stream(event.run_id)
        self._put(event, self._line(event))

    def _line(self, event: Event) -> bytes:
        """The event's line the long way: its record, long results written once, payloads stored by
        reference, secrets redacted."""
        record = event_record(event)
        if event.kind == "tool_finished":
            result = record.get("result")
            if _long(result):
                self._long_results[(event.run_id, record.get("call_id", ""))] = result
        elif event.kind == "tool_results" and self._long_results:
            record["content"] = [self._once(event.run_id, b) for b in record.get("content") or []]
        line = dumps(record)
        if line.find(MARKER) >= 0 and event.kind not in PLAIN_KINDS:
            record, line = self._by_ref(event, record, line)
        if event.kind not in PLAIN_KINDS:
            redactor = self._redactor(event.run_id)
            if redactor.needs_redaction(line, json_text=True):
                line = dumps(redactor.redact_fields(record))
        return line

    def _redactor(self, run_id: str) -> Redactor:
        """The run's redactor: its open file's, else :meth:`redactor_for`'s."""
        out = self._files.get(run_id)
        return out.redactor if out is not None else self.redactor_for(run_id)

    def _by_ref(self, event: Event, record: dict[str, Any], line: bytes) -> tuple[dict[str, Any], bytes]:
        """The record with its large base64 payloads stored once per run (:mod:`agentlab.trace._blobs`),
        written before this line; as it was when one cannot be written and ``on_error="warn"``."""
        try:
            stored = self._blobs.externalize(event.run_id, record)
        except (OSError, UnsafePath) as exc:
            error = exc if isinstance(exc, OSError) else OSError(errno.EINVAL, str(exc))
            self._failed(event.run_id, error, (event.kind, event.seq))
            return record, line
        return (stored, dumps(stored)) if stored is not record else (record, line)

    def _delta(self, event: Event) -> None:
        """A fragment, redacted over its block's assembled text (see :class:`~agentlab.redact.StreamRedactor`).

        Each fragment's line is written when the next event of the run arrives, so the last
        fragment of a block can carry the held-back tail: one line per fragment, none rebuilds a secret."""
        stream = self._streams.get(event.run_id)
        if stream is None:
            stream = self._streams[event.run_id] = _Stream(StreamRedactor(self._redactor(event.run_id)))
        d = event.data
        key = (event.step, d.get("index", 0), d.get("type"))
        if stream.held is not None and stream.held[1] != key:
            self._release(stream, flush=True)
        text = d.get("text")
        record = event_record(event)
        record["text"] = stream.redactor.feed(key, text) if isinstance(text, str) else text
        self._release(stream, flush=False)
        stream.held = (event, key, record)

    def _release(self, stream: _Stream, *, flush: bool) -> None:
        if stream.held is None:
            return
        event, key, record = stream.held
        stream.held = None
        if flush:
            record["text"] = (record.get("text") or "") + stream.redactor.flush(key)
        self._put(event, dumps(record))

    def _end_stream(self, run_id: str) -> None:
        """The stream of a step is over (another event came): write the held fragment with its block's tail."""
        stream = self._streams.pop(run_id)
        self._release(stream, flush=True)

    def _put(self, event: Event, line: bytes) -> None:
        """The long way's line of ``event``: held for the next flush point, or written with the lines held."""
        try:
            out = self._files.get(event.run_id)
            if out is None:
                if event.kind == "run_started":  # a new run: only a resumed one may append to its own file
                    self._opened.discard(event.run_id)
                out = self._open(event.run_id)
        except OSError as exc:
            self._failed(event.run_id, exc, (event.kind, event.seq))
            return
        try:
            hold = _HOLD.get(event.kind, 0)
            if not (hold and _held_back(out, hold, line)):
                self._flush(out, event.run_id, line)
        finally:
            if event.kind == "run_finished" and event.run_id in self._files:
                self._close(event.run_id)

    def flush_run(self, run_id: str) -> None:
        """Write now the lines of ``run_id`` held for the next flush point (see the module's docstring).

        The engine calls it when ``Run.step()`` returns and the run goes on (paused before its tools, the
        reply's ``model_called`` is held); a driver that feeds a writer events itself calls it, or
        :meth:`close`, before it reads the file. Raises :class:`TraceWriteError` as a write does
        (``on_error="stop"``)."""
        out = self._files.get(run_id)
        if out is not None and out.held:
            self._flush(out, run_id)

    def _flush(self, out: _File, run_id: str, line: bytes = b"") -> None:
        """The run's held lines, and ``line`` after them, in one ``write``. When it fails, the lines written whole
        stay (:meth:`_write_rest`), and the error names the first event that is not on disk."""
        data = out.held + line
        out.held = b""
        start = out.good
        try:
            self._write(out, data)
        except OSError as exc:
            self._failed(run_id, exc, _first_lost(data, out.good - start))

    def _write(self, out: _File, data: bytes) -> None:
        """Write ``data`` (whole lines) whole, or leave the file ending at its last complete line."""
        if out.ragged:  # a line was cut short and could not be taken back: start a fresh one
            self._write_rest(out, b"\n" + data, 0, whole=False)
            out.ragged = False
            out.good = os.fstat(out.f.fileno()).st_size  # the cut line stays before it: the file ends at a line
            return
        n = out.f.write(data)  # an OSError here wrote nothing: the file still ends at a line
        if n != len(data):
            n = self._write_rest(out, data, n or 0)
        out.good += n

    def _write_rest(self, out: _File, data: bytes, done: int, *, whole: bool = True) -> int:
        """Finish a write the OS took part of (``done`` bytes): the rest, or the file cut back to the end of the
        last line written whole (or marked ragged when even that fails) and the error raised. ``data`` holds
        whole lines (``whole``), or starts with the newline that closes a ragged file's partial line (then the
        file is cut back to where its last complete line ended before this write)."""
        view = memoryview(data)
        try:
            while done < len(data):
                n = out.f.write(view[done:])
                if not n:
                    raise OSError(errno.EIO, "the file accepted no bytes")
                done += n
        except OSError:
            if done:
                keep = data.rfind(b"\n", 0, done) + 1 if whole else 0  # the lines of a joined write that got through
                try:  # take the partial line back: the file ends at an event again
                    out.f.truncate(out.good + keep)
                    out.ragged = False
                except OSError:
                    out.ragged = True  # could not: the next line starts on a fresh line
                out.good += keep
            raise
        return done

    def _failed(self, run_id: str, exc: OSError, lost: tuple[str, Any]) -> None:
        """A write failed: raise (or warn once, ``on_error="warn"``) naming the first event not on disk (``lost``:
        its kind and ``seq``)."""
        why = exc.strerror or str(exc) or type(exc).__name__
        code = f" ({errno.errorcode[exc.errno]})" if exc.errno is not None and exc.errno in errno.errorcode else ""
        message = (
            f"trace write failed for run {run_id} at {self.file_of(run_id)}: {why}{code}; "
            f"the trace holds the events before {lost[0]} #{lost[1]}"
        )
        if isinstance(exc, TraceWriteError):
            message = exc.strerror or str(exc)  # its own message, without a second "[Errno N]"
        if self.on_error == "warn":
            if run_id not in self._warned:
                self._warned.add(run_id)
                warnings.warn(message + " (on_error='warn': the run goes on)", TraceWriteWarning, stacklevel=3)
            return
        raise TraceWriteError(exc.errno or errno.EIO, message) from exc

    def _once(self, run_id: str, block: Any) -> Any:
        """A tool_result block without its content when ``tool_finished`` already holds it."""
        if not isinstance(block, dict):
            return block
        held = self._long_results.pop((run_id, block.get("tool_use_id", "")), None)
        if held is None or block.get("content") != held:
            return block
        return {k: v for k, v in block.items() if k != "content"} | {"content_ref": "tool_finished"}

    def _open(self, run_id: str) -> _File:
        try:  # a refusal is a TraceWriteError, so the run stops instead of going on with no trace
            name = f"{check_name(run_id)}{SUFFIX}"
            try:
                f = self._open_file(name)
            except FileNotFoundError:  # the first run in a new folder (tried second: two syscalls saved a run)
                self.dir.mkdir(parents=True, exist_ok=True)
                f = self._open_file(name)
        except UnsafePath as exc:
            raise TraceWriteError(errno.EINVAL, f"trace write refused for run {run_id!r}: {exc}") from None
        file = f.name
        if fcntl is not None:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                raise TraceWriteError(
                    errno.EBUSY,
                    f"run {run_id} is already being written to {file} by another writer (another Run or "
                    "process with the same run id): one writer per run",
                ) from None
        size = os.fstat(f.fileno()).st_size
        if run_id not in self._opened and size:  # another run's trace
            f.close()
            raise TraceWriteError(
                errno.EEXIST,
                f"run {run_id} already has a trace at {file}: a run id names one run, so a second run cannot "
                "write into it; pass another run_id= (or none, for a fresh one)",
            )
        self._opened.add(run_id)
        out = self._files[run_id] = _File(f, size, run_id, self.redactor_for(run_id))
        remember(run_id, self.dir)
        return out

    def _open_file(self, name: str) -> Any:
        """The run's file ``name`` in the runs folder, opened to append, unbuffered; never through a link
        that leads out of the folder (:func:`~agentlab.trace.files.inside`). On POSIX one ``open`` that
        refuses a link (``O_NOFOLLOW``) says so without an ``lstat`` before it; a link found that way is then
        checked and followed only if it stays inside."""
        if _NOFOLLOW:
            try:
                return open(os.path.join(self._dir, name), "ab", buffering=0, opener=_open_nofollow)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
        return open(inside(self.dir, name), "ab", buffering=0)

    def _close(self, run_id: str) -> None:
        self._files.pop(run_id).f.close()  # closing releases the lock
        self._blobs.forget(run_id)

    def close(self) -> None:
        """Write the lines held, then close every open trace file (events already written stay on disk). Every file
        is closed even when a write fails; the first failure is raised then (``on_error="stop"``)."""
        for run_id in list(self._streams):
            self._end_stream(run_id)
        error: TraceWriteError | None = None
        for run_id in list(self._files):
            try:
                self.flush_run(run_id)
            except TraceWriteError as exc:
                error = error or exc
            self._close(run_id)
        if error is not None:
            raise error

    def __del__(self) -> None:  # a paused run left behind still closes its file
        files = getattr(self, "_files", None)
        if files:
            self.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _held_back(out: _File, hold: int, line: bytes) -> bool:
    """The rule of what waits for the next flush point (:data:`_HOLD`), for the common path and the long way alike:
    ``model_called`` and ``tool_results`` are held (the engine follows each at once with another event, before
    it waits on anything); ``tool_finished`` is held only when no other call of the run is still running
    (``tool_started`` counts them; a ``tool_finished`` with none running, a driver's, leaves none): a finished
    call's record never waits in memory while a sibling runs, since a resumed run reads it to know which calls
    (writes) not to run again. Returns whether ``line`` was held."""
    calls = out.calls
    if hold == _STARTED:
        out.calls = calls + 1
        return False
    if hold == _FINISHED:
        if calls > 1:
            out.calls = calls - 1
            return False
        out.calls = 0
    out.held += line
    return True


def _first_lost(data: bytes, kept: int) -> tuple[str, Any]:
    """The kind and ``seq`` of the first line of ``data`` (lines joined) that is not on disk after a failed write
    that kept ``kept`` bytes of it (whole lines, :meth:`TraceWriter._write_rest`), as the line records them."""
    try:
        record = orjson.loads(data[kept : data.find(b"\n", kept)])
    except orjson.JSONDecodeError:  # a line the standard library wrote, too deep for orjson
        return "?", "?"
    return record.get("kind", "?"), record.get("seq", "?")


def dumps(record: dict[str, Any]) -> bytes:
    """One JSON line (UTF-8, newline included), written by orjson; values it cannot encode fall back to the
    standard library, anything unknown becomes its ``str``. NaN and infinities
    (which orjson would write as ``null``) become ``{"$float": "NaN"}``."""
    try:
        line = orjson.dumps(record, default=str, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        # ensure_ascii: a lone surrogate (text cut from a UTF-16 source) is kept as an escape, not dropped
        record = _shallow(record)
        return (json.dumps(_finite(record), ensure_ascii=True, default=str, allow_nan=False) + "\n").encode("ascii")
    nulls = line.count(b"null")
    if nulls and (
        _nonfinite_below(nulls - (*record.values(),).count(None), record)
        if type(record) is dict
        else _has_nonfinite(record)
    ):
        return orjson.dumps(_finite(record), default=str, option=_OPTIONS)
    return line


def _nonfinite_below(unexplained: int, record: dict[str, Any]) -> bool:
    """Does ``record`` hold a NaN or an infinity, ``unexplained`` being how many ``null`` s of its JSON text are not
    its top level's ``None`` values (the caller counts those)? orjson writes a NaN or an
    infinity as ``null`` too, so when every ``null`` is one of the record's own ``None`` values, at its top
    level or one below, none hides anywhere and the walk of :func:`_has_nonfinite` is skipped: most events hold
    a ``None`` (a tool's ``error``, a reply's ``request_id``, a run's prices) and nothing else that writes
    ``null``. ``null`` cannot overlap itself, so the count is exact; a ``null`` inside a string, or a ``None``
    deeper, only sends the record to the walk."""
    if unexplained == 0:
        return False
    for v in record.values():  # one level down: a run's prices hold a None, its budget may
        if type(v) is dict:
            unexplained -= (*v.values(),).count(None)
    return unexplained != 0 and _has_nonfinite(record)


_SCALARS = (str, int, bool, type(None))


def _has_nonfinite(value: Any) -> bool:
    """Does ``value`` hold a NaN or an infinity anywhere? A loop over an explicit stack, not a
    recursion: it runs on every event whose line holds a ``null``, inside the step's budget."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is float:
            if v != v or v == math.inf or v == -math.inf:
                return True
        elif t is dict:
            extend(v.values())
        elif t is list or t is tuple:
            extend(v)
        elif t in _SCALARS:
            continue
        elif isinstance(v, float):  # numpy floats and other float subclasses
            if not math.isfinite(v):
                return True
        elif isinstance(v, dict):
            extend(v.values())
        elif isinstance(v, (list, tuple)):
            extend(v)
    return False


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities tagged as ``{"$float": ...}`` (valid JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {FLOAT_TAG: "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _shallow(value: Any) -> Any:
    """``value`` with every container deeper than :data:`MAX_DEPTH` replaced by its JSON text (no recursion)."""
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any, int]] = [(_items(value), root, 1)]
    while stack:
        items, out, depth = stack[-1]
        nxt = next(items, None)
        if nxt is None:
            stack.pop()
            continue
        k, v = nxt
        if isinstance(v, (dict, list, tuple)):
            if depth >= MAX_DEPTH:
                child: Any = _deep_json(v)
            else:
                child = {} if isinstance(v, dict) else []
                stack.append((_items(v), child, depth + 1))
        else:
            child = v
        if isinstance(out, dict):
            out[k] = child
        else:
            out.append(child)
    return root


def _items(value: Any) -> Any:
    return iter(value.items()) if isinstance(value, dict) else ((None, v) for v in value)


def _deep_json(value: Any) -> str:
    """JSON text of ``value`` at any depth, built with a stack instead of recursion."""
    parts: list[str] = []
    stack: list[tuple[bool, Any]] = [(False, value)]
    while stack:
        raw, v = stack.pop()
        if raw:
            parts.append(v)
        elif isinstance(v, dict):
            parts.append("{")
            stack.append((True, "}"))
            items = list(v.items())
            for j in range(len(items) - 1, -1, -1):
                k, x = items[j]
                stack.append((False, x))
                stack.append((True, ("," if j else "") + json.dumps(k if isinstance(k, str) else str(k)) + ":"))
        elif isinstance(v, (list, tuple)):
            parts.append("[")
            stack.append((True, "]"))
            for j in range(len(v) - 1, -1, -1):
                stack.append((False, v[j]))
                if j:
                    stack.append((True, ","))
        else:
            parts.append(json.dumps(_finite(v), ensure_ascii=True, default=str, allow_nan=False))
    return "".join(parts)

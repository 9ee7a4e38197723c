"""Reading traces: files -> event records, robustly; folders -> :class:`Traces`."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import orjson

from .files import find_run_file, runs_dir, trace_files
from .frames import gc_paused
from .records import Trace, Traces


class TruncatedTraceWarning(UserWarning):
    """A trace file ends in (or contains) a line that is not complete JSON."""


# ------------------------------------------------------------------ reading
def read_events(file: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The events in one trace file, in order.

    A line that is not complete JSON (a crash mid-write leaves at most the
    last one) is skipped with a :class:`TruncatedTraceWarning` naming the file.
    """
    file = Path(file)
    data = file.read_bytes()
    body = data.strip()
    if not body:
        return []
    try:  # one parse for the whole file: faster than a parse per line
        events = orjson.loads(b"[" + body.replace(b"\n", b",") + b"]")
        if all(isinstance(e, dict) for e in events):
            return events
    except ValueError:
        pass
    events, bad = [], []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = orjson.loads(line)
        except ValueError:
            bad.append(n)
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad.append(n)
    if bad:
        where = f"line {bad[0]}" if len(bad) == 1 else f"lines {', '.join(map(str, bad[:5]))}"
        warnings.warn(
            f"{file}: skipped {where} (not complete JSON; was the run killed while writing?); "
            f"loaded the {len(events)} complete events",
            TruncatedTraceWarning,
            stacklevel=2,
        )
    return events


def load_run(run_id: str, path: str | os.PathLike[str] | None = None) -> Trace:
    """One run's trace: ``run_id`` (or a unique prefix of it, or a ``.jsonl`` path)
    in the runs folder ``path`` (default: ``$AGENTLAB_RUNS`` or ``./runs``)."""
    file = find_run_file(run_id, path)
    return Trace(read_events(file), file)


def load_runs(path: str | os.PathLike[str] | None = None) -> Traces:
    """Every run in a runs folder (or one ``.jsonl`` file), as DataFrames.

    Columns and dtypes are documented in ``docs/traces.md``.
    """
    files = trace_files(path)
    traces = []
    with gc_paused():
        for f in files:
            t = Trace(read_events(f), f)
            _ = t.rows  # summarize while the parsed events are still in the CPU cache: 3-5x faster than later
            traces.append(t)
    return Traces(traces, runs_dir(path))

"""Traces: every event of a run on disk, and the run read back as data.

The package is split by job, each part testable alone:

- :mod:`.writer`: :class:`TraceWriter`, an engine subscriber that appends each
  event to ``<runs>/<run_id>.jsonl`` as one JSON line, redacted, on disk (unbuffered) before the engine
  next waits on a model, a tool or its caller;
- :mod:`.reader`: files -> event records (robust to crashes mid-write), and
  :func:`load_run` / :func:`load_runs`;
- :mod:`.runs`: :class:`Trace`, :class:`Traces`, :class:`StepView`: a run
  read back, with its history rebuilt step by step;
- :mod:`.frames`: records -> rows -> pandas DataFrames (``docs/traces.md``);
- :mod:`._store`, :mod:`._compact`: the columnar store (Parquet beside the logs), :func:`compact`,
  :class:`StoredTraceWriter`;
  :mod:`._sql`: :func:`sql` over it (DuckDB);
- :mod:`.display`: a run as terminal text and notebook HTML;
- :mod:`.files`: where runs live and how a run id finds its file.

Only the writer's side loads with the package: a traced run imports the
writer and nothing it does not write with. The read side (reader, records,
frames, display) loads when one of its names is first used; pandas when a
DataFrame is asked for, pyarrow when the store is read or written.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .files import RUNS_ENV, SUFFIX, find_run_file, runs_dir, trace_files
from .writer import TraceWriteError, TraceWriter, TraceWriteWarning, dumps

if TYPE_CHECKING:
    from ._compact import StoredTraceWriter, compact
    from ._sql import sql
    from .frames import CALLS_COLUMNS, EVENTS_COLUMNS, RUNS_COLUMNS, STEPS_COLUMNS, Rows
    from .reader import TruncatedTraceWarning, load_run, load_runs, read_events
    from .runs import StepView, Trace, Traces

_LAZY = {
    "CALLS_COLUMNS": "frames",
    "EVENTS_COLUMNS": "frames",
    "RUNS_COLUMNS": "frames",
    "STEPS_COLUMNS": "frames",
    "Rows": "frames",
    "TruncatedTraceWarning": "reader",
    "load_run": "reader",
    "load_runs": "reader",
    "read_events": "reader",
    "StepView": "runs",
    "Trace": "runs",
    "Traces": "runs",
    "compact": "_compact",
    "StoredTraceWriter": "_compact",
    "sql": "_sql",
}

__all__ = [
    "CALLS_COLUMNS",
    "EVENTS_COLUMNS",
    "RUNS_COLUMNS",
    "RUNS_ENV",
    "STEPS_COLUMNS",
    "SUFFIX",
    "Rows",
    "StepView",
    "StoredTraceWriter",
    "Trace",
    "TraceWriteError",
    "TraceWriteWarning",
    "TraceWriter",
    "Traces",
    "TruncatedTraceWarning",
    "compact",
    "dumps",
    "find_run_file",
    "load_run",
    "load_runs",
    "read_events",
    "runs_dir",
    "sql",
    "trace_files",
]


def __getattr__(name: str) -> Any:
    """The read side's names, imported when first used (see the module docstring)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentlab.trace' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

"""Traces: every event of a run on disk, and the run read back as data.

The package is split by job, each part testable alone:

- :mod:`.writer`: :class:`TraceWriter`, an engine subscriber that appends each
  event to ``<runs>/<run_id>.jsonl`` as one JSON line, redacted, unbuffered;
- :mod:`.reader`: files -> event records (robust to crashes mid-write), and
  :func:`load_run` / :func:`load_runs`;
- :mod:`.records`: :class:`Trace`, :class:`Traces`, :class:`StepView`: a run
  read back, with its history rebuilt step by step;
- :mod:`.frames`: records -> rows -> pandas DataFrames (``docs/traces.md``);
- :mod:`.display`: a run as terminal text and notebook HTML;
- :mod:`.files`: where runs live and how a run id finds its file.

pandas is imported only when a DataFrame is asked for.
"""

from typing import TYPE_CHECKING

from .files import RUNS_ENV, SUFFIX, find_run_file, runs_dir, trace_files
from .writer import TraceWriteError, TraceWriter, TraceWriteWarning, dumps

if TYPE_CHECKING:
    from .frames import CALLS_COLUMNS, EVENTS_COLUMNS, RUNS_COLUMNS, STEPS_COLUMNS, Rows
    from .reader import TruncatedTraceWarning, load_run, load_runs, read_events
    from .records import StepView, Trace, Traces

# The read side loads when first asked for: a traced run only writes, so it never pays for the
# readers, the frames and the display (about 11 ms of imports on every run).
_LAZY = {
    "CALLS_COLUMNS": "frames", "EVENTS_COLUMNS": "frames", "RUNS_COLUMNS": "frames", "STEPS_COLUMNS": "frames",
    "Rows": "frames", "TruncatedTraceWarning": "reader", "load_run": "reader", "load_runs": "reader",
    "read_events": "reader", "StepView": "records", "Trace": "records", "Traces": "records",
}

__all__ = [
    "CALLS_COLUMNS", "EVENTS_COLUMNS", "RUNS_COLUMNS", "RUNS_ENV", "STEPS_COLUMNS", "SUFFIX", "Rows", "StepView",
    "Trace", "TraceWriteError", "TraceWriteWarning", "TraceWriter", "Traces", "TruncatedTraceWarning", "dumps", "find_run_file", "load_run", "load_runs",
    "read_events", "runs_dir", "trace_files",
]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

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

from .files import RUNS_ENV, SUFFIX, find_run_file, runs_dir, trace_files
from .frames import CALLS_COLUMNS, EVENTS_COLUMNS, RUNS_COLUMNS, STEPS_COLUMNS, Rows
from .reader import TruncatedTraceWarning, load_run, load_runs, read_events
from .records import StepView, Trace, Traces
from .writer import TraceWriteError, TraceWriter, TraceWriteWarning, dumps

__all__ = [
    "CALLS_COLUMNS", "EVENTS_COLUMNS", "RUNS_COLUMNS", "RUNS_ENV", "STEPS_COLUMNS", "SUFFIX", "Rows", "StepView",
    "Trace", "TraceWriteError", "TraceWriteWarning", "TraceWriter", "Traces", "TruncatedTraceWarning", "dumps", "find_run_file", "load_run", "load_runs",
    "read_events", "runs_dir", "trace_files",
]

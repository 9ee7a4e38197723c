"""The trace's schema, in one place: what every line holds and in what order (its head), the version, the NaN
tag, the event kinds, and the columns of the four frames and of the store's tables.

The writer builds each line's head here (:func:`line_head`), a reader that rebuilds records builds them here
(:func:`record`), and the frames, the store, the compactor, the docs' tables and the importers read the columns
and the version from here; nothing else in ``trace/`` spells them. This module imports nothing of ``trace/``:
every other module there can depend on it, and it on none of them.

The event kinds (and the fields each holds) are declared beside :class:`agentlab.events.Event`, which builds
them; they are named here so a reader of the trace finds them with the rest.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from ..events import BASE, KINDS, PLAIN_KINDS, SCHEMA_VERSION, Field, Kind

__all__ = [
    "ARROW_TYPES",
    "BASE",
    "BASE_NAMES",
    "CALLS",
    "EVENTS",
    "FLOAT_TAG",
    "HEAD_PATTERN",
    "HIDDEN",
    "KINDS",
    "PLAIN_KINDS",
    "RUNS",
    "SCHEMA_VERSION",
    "STEPS",
    "TABLES",
    "Column",
    "Field",
    "Kind",
    "LINE_BASE",
    "kind_field",
    "line_head",
    "record",
]

BASE_NAMES: tuple[str, ...] = tuple(f.name for f in BASE)
"""The fields that open every line, in the order the writer writes them: ``v, run_id, seq, step, t, kind``."""
PREVIEW_CHARS = 200
"""How much of a tool's result the ``calls`` frame keeps (``result_preview``)."""
FLOAT_TAG = "$float"
"""How a line keeps a NaN or an infinity as valid JSON: ``{"$float": "NaN"}`` (the readers turn it back)."""


def line_head(run_id: str) -> bytes:
    """The bytes every line of ``run_id``'s log starts with, up to its ``seq`` value:
    ``{"v":1,"run_id":"...","seq":``."""
    return b'{"v":%d,"run_id":%b,"seq":' % (SCHEMA_VERSION, orjson.dumps(run_id, default=str))


LINE_BASE = b'%b%d,"step":%d,"t":%.6f'
"""A line up to its ``t``, from :func:`line_head`, ``seq``, ``step`` and ``t`` (``%``-formatted by the writer,
which then strips ``t``'s trailing zeros); :func:`kind_field` follows, then the kind's own fields."""


def kind_field(kind: str) -> bytes:
    """The bytes between a line's ``t`` and the kind's own fields: ``,"kind":"<kind>",``."""
    return b',"kind":' + orjson.dumps(kind) + b","


HEAD_PATTERN = (
    r'^\{"v":\d+,"run_id":"[^"\\]*","seq":-?\d+,"step":-?\d+,'
    r'"t":(?:-?[0-9.eE+-]+|\{"\$float":"-?[A-Za-z]+"\}),"kind":"[^"\\]*"(?:,|(\}))'
)
"""A line's base fields as the writer writes them (:func:`line_head`, then ``step``, ``t`` and ``kind``); what
follows is the kind's own fields, so cutting this prefix off (keeping ``{``) leaves the event's ``data`` as JSON.
A run id or kind with an escape in it (run ids have none: ``files.check_name``) does not match; such a line is
serialised anew by whoever cuts."""


def record(run_id: str, seq: int, step: int, t: float, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """A line's record from its parts, the base fields first (as the writer writes them), then the kind's own."""
    return {"v": SCHEMA_VERSION, "run_id": run_id, "seq": seq, "step": step, "t": t, "kind": kind, **data}


# ------------------------------------------------------------ the columns
class Column(NamedTuple):
    """One column of a frame (and of the store's table of the same name): the one place it is described.

    ``source`` names the event field it is read from (``kind.field``), so a
    test can hold the column's dtype to that field's type in
    :data:`agentlab.events.KINDS`; ``""`` for a column the frames derive.
    """

    name: str
    dtype: str
    doc: str
    source: str = ""


RUNS = (
    Column("run_id", "str", "the run", "run_started.run_id"),
    Column("task", "str", "the task it was given", "run_started.task"),
    Column("model", "str", "the model id", "run_started.model"),
    Column("outcome", "str", '"done" | "stopped" | "incomplete" (no run_finished event)', "run_finished.outcome"),
    Column("reason", "str", "why it stopped (a StopReason)", "run_finished.reason"),
    Column("detail", "str", "the diagnosis; for an incomplete run, where its trace ends", "run_finished.detail"),
    Column("steps", "int64", "steps taken", "run_finished.steps"),
    Column("model_calls", "int64", "model calls made", "run_finished.model_calls"),
    Column("cost", "float64", "USD spent (NaN, not $0, when a step's model has no known price)", "run_finished.spent"),
    Column("input_tokens", "int64", "summed over the model calls", "model_called.usage"),
    Column("output_tokens", "int64", "", "model_called.usage"),
    Column("cache_write_tokens", "int64", "", "model_called.usage"),
    Column("cache_read_tokens", "int64", "", "model_called.usage"),
    Column("seconds", "float64", "working seconds", "run_finished.elapsed"),
    Column("started_at", "datetime64[ns, UTC]", "when it started", "run_started.started_at"),
    Column("nudges", "int64", "repeated calls the loop guard answered", "run_finished.nudges"),
    Column("max_steps", "float64", "the step limit (NaN = no limit; raised by resume)", "run_started.budget"),
    Column("max_cost", "float64", "the cost limit, USD", "run_started.budget"),
    Column("deadline_s", "float64", "the deadline, seconds", "run_started.budget"),
    Column("file", "str", "the trace file it was read from"),
    Column(
        "recorded_cost",
        "float64",
        "what an imported record says the run cost, beside the repriced cost "
        "(NaN for native runs and records without one)",
        "run_started.recorded",
    ),
    Column(
        "audit",
        "str",
        'an imported run\'s audit: "ok", "estimated" (some usage estimated, and said so) or "findings" '
        '(its figures break a rule every record keeps; see recorded.audit); "" for native runs',
    ),
    Column(
        "audit_findings",
        "int64",
        "how many findings the import's audit made (0 for native runs)",
    ),
)
STEPS = (
    Column("run_id", "str", "the run", "model_called.run_id"),
    Column("step", "int64", "the step (1-based)", "model_called.step"),
    Column("input_tokens", "int64", "", "model_called.usage"),
    Column("output_tokens", "int64", "", "model_called.usage"),
    Column(
        "thinking_tokens",
        "int64",
        "the part of output_tokens that was reasoning (the reply's output_tokens_details; 0 when not reported), "
        "billed as output already",
        "model_called.usage",
    ),
    Column("cache_write_tokens", "int64", "", "model_called.usage"),
    Column("cache_read_tokens", "int64", "", "model_called.usage"),
    Column("context_tokens", "int64", "input + cache write + cache read", "model_called.usage"),
    Column("cost", "float64", "USD, this call", "model_called.cost"),
    Column("cumulative_cost", "float64", "USD, the run so far", "model_called.spent"),
    Column("latency", "float64", "seconds the call took", "model_called.latency"),
    Column("tool_calls", "int64", "tool_use blocks in the reply", "model_called.content"),
    Column("stop_reason", "str", "the reply's stop reason", "model_called.stop_reason"),
    Column("estimated", "bool", "usage estimated offline, not reported", "model_called.estimated"),
    Column("t", "float64", "when the reply arrived", "model_called.t"),
    Column(
        "server_tool_cost",
        "float64",
        "the part of cost billed per server-tool request (web searches)",
        "model_called.server_tool_cost",
    ),
    Column(
        "sub_run_cost",
        "float64",
        "the part of cost spent by runs started inside this step's tools (their sub_run events)",
        "sub_run.cost",
    ),
    Column(
        "recorded_cost",
        "float64",
        "the cost an imported record wrote for the call (NaN if none), beside the repriced cost",
        "model_called.recorded_cost",
    ),
)
CALLS = (
    Column("run_id", "str", "the run", "tool_finished.run_id"),
    Column("step", "int64", "", "tool_finished.step"),
    Column("call_id", "str", "", "tool_finished.call_id"),
    Column("index", "int64", "request order within the step", "tool_finished.index"),
    Column("tool", "str", "", "tool_finished.tool"),
    Column("mode", "str", '"read" | "write" | missing', "tool_finished.mode"),
    Column("args", "json", "the arguments: a dict, parsed from the store only when read", "tool_finished.args"),
    Column(
        "outcome",
        "str",
        '"ok" | "retried" | "recoverable" | "fatal" | "nudged" | "cancelled" | "unfinished" '
        "(started, no result recorded: the process died during it; its end and duration are NaN)",
        "tool_finished.outcome",
    ),
    Column("attempts", "int64", "", "tool_finished.attempts"),
    Column("is_error", "bool", "", "tool_finished.is_error"),
    Column("start", "float64", "seconds since the run started", "tool_finished.start"),
    Column("end", "float64", "", "tool_finished.end"),
    Column("duration", "float64", "seconds", ""),
    Column("result_preview", "str", f"the result's first {PREVIEW_CHARS} characters", "tool_finished.result"),
)
EVENTS = (
    Column("run_id", "str", "", "run_started.run_id"),
    Column("seq", "int64", "", "run_started.seq"),
    Column("step", "int64", "", "run_started.step"),
    Column("t", "float64", "", "run_started.t"),
    Column("kind", "str", "", "run_started.kind"),
    Column("data", "json", "the kind's own fields: a dict, parsed from the store only when read"),
)
RUNS_COLUMNS = {c.name: c.dtype for c in RUNS}
STEPS_COLUMNS = {c.name: c.dtype for c in STEPS}
CALLS_COLUMNS = {c.name: c.dtype for c in CALLS}
EVENTS_COLUMNS = {c.name: c.dtype for c in EVENTS}
TABLES = {"runs": RUNS, "steps": STEPS, "calls": CALLS, "events": EVENTS}


ARROW_TYPES = {
    "str": "string",
    "int64": "int64",
    "float64": "float64",
    "bool": "bool",
    "object": "string",
    "json": "string",
}
HIDDEN = {
    "runs": (("_bytes", "int64", "the size of the run's log when it was stored (fresh or stale)"),),
    "events": (
        (
            "_run",
            "string",
            "the run whose log holds the event (a sub_run event's run_id names the sub-run)",
        ),
    ),
}
"""Store-only columns: the size of the run's log when it was stored (to tell fresh from stale), and the run
whose log holds each event."""

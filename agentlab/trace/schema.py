"""The trace's schema, in one place: what a trace line holds and in what order, the event kinds and the fields each
carries, the version, the NaN tag, and the columns of the four frames and of the store's tables.

Everything that reads or writes a trace derives from this module: the writer builds each line's head here
(:func:`line_head`, :func:`kind_field`) and its records (:func:`event_record`) and skips the redaction pre-test
for :data:`PLAIN_KINDS`; the readers check each record with :func:`well_formed` and rebuild records with
:func:`record`; the frames, the store, the compactor and ``docs/traces.md`` (:mod:`agentlab.trace._docs`) read the
columns; the importers (:mod:`agentlab.recorded`) and the OpenTelemetry exporter build their records here too.
Nothing else spells any of it, and nothing re-exports it: ``tests/test_one_owner.py`` fails on a second spelling.

Why here, inside ``trace/``, and not beside :class:`agentlab.events.Event`: the engine builds and publishes events
and never reads the schema (an event is a kind from :class:`agentlab.vocab.EventKind` and a dict of data); only
what writes or reads a trace does, and all of that sits at or above ``trace/`` in the layers. So the one owner
needs no lower home, and a reader of the trace finds all of it in one file. This module imports no other module
of ``trace/`` (``tests/test_trace_imports.py``): every other one can depend on it, and it on none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import orjson

from ..vocab import EventKind

if TYPE_CHECKING:
    from ..events import Event

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
    "LINE_BASE",
    "PLAIN_KINDS",
    "RUNS",
    "SCHEMA_VERSION",
    "STEPS",
    "TABLES",
    "Column",
    "Field",
    "Kind",
    "catalogue",
    "event_record",
    "kind_field",
    "line_head",
    "record",
    "well_formed",
]

SCHEMA_VERSION = 1
"""The version every line carries in ``v`` (a reader warns on a newer one)."""
FLOAT_TAG = "$float"
"""How a line keeps a NaN or an infinity as valid JSON: ``{"$float": "NaN"}`` (the readers turn it back)."""
PREVIEW_CHARS = 200
"""How much of a tool's result the ``calls`` frame keeps (``result_preview``)."""


# --------------------------------------------------------- the event kinds
FieldType = Literal["str", "int", "float", "bool", "dict", "list", "usage", "any"]
"""``float`` accepts ints too (JSON does not tell ``1`` from ``1.0``) and a
``{"$float": "NaN"}`` tag; ``usage`` is a dict of int token counts."""


@dataclass(frozen=True, slots=True)
class Field:
    """One field of an event kind's ``data``.

    ``read``: the frames read it, so the reader checks its type (a line with a
    wrong one is skipped with a warning instead of breaking a DataFrame);
    ``required``: an event of the kind is malformed without it. Fields only a
    human reads are documented but not checked: a trace written by a newer
    engine, or by an importer, still loads.
    """

    name: str
    type: FieldType
    doc: str = ""
    read: bool = False
    required: bool = False


@dataclass(frozen=True, slots=True)
class Kind:
    """An event kind: what it says, its fields, and whether any of them can hold a secret."""

    kind: EventKind
    doc: str
    fields: tuple[Field, ...]
    plain: bool = False
    """Numbers and limits only: nothing in it can be a secret, so the writer skips the redaction pre-test."""


def _f(spec: str, doc: str = "") -> Field:
    """``"name:type"``, with ``!`` after the type for read-and-required and ``?`` for read-only."""
    name, _, kind = spec.partition(":")
    read = kind.endswith(("!", "?"))
    return Field(name, kind.rstrip("!?") or "any", doc, read=read, required=kind.endswith("!"))  # type: ignore[arg-type]


BASE = (
    _f("v:int", "the trace schema version (:data:`SCHEMA_VERSION`)"),
    _f("run_id:str?", "the run"),
    _f("seq:int?", "1, 2, 3 ... in the order the engine emitted them"),
    _f("step:int!", "the step the event belongs to (0 before the first model call)"),
    _f("t:float!", "working seconds since the run started"),
    _f("kind:str!", "one of the kinds below, or a driver's own kind sent through ``Run.note``"),
)
"""The fields every event (every trace line) has, before its kind's own."""

KINDS: dict[EventKind, Kind] = {
    k.kind: k
    for k in (
        Kind(
            EventKind.RUN_STARTED,
            "the run begins (a fork or an imported run also has parent {run_id, step}, a "
            "sub-run (started inside a tool) parent {run_id, step, tool_use_id}; an import has recorded "
            "{format, source, notes, ...})",
            (
                _f("task:str?"),
                _f("started_at:str?", "ISO 8601, UTC"),
                _f("model:str?"),
                _f("model_name:str"),
                _f("billed:bool?", "the model bills per call (the real API); false for an offline stand-in"),
                _f("system:any"),
                _f("budget:dict?", "{max_steps, max_cost, deadline_s, cost_guard}"),
                _f("max_tokens:int"),
                _f("tools:list", "[{name, mode, description, input_schema}]"),
                _f("prices:dict"),
                _f("caches:any"),
                _f("messages:list?", "the initial history"),
                _f("parent:dict"),
                _f("recorded:dict?"),
            ),
        ),
        Kind(
            EventKind.MODEL_REQUEST,
            "about to call the model, after the cost guard",
            (
                _f("max_tokens:int", "after the cost guard"),
                _f("estimated_input_tokens:int"),
                _f("input_bound:int"),
                _f("can_count:bool"),
                _f("guard_basis:str", "exact | bounded | estimated (when a cost guard ran)"),
                _f("guard_input_tokens:int"),
                _f("guard_fees:float"),
                _f("guard_worst_case:float", "USD"),
                _f("guard_why:str", "a sentence: the fields of budget.GuardCheck"),
                _f("count_latency:float", "when it asked for an exact count"),
                _f("count_error:str", "when the count failed"),
                _f(
                    "reserved:float",
                    "in a run sharing a total (an experiment): the dollars held for this call before it was sent",
                ),
            ),
            plain=True,
        ),
        Kind(
            EventKind.MODEL_RETRY,
            "a model call failed and will be tried again",
            (
                _f("attempt:int"),
                _f("error:str"),
                _f("wait:float"),
                _f("request:str", '"count_tokens" when an exact count was retried'),
            ),
        ),
        Kind(
            EventKind.MODEL_DELTA,
            "one fragment of a streamed reply; sent to subscribers only while someone listens, "
            "and not written to trace files unless ``TraceWriter(deltas=True)``",
            (
                _f("index:int"),
                _f("type:str", "text | thinking | tool_input | compaction | citation | a newer delta's name"),
                _f("text:str"),
            ),
        ),
        Kind(
            EventKind.MODEL_CALLED,
            "the model replied (a malformed reply has raw, error and latency instead; a stream cut "
            "short by Stop or the deadline has partial=True and the content received so far, charged by estimate)",
            (
                _f("content:list?", "the reply's content blocks"),
                _f("stop_reason:str?"),
                _f("usage:usage?", "token counts"),
                _f("estimated:bool?", "usage was estimated, not reported"),
                _f("cost:float?"),
                _f("server_tool_cost:float?"),
                _f("spent:float?", "the run's total so far"),
                _f("latency:float?"),
                _f("request_id:str"),
                _f("context_tokens:int"),
                _f("max_tokens:int"),
                _f("model:str", "the reply's own model id, if it gave one: the serving model"),
                _f("requested_model:str", "when another model served and priced it"),
                _f("stop_details:any"),
                _f("context_management:any", "the API's account of context edits"),
                _f("diagnostics:any", "the API's cache diagnostics (``cache_miss_reason``), when the model asked"),
                _f(
                    "lost:bool",
                    "a reply lost in transit after the request reached the API, or a call Stop or the deadline "
                    "abandoned in flight before any of its reply arrived (`stop_reason` says which): charged at the "
                    "guard's worst case; no content or usage, so it joins no history and is no row of `steps`, but "
                    "`runs.cost` counts it",
                ),
                _f("partial:bool"),
                _f("raw:any"),
                _f("error:str"),
                _f("recorded_cost:float?", "an imported call: the cost its record gives"),
            ),
        ),
        Kind(
            EventKind.TOOL_STARTED,
            "a tool call begins",
            (
                _f("call_id:str!"),
                _f("tool:str?"),
                _f("mode:str?", "read | write"),
                _f("args:dict?"),
                _f("index:int?", "request order"),
                _f("start:float?"),
                _f("end:float?"),
                _f("attempts:int?"),
                _f("outcome:str?"),
            ),
        ),
        Kind(
            EventKind.APPROVAL_REQUESTED,
            "a write waits for a human (see :mod:`agentlab.approval`)",
            (
                _f("call_id:str"),
                _f("tool:str"),
                _f("args:dict"),
            ),
        ),
        Kind(
            EventKind.APPROVAL_ANSWERED,
            "the human answered",
            (
                _f("call_id:str"),
                _f("tool:str"),
                _f("answer:str", "approve | deny | edit"),
                _f("args:dict", "the edited ones, else None"),
                _f("reason:str", "a denial's"),
                _f("waited:float"),
            ),
        ),
        Kind(
            EventKind.TOOL_RETRY,
            "a tool call failed and will be tried again",
            (
                _f("call_id:str"),
                _f("tool:str"),
                _f("attempt:int"),
                _f("error:str"),
                _f("wait:float"),
            ),
        ),
        Kind(
            EventKind.TOOL_FINISHED,
            "a tool call ended",
            (
                _f("call_id:str!"),
                _f("tool:str?"),
                _f("mode:str?"),
                _f("args:dict?"),
                _f("index:int?"),
                _f("outcome:str?", ":class:`~agentlab.vocab.Outcome`"),
                _f("attempts:int?"),
                _f("result:any?"),
                _f("is_error:bool?"),
                _f("start:float?"),
                _f("end:float?"),
                _f("error:str"),
            ),
        ),
        Kind(
            EventKind.SUB_RUN,
            "a run started inside a tool ended (its own trace has run_started.parent {run_id, step, tool_use_id})",
            (
                _f("run_id:str", "the sub-run's"),
                _f("tool_use_id:str"),
                _f("model:str"),
                _f("outcome:str"),
                _f("reason:str"),
                _f("steps:int"),
                _f("cost:float?"),
                _f("input_tokens:int", "what is new since the sub-run's last report"),
                _f("output_tokens:int"),
                _f("spent:float?", "the parent's, with it"),
            ),
        ),
        Kind(
            EventKind.NUDGED,
            "the loop guard answered a repeated call with the earlier result and a nudge",
            (
                _f("call_id:str"),
                _f("tool:str"),
                _f("args:dict"),
                _f("count:int"),
            ),
        ),
        Kind(
            EventKind.TOOL_RESULTS,
            "the user message of tool_result blocks appended to the history",
            (
                _f("content:list!"),
                _f("reused:list", "call ids whose results were kept from an interrupted attempt of the step"),
            ),
        ),
        Kind(
            EventKind.STEP_FINISHED,
            "a step ended",
            (
                _f("spent:float"),
                _f("elapsed:float"),
                _f("budget:dict"),
            ),
            plain=True,
        ),
        Kind(EventKind.PAUSED, "emitted by a driver (the panel) through ``Run.note``", (), plain=True),
        Kind(
            EventKind.RESUMED,
            "the run goes on with raised limits",
            (_f("limits:dict?", "the raised budget"),),
            plain=True,
        ),
        Kind(
            EventKind.RUN_FINISHED,
            "the run ended (a resumed run has several)",
            (
                _f("outcome:str?", "done | stopped"),
                _f("reason:str?", ":class:`~agentlab.vocab.StopReason`"),
                _f("detail:str?"),
                _f("text:str"),
                _f("steps:int?"),
                _f("spent:float?"),
                _f("elapsed:float?"),
                _f("model_calls:int?"),
                _f("nudges:int?"),
                _f("error:any"),
                _f("guard:dict", ":class:`~agentlab.budget.GuardReport` as a dict"),
                _f("guard_note:str"),
                _f("last_guard_check:dict", "the model_request fields of the last pre-call check"),
                _f("overrun_s:float"),
                _f("overrun_cause:str"),
                _f("abandoned:any", "docs/reliability.md"),
            ),
        ),
    )
}

PLAIN_KINDS = frozenset(k.kind.value for k in KINDS.values() if k.plain)
"""Kinds whose fields are numbers and limits only (the writer skips redaction for them)."""

_BIG = 2**62
_PY: dict[str, tuple[type, ...]] = {"str": (str,), "dict": (dict,), "list": (list,), "bool": (bool,), "usage": (dict,)}
_CHECKS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    kind.value: tuple((f.name, f.type, f.required) for f in (*BASE, *spec.fields) if f.read)
    for kind, spec in KINDS.items()
}
_BASE_CHECKS = tuple((f.name, f.type, f.required) for f in BASE if f.read)


def _ok(value: Any, type_: str) -> bool:
    if type_ == "int":
        return type(value) is int and -_BIG < value < _BIG
    if type_ == "float":
        if type(value) is int:
            return -_BIG < value < _BIG
        return type(value) is float or (type(value) is dict and FLOAT_TAG in value)
    if type_ == "usage":
        return type(value) is dict and all(type(v) is int and -_BIG < v < _BIG for v in value.values())
    allowed = _PY.get(type_)
    return allowed is None or type(value) in allowed


def well_formed(event: Any) -> bool:
    """Whether a trace record is an event the frames can use: the base fields and the fields
    :data:`KINDS` marks ``read``, of their types (``None`` stands for a missing optional field)."""
    if type(event) is not dict:
        return False
    kind = event.get("kind")
    checks = _CHECKS.get(kind, _BASE_CHECKS) if type(kind) is str else _BASE_CHECKS
    for name, type_, required in checks:
        value = event.get(name)
        if value is None:
            if required:
                return False
        elif not _ok(value, type_):
            return False
    return True


def catalogue() -> str:
    """The kinds and their fields as reStructuredText-ish lines (this module's docstring ends with it)."""
    lines = []
    for spec in KINDS.values():
        fields = ", ".join(f.name + (f" ({f.doc})" if f.doc else "") for f in spec.fields) or "no fields"
        lines.append(f"``{spec.kind.value}``\n    {spec.doc}: {fields}\n")
    return "\n".join(lines)


# ------------------------------------------------------------ the line
BASE_NAMES: tuple[str, ...] = tuple(f.name for f in BASE)
"""The fields that open every line, in the order the writer writes them: ``v, run_id, seq, step, t, kind``."""


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


def event_record(event: Event) -> dict[str, Any]:
    """An engine event as one flat JSON object, what its trace line holds: :func:`record` with ``t`` to the
    microsecond, as the writer writes it."""
    return record(event.run_id, event.seq, event.step, round(event.t, 6), event.kind, event.data)


# ------------------------------------------------------------ the columns
class Column(NamedTuple):
    """One column of a frame (and of the store's table of the same name): the one place it is described.

    ``source`` names the event field it is read from (``kind.field``), so a
    test can hold the column's dtype to that field's type in
    :data:`KINDS`; ``""`` for a column the frames derive.
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


__doc__ = (__doc__ or "") + "\nKinds (:class:`~agentlab.vocab.EventKind`) and their ``data``:\n\n" + catalogue()

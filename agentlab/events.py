"""What the engine tells its subscribers: one flat event type, one fact each.

The trace store, the notebook panel and the CLI are all subscribers; the
engine knows none of them. Every event has the run id, the step it belongs
to, a sequence number, seconds since the run started and a ``kind``; the rest
is in ``data`` (plain JSON-able values).

:data:`KINDS` below is the one definition of what each kind carries: the
catalogue in this docstring, the reader's well-formedness check
(:func:`well_formed`), the writer's redaction shortcut (:data:`PLAIN_KINDS`),
the frames' coercions and ``docs/traces.md`` all follow from it, and tests
fail when any of them drifts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .vocab import EventKind

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # an EventKind (a str), or a driver's own kind sent through Run.note
    run_id: str
    step: int
    seq: int
    t: float
    data: dict[str, Any]

    def as_record(self) -> dict[str, Any]:
        """The event as one flat JSON object (what a trace line holds)."""
        return {
            "v": SCHEMA_VERSION,
            "run_id": self.run_id,
            "seq": self.seq,
            "step": self.step,
            "t": round(self.t, 6),
            "kind": self.kind,
            **self.data,
        }


def new_event(kind: str, run_id: str, step: int, seq: int, t: float, data: dict[str, Any]) -> Event:
    """``Event(kind, run_id, step, seq, t, data)``: the engine's one way to make an event."""
    return Event(kind, run_id, step, seq, t, data)


Subscriber = Callable[[Event], None]


# ------------------------------------------------------- the one definition
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
        return type(value) is float or (type(value) is dict and "$float" in value)
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
    """The kinds and their fields as reStructuredText-ish lines (this module's docstring shows it)."""
    lines = []
    for spec in KINDS.values():
        fields = ", ".join(f.name + (f" ({f.doc})" if f.doc else "") for f in spec.fields) or "no fields"
        lines.append(f"``{spec.kind.value}``\n    {spec.doc}: {fields}\n")
    return "\n".join(lines)


__doc__ = (__doc__ or "") + "\nKinds (:class:`~agentlab.vocab.EventKind`) and their ``data``:\n\n" + catalogue()

"""What the engine tells its subscribers: one flat event type, one fact each.

The trace store, the notebook panel and the CLI are all subscribers; the
engine knows none of them. Every event has the run id, the step it belongs
to, a sequence number, seconds since the run started and a ``kind``; the rest
is in ``data`` (plain JSON-able values).

Kinds (:class:`~agentlab.vocab.EventKind`) and their ``data``; a test keeps
this list equal to the vocabulary and to what the engine emits:

``run_started``     task, started_at, model, model_name, system, budget
                    {max_steps, max_cost, deadline_s, cost_guard}, max_tokens,
                    tools [{name, mode, description, input_schema}], prices,
                    caches, messages (the initial history); a fork or an
                    imported run also has parent {run_id, step}, a sub-run
                    (started inside a tool) parent {run_id, step,
                    tool_use_id}, and an import has recorded {format,
                    source, notes, ...}
``model_request``   max_tokens (after the cost guard), estimated_input_tokens,
                    input_bound, can_count; when a cost guard ran:
                    guard_basis (exact | bounded | estimated),
                    guard_input_tokens, guard_fees, guard_worst_case (USD),
                    guard_why (a sentence), and, when it asked for
                    an exact count, count_latency (and count_error if the
                    count failed), the fields of budget.GuardCheck; in a run
                    sharing a total (an experiment), reserved: the dollars
                    held for this call before it was sent
``model_retry``     attempt, error, wait (request="count_tokens" when an
                    exact count was retried)
``model_delta``     index, type (text | thinking | tool_input | compaction |
                    citation | a newer delta's name), text: one
                    fragment of a streamed reply; sent to subscribers only
                    while someone listens, and not written to trace files
                    unless ``TraceWriter(deltas=True)``
``model_called``    content, stop_reason, usage {...}, estimated (usage was
                    estimated, not reported), cost, server_tool_cost, spent,
                    latency, request_id, context_tokens, max_tokens, model
                    (the reply's own model id, if it gave one: the serving
                    model), requested_model when another model served and
                    priced it, stop_details and context_management when the
                    API gave them; a malformed reply has raw, error and
                    latency instead (and usage, cost, spent: it is charged
                    when it came with usage); a stream cut short by Stop or
                    the deadline has partial=True and the content received
                    so far, charged by estimate; a reply lost in transit
                    after the API began it has lost=True, charged at the
                    guard's worst case
``tool_started``    call_id, tool, mode, args, index
``approval_requested``  call_id, tool, args (a write waits for a human:
                    see :mod:`agentlab.approval`)
``approval_answered``   call_id, tool, answer (approve | deny | edit), args
                    (the edited ones, else None), reason (a denial's), waited
``tool_retry``      call_id, tool, attempt, error, wait
``tool_finished``   call_id, tool, mode, args, index, outcome
                    (:class:`~agentlab.vocab.Outcome`), attempts, result,
                    is_error, start, end, error
``sub_run``         run_id, tool_use_id, model, outcome, reason, steps,
                    cost, input_tokens, output_tokens (what is new since
                    the sub-run's last report), spent (the parent's, with
                    it): a run started inside a tool ended (its own trace
                    has run_started.parent {run_id, step, tool_use_id})
``nudged``          call_id, tool, args, count
``tool_results``    content (the user message of tool_result blocks appended
                    to the history), reused (call ids whose results were kept
                    from an interrupted attempt of the step; absent if none)
``step_finished``   spent, elapsed, budget {...}
``paused``          emitted by a driver (the panel) through ``Run.note``
``resumed``         limits (the raised budget)
``run_finished``    outcome (done | stopped), reason
                    (:class:`~agentlab.vocab.StopReason`), detail, text,
                    steps, spent, elapsed, model_calls, nudges, error,
                    guard (:class:`~agentlab.budget.GuardReport` as a dict),
                    guard_note, last_guard_check (the model_request fields
                    of the last pre-call check: a check that stopped the run
                    has no model_request), overrun_s, overrun_cause,
                    abandoned (docs/reliability.md)

Messages sent at step k are rebuilt from ``run_started.messages`` plus each
earlier step's ``model_called.content`` (as the assistant) and
``tool_results.content`` (as the user): each step is stored once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
            "v": SCHEMA_VERSION, "run_id": self.run_id, "seq": self.seq, "step": self.step,
            "t": round(self.t, 6), "kind": self.kind, **self.data,
        }


Subscriber = Callable[[Event], None]

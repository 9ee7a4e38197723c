"""The engine's three vocabularies: event kinds, stop reasons, tool-call outcomes.

Each is a :class:`~enum.StrEnum`, so a member *is* its string: ``reason ==
"budget"`` keeps working, traces hold plain strings, and a typo in engine,
panel, report or plots is an ``AttributeError`` instead of a silent miss.
This module is the one owner of these words; ``docs/architecture.md`` and the
catalogue of kinds in :mod:`agentlab.trace.schema` are tested against it.
"""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    """What an :class:`~agentlab.events.Event` reports (see :mod:`agentlab.events`)."""

    RUN_STARTED = "run_started"
    MODEL_REQUEST = "model_request"
    MODEL_RETRY = "model_retry"
    MODEL_DELTA = "model_delta"  # a fragment of a streamed reply; to subscribers, not the trace file
    MODEL_CALLED = "model_called"
    TOOL_STARTED = "tool_started"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_ANSWERED = "approval_answered"
    TOOL_RETRY = "tool_retry"
    TOOL_FINISHED = "tool_finished"
    SUB_RUN = "sub_run"  # a run started inside a tool ended: its cost is in the parent's
    NUDGED = "nudged"
    TOOL_RESULTS = "tool_results"
    STEP_FINISHED = "step_finished"
    PAUSED = "paused"
    RESUMED = "resumed"
    RUN_FINISHED = "run_finished"


class StopReason(StrEnum):
    """Why a run stopped: the diagnosis in :class:`~agentlab.results.Stopped`."""

    BUDGET = "budget"
    DEADLINE = "deadline"
    STEP_LIMIT = "step limit"
    LOOP_DETECTED = "loop detected"
    FATAL = "fatal"
    CANCELLED = "cancelled"
    MAX_TOKENS = "max_tokens"
    REFUSAL = "refusal"
    CONTEXT_WINDOW = "context window"
    REQUEST_TOO_LARGE = "request too large"  # HTTP 413: the request's bytes, not its tokens
    MODEL_ERROR = "model error"
    MALFORMED_REPLY = "malformed reply"
    UNEXPECTED_STOP = "unexpected stop reason"
    EXPERIMENT_BUDGET = "experiment budget"  # an experiment's shared total could not cover the next call
    TRACE_WRITE_FAILED = "trace write failed"


RESUMABLE = frozenset({StopReason.BUDGET, StopReason.STEP_LIMIT, StopReason.DEADLINE, StopReason.CANCELLED})
"""Stops that ``Run.resume()`` can reopen (with raised limits)."""


class Outcome(StrEnum):
    """How one tool call ended (the ``outcome`` of ``tool_finished`` and of the calls frame)."""

    OK = "ok"
    RETRIED = "retried"  # succeeded after retries
    RECOVERABLE = "recoverable"  # an error handed back to the model
    FATAL = "fatal"  # stopped the run; the model is not told
    NUDGED = "nudged"  # not run: the loop guard answered with the earlier result and a nudge
    CANCELLED = "cancelled"  # interrupted (another call stopped the run, or Stop)
    UNFINISHED = "unfinished"  # in a trace only: started, never finished (the process died)

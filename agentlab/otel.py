"""A run as OpenTelemetry spans, named by the GenAI semantic conventions.

Tracing back-ends (Jaeger, Grafana Tempo, Logfire, Langfuse, Phoenix) read
OpenTelemetry, and the GenAI conventions say what an agent's spans are called
and which attributes they carry. This module maps agentlab's events onto them:

* one ``invoke_agent`` span per run (the parent of everything below);
* one ``chat`` span per model call, from the request to the reply, with the
  request and response model, ``max_tokens`` (after the cost guard), the
  finish reason, the response id and the token usage, cache tokens included;
* one ``execute_tool`` span per tool call, from the call's own start and end,
  so a turn's parallel reads overlap in a trace viewer and its writes do not;
  a failed call has status ERROR and ``error.type``.

What the conventions have no name for (cost, the three budgets, the stop
reason, a call's mode and outcome) goes in ``agentlab.*`` attributes.

Message content (the task, replies, tool arguments and results) is left out
unless asked for (``capture_content=True`` or the conventions' environment
variable ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``), and is
redacted like a trace file when it is included.

One code path serves both uses: :func:`exporter` is a subscriber that feeds a
live run's events to a span builder as they happen, and :func:`export` feeds
a stored trace's records to the same builder. Span times come from the
events' run clock (working seconds, see :class:`agentlab.Run`) anchored at the
run's wall-clock start, so a replayed trace gives the same spans as the live
run did, and an injected clock gives exact, testable times. Time a run spends
paused between steps in a notebook is not working time and is not shown.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import threading
import time
import warnings
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ._model_label import is_offline
from .events import Event
from .redact import Redactor
from .trace.schema import event_record

try:
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "agentlab.otel needs OpenTelemetry: pip install 'agentlab-loop[otel]' "
        "(opentelemetry-api, opentelemetry-sdk and the OTLP exporter)"
    ) from exc

__all__ = ["SpanBuilder", "TraceExporter", "export", "exporter"]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' opt-in for message content on spans."""

_BUDGET_STOPS = frozenset({"budget", "step limit", "deadline"})


def _capture_from_env() -> bool:
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in ("1", "true", "yes")


def _version() -> str:
    """agentlab's installed version (the distribution is agentlab-loop), for the tracer's scope."""
    from ._version import installed_version

    return installed_version()


class SpanBuilder:
    """Turns one run's event records, fed in order, into spans.

    Records are the flat dicts of a trace line (:func:`agentlab.trace.schema.event_record`).
    Spans start and end at the events' times: ``anchor_ns`` (the run's
    wall-clock start) plus the event's run-clock seconds.
    """

    def __init__(self, tracer: Any, *, capture_content: bool, redactor: Redactor, agent_name: str) -> None:
        self.tracer = tracer
        self.capture = capture_content
        self.redactor = redactor
        self.agent_name = agent_name
        self.anchor_ns: int | None = None
        self.root: Any = None
        self.chat: Any = None
        self.model = ""
        self.provider = "anthropic"
        self.finished = False
        self.started: dict[str, Any] = {}

    # -------------------------------------------------------------- helpers
    def _ns(self, t: Any) -> int:
        assert self.anchor_ns is not None
        return self.anchor_ns + int(round(float(t or 0.0) * 1e9))

    def _content(self, value: Any) -> str:
        return json.dumps(self.redactor.redact(value), ensure_ascii=False, default=str)

    def _child_context(self) -> Any:
        return otel_trace.set_span_in_context(self.root) if self.root is not None else None

    # ---------------------------------------------------------------- feed
    def feed(self, rec: dict[str, Any]) -> None:
        """Advance the spans by one event record."""
        kind = rec.get("kind")
        t = rec.get("t", 0.0)
        if self.anchor_ns is None:
            self.anchor_ns = _anchor_ns(rec)
        if kind == "run_started":
            self._start_run(rec, t)
        elif self.root is None or (self.finished and kind == "resumed"):
            self._open_root(self.started or rec, t, resumed=kind == "resumed")
        if kind == "model_request":
            self._start_chat(rec, t)
        elif kind == "model_retry" and self.chat is not None:
            self.chat.add_event(
                "agentlab.retry",
                {
                    "agentlab.attempt": int(rec.get("attempt") or 0),
                    "agentlab.error": str(rec.get("error") or ""),
                    "agentlab.wait_s": float(rec.get("wait") or 0.0),
                },
                timestamp=self._ns(t),
            )
        elif kind == "model_called":
            self._end_chat(rec, t)
        elif kind == "tool_finished":
            self._tool_span(rec)
        elif (
            kind in ("paused", "resumed", "nudged", "approval_requested", "approval_answered") and self.root is not None
        ):
            attrs: dict[str, Any] = {"agentlab.step": int(rec.get("step") or 0)}
            if rec.get("tool"):
                attrs["gen_ai.tool.name"] = str(rec["tool"])
                attrs["gen_ai.tool.call.id"] = str(rec.get("call_id") or "")
            if kind == "approval_answered":
                attrs["agentlab.answer"] = str(rec.get("answer") or "")
                attrs["agentlab.waited_s"] = float(rec.get("waited") or 0.0)
            self.root.add_event(f"agentlab.{kind}", attrs, timestamp=self._ns(t))
        elif kind == "run_finished":
            self._end_run(rec, t)

    def _start_run(self, rec: dict[str, Any], t: float) -> None:
        self.started = rec
        self.model = str(rec.get("model") or "")
        name = rec.get("model_name")
        self.provider = str(
            rec.get("provider")
            or ("agentlab.offline" if is_offline(self.model, name, rec.get("billed")) else "anthropic")
        )
        self._open_root(rec, t, resumed=False)

    def _open_root(self, rec: dict[str, Any], t: float, *, resumed: bool) -> None:
        budget = rec.get("budget") or {}
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": self.provider,
            "gen_ai.agent.name": self.agent_name,
            "gen_ai.conversation.id": str(rec.get("run_id") or ""),
            "agentlab.run_id": str(rec.get("run_id") or ""),
        }
        if self.model:
            attrs["gen_ai.request.model"] = self.model
        for key in ("max_steps", "max_cost", "deadline_s"):
            if budget.get(key) is not None:
                attrs[f"agentlab.budget.{key}"] = budget[key]
        if budget.get("cost_guard"):
            attrs["agentlab.budget.cost_guard"] = str(budget["cost_guard"])
        if resumed:
            attrs["agentlab.resumed"] = True
        if self.capture and rec.get("kind") == "run_started":
            if rec.get("system"):
                attrs["gen_ai.system_instructions"] = self._content([{"type": "text", "content": rec["system"]}])
            attrs["gen_ai.input.messages"] = self._content(rec.get("messages") or [])
        tools = rec.get("tools") or []
        if tools:
            attrs["agentlab.tools"] = [f"{x.get('name')}:{x.get('mode')}" for x in tools]
        self.root = self.tracer.start_span(
            f"invoke_agent {self.agent_name}",
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=self._ns(t),
            context=otel_trace.set_span_in_context(otel_trace.INVALID_SPAN),
        )
        self.finished = False

    def _start_chat(self, rec: dict[str, Any], t: float) -> None:
        if self.chat is not None:  # a request with no reply recorded: close it where the next began
            self.chat.set_status(Status(StatusCode.ERROR, "no reply recorded"))
            self.chat.end(end_time=self._ns(t))
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
            "agentlab.step": int(rec.get("step") or 0),
        }
        if rec.get("max_tokens") is not None:
            attrs["gen_ai.request.max_tokens"] = int(rec["max_tokens"])
        if rec.get("estimated_input_tokens") is not None:
            attrs["agentlab.estimated_input_tokens"] = int(rec["estimated_input_tokens"])
        self.chat = self.tracer.start_span(
            f"chat {self.model}",
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=self._ns(t),
            context=self._child_context(),
        )

    def _end_chat(self, rec: dict[str, Any], t: float) -> None:
        if self.chat is None:  # a trace without model_request events: start at t - latency
            self._start_chat(
                {"step": rec.get("step"), "max_tokens": rec.get("max_tokens")},
                float(t) - float(rec.get("latency") or 0.0),
            )
        span = self.chat
        self.chat = None
        if rec.get("error"):
            span.set_attribute("error.type", "malformed_reply")
            span.set_status(Status(StatusCode.ERROR, str(rec["error"])))
            span.end(end_time=self._ns(t))
            return
        usage = rec.get("usage") or {}
        attrs: dict[str, Any] = {
            "gen_ai.response.model": str(rec.get("model") or self.model),
            "gen_ai.usage.input_tokens": int(usage.get("input_tokens") or 0),
            "gen_ai.usage.output_tokens": int(usage.get("output_tokens") or 0),
            "gen_ai.usage.cache_read.input_tokens": int(usage.get("cache_read_input_tokens") or 0),
            "gen_ai.usage.cache_creation.input_tokens": int(usage.get("cache_creation_input_tokens") or 0),
            "agentlab.cost_usd": float(rec.get("cost") or 0.0),
            "agentlab.spent_usd": float(rec.get("spent") or 0.0),
            "agentlab.usage.estimated": bool(rec.get("estimated")),
        }
        if rec.get("stop_reason"):
            attrs["gen_ai.response.finish_reasons"] = [str(rec["stop_reason"])]
        if rec.get("request_id"):
            attrs["gen_ai.response.id"] = str(rec["request_id"])
        if rec.get("max_tokens") is not None:
            attrs["gen_ai.request.max_tokens"] = int(rec["max_tokens"])
        if self.capture:
            attrs["gen_ai.output.messages"] = self._content(
                [{"role": "assistant", "content": rec.get("content") or [], "finish_reason": rec.get("stop_reason")}]
            )
        span.set_attributes(attrs)
        span.end(end_time=self._ns(t))

    def _tool_span(self, rec: dict[str, Any]) -> None:
        name = str(rec.get("tool") or "")
        start, end = rec.get("start", rec.get("t")), rec.get("end", rec.get("t"))
        outcome = str(rec.get("outcome") or "")
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": str(rec.get("call_id") or ""),
            "gen_ai.tool.type": "function",
            "agentlab.tool.mode": str(rec.get("mode") or "write"),
            "agentlab.outcome": outcome,
            "agentlab.attempts": int(rec.get("attempts") or 0),
            "agentlab.step": int(rec.get("step") or 0),
        }
        if self.capture:
            attrs["gen_ai.tool.call.arguments"] = self._content(rec.get("args") or {})
            attrs["gen_ai.tool.call.result"] = self._content(rec.get("result") or "")
        span = self.tracer.start_span(
            f"execute_tool {name}",
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=self._ns(start),
            context=self._child_context(),
        )
        if rec.get("is_error") or outcome in ("fatal", "cancelled"):
            error = rec.get("error") or {}
            span.set_attribute("error.type", str(error.get("type") or outcome or "tool_error"))
            description = (
                str(error.get("message") or "")
                if not self.capture
                else self.redactor.redact_text(str(rec.get("result") or ""))
            )
            span.set_status(Status(StatusCode.ERROR, description or outcome))
        span.end(end_time=self._ns(end))

    def _end_run(self, rec: dict[str, Any], t: float) -> None:
        if self.chat is not None:  # the run stopped during a model call (deadline, model error)
            self.chat.set_status(Status(StatusCode.ERROR, str(rec.get("reason") or "stopped")))
            self.chat.set_attribute("error.type", str(rec.get("reason") or "stopped"))
            self.chat.end(end_time=self._ns(t))
            self.chat = None
        if self.root is None:
            return
        reason = str(rec.get("reason") or "")
        attrs: dict[str, Any] = {
            "agentlab.outcome": str(rec.get("outcome") or ""),
            "agentlab.stop_reason": reason,
            "agentlab.steps": int(rec.get("steps") or 0),
            "agentlab.model_calls": int(rec.get("model_calls") or 0),
            "agentlab.cost_usd": float(rec.get("spent") or 0.0),
            "agentlab.elapsed_s": float(rec.get("elapsed") or 0.0),
        }
        if rec.get("detail"):
            attrs["agentlab.stop_detail"] = str(rec["detail"])
        if self.capture and rec.get("text"):
            attrs["gen_ai.output.messages"] = self._content([{"role": "assistant", "content": rec["text"]}])
        self.root.set_attributes(attrs)
        if rec.get("outcome") == "stopped":
            self.root.set_attribute("error.type", reason or "stopped")
            self.root.set_status(Status(StatusCode.ERROR, f"{reason}: {rec.get('detail') or ''}".rstrip(": ")))
        self.root.end(end_time=self._ns(t))
        self.finished = True

    def close(self, t: float | None = None) -> None:
        """End whatever is still open (a trace cut short): nothing finished is lost."""
        end = self._ns(t) if t is not None and self.anchor_ns is not None else None
        if self.chat is not None:
            self.chat.set_status(Status(StatusCode.ERROR, "trace ended during the model call"))
            self.chat.end(end_time=end)
            self.chat = None
        if self.root is not None and not self.finished:
            self.root.set_attribute("agentlab.outcome", "unfinished")
            self.root.end(end_time=end)
            self.finished = True


def _anchor_ns(rec: dict[str, Any]) -> int:
    """The run's wall-clock start in ns: ``started_at`` minus the event's run time."""
    started_at = rec.get("started_at")
    t = float(rec.get("t") or 0.0)
    if isinstance(started_at, str):
        try:
            return int(datetime.fromisoformat(started_at).timestamp() * 1e9) - int(t * 1e9)
        except ValueError:
            pass
    return time.time_ns() - int(t * 1e9)


class _Handoff:
    """The one thread (per process) on which exporters build spans, and its bounded queue of
    ``(exporter, record)``: the runs put events on it and never wait; past ``size`` queued events an event
    is dropped and counted (an exporter stuck that long), never waited for."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._fresh()
        if hasattr(os, "register_at_fork"):  # a forked child (a worker process) starts with no thread: its own
            os.register_at_fork(after_in_child=self._fresh)

    def _fresh(self) -> None:
        self.queue: queue.Queue[tuple[Any, Any]] = queue.Queue(maxsize=self.size)
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def put(self, exporter: TraceExporter, item: Any) -> bool:
        if self.thread is None:
            with self.lock:
                if self.thread is None:
                    self.thread = threading.Thread(target=self._work, name="agentlab-otel", daemon=True)
                    self.thread.start()
                    atexit.register(self._at_exit)
        try:
            self.queue.put_nowait((exporter, item))
        except queue.Full:
            return False
        return True

    def mark(self, exporter: TraceExporter, item: Any, deadline: float) -> bool:
        """Put ``item`` behind every queued event, waiting for room until ``deadline`` (monotonic)."""
        if self.thread is None:
            self.put(exporter, None)  # (starts the thread; a None record is skipped)
        try:
            self.queue.put((exporter, item), timeout=max(0.0, deadline - time.monotonic()))
        except queue.Full:
            return False
        return True

    def _work(self) -> None:
        while True:
            exporter, item = self.queue.get()
            try:
                if isinstance(item, threading.Event):  # a flush's marker: everything before it is fed
                    item.set()
                elif item is _CLOSE:
                    exporter._end_open()
                elif item is not None:
                    exporter.feed(item)
            except Exception as exc:  # a span processor's failure is neither the run's nor this thread's end
                warnings.warn(f"agentlab.otel: a span could not be made: {exc!r}", RuntimeWarning, stacklevel=1)
            finally:
                del exporter, item

    def _at_exit(self) -> None:
        """What the exporters hold, handed over at interpreter exit (at most :data:`EXIT_FLUSH_S` seconds)."""
        done = threading.Event()
        if self.mark(_NOBODY, done, time.monotonic() + EXIT_FLUSH_S):
            done.wait(EXIT_FLUSH_S)


QUEUE_SIZE = 100_000
"""Events the exporters may hold for their thread before dropping (and counting) new ones."""
EXIT_FLUSH_S = 5.0
"""How long, at most, interpreter exit waits for the exporters to hand over what they hold."""
_CLOSE: Any = object()
_handoff = _Handoff(QUEUE_SIZE)


class TraceExporter:
    """A subscriber: ``Run(..., subscribers=[agentlab.otel.exporter()])``.

    Keeps one :class:`SpanBuilder` per run id, so one exporter can watch
    many runs.

    The run never waits for OpenTelemetry: each event's record goes on a bounded queue, and one thread
    (per process) builds the spans and hands them to the tracer provider, whose span processors export
    them. A ``SimpleSpanProcessor`` exports each span as it ends, so an exporter that blocks would
    otherwise hold the run's loop, and its deadline, hostage. Span times come from the events, so a span
    built late has the times it would have had. Call :meth:`flush` before reading the spans (and before
    ``provider.force_flush()``); :meth:`close` flushes within a bound and ends what is left open. At
    interpreter exit what the exporters hold is handed over, within :data:`EXIT_FLUSH_S` seconds.
    """

    def __init__(
        self,
        tracer_provider: Any = None,
        *,
        capture_content: bool | None = None,
        redactor: Redactor | None = None,
        agent_name: str = "agentlab",
    ) -> None:
        self.tracer = otel_trace.get_tracer("agentlab", _version(), tracer_provider=tracer_provider)
        self.capture_content = _capture_from_env() if capture_content is None else bool(capture_content)
        self.redactor = redactor or Redactor()
        self.agent_name = agent_name
        self.builders: dict[str, SpanBuilder] = {}
        self.dropped = 0
        """Events left out of the spans because the queue was full (an exporter stuck that long)."""
        self._closed = False

    def builder(self, run_id: str) -> SpanBuilder:
        """The span builder of one run (made on its first event): runs feed the exporter interleaved."""
        b = self.builders.get(run_id)
        if b is None:
            b = self.builders[run_id] = SpanBuilder(
                self.tracer, capture_content=self.capture_content, redactor=self.redactor, agent_name=self.agent_name
            )
        return b

    def feed(self, rec: dict[str, Any]) -> None:
        """Advance the spans of the record's run by one event record, on the calling thread (a replay's way;
        a live run's events go through the exporters' thread)."""
        self.builder(str(rec.get("run_id") or "")).feed(rec)

    def __call__(self, event: Event) -> None:
        if self._closed or _handoff.put(self, event_record(event)):
            return
        self.dropped += 1
        if self.dropped == 1:
            warnings.warn(
                f"agentlab.otel: the span exporters have fallen {_handoff.queue.maxsize} events behind (is one "
                "blocked?); events are left out of the spans until they catch up, never waited for",
                RuntimeWarning,
                stacklevel=2,
            )

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every event received so far is in spans handed to the tracer provider, at most
        ``timeout_s`` seconds; True if they all are (False: a span exporter is still blocked)."""
        done = threading.Event()
        return _handoff.mark(self, done, time.monotonic() + timeout_s) and done.wait(timeout_s)

    def close(self, timeout_s: float = 30.0) -> bool:
        """Flush (at most ``timeout_s`` seconds), then end the spans of runs that did not finish (a run
        abandoned while paused); later events are ignored. True if everything was handed over in time."""
        if self._closed:
            return True
        self._closed = True
        deadline = time.monotonic() + timeout_s
        done = threading.Event()
        return (
            _handoff.mark(self, _CLOSE, deadline)
            and _handoff.mark(self, done, deadline)
            and done.wait(max(0.0, deadline - time.monotonic()))
        )

    def _end_open(self) -> None:
        for b in self.builders.values():
            b.close()


_NOBODY: Any = None


def exporter(
    tracer_provider: Any = None,
    *,
    capture_content: bool | None = None,
    agent_name: str = "agentlab",
    redactor: Redactor | None = None,
) -> TraceExporter:
    """A subscriber that sends a run's events to OpenTelemetry as GenAI spans.

    ``tracer_provider`` defaults to the global one (set it up once with the
    SDK and an OTLP exporter; see ``docs/integrations.md``).
    ``capture_content``: include redacted message content; default from
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, else off.
    """
    return TraceExporter(tracer_provider, capture_content=capture_content, redactor=redactor, agent_name=agent_name)


def export(
    trace: Any,
    tracer_provider: Any = None,
    *,
    capture_content: bool | None = None,
    agent_name: str = "agentlab",
    redactor: Redactor | None = None,
) -> TraceExporter:
    """Replay a stored run (a :class:`agentlab.Trace`, a :class:`agentlab.Traces`
    or a list of event records) into spans, with the times it had.

    Returns the exporter used; spans of a run cut short are ended at its last event.
    """
    exp = exporter(tracer_provider, capture_content=capture_content, agent_name=agent_name, redactor=redactor)
    for records in _record_lists(trace):
        last: dict[str, Any] = {}
        for rec in records:
            exp.feed(rec)
            last = rec
        if last:
            exp.builder(str(last.get("run_id") or "")).close(float(last.get("t") or 0.0))
    return exp


def _record_lists(trace: Any) -> Iterable[list[dict[str, Any]]]:
    records = getattr(trace, "records", None)
    if isinstance(records, list):
        return [records]
    if isinstance(trace, list) and all(isinstance(r, dict) for r in trace):
        return [trace]
    if isinstance(trace, Iterable) and not isinstance(trace, (str, bytes, dict)):
        out = []
        for item in trace:
            recs = getattr(item, "records", None)
            if not isinstance(recs, list):
                break
            out.append(recs)
        else:
            return out
    raise TypeError(
        f"export: expected an agentlab Trace, Traces or a list of event records, got {type(trace).__name__}"
    )

"""Runs as OpenTelemetry GenAI spans, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json

import pytest

import agentlab as al
from agentlab import reply

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed: pip install 'agentlab-loop[otel]'")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from agentlab import otel  # noqa: E402
from agentlab.trace import TraceWriter  # noqa: E402


@pytest.fixture
def spans_out():
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def _by_name(spans, prefix):
    return [s for s in spans if s.name.startswith(prefix)]


def _parallel_run(clock: al.FakeClock, subscribers=()):
    """Step 1 asks for two reads (overlapping) and a write; step 2 answers.

    Each model call takes 0.5 s on the fake clock. Both reads start before
    either ends; ``a`` takes 1 s, then ``b`` (which waits until ``a`` has been
    reported finished) takes 2 s more; the write takes 0.25 s.
    """
    started: list[str] = []
    finished: list[str] = []

    async def read(name: str, seconds: float, after: str | None) -> str:
        started.append(name)
        while len(started) < 2 or (after is not None and after not in finished):
            await asyncio.sleep(0)
        clock.advance(seconds)
        return f"{name} read"

    @al.tool(mode="read")
    async def read_a() -> str:
        return await read("a", 1.0, None)

    @al.tool(mode="read")
    async def read_b() -> str:
        return await read("b", 2.0, "read_a")

    def note_finished(event: al.Event) -> None:
        if event.kind == "tool_finished":
            finished.append(event.data["tool"])

    @al.tool(mode="write")
    async def save(note: str) -> str:
        clock.advance(0.25)
        return "saved"

    def model(messages, tools):
        clock.advance(0.5)
        if len(messages) == 1:
            out = reply(
                None,
                ("read_a", {}),
                ("read_b", {}),
                ("save", {"note": "api_key=sk-abcdefghijklmnopqrstu"}),
                usage={
                    "input_tokens": 100,
                    "output_tokens": 20,
                    "cache_read_input_tokens": 40,
                    "cache_creation_input_tokens": 7,
                },
            )
        else:
            out = reply("All done.", usage={"input_tokens": 150, "output_tokens": 5})
        out["request_id"] = f"req_{len(messages)}"
        out["model"] = "claude-sonnet-4-5-20250929"
        return out

    return al.run(
        "read both, then save",
        [read_a, read_b, save],
        model=al.FunctionModel(model),
        clock=clock,
        trace=False,
        max_steps=5,
        max_cost=1.0,
        deadline_s=30,
        subscribers=[note_finished, *subscribers],
    )


def test_a_run_becomes_an_invoke_agent_span_with_chat_and_tool_children(spans_out):
    provider, memory = spans_out
    result = _parallel_run(al.FakeClock(), subscribers=[exp := otel.exporter(provider)])
    assert exp.flush()  # the spans are built on the exporters' thread
    assert isinstance(result, al.Done)
    spans = memory.get_finished_spans()
    assert sorted(s.name for s in spans) == sorted(
        [
            "invoke_agent agentlab",
            "chat claude-sonnet-4-5",
            "chat claude-sonnet-4-5",
            "execute_tool read_a",
            "execute_tool read_b",
            "execute_tool save",
        ]
    )
    (root,) = _by_name(spans, "invoke_agent")
    assert root.parent is None
    for child in spans:
        if child is not root:
            assert child.parent is not None and child.parent.span_id == root.context.span_id
            assert child.context.trace_id == root.context.trace_id
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["agentlab.stop_reason"] == "done"
    assert root.attributes["agentlab.budget.max_steps"] == 5
    assert root.attributes["agentlab.budget.max_cost"] == 1.0
    assert root.attributes["agentlab.budget.deadline_s"] == 30
    assert root.attributes["agentlab.cost_usd"] == pytest.approx(result.spent)
    assert root.status.status_code == StatusCode.UNSET
    assert {s.kind for s in _by_name(spans, "chat")} == {SpanKind.CLIENT}


def test_chat_spans_carry_the_genai_request_response_and_usage_attributes(spans_out):
    provider, memory = spans_out
    _parallel_run(al.FakeClock(), subscribers=[exp := otel.exporter(provider)])
    assert exp.flush()  # the spans are built on the exporters' thread
    first, second = sorted(_by_name(memory.get_finished_spans(), "chat"), key=lambda s: s.start_time)
    a = first.attributes
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "agentlab.offline"  # an offline model is not Anthropic's API
    assert a["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert a["gen_ai.response.model"] == "claude-sonnet-4-5-20250929"  # what the reply said it was
    assert a["gen_ai.request.max_tokens"] == 1024
    assert tuple(a["gen_ai.response.finish_reasons"]) == ("tool_use",)
    assert a["gen_ai.response.id"] == "req_1"
    assert a["gen_ai.usage.input_tokens"] == 100
    assert a["gen_ai.usage.output_tokens"] == 20
    assert a["gen_ai.usage.cache_read.input_tokens"] == 40
    assert a["gen_ai.usage.cache_creation.input_tokens"] == 7
    assert a["agentlab.cost_usd"] > 0
    assert tuple(second.attributes["gen_ai.response.finish_reasons"]) == ("end_turn",)
    assert "gen_ai.output.messages" not in a  # content is opt-in


def test_span_times_follow_the_run_clock_so_parallel_reads_overlap(spans_out):
    provider, memory = spans_out
    _parallel_run(al.FakeClock(), subscribers=[exp := otel.exporter(provider)])
    assert exp.flush()  # the spans are built on the exporters' thread
    spans = {s.name: s for s in memory.get_finished_spans() if not s.name.startswith("chat")}
    chats = sorted(_by_name(memory.get_finished_spans(), "chat"), key=lambda s: s.start_time)
    root = spans["invoke_agent agentlab"]
    a, b, save = spans["execute_tool read_a"], spans["execute_tool read_b"], spans["execute_tool save"]
    s = 1_000_000_000
    assert chats[0].end_time - chats[0].start_time == s // 2  # the model's 0.5 s
    assert a.start_time == b.start_time == chats[0].end_time  # both reads start together
    assert a.end_time - a.start_time == 1 * s
    assert b.end_time - b.start_time == 3 * s  # a's second, then b's own two
    assert a.end_time < b.end_time and b.start_time < a.end_time  # they overlap
    assert save.start_time >= b.end_time  # the write ran alone, after the reads
    assert save.end_time - save.start_time == s // 4
    assert chats[1].start_time >= save.end_time
    assert root.start_time <= chats[0].start_time and root.end_time == chats[1].end_time


def test_failed_tool_calls_get_error_status_and_type(spans_out):
    provider, memory = spans_out

    @al.tool(mode="read")
    def find(n: int) -> str:
        raise al.ToolError(f"no record {n}", hint="try another number")

    @al.tool
    def delete(n: int) -> str:
        raise al.PermissionDenied("not allowed to delete")

    model = al.ScriptedModel([reply(None, ("find", {"n": 1})), reply(None, ("delete", {"n": 1})), reply("x")])
    result = al.run("q", [find, delete], model=model, trace=False, subscribers=[exp := otel.exporter(provider)])
    assert exp.flush()  # the spans are built on the exporters' thread
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    spans = {s.name: s for s in memory.get_finished_spans()}
    find_span = spans["execute_tool find"]
    assert find_span.status.status_code == StatusCode.ERROR
    assert find_span.attributes["error.type"] == "ToolError"
    assert find_span.attributes["agentlab.outcome"] == "recoverable"
    assert find_span.attributes["gen_ai.tool.call.id"].startswith("toolu_")
    delete_span = spans["execute_tool delete"]
    assert delete_span.attributes["error.type"] == "PermissionDenied"
    assert delete_span.attributes["agentlab.outcome"] == "fatal"
    root = spans["invoke_agent agentlab"]
    assert root.status.status_code == StatusCode.ERROR
    assert root.attributes["agentlab.stop_reason"] == "fatal"
    assert root.attributes["error.type"] == "fatal"


def test_content_is_only_exported_on_opt_in_and_redacted(spans_out, monkeypatch):
    provider, memory = spans_out
    monkeypatch.delenv(otel.CAPTURE_ENV, raising=False)
    _parallel_run(al.FakeClock(), subscribers=[exp := otel.exporter(provider)])
    assert exp.flush()  # the spans are built on the exporters' thread
    assert not any("gen_ai.tool.call.arguments" in s.attributes for s in memory.get_finished_spans())
    memory.clear()
    monkeypatch.setenv(otel.CAPTURE_ENV, "true")
    _parallel_run(al.FakeClock(), subscribers=[exp := otel.exporter(provider)])
    assert exp.flush()  # the spans are built on the exporters' thread
    spans = {s.name: s for s in memory.get_finished_spans()}
    args = spans["execute_tool save"].attributes["gen_ai.tool.call.arguments"]
    assert "sk-abcdefghijklmnopqrstu" not in args and "[redacted]" in args
    assert json.loads(spans["execute_tool read_a"].attributes["gen_ai.tool.call.result"]) == "a read"
    root = spans["invoke_agent agentlab"]
    assert json.loads(root.attributes["gen_ai.input.messages"])[0]["content"] == "read both, then save"


def test_a_stored_trace_replays_into_the_same_spans(spans_out, tmp_path):
    provider, memory = spans_out
    live = InMemorySpanExporter()
    live_provider = TracerProvider()
    live_provider.add_span_processor(SimpleSpanProcessor(live))
    result = _parallel_run(al.FakeClock(), subscribers=[exp := otel.exporter(live_provider), TraceWriter(tmp_path)])
    assert exp.flush()  # the spans are built on the exporters' thread
    stored = al.load_run(result.run_id, tmp_path)
    otel.export(stored, provider)

    def shape(spans):
        root = next(s for s in spans if s.parent is None)
        return sorted(
            (
                s.name,
                s.start_time - root.start_time,
                s.end_time - root.start_time,
                {k: v for k, v in s.attributes.items() if not isinstance(v, tuple)},
            )
            for s in spans
        )

    assert shape(memory.get_finished_spans()) == shape(live.get_finished_spans())


def test_a_trace_cut_short_still_exports_its_finished_calls(spans_out):
    provider, memory = spans_out
    records = [
        {
            "kind": "run_started",
            "run_id": "r1",
            "t": 0.0,
            "step": 0,
            "model": "claude-sonnet-4-5",
            "started_at": "2026-12-03T07:00:00+00:00",
            "budget": {"max_steps": 3},
        },
        {"kind": "model_request", "run_id": "r1", "t": 0.1, "step": 1, "max_tokens": 512},
        {
            "kind": "model_called",
            "run_id": "r1",
            "t": 0.9,
            "step": 1,
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 3},
        },
        {
            "kind": "tool_finished",
            "run_id": "r1",
            "t": 1.5,
            "step": 1,
            "call_id": "c1",
            "tool": "look",
            "mode": "read",
            "outcome": "ok",
            "is_error": False,
            "start": 0.9,
            "end": 1.5,
        },
    ]
    otel.export(records, provider)
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert set(spans) == {"invoke_agent agentlab", "chat claude-sonnet-4-5", "execute_tool look"}
    root = spans["invoke_agent agentlab"]
    assert root.attributes["agentlab.outcome"] == "unfinished"
    assert root.end_time - root.start_time == 1_500_000_000
    assert spans["chat claude-sonnet-4-5"].attributes["gen_ai.request.max_tokens"] == 512


def test_export_names_what_it_cannot_read():
    with pytest.raises(TypeError, match="Trace, Traces or a list of event records"):
        otel.export("runs/abc.jsonl")


def test_an_approval_shows_on_the_run_span_and_a_denial_marks_the_tool_span(spans_out):
    provider, memory = spans_out

    @al.tool(mode="write", approve=True)
    def refund(order_id: int) -> str:
        return "refunded"

    clock = al.FakeClock()

    def no(request):
        clock.advance(2.0)
        return "not this one"

    model = al.ScriptedModel([reply(None, ("refund", {"order_id": 1})), reply("x")])
    al.run(
        "q", [refund], model=model, trace=False, clock=clock, approve=no, subscribers=[exp := otel.exporter(provider)]
    )
    assert exp.flush()  # the spans are built on the exporters' thread
    spans = {s.name: s for s in memory.get_finished_spans()}
    events = {e.name: e for e in spans["invoke_agent agentlab"].events}
    assert events["agentlab.approval_answered"].attributes["agentlab.answer"] == "deny"
    assert events["agentlab.approval_answered"].attributes["agentlab.waited_s"] == 2.0
    tool = spans["execute_tool refund"]
    assert tool.attributes["error.type"] == "ApprovalDenied"
    assert tool.end_time - tool.start_time == 2_000_000_000  # the wait is inside the call's span


class _BlockingExporter:
    """A span exporter that blocks every export until ``release`` is set (a collector that hangs)."""

    def __init__(self) -> None:
        import threading

        self.entered = threading.Event()
        self.release = threading.Event()
        self.spans: list = []

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.entered.set()
        self.release.wait(120)
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def test_a_blocked_span_exporter_cannot_hold_a_run_past_its_deadline_and_every_span_arrives_later():
    import threading

    blocking = _BlockingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(blocking))  # exports each span on the thread that ends it
    clock = al.FakeClock()

    @al.tool(mode="read")
    def look(q: str) -> str:
        return "more to read"

    def model(messages, tools):
        clock.advance(0.6)  # each call takes 0.6 s of the run's (injected) clock
        return reply(None, ("look", {"q": str(len(messages))}))

    exp = otel.exporter(provider)
    results: list = []
    ended = threading.Event()

    def run() -> None:
        results.append(
            al.run(
                "read forever",
                [look],
                model=al.FunctionModel(model),
                clock=clock,
                trace=False,
                deadline_s=2,
                subscribers=[exp],
            )
        )
        ended.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert blocking.entered.wait(60), "no span reached the exporter"
        # the run ends while every export is still blocked: nothing of the exporter's is on the run's path
        assert ended.wait(60), "the run waited for the blocked span exporter"
        assert not exp.close(timeout_s=0.05)  # the close is bounded: it gives up while the exporter hangs
    finally:
        blocking.release.set()
        thread.join(60)
    result = results[0]
    assert result.reason == "deadline" and result.elapsed <= 2.0 + 0.6
    assert exp.flush(timeout_s=60)
    names = sorted(s.name for s in blocking.spans)
    calls = result.model_calls
    assert names.count("invoke_agent agentlab") == 1
    assert len([n for n in names if n.startswith("chat")]) == calls
    assert names.count("execute_tool look") == result.steps - 1  # its last step was stopped before its tools


def test_the_docs_state_the_exporter_s_bounds_as_the_code_has_them():
    import inspect
    from pathlib import Path

    text = " ".join((Path(__file__).parents[1] / "docs" / "integrations.md").read_text(encoding="utf-8").split())
    flush_s = inspect.signature(otel.TraceExporter.flush).parameters["timeout_s"].default
    assert f"(at most {flush_s:g} s;" in text
    assert f"handed over within {otel.EXIT_FLUSH_S:g} s" in text
    assert f"stuck for {otel.QUEUE_SIZE:,} events" in text


def test_a_full_queue_drops_events_with_a_warning_instead_of_making_the_run_wait(monkeypatch):
    blocking = _BlockingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(blocking))
    monkeypatch.setattr(otel, "_handoff", otel._Handoff(4))  # room for four events while the exporter hangs
    exp = otel.exporter(provider)
    try:
        with pytest.warns(RuntimeWarning, match="fallen 4 events behind"):
            result = _parallel_run(al.FakeClock(), subscribers=[exp])
        assert isinstance(result, al.Done)
        assert exp.dropped > 0
    finally:
        blocking.release.set()
    assert exp.flush(timeout_s=60)


def test_a_forked_worker_exports_on_its_own_thread(spans_out):
    import os

    provider, memory = spans_out
    exp = otel.exporter(provider)
    _parallel_run(al.FakeClock(), subscribers=[exp])  # the parent's thread is running
    assert exp.flush()
    before = len(memory.get_finished_spans())
    pid = os.fork()
    if pid == 0:  # the child: a run, its spans handed over by a thread of its own
        ok = False
        try:
            _parallel_run(al.FakeClock(), subscribers=[exp])
            ok = exp.flush(timeout_s=60) and len(memory.get_finished_spans()) == 2 * before
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

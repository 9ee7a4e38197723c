"""Subscribers get the tools' treatment (issue 24): whatever one raises, the run ends with a result,
the other subscribers (the trace among them) hear every event, and the trace ends with run_finished."""

from __future__ import annotations

import asyncio
import json
import warnings

import pytest

import agentlab as al
from agentlab import reply

from .helpers import ONE_TOOL_STEP, Recorder


class Custom(BaseException):
    """Outside the Exception family, like SystemExit."""


RAISED = [SystemExit(1), GeneratorExit(), asyncio.CancelledError(), Custom("boom"), ValueError("bad"), StopIteration()]
KINDS = ["run_started", *ONE_TOOL_STEP, "run_finished"]


@al.tool
def lookup(order_id: int) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


def _trace(folder):
    (file,) = folder.glob("*.jsonl")
    return [json.loads(line) for line in file.read_text().splitlines()]


def _run(folder, *subscribers, **options):
    model = al.ScriptedModel([reply(None, ("lookup", {"order_id": 7})), reply("shipped")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = al.run(
            "where is 7?",
            [lookup],
            model=model,
            trace=folder,
            subscribers=list(subscribers),
            clock=al.FakeClock(),
            **options,
        )
    return result, [str(w.message) for w in caught]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("exc", RAISED, ids=lambda e: type(e).__name__)
def test_a_subscriber_raising_anything_leaves_the_run_a_result_and_the_trace_whole(tmp_path, exc, kind):
    def exporter(event):
        if event.kind == kind:
            raise exc

    after = Recorder()
    result, warned = _run(tmp_path, exporter, after)
    assert isinstance(result, al.Done) and result.text == "shipped"
    records = _trace(tmp_path)
    assert records[-1]["kind"] == "run_finished" and records[-1]["outcome"] == "done"
    assert [r["kind"] for r in records] == after.kinds()  # the subscriber after it heard every event too
    assert any(f"failed on {kind}" in w and type(exc).__name__ in w for w in warned)


@pytest.mark.parametrize("kind", KINDS)
def test_a_keyboard_interrupt_from_a_subscriber_ends_the_run_cancelled_after_every_subscriber_heard_the_event(
    tmp_path, kind
):
    """Taken as a Ctrl-C, at any event: from the step's own task or from a tool call's (where, raised, it
    would tear through the event loop and out of run())."""

    def exporter(event):
        if event.kind == kind:
            raise KeyboardInterrupt

    after = Recorder()
    result, _ = _run(tmp_path, exporter, after)
    if kind == "run_finished":  # the run had ended: the interrupt changes nothing
        assert isinstance(result, al.Done)
    else:
        assert isinstance(result, al.Stopped) and result.reason == "cancelled"
    kinds = [r["kind"] for r in _trace(tmp_path)]
    assert kind in kinds and kinds[-1] == "run_finished"
    assert kinds == after.kinds()


def test_a_subscriber_blocking_on_run_finished_counts_in_the_overrun_of_the_result_and_the_trace(tmp_path):
    clock = al.FakeClock()

    def blocking_exporter(event):
        if event.kind in ("tool_started", "run_finished"):
            clock.advance(2.0)  # a flush to a collector that does not answer

    model = al.ScriptedModel([reply(None, ("lookup", {"order_id": 7})), reply("shipped")])
    result = al.run(
        "where is 7?",
        [lookup],
        model=model,
        trace=tmp_path,
        subscribers=[blocking_exporter],
        clock=clock,
        deadline_s=1.0,
    )
    assert result.reason == "deadline"
    assert result.overrun_s == pytest.approx(
        3.0
    )  # 4 s worked against a 1 s deadline, not the 1 s seen before the flush
    assert _trace(tmp_path)[-1]["overrun_s"] == pytest.approx(3.0)


def test_a_subscriber_added_or_removed_while_an_event_is_handed_out_counts_from_the_next_event():
    """The event in hand goes to the subscribers it started with; a change made by one of them (a panel
    subscribing a widget at the first tool call, say) holds from the next event on."""
    model = al.ScriptedModel([reply(None, ("lookup", {"order_id": 7})), reply("shipped")])
    run = al.Run("where is 7?", [lookup], model=model, clock=al.FakeClock())
    late, early, whole = Recorder(), Recorder(), Recorder()
    swapped: list[str] = []

    def swapper(event):
        if event.kind == "tool_started" and not swapped:
            swapped.append(event.kind)
            run.subscribe(late)
            stop_early()

    run.subscribe(whole)
    run.subscribe(swapper)
    stop_early = run.subscribe(early)
    asyncio.run(run.run())
    kinds = [*early.kinds(), *late.kinds()]
    assert early.kinds()[-1] == "tool_started"  # removed while hearing it: still heard it, and nothing after
    assert late.kinds()[0] == "tool_finished"  # added while it was handed out: heard from the next one
    assert kinds == whole.kinds()


class Counter:
    """A subscriber that is an object whose class is called: it hears each event once, as itself."""

    def __init__(self) -> None:
        self.seen: list[tuple[object, str]] = []

    def __call__(self, event: al.Event) -> None:
        self.seen.append((self, event.kind))


def test_a_callable_object_subscribed_hears_every_event_once_and_can_be_unsubscribed():
    model = al.ScriptedModel([reply(None, ("lookup", {"order_id": 7})), reply("shipped")])
    counter = Counter()
    run = al.Run("where is 7?", [lookup], model=model, clock=al.FakeClock(), subscribers=[counter])
    asyncio.run(run.step())
    assert [kind for _, kind in counter.seen] == KINDS[:-1]
    assert all(who is counter for who, _ in counter.seen)
    run.subscribe(counter)  # twice: hears each event twice
    stop = run.subscribe(Recorder())
    stop()
    asyncio.run(run.step())
    assert [kind for _, kind in counter.seen[len(KINDS) - 1 :]] == [
        k for k in ("model_request", "model_called", "run_finished") for _ in (1, 2)
    ]

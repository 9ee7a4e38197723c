"""When the trace writer's lines reach the disk: at flush points, two or three ``write``s a step (issue 27).

``model_called``, ``tool_results``, and ``tool_finished`` when no other call of the run is running, wait for the
next event that is a flush point, and go to disk with it in one ``write``; every other event is one. So before
any model call, tool body, approval wait or retry sleep, at each step's end and when ``step()`` returns, every
event so far is on disk. These tests hold the writer to that promise: the same bytes as one write an event, only
later; what a tool, a paused run and a killed process find on disk; what a failed joined write leaves behind.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import textwrap
import warnings
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab import reply
from agentlab.events import new_event
from agentlab.redact import Redactor
from agentlab.trace import TraceWriter, TraceWriteWarning

from .helpers import WrappedFile, killed_when_it_says
from .writer_lines import DATA, WHEN, expected_lines

ROOT = Path(__file__).resolve().parent.parent
HELD = {"model_called", "tool_results"}


def on_disk(kinds: list[str]) -> int:
    """How many of a run's events (``kinds``, in order) the promise puts on disk: all of them up to the last
    flush point. The rule, said again independently of the writer."""
    running = on = 0
    for i, kind in enumerate(kinds, start=1):
        if kind == "tool_started":
            running += 1
        elif kind == "tool_finished":
            running -= 1
            if running <= 0:
                running = 0
                continue
        if kind not in HELD:
            on = i
    return on


def kinds_in(file: Path) -> list[str]:
    return [json.loads(line)["kind"] for line in file.read_bytes().splitlines()]


KINDS = st.sampled_from(["model_request", "model_called", "tool_started", "tool_finished", "tool_results"])
STEPS = st.lists(
    st.tuples(KINDS | st.sampled_from(["step_finished", "model_retry", "my_note"]), WHEN, DATA), max_size=12
)


def _calls(data: dict) -> list[tuple[str, float, dict]]:
    """Two calls at once, then one alone, each event with ``data`` (plain: the hot path; a secret: the long way)."""
    kinds = ["model_called", "tool_started", "tool_started", "tool_finished", "tool_finished", "tool_results"]
    kinds += ["model_request", "model_called", "tool_started", "tool_finished", "tool_results", "step_finished"]
    return [(k, 0.5 + i, data) for i, k in enumerate(kinds)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STEPS)
@example(_calls({"call_id": "c1", "tool": "lookup"}))
@example(_calls({"call_id": "c1", "password": "hunter2hunter2"}))
def test_after_each_event_the_file_holds_every_event_up_to_the_last_flush_point_as_one_write_each_would(
    tmp_path_factory, steps
):
    """Calls started and finished in any order, secrets and NaNs (the long way holds lines by the same rule as
    the hot path): after each event the file is the lines of the events up to the last flush point, byte for
    byte what a write an event wrote; ``flush_run`` and ``close`` write the rest."""
    folder = tmp_path_factory.mktemp("runs")
    run_id = "f-" + os.urandom(4).hex()
    events = [new_event("run_started", run_id, 0, 1, 0.0, {"task": "go"})]
    for i, (kind, t, data) in enumerate(steps, start=2):
        events.append(new_event(kind, run_id, 1, i, t, data))
    expected = expected_lines(events)
    writer = TraceWriter(folder, redactor=Redactor(env=False))
    file = folder / f"{run_id}.jsonl"
    for n, e in enumerate(events, start=1):
        writer(e)
        assert file.read_bytes() == b"".join(expected[: on_disk([x.kind for x in events[:n]])])
    writer.flush_run(run_id)
    assert file.read_bytes() == b"".join(expected)
    writer.close()
    assert file.read_bytes() == b"".join(expected)


def test_closing_the_writer_writes_the_lines_it_holds(tmp_path):
    run_id = "c-" + os.urandom(4).hex()
    writer = TraceWriter(tmp_path, redactor=Redactor(env=False))
    events = [
        new_event("run_started", run_id, 0, 1, 0.0, {"task": "go"}),
        new_event("model_called", run_id, 1, 2, 0.5, {"content": [], "stop_reason": "tool_use"}),
    ]
    for e in events:
        writer(e)
    assert kinds_in(tmp_path / f"{run_id}.jsonl") == ["run_started"]
    writer.close()
    assert (tmp_path / f"{run_id}.jsonl").read_bytes() == b"".join(expected_lines(events))


@al.tool(mode="read")
def lookup(key: str) -> str:
    """Look up a key."""
    return "v:" + key


def test_a_run_paused_before_its_tools_has_the_reply_on_disk(tmp_path):
    """``step(pause_before_tools=True)`` returns with the calls pending: the reply that asked for them is in
    the file (a driver reading the trace, a process killed while paused), and the next step goes on from it."""
    model = al.ScriptedModel([reply(None, ("lookup", {"key": "a"})), reply("done")])
    run = al.Run("q", [lookup], model=model, max_cost=None, clock=al.FakeClock())
    writer = TraceWriter(tmp_path)
    run.subscribe(writer)
    asyncio.run(run.step(pause_before_tools=True))
    assert run.phase == "awaiting tools"
    file = tmp_path / f"{run.run_id}.jsonl"
    assert kinds_in(file) == ["run_started", "model_request", "model_called"]
    asyncio.run(run.step())
    assert kinds_in(file)[3:] == ["tool_started", "tool_finished", "tool_results", "step_finished"]
    asyncio.run(run.step())
    assert isinstance(run.result, al.Done) and kinds_in(file)[-1] == "run_finished"


def test_a_tool_reading_its_own_trace_finds_its_own_call_and_the_reply_that_asked_for_it(tmp_path):
    found: list[list[tuple[str, str | None]]] = []

    @al.tool(mode="read")
    def peek(n: int) -> str:
        """Read this run's trace so far."""
        (file,) = tmp_path.glob("*.jsonl")
        found.append([(e["kind"], e.get("call_id")) for e in map(json.loads, file.read_bytes().splitlines())])
        return "ok"

    model = al.ScriptedModel([reply(None, ("peek", {"n": 1}), ("peek", {"n": 2})), reply("done")])
    result = al.run("q", [peek], model=model, trace=tmp_path, max_cost=None, max_concurrency=1)
    assert isinstance(result, al.Done)
    first, second = found
    assert first[-2:] == [("model_called", None), ("tool_started", first[-1][1])]
    # the second call finds the first one finished, then its own start
    assert [k for k, _ in second[-3:]] == ["tool_started", "tool_finished", "tool_started"]
    assert second[-2][1] == first[-1][1] != second[-1][1]


def test_a_finished_call_is_on_disk_while_its_sibling_still_runs(tmp_path):
    """Two reads at once: the first waits until the second has returned and its ``tool_finished`` has been
    through the writer, then reads the file: the finished call is there (a resumed run reads it to know
    which calls not to run again)."""
    first_done = asyncio.Event()
    found: list[list[str]] = []

    @al.tool(mode="read")
    async def quick() -> str:
        """Answer at once."""
        return "quick"

    @al.tool(mode="read")
    async def slow() -> str:
        """Answer once the other call has finished."""
        await first_done.wait()
        (file,) = tmp_path.glob("*.jsonl")
        found.append([(e["kind"], e["tool"]) for e in map(json.loads, file.read_bytes().splitlines()[3:])])
        return "slow"

    def after_the_writer(event: al.Event) -> None:
        if event.kind == "tool_finished" and event.data["tool"] == "quick":
            first_done.set()

    model = al.ScriptedModel([reply(None, ("slow", {}), ("quick", {})), reply("done")])
    run = al.Run("q", [quick, slow], model=model, max_cost=None)
    run.subscribe(TraceWriter(tmp_path))
    run.subscribe(after_the_writer)
    result = asyncio.run(asyncio.wait_for(run.run(), 60))
    assert isinstance(result, al.Done)
    assert found == [[("tool_started", "slow"), ("tool_started", "quick"), ("tool_finished", "quick")]]


class _ShortWrites(WrappedFile):
    """A file whose first write of more than one line stops after the first line and half the next, and whose
    next write then fails like a full disk; later writes go through."""

    def __init__(self, real) -> None:
        super().__init__(real)
        self.state = "ok"

    def write(self, data) -> int:
        data = bytes(data)
        if self.state == "ok" and data.count(b"\n") > 1:
            self.state = "short"
            cut = data.index(b"\n") + 1
            return self.real.write(data[: cut + (data.index(b"\n", cut) - cut) // 2])
        if self.state == "short":
            self.state = "done"
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real.write(data)


class _ShortWriter(TraceWriter):
    def _open(self, run_id):
        out = super()._open(run_id)
        out.f = _ShortWrites(out.f)
        return out


def test_a_joined_write_that_fails_keeps_its_whole_lines_and_stops_the_run_naming_the_first_lost_event(tmp_path):
    """The reply and the call's start go out in one write; the disk takes the reply and half the start, then
    fills: the half line is taken back, the reply stays, and the run stops with "trace write failed" naming
    the call's start as the first event not on disk. The call itself is not made: no trace would show it."""
    ran: list[str] = []

    def lookup(key: str) -> str:
        """Look a key up."""
        ran.append(key)
        return f"value of {key}"

    model = al.ScriptedModel([reply(None, ("lookup", {"key": "a"})), reply("done")])
    result = al.run("q", [lookup], model=model, trace=_ShortWriter(tmp_path), max_cost=None)
    assert ran == [], "a call whose start could not be written ran anyway"
    assert isinstance(result, al.Stopped) and result.reason == "trace write failed"
    assert "No space left on device (ENOSPC)" in result.detail
    assert result.detail.endswith("the trace holds the events before tool_started #4")
    data = (tmp_path / f"{result.run_id}.jsonl").read_bytes()
    assert data.endswith(b"\n")
    kinds = kinds_in(tmp_path / f"{result.run_id}.jsonl")
    assert kinds[:3] == ["run_started", "model_request", "model_called"] and kinds[-1] == "run_finished"
    assert "tool_started" not in kinds


KILL_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import agentlab as al
    from agentlab import reply

    where = sys.argv[1]
    seen = []

    def blocked():
        print(json.dumps([[e.seq, e.kind] for e in seen]), flush=True)
        sys.stdin.readline()  # never comes: the test kills the process here

    @al.tool(mode="read")
    def fetch(n: int) -> str:
        '''Fetch page n.'''
        if where == "tool" and n == 2:
            blocked()
        return f"page {n}"

    def model(messages, tools=None, *a, **kw):
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if where == "model" and turn == 2:
            blocked()
        return {"content": [{"type": "tool_use", "id": f"c{turn}", "name": "fetch", "input": {"n": turn}}],
                "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}

    run = al.Run("read", [fetch], model=al.FunctionModel(model), run_id="killme", max_steps=10, max_cost=None,
                 subscribers=[seen.append])
    run.subscribe(al.trace.TraceWriter(sys.argv[2]))
    if where == "paused":
        asyncio.run(run.step())
        asyncio.run(run.step(pause_before_tools=True))
        blocked()
    asyncio.run(run.run())
    """
)


def _killed_at(where: str, runs: Path) -> list[list]:
    said = killed_when_it_says(b"[", KILL_SCRIPT, where, str(runs), why=f"the child never reached its wait ({where})")
    return json.loads(said)


def test_a_process_killed_while_it_waits_leaves_every_event_so_far_on_disk(tmp_path):
    """SIGKILL while a model call, a tool body or a paused run waits: the file holds every event the run had
    emitted, whole, the last one included (the reply of a paused step, the call in flight)."""
    for where, last in (("model", "model_request"), ("tool", "tool_started"), ("paused", "model_called")):
        runs = tmp_path / where
        emitted = _killed_at(where, runs)
        data = (runs / "killme.jsonl").read_bytes()
        assert data.endswith(b"\n")
        assert [[e["seq"], e["kind"]] for e in map(json.loads, data.splitlines())] == emitted
        assert emitted[-1][1] == last


class _Scripted(WrappedFile):
    """A file that follows a script, one step a ``write``: "ok", "half" (half the bytes, then the next write
    fails like a full disk), and whose ``truncate`` fails while ``stuck`` (permission lost)."""

    def __init__(self, real, script: list[str]) -> None:
        super().__init__(real)
        self.script, self.stuck, self.full = script, True, False

    def write(self, data) -> int:
        data = bytes(data)
        if self.full:
            self.full = False
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if self.script and self.script.pop(0) == "half":
            self.full = True
            return self.real.write(data[: len(data) // 2])
        return self.real.write(data)

    def truncate(self, size: int) -> int:
        if self.stuck:
            self.stuck = False
            raise OSError(errno.EACCES, "permission lost")
        return self.real.truncate(size)


def test_after_a_cut_line_that_could_not_be_taken_back_a_later_failure_still_cuts_back_to_a_whole_line(tmp_path):
    """A write cut short whose partial line cannot be truncated away (the next line starts on a fresh one),
    then a line written whole, then another write cut short: the file is cut back to the end of that whole
    line, not into it (the cut line before it counts in the file's length)."""

    class Writer(TraceWriter):
        def _open(self, run_id):
            out = super()._open(run_id)
            out.f = _Scripted(out.f, ["ok", "half", "ok", "half"])
            return out

    run_id = "s-" + os.urandom(4).hex()
    writer = Writer(tmp_path, on_error="warn")
    notes = [new_event("my_note", run_id, 1, i, 0.5 + i, {"n": i}) for i in range(2, 5)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWriteWarning)
        for e in [new_event("run_started", run_id, 0, 1, 0.0, {"task": "go"}), *notes]:
            writer(e)
    writer.close()
    data = (tmp_path / f"{run_id}.jsonl").read_bytes()
    assert data.endswith(b"\n")
    lines = data.splitlines()
    assert [json.loads(lines[0])["seq"], json.loads(lines[-1])["seq"]] == [1, 3]  # the cut line 2 stays between


def test_a_paused_step_whose_reply_cannot_be_written_stops_the_run_naming_it(tmp_path):
    """The flush before ``step()`` returns fails (a full disk): the run stops with "trace write failed", as
    any trace write that fails stops it, and the file still ends at a whole line."""

    class Writer(TraceWriter):
        def _open(self, run_id):
            out = super()._open(run_id)
            out.f = _Scripted(out.f, ["ok", "ok", "half"])  # run_started, model_request, then the reply
            out.f.stuck = False
            return out

    model = al.ScriptedModel([reply(None, ("lookup", {"key": "a"})), reply("done")])
    run = al.Run("q", [lookup], model=model, max_cost=None, clock=al.FakeClock())
    run.subscribe(Writer(tmp_path))
    asyncio.run(run.step(pause_before_tools=True))
    assert isinstance(run.result, al.Stopped) and run.result.reason == "trace write failed"
    assert run.result.detail.endswith("the trace holds the events before model_called #3")
    assert kinds_in(tmp_path / f"{run.run_id}.jsonl") == ["run_started", "model_request", "run_finished"]

"""The trace holds up: write faults stop the run cleanly, one writer per run, the loader never crashes (issue 14)."""

from __future__ import annotations

import errno
import json
import math
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab import reply
from agentlab.trace import (
    TraceWriter,
    TraceWriteWarning,
    TruncatedTraceWarning,
    read_events,
)

from .helpers import WrappedFile


class FailingFile(WrappedFile):
    """A file object that accepts ``budget`` bytes, then writes part of a line and fails like a full disk."""

    def __init__(self, real, budget: int, *, err: int = errno.ENOSPC, truncate_fails: bool = False) -> None:
        super().__init__(real)
        self.budget, self.err, self.truncate_fails = budget, err, truncate_fails

    def write(self, data) -> int:
        if self.budget <= 0:
            raise OSError(self.err, os.strerror(self.err))
        n = min(len(data), self.budget)
        self.real.write(bytes(data[:n]))
        self.budget -= n
        return n

    def truncate(self, size: int) -> int:
        if self.truncate_fails:
            raise OSError(errno.EACCES, "permission lost")
        return self.real.truncate(size)


class FaultyWriter(TraceWriter):
    """A real TraceWriter whose file starts failing after ``budget`` bytes."""

    def __init__(self, path, budget: int, **kw) -> None:
        self.fault = {k: kw.pop(k) for k in ("err", "truncate_fails") if k in kw}
        super().__init__(path, **kw)
        self.budget = budget

    def _open(self, run_id):
        out = super()._open(run_id)
        out.f = FailingFile(out.f, self.budget, **self.fault)
        return out


def _run(tmp_path, writer):
    @al.tool(mode="read")
    def page(i: int) -> str:
        """Read a page."""
        return f"page {i} " + "z" * 300

    model = al.ScriptedModel([reply(None, ("page", {"i": i})) for i in range(6)] + [reply("done")])
    return al.run("read", [page], model=model, trace=writer, max_cost=None, max_steps=10, clock=al.FakeClock())


@pytest.mark.parametrize("truncate_fails", [False, True])
def test_a_full_disk_stops_the_run_with_a_clear_reason_and_no_glued_line(tmp_path, truncate_fails):
    """Never Done over an incomplete trace; every line on disk is whole and the loader recovers them all."""
    writer = FaultyWriter(tmp_path, 4000, truncate_fails=truncate_fails)
    result = _run(tmp_path, writer)
    assert isinstance(result, al.Stopped)
    assert result.reason == "trace write failed"
    assert "No space left on device (ENOSPC)" in result.detail and result.run_id in result.detail
    writer.close()
    data = (tmp_path / f"{result.run_id}.jsonl").read_bytes()
    lines = [ln for ln in data.split(b"\n") if ln]
    if truncate_fails:  # the cut line stays, alone on its line; the later run_finished starts a fresh one
        with pytest.warns(TruncatedTraceWarning, match="skipped line"):
            events = read_events(tmp_path / f"{result.run_id}.jsonl")
        assert len(events) == len(lines) - 1
    else:  # the partial line was taken back: every line is a complete event
        events = [json.loads(ln) for ln in lines]
        assert len(data) <= 4000
    assert all(isinstance(e, dict) and "kind" in e for e in events)


def test_on_error_warn_keeps_the_run_going_with_one_warning(tmp_path):
    writer = FaultyWriter(tmp_path, 4000, on_error="warn")
    with pytest.warns(TraceWriteWarning, match="on_error='warn'") as caught:
        result = _run(tmp_path, writer)
    assert isinstance(result, al.Done)
    assert len([w for w in caught if issubclass(w.category, TraceWriteWarning)]) == 1


def test_a_file_size_limit_stops_the_run_in_a_real_process(tmp_path):
    """RLIMIT_FSIZE makes the kernel refuse the write (EFBIG): the run stops, the loader reads every complete event."""
    pytest.importorskip("resource")
    script = textwrap.dedent(f"""
        import resource, signal
        import agentlab as al
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))
        page = al.tool(mode="read", name="page")(lambda i: "p" * 400)
        model = al.ScriptedModel([al.reply(None, ("page", {{"i": i}})) for i in range(20)] + [al.reply("done")])
        r = al.run("read", [page], model=model, trace={str(tmp_path)!r}, max_cost=None, max_steps=30,
                   clock=al.FakeClock())
        print(type(r).__name__, r.reason if hasattr(r, "reason") else "", "|", r.detail if hasattr(r, "detail") else "")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Stopped trace write failed |"), out.stdout
    assert "EFBIG" in out.stdout
    (file,) = tmp_path.glob("*.jsonl")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no partial line to warn about
        trace = al.load_run(file.stem, tmp_path)
    assert trace.outcome == "incomplete" and len(trace.records) > 5


def test_a_second_writer_of_the_same_run_gets_a_clear_error(tmp_path):
    """Two Runs (or processes) with one run id: the second is refused, the first's trace stays clean."""
    model = lambda: al.ScriptedModel([reply("hi")])  # noqa: E731
    first = al.Run("q", model=model(), run_id="shared-run", max_cost=None)
    w1 = TraceWriter(tmp_path)
    first.subscribe(w1)
    first.note("note", text="first writer holds the file")
    second = al.run("q", model=model(), run_id="shared-run", trace=tmp_path, max_cost=None)
    assert isinstance(second, al.Stopped) and second.reason == "trace write failed"
    assert "already being written" in second.detail
    script = textwrap.dedent(f"""
        import agentlab as al
        model = al.ScriptedModel([al.reply("hi")])
        r = al.run("q", model=model, run_id="shared-run", trace={str(tmp_path)!r}, max_cost=None)
        print(r.reason)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "trace write failed", out.stderr
    w1.close()
    lines = (tmp_path / "shared-run.jsonl").read_text().splitlines()
    assert [json.loads(ln)["kind"] for ln in lines] == ["note"]


def test_nan_and_infinities_are_valid_json_and_read_back_the_same(tmp_path):
    run = al.Run("q", model=al.ScriptedModel([reply("hi")]), run_id="floaty", max_cost=None)
    with TraceWriter(tmp_path) as w:
        run.subscribe(w)
        run.note("measure", values=[math.nan, math.inf, -math.inf, 1.5], usage={"x": math.nan})
    text = (tmp_path / "floaty.jsonl").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    (e,) = read_events(tmp_path / "floaty.jsonl")
    assert math.isnan(e["values"][0]) and e["values"][1:] == [math.inf, -math.inf, 1.5] and math.isnan(e["usage"]["x"])


def test_a_nan_after_many_dollar_signs_still_reads_back_as_nan(tmp_path):
    """The reader finds the float tag by looking at each ``$``; past a few dozen it searches the whole file."""
    for dollars in (3, 500):
        run = al.Run("q", model=al.ScriptedModel([reply("hi")]), run_id=f"cash{dollars}", max_cost=None)
        with TraceWriter(tmp_path) as w:
            run.subscribe(w)
            run.note("prices", text="$1.50 " * dollars)
            run.note("measure", value=math.nan)
        events = read_events(tmp_path / f"cash{dollars}.jsonl")
        assert events[0]["text"].count("$") == dollars and math.isnan(events[-1]["value"])


def test_a_lone_surrogate_is_escaped_not_dropped(tmp_path):
    run = al.Run("q", model=al.ScriptedModel([reply("hi")]), run_id="surro", max_cost=None)
    with TraceWriter(tmp_path) as w:
        run.subscribe(w)
        run.note("note", text="half an emoji: \ud83d!")
    (e,) = read_events(tmp_path / "surro.jsonl")
    assert e["text"] == "half an emoji: \ud83d!"


GOOD = {
    "v": 1,
    "run_id": "r",
    "seq": 1,
    "step": 0,
    "t": 0.0,
    "kind": "run_started",
    "task": "t",
    "model": "m",
    "budget": {"max_steps": 3},
    "messages": [],
    "started_at": "2026-12-03T00:00:00+00:00",
}


def _line(**kw) -> str:
    return json.dumps({**GOOD, "seq": 2, "kind": "note", **kw})


def test_the_loader_skips_every_kind_of_bad_line_and_file_with_one_warning_each(tmp_path):
    """Invalid JSON, wrong shapes and types, a BOM, NaN, a directory and an unreadable file: everything readable
    loads.
    """
    good = json.dumps(GOOD)
    bad_lines = [
        "{not json",
        "[1, 2]",
        "42",
        '"text"',
        "null",
        _line(step="3"),
        _line(t="soon"),
        _line(kind=7),
        json.dumps({**GOOD, "kind": "model_called", "usage": "lots", "content": []}),
        json.dumps({**GOOD, "kind": "model_called", "usage": {"input_tokens": "9"}, "content": []}),
        json.dumps({**GOOD, "kind": "tool_started", "call_id": 5}),
        json.dumps({**GOOD, "kind": "tool_finished", "call_id": "c", "start": "x"}),
        json.dumps({**GOOD, "kind": "tool_results", "content": "x"}),
        json.dumps({**GOOD, "kind": "run_finished", "steps": "two"}),
        '{"kind": "note"}',
    ]
    (tmp_path / "mixed.jsonl").write_text("\n".join([good, *bad_lines, _line(seq=9)]) + "\n", encoding="utf-8")
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + good.encode() + b"\n")
    (tmp_path / "nan.jsonl").write_text(good + "\n" + _line(score=float("nan")) + "\n", encoding="utf-8")
    (tmp_path / "dir.jsonl").mkdir()
    unreadable = tmp_path / "locked.jsonl"
    unreadable.write_text(good + "\n")
    unreadable.chmod(0)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            traces = al.load_runs(tmp_path)
    finally:
        unreadable.chmod(0o644)
    messages = [str(w.message) for w in caught if issubclass(w.category, TruncatedTraceWarning)]
    assert any("mixed.jsonl: skipped 15 lines (2, 3, 4, 5, 6..." in m for m in messages), messages
    assert any("dir.jsonl: skipped the whole file: it is a directory" in m for m in messages)
    if os.geteuid() != 0:  # root reads any file
        assert any("locked.jsonl: skipped the whole file" in m for m in messages)
    assert len([m for m in messages if "mixed.jsonl" in m]) == 1
    assert not any("bom.jsonl" in m or "nan.jsonl" in m for m in messages)
    by_file = {os.path.basename(f): n for f, n in zip(traces.runs["file"], traces.runs["file"], strict=True)}
    assert {"mixed.jsonl", "bom.jsonl", "nan.jsonl"} <= set(by_file)
    events = traces.events
    assert len(events[events["kind"] == "note"]) == 2  # mixed's last line and nan's note
    nan_note = events[(events["kind"] == "note") & events["data"].map(lambda d: "score" in d)]
    assert math.isnan(nan_note["data"].iloc[0]["score"])


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20,
)
_event = st.fixed_dictionaries(
    {},
    optional={
        "v": _json,
        "run_id": _json,
        "seq": _json,
        "step": _json,
        "t": _json,
        "usage": _json,
        "content": _json,
        "call_id": _json,
        "budget": _json,
        "limits": _json,
        "start": _json,
        "end": _json,
        "args": _json,
        "kind": st.sampled_from(
            [
                "run_started",
                "model_called",
                "tool_started",
                "tool_finished",
                "tool_results",
                "run_finished",
                "resumed",
                "model_request",
                "nudged",
            ]
        )
        | _json,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(
        st.one_of(
            st.binary(max_size=60),
            _event.map(lambda e: json.dumps(e).encode()),
            _json.map(lambda v: json.dumps(v).encode()),
        ),
        max_size=8,
    )
)
def test_the_loader_never_raises_on_random_bytes_and_random_json(tmp_path, lines):
    """Fuzz: whatever lines a trace folder holds, load_runs and all four frames come back."""
    folder = tmp_path / "fuzz"
    folder.mkdir(exist_ok=True)
    (folder / "fuzz.jsonl").write_bytes(b"\n".join(lines))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traces = al.load_runs(folder)
        for frame in ("runs", "steps", "calls", "events"):
            getattr(traces, frame)
        trace = al.load_run("fuzz", folder)
        trace.messages  # noqa: B018
        repr(trace)

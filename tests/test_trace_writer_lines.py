"""The trace writer's hot path writes exactly what its long way writes (issue 27, the tracing share of a step).

Six events a step take a short path: the line is spliced from the run's first bytes, the kind's and the
event's ``data`` as JSON, with the secret pre-test on the finished line. Everything else (a secret, a
NaN, a payload stored once, a field named like a base field...) takes the long way: the record, rebuilt,
redacted field by field. These tests hold the short path to the long way's bytes, the field-by-field
redaction to the whole walk, and the cheaper set-up (a run's file, the environment's secrets) to the same
promises as before.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab import reply
from agentlab.events import Event, new_event
from agentlab.redact import REDACTED, Redactor
from agentlab.trace import TraceWriter, dumps, read_events
from agentlab.trace.schema import PLAIN_KINDS

from .helpers import ONE_TOOL_STEP
from .writer_lines import DATA, ENGINE_KINDS, KEYS, VALUES, WHEN, expected_lines


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.sampled_from([*ENGINE_KINDS, "my_note"]), st.integers(0, 2**40), WHEN, DATA),
        max_size=8,
    ),
    st.sampled_from(["r-", "auth-token-", "ghp_" + "a1B2" * 9, "sk-ant-api03-" + "x" * 20, "Basic-", "pass"]),
)
def test_every_line_is_the_events_record_whichever_way_the_writer_takes(tmp_path_factory, steps, run_id):
    """Secrets, NaNs, tiny and huge times, fields named like base fields, numbers past 64 bits, a run id
    holding a secret word or a key's prefix: the bytes on disk are the record's JSON, redacted as the whole
    walk redacts it."""
    folder = tmp_path_factory.mktemp("runs")
    run_id += os.urandom(4).hex()
    events = [new_event("run_started", run_id, 0, 1, 0.0, {"task": "go"})]
    for i, (kind, step, t, data) in enumerate(steps, start=2):
        events.append(new_event(kind, run_id, step, i, t, data))
    events.append(new_event("run_finished", run_id, 0, len(events) + 1, 1.0, {"outcome": "done", "error": None}))
    assert written_lines(folder, run_id, events) == expected_lines(events)


def written_lines(folder, run_id: str, events: list[Event]) -> list[bytes]:
    """The lines a fresh writer puts on disk for ``events`` (secrets of this machine's environment left out)."""
    writer = TraceWriter(folder, redactor=Redactor(env=False))
    for e in events:
        writer(e)
    writer.close()
    return (folder / f"{run_id}.jsonl").read_bytes().splitlines(keepends=True)


HALVES = st.integers(100, 10**15).map(lambda n: (n + 0.5) / 1e6)  # half a microsecond past a microsecond
TIMES = (
    st.floats(1e-4, 1e9)
    | HALVES
    | st.integers(1, 10**9).map(float)
    | st.sampled_from([0.0001, 0.1, 1e9, 999999999.9999995])
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(TIMES, min_size=1, max_size=20))
def test_an_events_time_is_written_as_the_record_rounds_it(tmp_path_factory, times):
    """Times rounded half-way, whole seconds ("2.0"), the edges of the short path's range: ``t`` on disk is
    ``round(t, 6)`` as JSON, as the long way writes it."""
    folder = tmp_path_factory.mktemp("runs")
    run_id = "t-" + os.urandom(4).hex()
    events = [new_event("run_started", run_id, 0, 1, 0.0, {"task": "go"})]
    events += [new_event("step_finished", run_id, 1, i, t, {"spent": 0.0}) for i, t in enumerate(times, start=2)]
    assert written_lines(folder, run_id, events) == expected_lines(events)


def test_a_runs_lines_are_the_records_of_its_events(tmp_path):
    """A real run: each line of its trace is what the long way writes for the event the run emitted."""
    seen: list[Event] = []

    @al.tool(mode="read")
    def lookup(key: str) -> str:
        """Look up a key."""
        return "v:" + key

    model = al.ScriptedModel(
        [reply(None, ("lookup", {"key": "k0"})), reply(None, ("lookup", {"key": "k1"})), reply("ok")]
    )
    result = al.run("go", [lookup], model=model, trace=tmp_path, subscribers=[seen.append], max_cost=None)
    written = (tmp_path / f"{result.run_id}.jsonl").read_bytes().splitlines(keepends=True)
    assert [e.kind for e in seen][:7] == ["run_started", *ONE_TOOL_STEP]
    assert written[1:-1] == expected_lines(seen)[1:-1]  # the run's first and last hold the live history


@pytest.mark.parametrize("kind", [k for k in ENGINE_KINDS if k not in PLAIN_KINDS] + ["my_note"])
def test_a_secret_in_any_events_data_reaches_no_line(tmp_path, kind):
    """Whatever kind carries it (but the kinds of numbers only, schema.PLAIN_KINDS), a key in an event's data
    is redacted: the writer looks for secret words in data's text, not in the numbers and kind before it."""
    key = "ghp_" + "Zx9" * 12
    run_id = "r-" + os.urandom(4).hex()
    writer = TraceWriter(tmp_path, redactor=Redactor(env=False))
    writer(new_event("run_started", run_id, 0, 1, 0.5, {"task": "go"}))
    writer(new_event(kind, run_id, 1, 2, 0.75, {"text": f"the key is {key}", "token": key}))
    writer.close()
    text = (tmp_path / f"{run_id}.jsonl").read_text(encoding="utf-8")
    assert key not in text and REDACTED in text


@pytest.mark.parametrize("kind", [k for k in ENGINE_KINDS if k not in PLAIN_KINDS])
def test_a_password_in_a_url_in_any_events_data_reaches_no_line(tmp_path, kind):
    """A URL's credentials (``scheme://user:password@host``) are redacted whichever kind carries them; the
    pre-test finds the URL's ``://`` among the secret words it looks for in data's text."""
    run_id = "r-" + os.urandom(4).hex()
    writer = TraceWriter(tmp_path, redactor=Redactor(env=False))
    writer(new_event("run_started", run_id, 0, 1, 0.5, {"task": "go"}))
    writer(new_event(kind, run_id, 1, 2, 0.75, {"result": "connect postgres://app:Pg-Str3am-77@db/x now"}))
    writer(new_event(kind, run_id, 1, 3, 0.8, {"args": {"to": "ops@example.com", "dsn": "mysql://u:Zq-91xLm@h/d"}}))
    writer.close()
    text = (tmp_path / f"{run_id}.jsonl").read_text(encoding="utf-8")
    assert "Pg-Str3am-77" not in text and "Zq-91xLm" not in text and text.count(REDACTED) == 2


def test_a_secret_in_a_tool_result_is_redacted_on_the_way_to_disk(tmp_path):
    key = "sk-ant-api03-" + "x" * 40

    @al.tool(mode="read")
    def leak() -> str:
        """Print the config."""
        return f"ANTHROPIC_API_KEY={key}"

    model = al.ScriptedModel([reply(None, ("leak", {})), reply("done")])
    result = al.run("go", [leak], model=model, trace=tmp_path, max_cost=None)
    text = (tmp_path / f"{result.run_id}.jsonl").read_text(encoding="utf-8")
    assert key not in text and REDACTED in text
    assert [e["kind"] for e in read_events(tmp_path / f"{result.run_id}.jsonl")].count("tool_finished") == 1


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS | st.sampled_from(["input_schema", "signature"]), VALUES, max_size=6))
def test_redacting_a_record_field_by_field_changes_what_the_whole_walk_changes(record):
    by_field, whole = Redactor(env=False).for_run(), Redactor(env=False).for_run()
    assert dumps(by_field.redact_fields(record)) == dumps(whole.redact(record))
    assert by_field.learned == whole.learned and by_field.changes == whole.changes


def test_an_event_made_by_new_event_is_an_ordinary_frozen_event():
    fast, plain = new_event("tool_started", "r1", 2, 7, 0.5, {"a": 1}), Event("tool_started", "r1", 2, 7, 0.5, {"a": 1})
    assert type(fast) is Event and fast == plain and repr(fast) == repr(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.kind = "x"  # type: ignore[misc]
    assert dataclasses.replace(fast, step=3).step == 3


def test_every_event_a_run_hands_its_subscribers_is_an_ordinary_frozen_event():
    seen: list[Event] = []

    @al.tool(mode="read")
    def lookup(key: str) -> str:
        """Look up a key."""
        return "v:" + key

    model = al.ScriptedModel([reply(None, ("lookup", {"key": "k0"})), reply("ok")])
    al.run("go", [lookup], model=model, trace=False, subscribers=[seen.append], max_cost=None)
    assert [e.kind for e in seen][1:7] == ONE_TOOL_STEP
    for e in seen:
        assert type(e) is Event and e == Event(e.kind, e.run_id, e.step, e.seq, e.t, e.data)
        with pytest.raises(dataclasses.FrozenInstanceError):
            e.seq = 0  # type: ignore[misc]


def test_a_secret_put_in_the_environment_after_a_run_is_kept_out_of_the_next_runs_trace(tmp_path, monkeypatch):
    """The environment's secrets are read once per change of the environment, not once per run."""
    token = "ghx" + "Q7w" * 12

    @al.tool(mode="read")
    def echo(text: str) -> str:
        """Echo."""
        return text

    def run_once() -> str:
        model = al.ScriptedModel([reply(None, ("echo", {"text": f"value {token} here"})), reply("done")])
        result = al.run("go", [echo], model=model, trace=tmp_path, max_cost=None)
        return (tmp_path / f"{result.run_id}.jsonl").read_text(encoding="utf-8")

    assert token in run_once()  # not a secret yet: an ordinary word
    monkeypatch.setenv("DEPLOY_TOKEN", token)
    assert token not in run_once()
    monkeypatch.delenv("DEPLOY_TOKEN")
    assert token in run_once()


def test_a_link_named_like_a_runs_trace_stops_the_run_and_nothing_is_written_through_it(tmp_path):
    runs, outside = tmp_path / "runs", tmp_path / "outside.txt"
    runs.mkdir()
    outside.write_text("untouched")
    os.symlink(outside, runs / "linked.jsonl")
    model = al.ScriptedModel([reply("done")])
    result = al.run("go", [], model=model, trace=runs, run_id="linked", max_cost=None)
    assert isinstance(result, al.Stopped) and result.reason == "trace write failed"
    assert outside.read_text() == "untouched"

"""Loading from the logs: runs summarized in bulk give the frames, runs and warnings the per-run reference gives.

The bulk path (``agentlab/trace/_columns.py``) is an accelerator: every log it takes must load exactly as the
per-run path loads it, and every log it cannot take exactly must be handed to that path. These tests load the
same folder both ways, on every fixture (native runs and every recorded import) and on damaged logs.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab.trace import reader
from agentlab.trace._columns import Batch

from .trace_fixtures import assert_same_frames, every_fixture


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """A folder of native runs and one of every recorded fixture imported."""
    return every_fixture(tmp_path_factory)


def load(folder: Path, *, bulk: bool) -> tuple[al.Traces | None, set[str], str]:
    """The folder loaded with the bulk path on or off (every frame built), the warnings it gave, and the
    error it raised (a log the per-run path itself cannot load must fail the same way in bulk)."""
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if not bulk:
            mp.setattr(reader, "_bulk_module", lambda: None)
        try:
            traces = al.load_runs(folder)
            for name in ("runs", "steps", "calls", "events"):
                getattr(traces, name)
        except Exception as exc:
            return None, {str(w.message) for w in caught}, type(exc).__name__
    return traces, {str(w.message) for w in caught}, ""


def assert_loads_as_the_reference(folder: Path) -> al.Traces | None:
    fast, fast_warned, fast_error = load(folder, bulk=True)
    ref, ref_warned, ref_error = load(folder, bulk=False)
    assert fast_warned == ref_warned and fast_error == ref_error
    if ref is None or fast is None:
        return None
    assert_same_frames(ref, fast)
    assert [t.run_id for t in fast] == [t.run_id for t in ref] and len(fast) == len(ref)
    for f, r in zip(fast, ref, strict=True):
        assert f.file == r.file and (f.records == r.records or _nan_equal(f.records, r.records))
        assert fast.run(r.run_id).file == ref.run(r.run_id).file
    assert repr(fast) == repr(ref)
    return fast


def _nan_equal(a: object, b: object) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def bulk_used(traces: al.Traces | None) -> bool:
    return traces is not None and any(isinstance(p, Batch) for p in traces._parts or [])


@pytest.mark.parametrize("kind", ["native", "imported"])
def test_every_fixture_loads_in_bulk_as_run_by_run(fixtures, kind, tmp_path):
    """Native runs (every scenario, a sub-run, a cut log, non-ASCII text) and every recorded import."""
    folder = tmp_path / kind
    shutil.copytree(fixtures[kind], folder)
    fast = assert_loads_as_the_reference(folder)
    assert bulk_used(fast)


def test_a_run_the_bulk_path_turns_down_leaves_every_other_log_read_once(fixtures, tmp_path, monkeypatch):
    """A resumed run, a sub-run's parent or a call never finished is handed to the per-run path when its log
    is added: the other runs of its batch stay in bulk, their logs not parsed again."""
    folder = tmp_path / "native"
    shutil.copytree(fixtures["native"], folder)
    (folder / "parent.jsonl").rename(folder / "m-parent.jsonl")  # mid-folder, between runs taken in bulk
    added: list[str] = []
    add = Batch.add

    def counted(self, trace, data, lines):
        added.append(trace.run_id)
        return add(self, trace, data, lines)

    monkeypatch.setattr(Batch, "add", counted)
    traces = al.load_runs(folder)
    assert sorted(added) == sorted(set(added)) and "parent" in added
    batches = [p for p in traces._parts or [] if isinstance(p, Batch)]
    assert len(batches) >= 2 and "parent" not in {t.run_id for b in batches for t in b.traces}
    assert len(traces) == len(list(folder.glob("*.jsonl")))


# ------------------------------------------------------------ damaged and unusual logs
def _lines(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, events: list[dict]) -> None:
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), encoding="utf-8")


def _first(events: list[dict], kind: str) -> dict:
    return next(e for e in events if e["kind"] == kind)


def _variants(base: list[dict]) -> dict[str, list[dict] | str | bytes]:
    """Logs made from one native run's events: each holds one thing the bulk path must get right or hand over."""

    def edited(which: str, **fields: object) -> list[dict]:
        events = [dict(e) for e in base]
        e = _first(events, which)
        for k, v in fields.items():
            if v is _DROP:
                e.pop(k, None)
            else:
                e[k] = v
        return events

    text = "".join(json.dumps(e) + "\n" for e in base)
    out: dict[str, list[dict] | str | bytes] = {
        "a_plain_copy": base,
        "a_nan_tag": edited("model_called", cost={"$float": "NaN"}),
        "a_blob": edited("tool_results", content=[{"type": "image", "source": {"$ref": "sha256:00", "bytes": 3}}]),
        "dollars_in_text": edited("tool_finished", result="$5 a $b, $v or $r; the $float tag, a $ref"),
        "a_nan_tag_deep": edited("tool_finished", args={"x": [{"$float": "Infinity"}]}),
        "resumed": [
            *base,
            {**base[0], "seq": 900, "budget": {"max_steps": 90}},
            {**base[0], "seq": 901, "kind": "resumed", "limits": {"max_cost": 9.0}},
        ],
        "two_run_started": [*base[:-1], {**base[0], "seq": 900, "task": "again"}, base[-1]],
        "a_lone_surrogate": text.replace('"kind": "run_started"', '"kind": "run_started", "x": "\\ud800"', 1),
        "being_written": base[:-1],
        "being_written_mid_line": text[: len(text) - len(json.dumps(base[-1])) // 2 - 1],
        "a_lost_attempt": edited("model_called", usage=None),
        "no_spent": edited("model_called", spent=_DROP),
        "a_null_spent": edited("model_called", spent=None),
        "a_call_never_started": [e for e in base if e["kind"] != "tool_started"],
        "a_call_never_finished": [e for e in base if e["kind"] != "tool_finished"],
        "a_bool_step": edited("model_called", step=True),
        "a_float_step": edited("tool_finished", step=1.0),
        "a_dict_result": edited("tool_finished", result={"a": 1}),
        "a_long_result": edited("tool_finished", result="word " * 120),
        "a_null_result": edited("tool_finished", result=None),
        "float_tokens": edited("model_called", usage={"input_tokens": 10.0}),
        "text_cost": edited("model_called", cost="0.5"),
        "int_cost_and_times": edited("model_called", cost=1, latency=2, t=3),
        "a_huge_seq": edited("tool_started", seq=2**62),
        "a_huge_index": edited("tool_finished", index=2**63 + 5),
        "null_stop_reason": edited("model_called", stop_reason=None),
        "no_content": edited("model_called", content=None),
        "text_content": edited("model_called", content="hello"),
        "odd_blocks": edited("model_called", content=["x", {"type": "tool_use"}, {"no": "type"}]),
        "another_run_id": edited("tool_started", run_id="someone-else"),
        "no_run_id": edited("tool_finished", run_id=_DROP),
        "no_kind": edited("tool_results", kind=_DROP),
        "a_number_kind": edited("tool_results", kind=7),
        "three_hundred_kinds": [*base, *({**base[1], "seq": 900 + n, "kind": f"custom_{n}"} for n in range(300))],
        "a_finished_call_said_unfinished": edited("tool_finished", outcome="unfinished"),
        "a_number_tool": edited("tool_finished", tool=1),
        "a_true_outcome": edited("tool_finished", outcome=True),
        "a_list_mode": edited("tool_finished", mode=["read"]),
        "a_number_mode": edited("tool_finished", mode=2),
        "no_tool": edited("tool_finished", tool=_DROP),
        "no_start": edited("tool_finished", start=_DROP),
        "no_mode": edited("tool_finished", mode=_DROP),
        "usage_without_cache_counts": edited("model_called", usage={"input_tokens": 10, "output_tokens": 3}),
        "calls_out_of_order": [
            {**e, "index": 5 - e.get("index", 0)} if e["kind"] in ("tool_started", "tool_finished") else e for e in base
        ],
        "a_blank_line": text.replace("\n", "\n\n", 1),
        "crlf": text.replace("\n", "\r\n"),
        "no_final_newline": text[:-1],
        "a_bom": b"\xef\xbb\xbf" + text.encode(),
        "two_values_on_a_line": text.replace("\n", ",", 1),
        "empty": "",
        "a_newer_schema": [{**e, "v": 99} for e in base],
    }
    return out


_DROP = object()


def test_a_call_finished_before_it_started_loads_as_run_by_run(fixtures, tmp_path):
    """The ids of a run's calls in order, but one finish written before its start (an edited log): the
    reference finds that call left open, and so must the bulk path (its whole batch is then read run by run)."""
    base = _lines(fixtures["native"] / "unicode.jsonl")
    events = [dict(e) for e in base]
    start = next(n for n, e in enumerate(events) if e["kind"] == "tool_started")
    finish = next(n for n, e in enumerate(events) if e["kind"] == "tool_finished")
    events[start], events[finish] = events[finish], events[start]
    _write(tmp_path / "a.jsonl", [{**e, "run_id": "good"} for e in base])
    _write(tmp_path / "b.jsonl", events)
    traces = assert_loads_as_the_reference(tmp_path)
    assert traces is not None and "unfinished" in set(traces.calls["outcome"])


def test_damaged_and_unusual_logs_load_in_bulk_as_run_by_run(fixtures, tmp_path):
    """Cut lines, NaN tags, blobs, resumed runs, lone surrogates, runs still being written, calls never finished,
    fields of every wrong type: each folder loads the same both ways, and the good logs beside the bad still
    load in bulk."""
    base = _lines(fixtures["native"] / "unicode.jsonl")
    assert {"tool_started", "tool_finished", "model_called", "run_finished"} <= {e["kind"] for e in base}
    variants = _variants(base)
    for name, content in variants.items():
        folder = tmp_path / name
        folder.mkdir()
        good = [{**e, "run_id": "good-0"} for e in base]
        _write(folder / "a-good.jsonl", good)
        log = folder / "b-variant.jsonl"
        if isinstance(content, bytes):
            log.write_bytes(content)
        elif isinstance(content, str):
            log.write_text(content, encoding="utf-8")
        else:
            _write(log, [{**e, "run_id": "variant"} if e.get("run_id") == "unicode" else e for e in content])
        _write(folder / "c-good.jsonl", [{**e, "run_id": "good-2"} for e in base])
        fast = assert_loads_as_the_reference(folder)
        assert bulk_used(fast), name
    mixed = tmp_path / "all"  # every variant in one folder: the parts are joined in file order
    mixed.mkdir()
    for n, name in enumerate(variants):
        shutil.copy(tmp_path / name / "b-variant.jsonl", mixed / f"{n:02d}-{name}.jsonl")
        _write(mixed / f"{n:02d}-{name}-good.jsonl", [{**e, "run_id": f"good-{n}"} for e in base])
    assert_loads_as_the_reference(mixed)


_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_FIELDS = [
    "step",
    "seq",
    "t",
    "run_id",
    "usage",
    "cost",
    "spent",
    "latency",
    "content",
    "stop_reason",
    "estimated",
    "server_tool_cost",
    "recorded_cost",
    "call_id",
    "index",
    "tool",
    "mode",
    "args",
    "outcome",
    "attempts",
    "is_error",
    "start",
    "end",
    "result",
    "budget",
    "steps",
    "elapsed",
    "model_calls",
    "nudges",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(_FIELDS), _value), min_size=1, max_size=3))
def test_any_field_of_any_type_loads_in_bulk_as_run_by_run(fixtures, tmp_path_factory, edits):
    """A native log with a few fields set to random JSON values: the same frames and warnings both ways."""
    base = _lines(fixtures["native"] / "unicode.jsonl")
    events = [dict(e) for e in base]
    for at, name, value in edits:
        events[at % len(events)][name] = value
    folder = tmp_path_factory.mktemp("edited")
    _write(folder / "a.jsonl", base)
    _write(folder / "b.jsonl", events)
    assert_loads_as_the_reference(folder)


def test_a_repr_builds_no_frame_and_the_data_column_stays_unparsed(fixtures, tmp_path):
    folder = tmp_path / "native"
    shutil.copytree(fixtures["native"], folder)
    traces = al.load_runs(folder)
    assert "runs" in repr(traces)
    batches = [p for p in traces._parts or [] if isinstance(p, Batch)]
    assert batches and not any(name in b.__dict__ for b in batches for name in ("runs", "steps", "calls", "events"))
    data = traces.events["data"]
    assert all(v is None for v in data.array._parsed)  # nothing parsed until read
    first = data.iloc[0]
    assert isinstance(first, dict) and "run_id" not in first and "kind" not in first
    assert isinstance(traces.calls["args"].iloc[0], dict)  # args parsed when read, from the kept bytes


def test_the_data_column_filtered_sliced_or_joined_reads_the_events_of_the_reference(fixtures, tmp_path):
    """The lines of the logs are found when a row of ``data`` is first read, by any view of the column: a
    filter, a slice, a reversed take or a concatenation reads the same dicts as the per-run path."""
    folder = tmp_path / "native"
    shutil.copytree(fixtures["native"], folder)
    fast, _, _ = load(folder, bulk=True)
    ref, _, _ = load(folder, bulk=False)
    assert fast is not None and ref is not None and bulk_used(fast)
    f, r = fast.events, ref.events
    views = [
        lambda e: e[e["kind"] == "tool_finished"]["data"],
        lambda e: e["data"].iloc[3:40],
        lambda e: e["data"].iloc[::-1],
        lambda e: pd.concat([e["data"].iloc[5:9], e["data"].iloc[:2]]),
    ]
    for view in views:
        assert list(view(f)) == list(view(r))
    assert f["data"].iloc[-1] == r["data"].iloc[-1]

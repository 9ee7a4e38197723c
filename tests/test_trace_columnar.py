"""The columnar store: the same frames as the logs, safe against a kill, fresh while runs are written, SQL."""

from __future__ import annotations

import asyncio
import math
import shutil
import textwrap
import warnings
from pathlib import Path

import pandas as pd
import pytest

import agentlab as al
from agentlab import reply
from agentlab.cli import main
from agentlab.trace import StoredTraceWriter, TraceWriter, compact

from .helpers import PRICES, killed_when_it_says
from .trace_fixtures import a_run, assert_at_most_once_outside, assert_same_frames, every_fixture, from_logs, lookup

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "fixtures" / "recorded"


@pytest.fixture(autouse=True)
def no_store_worker_left():
    """A test that stored runs in the background ends its thread and worker process (they would idle on)."""
    yield
    from agentlab.trace import _background

    assert _background.shutdown(timeout=60)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """A folder of native runs and one of every recorded fixture imported."""
    return every_fixture(tmp_path_factory)


@pytest.mark.parametrize("kind", ["native", "imported"])
def test_the_store_gives_the_same_frames_as_the_logs_on_every_fixture(fixtures, kind, tmp_path):
    """Every fixture, native and imported: frames from the store equal those from the logs, dtypes included."""
    folder = tmp_path / kind
    shutil.copytree(fixtures[kind], folder)
    logs = from_logs(folder)
    assert len(logs) >= 3
    counts = compact(folder)
    assert counts["stored"] == len(list(folder.glob("*.jsonl"))) and counts["parts"] >= 1
    stored = al.load_runs(folder)
    assert set(stored.sources.values()) == {"store"}  # read from the store, no log parsed
    assert_same_frames(logs, stored)
    one = logs.runs["run_id"].iloc[-1]
    assert stored.run(one).messages == logs.run(one).messages  # a run's Trace: read from its log when asked for
    assert [t.run_id for t in stored] == [t.run_id for t in logs]


def test_a_run_still_being_written_is_read_from_its_log_beside_stored_runs(tmp_path):
    """A tool that loads the folder mid-run sees its own run (incomplete, its steps so far) beside the stored ones."""
    folder = tmp_path / "runs"
    for i in range(2):
        al.run(
            "stored",
            [lookup],
            model=al.ScriptedModel([reply("done")]),
            trace=folder,
            max_cost=None,
            run_id=f"a{i}",
        )
    compact(folder)
    seen: list[al.Traces] = []

    @al.tool(mode="read")
    def peek() -> str:
        """Load the folder."""
        seen.append(al.load_runs(folder))
        return "ok"

    writer = StoredTraceWriter(folder)
    al.run(
        "live",
        [peek],
        model=al.ScriptedModel([reply(None, ("peek", {})), reply("done")]),
        trace=writer,
        max_cost=None,
        run_id="b-live",
    )
    during = seen[0]
    assert writer.flush()
    assert dict(zip(during.runs["run_id"], during.runs["outcome"], strict=True)) == {
        "a0": "done",
        "a1": "done",
        "b-live": "incomplete",
    }
    assert list(during.steps[during.steps["run_id"] == "b-live"]["step"]) == [1]
    after = al.load_runs(folder)
    assert {r for r, s in after.sources.items() if s == "store"} == {
        "a0",
        "a1",
        "b-live",
    }  # the writer stored it once it finished
    assert_same_frames(from_logs(folder), after)


def test_a_log_that_grew_after_it_was_stored_is_read_from_the_log_until_compacted_again(tmp_path):
    """A run resumed after it was stored appends to its log: the stale stored copy is not used, and
    compaction replaces it."""
    folder = tmp_path / "runs"
    script = [reply(None, ("lookup", {"key": str(i)})) for i in range(3)] + [reply("done")]
    run = al.Run(
        "resumed",
        [lookup],
        model=al.ScriptedModel(script),
        max_cost=None,
        max_steps=2,
        run_id="again",
    )
    run.subscribe(TraceWriter(folder))
    assert asyncio.run(run.run()).reason == "step limit"
    al.run(
        "other",
        [lookup],
        model=al.ScriptedModel([reply("done")]),
        trace=folder,
        max_cost=None,
        run_id="other",
    )
    compact(folder)
    run.resume(max_steps=8)
    assert isinstance(asyncio.run(run.run()), al.Done)
    logs = from_logs(folder)
    assert len(logs.steps[logs.steps["run_id"] == "again"]) == 4
    assert_same_frames(logs, al.load_runs(folder))
    assert compact(folder) == {"stored": 1, "fresh": 1, "parts": 1, "repaired": 0}
    again = al.load_runs(folder)
    assert list(again.sources.values()).count("store") == 2
    assert_same_frames(logs, again)


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentlab.trace import _compact, _store

    where, folder = sys.argv[1], Path(sys.argv[2])
    calls = {"table": 0}
    write_table, commit = _store._write_table, _store.commit

    def stop_here():
        print("stopped", flush=True)
        sys.stdin.readline()  # never answered: the parent kills us here

    def half_written(table, path):
        calls["table"] += 1
        if where == "mid-file" and calls["table"] == 7:  # the steps file of the second part, half on disk
            import io, pyarrow.parquet as pq
            buf = io.BytesIO()
            pq.write_table(table, buf)
            tmp = path.with_name(f".{path.name}.dead.tmp")
            tmp.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
            stop_here()
        write_table(table, path)

    def unlink_then_stop(self, *a, **kw):
        type(self).unlink = unlink
        unlink(self, *a, **kw)
        stop_here()

    def merged(root, old, new):
        global unlink
        if where == "mid-merge" and old and new:  # killed inside the swap: old runs files gone, the rest not
            unlink = Path.unlink
            Path.unlink = unlink_then_stop
        commit(root, old, new)

    _store._write_table, _store.commit, _compact.commit = half_written, merged, merged
    _compact.compact(folder, batch=2)
    print("finished", flush=True)
    """
)


@pytest.mark.parametrize("where", ["mid-file", "mid-merge"])
def test_sigkill_during_compaction_leaves_a_store_that_loads_the_same_frames(tmp_path, where):
    """Killed while writing a file, or between a merge and its clean-up: the folder loads to the same frames,
    with no warning, and the next compaction finishes the job."""
    folder = tmp_path / "runs"
    for i in range(5):
        al.run(
            f"task {i}",
            [lookup],
            model=al.ScriptedModel([reply(None, ("lookup", {"key": str(i)})), reply("done")]),
            trace=folder,
            prices=PRICES,
            clock=al.FakeClock(),
            max_cost=1.0,
            run_id=f"r{i}",
        )
    logs = from_logs(folder)
    killed_when_it_says(b"stopped\n", KILL_SCRIPT, where, str(folder), why=f"the child never reached {where}")
    assert_at_most_once_outside(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after_kill = al.load_runs(folder)
    assert "store" in after_kill.sources.values()  # the parts written before the kill are used
    assert_same_frames(logs, after_kill)
    compact(folder)
    healed = al.load_runs(folder)
    assert list(healed.sources.values()).count("store") == 5
    assert_same_frames(logs, healed)
    runs_parts = list((folder / "_store" / "runs").glob("day=*/part-*.parquet"))
    assert len(runs_parts) == 1
    assert all(len(seen) == 5 for seen in assert_at_most_once_outside(folder).values())


def test_sql_answers_over_the_store_and_counts_runs_not_stored_yet(tmp_path):
    """The README's query: a DataFrame equal to the pandas answer over load_runs, including a run added since."""
    folder = tmp_path / "runs"
    for i, model in enumerate(["claude-sonnet-4-5", "claude-sonnet-4-5", "claude-haiku-4-5"]):
        al.run(
            f"t{i}",
            [lookup],
            model=al.ScriptedModel([reply(None, ("lookup", {"key": "k"})), reply("done")], model=model),
            trace=folder,
            prices=PRICES,
            max_cost=1.0,
            run_id=f"s{i}",
        )
    answer = al.sql(
        "select model, count(*) as runs, avg(cost) as cost from runs group by model order by model",
        folder,
    )
    frames = al.load_runs(folder).runs
    expected = frames.groupby("model")["cost"].agg(["count", "mean"]).sort_index()
    assert list(answer["model"]) == list(expected.index)
    assert list(answer["runs"]) == list(expected["count"])
    assert answer["cost"].tolist() == pytest.approx(expected["mean"].tolist())
    tools = al.sql(
        "select data->>'tool' as tool, count(*) as n from events where kind = 'tool_finished' group by 1",
        folder,
    )
    assert tools.to_dict("records") == [{"tool": "lookup", "n": 3}]
    with pytest.raises(ValueError, match="non-empty SQL"):
        al.sql("  ", folder)


def test_agentlab_compact_stores_a_folder_and_says_so(tmp_path, capsys):
    folder = tmp_path / "runs"
    al.run("q", model=al.ScriptedModel([reply("hi")]), trace=folder, max_cost=None, run_id="one")
    assert main(["compact", str(folder)]) == 0
    assert "1 run(s) stored" in capsys.readouterr().out
    assert main(["compact", str(folder)]) == 0
    assert "0 run(s) stored, 1 already fresh" in capsys.readouterr().out
    assert main(["compact", str(tmp_path / "nowhere")]) == 2
    assert "no runs folder" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")  # Ray Data's own defaults, not ours
def test_the_ray_data_example_reads_the_store_as_it_stands(local_ray, tmp_path):
    """docs/traces.md: Ray Data reads the store's Parquet (partition folders and all) without agentlab."""
    import ray.data

    folder = tmp_path / "runs"
    for i in range(3):
        al.run(
            f"t{i}",
            [lookup],
            model=al.ScriptedModel([reply(None, ("lookup", {"key": "k"})), reply("done")]),
            trace=folder,
            prices=PRICES,
            max_cost=1.0,
        )
    compact(folder)
    frames = al.load_runs(folder).steps
    steps = ray.data.read_parquet(str(folder / "_store" / "steps"))
    assert steps.count() == len(frames) and {"run_id", "cost", "day"} <= set(steps.schema().names)
    cost = steps.to_pandas().groupby("run_id")["cost"].sum()
    assert cost.to_dict() == pytest.approx(frames.groupby("run_id")["cost"].sum().to_dict())


def test_a_stored_run_whose_log_was_deleted_still_loads_from_the_store(tmp_path):
    """The store stands alone: with a log gone, its run keeps its rows and its Trace is rebuilt from the events."""
    folder = tmp_path / "runs"
    for i in range(2):
        a_run(folder, f"k{i}", steps=1)
    before = al.load_runs(folder)
    messages = before.run("k0").messages
    compact(folder)
    (folder / "k0.jsonl").unlink()
    after = al.load_runs(folder)
    assert list(after.runs["run_id"]) == ["k0", "k1"]
    assert_same_frames(before, after)
    assert after.run("k0").messages == messages


def test_runs_stored_as_they_finish_are_merged_so_the_files_stay_few(tmp_path):
    """Sixteen parts of a tier become one: 40 runs stored one by one leave 10 parts, not 40, and the same frames."""
    folder = tmp_path / "runs"
    writer = StoredTraceWriter(folder)
    for i in range(40):
        al.run(
            "q",
            model=al.ScriptedModel([reply("hi")]),
            trace=writer,
            max_cost=None,
            run_id=f"r{i:03d}",
        )
        assert writer.flush()  # one part per run (the background would batch runs this close together)
    tiers = sorted(p.name.split("-")[1] for p in (folder / "_store" / "runs").glob("day=*/part-*.parquet"))
    assert tiers == ["0"] * 8 + ["1"] * 2
    stored = al.load_runs(folder)
    assert list(stored.sources.values()) == ["store"] * 40
    assert_same_frames(from_logs(folder), stored)


def test_the_lazily_parsed_data_column_works_like_dicts(tmp_path):
    """events.data from the store: a mask from .map, filtering, concatenation and NaN all behave as with dicts."""
    folder = tmp_path / "runs"
    script = [reply(None, ("lookup", {"key": "a"})), reply("done")]
    run = al.Run("q", [lookup], model=al.ScriptedModel(script), run_id="lazy", max_cost=None)
    with TraceWriter(folder) as w:
        run.subscribe(w)
        run.note("measure", score=math.nan)
        asyncio.run(run.run())
    compact(folder)
    events = al.load_runs(folder).events
    assert str(events["data"].dtype) == "json"
    mask = events["data"].map(lambda d: "score" in d)
    assert mask.dtype == bool and mask.sum() == 1
    (measure,) = events[mask]["data"]
    assert math.isnan(measure["score"])
    both = pd.concat([events, events], ignore_index=True)
    assert both["data"].iloc[len(events) + 1] == events["data"].iloc[1]
    finished = events[events["kind"] == "tool_finished"]["data"].iloc[0]
    assert finished["result"] == "value of a" and finished["args"] == {"key": "a"}


def test_the_data_column_left_on_disk_still_reads_after_a_rebuild_removed_its_files(tmp_path):
    """events.data and calls.args are read from the store only when a row is read; a rebuild that
    replaces the store's files in between takes nothing away (the load holds them open)."""
    folder = tmp_path / "runs"
    script = [reply(None, ("lookup", {"key": "a"}), ("lookup", {"key": "b"})), reply("done")]
    for i in range(3):
        al.run("q", [lookup], model=al.ScriptedModel(script), trace=folder, max_cost=None, run_id=f"d{i}")
    logs = from_logs(folder)
    compact(folder)
    stored = al.load_runs(folder)
    old = sorted(p.name for p in (folder / "_store").rglob("*.parquet"))
    compact(folder, rebuild=True)
    assert not set(old) & {p.name for p in (folder / "_store").rglob("*.parquet")}  # every file replaced
    assert_same_frames(logs, stored)
    assert stored.calls["args"].iloc[1] == {"key": "b"}


def test_frames_loaded_from_the_store_pickle_with_their_data(tmp_path):
    """A frame whose data column is still on disk pickles whole (to_pickle, a Ray task's argument)."""
    import pickle

    folder = tmp_path / "runs"
    script = [reply(None, ("lookup", {"key": "a"})), reply("done")]
    al.run("q", [lookup], model=al.ScriptedModel(script), trace=folder, max_cost=None, run_id="p")
    compact(folder)
    stored = al.load_runs(folder)
    events = pickle.loads(pickle.dumps(stored.events))
    calls = pickle.loads(pickle.dumps(stored.calls))
    assert_same_frames(from_logs(folder), stored)
    assert list(events["data"]) == list(stored.events["data"])
    assert calls["args"].iloc[0] == {"key": "a"}

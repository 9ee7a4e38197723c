"""Runs stored off their path: the run does not wait for the store, and nothing is lost, hidden or left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest

import agentlab as al
from agentlab import reply
from agentlab.trace import StoredTraceWriter, TraceWriteWarning, _background, compact

from .helpers import PRICES, within
from .trace_fixtures import assert_same_frames, from_logs, lookup

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def no_store_thread_left():
    """Every test ends with nothing pending and no store thread alive (a leak would show here); one that an
    earlier test left idle (an experiment hands its runs to the background) is ended first."""
    assert _background.shutdown(timeout=60)
    yield
    assert _background.shutdown(timeout=60)
    assert not [t for t in threading.enumerate() if t.name == "agentlab-store"]


@pytest.fixture
def batcher(monkeypatch):
    """The process's batcher, replaced by one whose store step the test controls."""

    def use(store):
        b = _background.StoreBatcher(store=store)
        monkeypatch.setattr(_background, "_batcher", b)
        return b

    return use


def a_run(folder: Path, run_id: str, writer: StoredTraceWriter | None = None) -> al.Result:
    return al.run(
        f"task {run_id}",
        [lookup],
        model=al.ScriptedModel([reply(None, ("lookup", {"key": run_id})), reply("done")]),
        trace=writer or StoredTraceWriter(folder),
        prices=PRICES,
        clock=al.FakeClock(),
        max_cost=1.0,
        run_id=run_id,
    )


def test_a_run_returns_before_it_is_stored_and_loads_the_same_from_its_log_meanwhile(tmp_path, batcher):
    """The store write happens off the run's path: while it is held back, the run has already returned, and
    load_runs reads it from its log; once stored, it reads it from the store, with the same frames both times."""
    from agentlab.trace._compact import store_runs

    folder = tmp_path / "runs"
    go = threading.Event()
    started = threading.Event()

    def held(where, files):
        started.set()
        assert go.wait(60), "the test never let the store write go on"
        return store_runs(where, files)

    batcher(held).linger_s = 3600.0  # batches made by flush alone, not by how fast the two runs finish
    writer = StoredTraceWriter(folder)
    a_run(folder, "first", writer)
    assert isinstance(a_run(folder, "second", writer), al.Done)  # returned, though nothing is stored yet
    assert not (folder / "_store").exists()
    meanwhile = al.load_runs(folder)
    assert meanwhile.sources == {"first": "log", "second": "log"}
    go.set()
    assert writer.flush(timeout=60) and started.is_set()
    after = al.load_runs(folder)
    assert after.sources == {"first": "store", "second": "store"}
    assert_same_frames(meanwhile, after)
    assert len(list((folder / "_store" / "runs").rglob("part-*.parquet"))) == 1  # both runs in one batch


def test_a_failed_background_store_is_warned_in_the_callers_thread(tmp_path, batcher):
    """A store write that fails is not swallowed: flush (or the next finished run) warns, naming the runs and the fix;
    the runs still load from their logs."""

    def broken(where, files):
        raise OSError(28, "No space left on device")

    batcher(broken)
    folder = tmp_path / "runs"
    a_run(folder, "lost-store")
    with pytest.warns(TraceWriteWarning, match=r"1 finished run\(s\) \(lost-store\).*No space left.*agentlab compact"):
        assert StoredTraceWriter(folder).flush(timeout=60)
    assert al.load_runs(folder).sources == {"lost-store": "log"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StoredTraceWriter(folder).flush(timeout=60)  # reported once, not again


def test_compact_in_the_same_process_stores_a_pending_run_once(tmp_path, batcher):
    """compact() first writes what the background holds, so no run ends up in two parts (SQL would count it twice)."""
    from agentlab.trace._compact import store_runs

    calls: list[list[str]] = []

    def counted(where, files):
        calls.append([f.stem for f in files])
        return store_runs(where, files)

    b = batcher(counted)
    b.linger_s = 3600.0  # would wait an hour for company: only compact's flush writes it
    folder = tmp_path / "runs"
    a_run(folder, "once")
    assert compact(folder) == {"stored": 0, "fresh": 1, "parts": 1, "repaired": 0}
    assert calls == [["once"]]
    assert al.sql("select count(*) as n from runs", folder)["n"].tolist() == [1]


EXIT_SCRIPT = textwrap.dedent(
    """
    import sys
    # Importing it raises from here on: an import at shutdown that registers an exit hook (this one does) is
    # refused once the interpreter is exiting, so the exit's write must need none (the worker process imports
    # the store's libraries, not this one).
    sys.modules["concurrent.futures.thread"] = None
    from pathlib import Path
    import agentlab as al
    from agentlab import reply
    from agentlab.trace import StoredTraceWriter, _background

    folder, how = Path(sys.argv[1]), sys.argv[2]
    _background.batcher().linger_s = 3600.0  # nothing is written before exit unless exit writes it
    if how == "broken":
        def broken(where, files):
            raise PermissionError(13, "Permission denied")
        _background.batcher()._store = broken
    writer = StoredTraceWriter(folder)
    for i in range(3):
        al.run(f"task {i}", model=al.ScriptedModel([reply("done")]), trace=writer, max_cost=None, run_id=f"x{i}")
    assert _background.batcher().pending() == {folder: [folder / f"x{i}.jsonl" for i in range(3)]}
    print("exiting", flush=True)
    """
)


def exit_child(folder: Path, how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, str(folder), how],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_pending_runs_are_stored_before_a_normal_exit(tmp_path):
    """A script that ends right after its runs: the exit writes them to the store before the process leaves."""
    folder = tmp_path / "runs"
    out = exit_child(folder, "ok")
    assert out.returncode == 0 and "exiting" in out.stdout, out.stderr[-2000:]
    assert "agentlab:" not in out.stderr
    stored = al.load_runs(folder)
    assert stored.sources == {f"x{i}": "store" for i in range(3)}
    assert_same_frames(from_logs(folder), stored)


def test_an_exit_that_could_not_store_its_runs_says_so(tmp_path):
    """The exit does not hide a failed store: stderr names the runs, the folder and the command that adds them."""
    folder = tmp_path / "runs"
    out = exit_child(folder, "broken")
    assert out.returncode == 0 and "exiting" in out.stdout, out.stderr[-2000:]
    assert "3 finished run(s) (x0, x1, x2) were not all added to the store" in out.stderr
    assert f"agentlab compact {folder}" in out.stderr
    assert al.load_runs(folder).sources == {f"x{i}": "log" for i in range(3)}


KILL_POINT = textwrap.dedent(
    """
    import os, sys, threading
    from agentlab.trace import _compact, _store, _store_worker

    batches = {"n": 0}
    store_runs, write_table = _compact.store_runs, _store._write_table

    def counted(folder, files, **kw):
        batches["n"] += 1
        return store_runs(folder, files, **kw)

    def half_written(table, path):
        if batches["n"] == 2 and path.parent.parent.name == "steps":  # the second batch's steps file, half on disk
            import io, pyarrow.parquet as pq
            buf = io.BytesIO()
            pq.write_table(table, buf)
            tmp = path.with_name(f".{path.name}.dead.tmp")
            tmp.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
            print(f"stopped {os.getpid()}", file=sys.stderr, flush=True)
            threading.Event().wait()  # never set: the test kills this worker here
        write_table(table, path)

    _compact.store_runs, _store._write_table = counted, half_written
    _store_worker.main()
    """
)

WORKER_GIVEN = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import agentlab as al
    from agentlab import reply
    from agentlab.trace import StoredTraceWriter, _background

    folder, worker = Path(sys.argv[1]), sys.argv[2]
    _background.WORKER_COMMAND[:] = [sys.executable, "-c", worker]
    _background.batcher().linger_s = 3600.0  # batches made by flush alone, not by the clock
    writer = StoredTraceWriter(folder)
    """
)
"""The head of a parent script whose store worker is the script given as its second argument."""

KILL_SCRIPT = WORKER_GIVEN + textwrap.dedent(
    """
    for i in range(5):
        al.run(f"task {i}", model=al.ScriptedModel([reply("done")]), trace=writer, max_cost=None, run_id=f"k{i}")
        if i in (1, 4):
            writer.flush()  # the first batch (k0, k1) is stored whole; the second (k2-k4) is killed mid-file
    """
)


def _spawn(script: str, folder: Path, *args: str) -> subprocess.Popen[bytes]:
    """A child Python running ``script`` on ``folder`` with this checkout's package; its stderr kept for the test."""
    return subprocess.Popen(
        [sys.executable, "-c", script, str(folder), *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_sigkill_during_a_background_write_leaves_every_run_readable(tmp_path):
    """The process and its store worker killed while the worker writes a part: the runs stored before load from the
    store, the others from their logs, all with the frames the logs give and no warning; compaction stores the rest."""
    folder = tmp_path / "runs"
    proc = _spawn(KILL_SCRIPT, folder, KILL_POINT)
    worker = None
    try:

        def stopped() -> int:
            said = []
            for line in proc.stderr:  # until the worker says where it stopped (or the child ends)
                said.append(line.decode(errors="replace"))
                if line.startswith(b"stopped "):
                    return int(line.split()[1])
            raise AssertionError("the worker never reached the write: " + "".join(said)[-2000:])

        worker = within(300, stopped, "the worker never reached the write")
        proc.send_signal(signal.SIGKILL)
        os.kill(worker, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after_kill = al.load_runs(folder)
    assert after_kill.sources == {"k0": "store", "k1": "store", "k2": "log", "k3": "log", "k4": "log"}
    assert list((folder / "_store").rglob(".*.tmp"))  # the half-written file is there, and ignored
    logs = from_logs(folder)
    assert_same_frames(logs, after_kill)
    assert compact(folder)["stored"] == 3
    healed = al.load_runs(folder)
    assert set(healed.sources.values()) == {"store"}
    assert_same_frames(logs, healed)


def test_a_failed_store_in_the_worker_process_is_warned(tmp_path):
    """The worker's own failure (here the store's folder is a file) comes back to the caller as a warning."""
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "_store").write_text("not a folder")
    a_run(folder, "blocked")
    with pytest.warns(TraceWriteWarning, match=r"\(blocked\) were not all added to the store.*agentlab compact"):
        assert StoredTraceWriter(folder).flush(timeout=120)
    assert al.load_runs(folder).sources == {"blocked": "log"}


WAIT_FOR_PARENT = textwrap.dedent(
    """
    import os, select, sys
    from agentlab.trace import _store, _store_worker

    write_table = _store._write_table

    def after_the_parent(table, path):
        if path.parent.parent.name == "steps" and not os.environ.get("SAID"):
            os.environ["SAID"] = "1"
            print(f"writing {os.getpid()}", file=sys.stderr, flush=True)
            select.select([sys.stdin], [], [])  # readable once the parent is gone (its end of the pipe closed)
        write_table(table, path)

    _store._write_table = after_the_parent
    _store_worker.main()
    """
)

PARENT_SCRIPT = WORKER_GIVEN + textwrap.dedent(
    """
    for i in range(3):
        al.run(f"task {i}", model=al.ScriptedModel([reply("done")]), trace=writer, max_cost=None, run_id=f"p{i}")
    writer.flush()  # killed in here, while the worker writes the batch
    """
)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits for the worker's exit through a pidfd (Linux)")
def test_a_worker_whose_parent_is_killed_finishes_its_batch_then_exits(tmp_path):
    """SIGKILL the process mid-batch: its worker still writes the whole part, then exits, so the runs are stored."""
    import select

    folder = tmp_path / "runs"
    proc = _spawn(PARENT_SCRIPT, folder, WAIT_FOR_PARENT)
    try:

        def writing() -> int:
            said = []
            for line in proc.stderr:
                said.append(line.decode(errors="replace"))
                if line.startswith(b"writing "):
                    return int(line.split()[1])
            raise AssertionError("the worker never started writing: " + "".join(said)[-2000:])

        worker = within(300, writing, "the worker never started writing")
        exited = os.pidfd_open(worker)
        try:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
            assert select.select([exited], [], [], 120)[0], "the worker did not exit after its parent died"
        finally:
            os.close(exited)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()
    stored = al.load_runs(folder)
    assert stored.sources == {f"p{i}": "store" for i in range(3)}
    assert_same_frames(from_logs(folder), stored)


def test_an_experiment_returns_before_its_runs_are_stored_and_the_background_stores_them(tmp_path, batcher):
    """An experiment hands its finished runs to the background instead of writing the store on its path: when it
    returns they read from their logs, and once stored they read from the store, with the same frames."""
    from agentlab.trace._compact import store_runs

    batcher(store_runs).linger_s = 3600.0  # written by flush alone, not by the clock
    exp = al.Experiment(
        [{"id": f"t{i}", "input": f"look up {i}"} for i in range(3)],
        {"a": {"prices": PRICES}},
        tools=[lookup],
        model=lambda task, seed: al.ScriptedModel([reply(None, ("lookup", {"key": task.id})), reply("done")]),
        folder=tmp_path / "exp",
        progress=False,
    )
    assert list(exp.run().runs["outcome"]) == ["done"] * 3
    traces = exp.folder.traces
    assert sorted(f.name for f in _background.batcher().pending()[traces]) == sorted(
        f.name for f in traces.glob("*.jsonl")
    )
    before = al.load_runs(traces)
    assert set(before.sources.values()) == {"log"} and len(before.sources) == 3
    assert _background.flush(timeout=60)
    after = al.load_runs(traces)
    assert set(after.sources.values()) == {"store"} and len(after.sources) == 3
    assert_same_frames(before, after)


def test_an_experiment_grown_by_a_task_hands_the_background_only_the_run_not_stored_yet(tmp_path, batcher):
    """The second time an experiment runs in a folder whose runs are stored, only the new cell's run is handed
    over: the stored ones are recognised (by name and size) and not stored again."""
    from agentlab.trace._compact import store_runs

    batcher(store_runs).linger_s = 3600.0  # written by flush alone, not by the clock

    def experiment(n: int) -> al.Experiment:
        return al.Experiment(
            [{"id": f"t{i}", "input": f"look up {i}"} for i in range(n)],
            {"a": {"prices": PRICES}},
            tools=[lookup],
            model=lambda task, seed: al.ScriptedModel([reply(None, ("lookup", {"key": task.id})), reply("done")]),
            folder=tmp_path / "exp",
            progress=False,
        )

    first = experiment(2)
    first.run()
    assert _background.flush(timeout=60)
    grown = experiment(3)
    runs = grown.run().runs.set_index("task_id")
    assert [f.name for f in _background.batcher().pending()[grown.folder.traces]] == [
        f"{runs.loc['t2', 'run_id']}.jsonl"
    ]
    assert _background.flush(timeout=60)
    stored = al.load_runs(grown.folder.traces)
    assert set(stored.sources.values()) == {"store"} and len(stored.sources) == 3

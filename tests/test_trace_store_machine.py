"""A Hypothesis state machine drives a runs folder's store the way scripts, experiments and operators do.

Rules write runs (some stopped at a step limit), resume them (their logs grow), store batches of them, compact
in this process, and start one to three other processes that compact or store at once, one of them killed
(SIGKILL, by itself, so the point is chosen by the test and not by timing) before its k-th change to the store's
files. While those processes run, DuckDB reads the store's folder as it stands over and over. After every rule:

- a reader of the folder as it stands (DuckDB) finds no run in two parts of any table;
- ``load_runs`` gives each run once, with the frames the logs give;
- ``agentlab.sql(compact=False)`` counts no run twice, and never more steps for a run than its log holds.

At the end, a compaction leaves every run stored once, with the logs' frames and the logs' cost.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import agentlab as al
from agentlab import reply
from agentlab.trace import TraceWriter, compact
from agentlab.trace._compact import store_runs

from .helpers import PRICES, ROOT
from .trace_fixtures import assert_at_most_once_outside, assert_same_frames, from_logs, lookup

OTHER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path

    mode, folder, kill_at = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    if kill_at:  # killed before its kill_at-th change to a file of the store (a rename or a removal)
        changes, replace, unlink = [0], os.replace, Path.unlink

        def before_change(path):
            if "_store" in str(path):
                changes[0] += 1
                if changes[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)

        def counted_replace(src, dst, *args, **kwargs):
            before_change(dst)
            return replace(src, dst, *args, **kwargs)

        def counted_unlink(self, *args, **kwargs):
            before_change(self)
            return unlink(self, *args, **kwargs)

        os.replace, Path.unlink = counted_replace, counted_unlink
    if mode == "compact":
        from agentlab.trace import compact
        compact(folder)
    else:
        from agentlab.trace._compact import store_runs
        store_runs(folder, [folder / name for name in sys.argv[4:]])
    """
)
"""Another process that compacts the folder or stores some of its runs, killed at a chosen point (or not: 0)."""


class StoreMachine(RuleBasedStateMachine):
    @initialize()
    def folder(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="store-machine-"))
        self.runs = self.tmp / "runs"
        self.paused: dict[str, al.Run] = {}
        self.count = 0

    def teardown(self) -> None:
        if hasattr(self, "tmp"):
            try:
                if self.count:
                    compact(self.runs)
                    self._everything_stored_once()
            finally:
                shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------ rules
    @rule(steps=st.integers(1, 3), stop_early=st.booleans())
    def write_a_run(self, steps: int, stop_early: bool) -> None:
        run_id = f"m{self.count}"
        self.count += 1
        script = [reply(f"s{i}", ("lookup", {"key": f"{run_id}-{i}"})) for i in range(steps)] + [reply("done")]
        run = al.Run(
            f"task {run_id}",
            [lookup],
            model=al.ScriptedModel(script),
            prices=PRICES,
            clock=al.FakeClock(),
            max_cost=1.0,
            max_steps=1 if stop_early else 10,
            run_id=run_id,
        )
        run.subscribe(TraceWriter(self.runs))
        result = asyncio.run(run.run())
        if stop_early and not isinstance(result, al.Done):
            self.paused[run_id] = run

    @precondition(lambda self: bool(self.paused))
    @rule(data=st.data())
    def resume_a_run(self, data: st.DataObject) -> None:
        run_id = data.draw(st.sampled_from(sorted(self.paused)))
        run = self.paused.pop(run_id)
        run.resume(max_steps=10)
        assert isinstance(asyncio.run(run.run()), al.Done)

    @precondition(lambda self: self.count > 0)
    @rule(data=st.data())
    def store_some_runs(self, data: st.DataObject) -> None:
        names = data.draw(st.lists(st.sampled_from(self._logs()), min_size=1, max_size=4))
        store_runs(self.runs, [self.runs / n for n in names])

    @precondition(lambda self: self.count > 0)
    @rule()
    def compact_here(self) -> None:
        compact(self.runs)

    @precondition(lambda self: self.count > 0)
    @rule(
        modes=st.lists(st.sampled_from(["compact", "store"]), min_size=1, max_size=3),
        kill_at=st.integers(0, 24),
        data=st.data(),
    )
    def other_processes_at_once(self, modes: list[str], kill_at: int, data: st.DataObject) -> None:
        """One to three processes compact or store at once, the first killed before its ``kill_at``-th change."""
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs = []
        for i, mode in enumerate(modes):
            names = (
                data.draw(st.lists(st.sampled_from(self._logs()), min_size=1, max_size=4)) if mode == "store" else []
            )
            args = [mode, str(self.runs), str(kill_at if i == 0 else 0), *names]
            procs.append(subprocess.Popen([sys.executable, "-c", OTHER, *args], env=env, stderr=subprocess.PIPE))
        try:
            while any(p.poll() is None for p in procs):  # read the folder as it stands all the while
                assert_at_most_once_outside(self.runs)
        finally:
            for p in procs:
                _, err = p.communicate(timeout=600)
                assert p.returncode in (0, -9), err.decode(errors="replace")[-3000:]

    # ------------------------------------------------------------ what every reader sees
    @invariant()
    def no_reader_sees_a_run_twice(self) -> None:
        if not hasattr(self, "tmp") or not self.runs.is_dir():
            return
        assert_at_most_once_outside(self.runs)
        logs = from_logs(self.runs)
        loaded = al.load_runs(self.runs)
        assert sorted(loaded.runs["run_id"]) == sorted(logs.runs["run_id"]) == self._ids()
        assert_same_frames(logs, loaded)
        if (self.runs / "_store").is_dir():
            per_run = al.sql("select run_id, count(*) as n from steps group by run_id", self.runs, compact=False)
            runs = al.sql("select count(*) as n, count(distinct run_id) as ids from runs", self.runs, compact=False)
            assert runs["n"].iloc[0] == runs["ids"].iloc[0] <= len(self._ids())
            in_logs = logs.steps.groupby("run_id").size()
            assert all(n <= in_logs[r] for r, n in zip(per_run["run_id"], per_run["n"], strict=True))

    # ------------------------------------------------------------ helpers
    def _logs(self) -> list[str]:
        return sorted(p.name for p in self.runs.glob("*.jsonl"))

    def _ids(self) -> list[str]:
        return sorted(n.removesuffix(".jsonl") for n in self._logs())

    def _everything_stored_once(self) -> None:
        logs = from_logs(self.runs)
        stored = al.load_runs(self.runs)
        assert set(stored.sources.values()) <= {"store"}
        assert_same_frames(logs, stored)
        seen = assert_at_most_once_outside(self.runs)
        assert all(sorted(runs) == self._ids() for runs in seen.values())
        answer = al.sql("select count(*) as n, sum(cost) as cost from runs", self.runs, compact=False)
        assert answer["n"].iloc[0] == len(self._ids())
        assert answer["cost"].iloc[0] == pytest.approx(logs.runs["cost"].sum(), abs=1e-12)


StoreMachine.TestCase.settings = settings(
    max_examples=8,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_every_reader_sees_each_run_once_whatever_writes_resumes_compactions_and_kills_interleave = StoreMachine.TestCase

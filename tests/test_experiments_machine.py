"""A Hypothesis state machine over one experiment folder: runs stopped part-way, contended, resumed.

Each rule runs the experiment again on the same folder, with its own
concurrency, stopping it after some cells, and (sometimes) another owner
trying to take the folder while it runs. Invariants after every run: the
ledger opened with exactly what the folder's traces show was spent (runs
stopped mid-call included), the traces never total more than
``max_total_cost``, the ledger and the traces agree when it ends, nothing is
left reserved, a second owner was always refused, and no cell that had
finished ran again. (Real SIGKILLs are in ``test_experiments_processes.py``
and ``benchmarks/chaos_folders.py``: a process per example is too slow here.)
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import agentlab as al
from agentlab import FunctionModel, reply
from agentlab.experiments import FolderInUse
from agentlab.experiments.folder import Folder

from .helpers import PRICES


@al.tool
def lookup(key: str) -> str:
    """Look a key up."""
    return "value " * 10


def _parse(line: bytes) -> dict | None:
    """One trace line, or None for a line a kill left torn (the lab's reader skips those too)."""
    try:
        return json.loads(line)
    except ValueError:
        return None


def trace_money(folder: Path) -> float:
    total = 0.0
    for f in [*(folder / "traces").glob("*.jsonl"), *(folder / "attempts").glob("*.jsonl")]:
        events = [e for e in map(_parse, f.read_bytes().splitlines()) if e is not None]
        total += sum(e["cost"] for e in events if e["kind"] == "model_called")
        if events and events[-1]["kind"] == "model_request":
            total += events[-1].get("reserved", 0.0)
    return total


class FolderMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="agentlab-folder-machine-"))
        self.calls: list[str] = []
        self.finished: set[str] = set()
        self.total = 0.05
        self.n = 4
        self.words = 20

    def teardown(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def build(self, concurrency: int) -> al.Experiment:
        calls, words = self.calls, self.words

        def factory(task, seed):
            async def fn(messages, tools):
                calls.append(task.id)
                await asyncio.sleep(0)  # let other cells and Stop in between calls
                n = sum(1 for m in messages if m["role"] == "assistant")
                size = words + (seed + n) % 50
                return reply("x " * size, ("lookup", {"key": str(n)})) if n < 2 else reply("done " * size)

            return FunctionModel(fn)

        return al.Experiment(
            [{"id": f"t{i}", "input": f"q{i}"} for i in range(self.n)],
            {"a": {"prices": PRICES, "max_tokens": 300}},
            tools=[lookup],
            model=factory,
            folder=self.base,
            concurrency=concurrency,
            progress=False,
            max_total_cost=self.total,
        )

    @property
    def folder(self) -> Path:
        return self.base / "experiment"

    @initialize(total=st.floats(0.005, 0.06), n=st.integers(2, 7), words=st.integers(1, 200))
    def setup(self, total: float, n: int, words: int) -> None:
        self.total, self.n, self.words = total, n, words

    @rule(
        concurrency=st.integers(1, 4),
        stop_after=st.one_of(st.none(), st.integers(0, 4)),
        contend=st.booleans(),
    )
    def run_again(self, concurrency: int, stop_after: int | None, contend: bool) -> None:
        exp = self.build(concurrency)
        before = trace_money(self.folder) if self.folder.exists() else 0.0
        opening: list[float] = []
        refused: list[bool] = []
        finished = 0

        def watch(e: al.experiments.ExperimentEvent) -> None:
            nonlocal finished
            if e.kind == "experiment_started":
                opening.append(e.spent)
            elif e.kind == "cell_started" and contend and not refused:
                try:
                    with Folder(self.folder).own():
                        refused.append(False)
                except FolderInUse:
                    refused.append(True)
            elif e.kind == "cell_finished":
                finished += 1
            if stop_after is not None and finished >= stop_after and e.kind in ("cell_started", "cell_finished"):
                exp.stop()

        exp.subscribe(watch)
        calls_before = len(self.calls)
        result = exp.run()
        assert opening == [pytest.approx(before, abs=1e-9)]  # the ledger opened with everything spent so far
        assert all(refused)
        assert not set(self.calls[calls_before:]) & self.finished  # a finished cell never runs again
        after = trace_money(self.folder)
        assert after <= self.total + 1e-9
        assert exp.ledger is not None and exp.ledger.spent == pytest.approx(after, abs=1e-9)
        assert exp.ledger.reserved == pytest.approx(0.0, abs=1e-12)
        self.finished |= set(result.runs.loc[result.runs["outcome"] == "done", "task_id"])

    @invariant()
    def one_row_per_cell_is_kept(self) -> None:
        if self.folder.exists():
            kept = Folder(self.folder).finished_rows()
            assert {k[0] for k in kept} <= {f"t{i}" for i in range(self.n)}
            assert len(kept) == len({k[0] for k in kept})


FolderMachine.TestCase.settings = settings(max_examples=12, stateful_step_count=4, deadline=None)
test_folder_machine = FolderMachine.TestCase

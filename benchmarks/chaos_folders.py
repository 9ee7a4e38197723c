"""Chaos across processes: experiments killed with SIGKILL mid-call, a second process on the same folder, resume.

Each round, with its own seed (task count, reply sizes, total budget and the
call held in flight vary): a child process runs an offline experiment until
one chosen call is in flight; a second child then starts on the same folder
(it must be refused); the first is killed with SIGKILL; the experiment is
resumed here, to its end. The children and this process synchronise through
pipes (a line when the call is in flight), never through sleeps.

Counted, per round, with the goals of issue 24:

* **second owners**: the second process ran anything while the first held the folder;
* **forgotten money**: the resumed ledger's opening balance differs from what
  the traces show was spent (model calls' costs, plus the reservation of the
  call in flight at the kill), by more than a micro-dollar;
* **overspend**: all the folder's traces together spent more than ``max_total_cost``;
* **cells run twice / lost**: after the resume, each cell has exactly one
  finished row, and no cell that had finished before the kill ran again.

:func:`ray_rows` does the same for Ray workers killed mid-call (real local
Ray; skipped at the quick size, since starting Ray takes seconds): the lost
cell's row must cost what its trace shows, nothing may stay reserved, the
ledger must equal the traces, and a resume must finish every cell.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .report import Row, judged, missing

CHILD = textwrap.dedent('''
    import asyncio, os, sys
    import agentlab
    from agentlab import FunctionModel, Prices, reply, tool

    SEED = int(os.environ["CHAOS_SEED"])
    HOLD = os.environ.get("HOLD", "")
    CALLS = []

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return "value " * (5 + SEED % 40)

    def factory(task, seed):
        async def fn(messages, tools):
            n = sum(1 for m in messages if m["role"] == "assistant")
            CALLS.append((task.id, n + 1))
            if HOLD == f"{task.id}:{n + 1}":
                print("IN FLIGHT", flush=True)
                await asyncio.get_running_loop().create_future()  # until killed
            words = 10 + (seed + n * 7) % 90
            steps = 1 + seed % 3
            if n < steps:
                return reply("thinking " * words, ("lookup", {"key": str(n)}))
            return reply("done " * words)
        return FunctionModel(fn)

    def build(folder):
        rnd = __import__("random").Random(SEED)
        tasks = [{"id": f"t{i}", "input": f"question {i} of round {SEED}"} for i in range(rnd.randint(4, 10))]
        return agentlab.Experiment(
            tasks, {"a": {"prices": Prices(input=3, output=15), "max_tokens": rnd.choice([200, 400, 800])}},
            tools=[lookup], model=factory, folder=folder, concurrency=rnd.randint(1, 4), progress=False,
            max_total_cost=rnd.uniform(0.02, 0.12),
        )

    if __name__ == "__main__":
        build(sys.argv[1]).run()
        print("FINISHED", flush=True)
''')


@dataclass
class Tally:
    rounds: int = 0
    second_owners: int = 0
    forgotten: list[float] = field(default_factory=list)
    overspend: list[float] = field(default_factory=list)
    twice: int = 0
    lost: int = 0
    kills_in_flight: int = 0
    notes: list[str] = field(default_factory=list)


def _trace_money(folder: Path) -> float:
    """Dollars the folder's trace files show (earlier attempts included)."""
    return _trace_money_files([*(folder / "traces").glob("*.jsonl"), *(folder / "attempts").glob("*.jsonl")])


def _round(seed: int, base: Path, script: Path, tally: Tally) -> None:
    rnd = random.Random(seed)
    folder = base / f"r{seed}"
    env = {
        **os.environ,
        "CHAOS_SEED": str(seed),
        "HOLD": f"t{rnd.randint(0, 3)}:{rnd.randint(1, 2)}",
    }
    first = subprocess.Popen(
        [sys.executable, str(script), str(folder)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert first.stdout is not None
        in_flight = any(line.strip() == "IN FLIGHT" for line in first.stdout)  # blocks until the line (or the end)
        if in_flight:
            tally.kills_in_flight += 1
            second = subprocess.run(
                [sys.executable, str(script), str(folder)],
                capture_output=True,
                text=True,
                env={**env, "HOLD": ""},
                timeout=120,
            )
            if second.returncode == 0 or "FolderInUse" not in second.stderr:
                tally.second_owners += 1
                tally.notes.append(f"round {seed}: second process exit {second.returncode}")
            os.kill(first.pid, signal.SIGKILL)
    finally:
        first.kill()
        first.communicate(timeout=60)
    exp_folder = folder / "experiment"
    before_rows = _rows(exp_folder)
    finished_before = {r["task_id"] for r in before_rows if r["outcome"] == "done"}
    spent_in_traces = _trace_money(exp_folder)

    spec = importlib.util.spec_from_file_location(f"chaos_child_{seed}", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    saved = {k: os.environ.get(k) for k in ("CHAOS_SEED", "HOLD")}
    os.environ["CHAOS_SEED"], os.environ["HOLD"] = str(seed), ""
    try:
        spec.loader.exec_module(mod)  # the child's module, read here: HOLD is empty, so nothing is held
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    exp = mod.build(folder)
    result = exp.run()
    tally.rounds += 1
    gap = abs(exp.spent_before - spent_in_traces)
    if gap > 1e-6:
        tally.forgotten.append(gap)
        tally.notes.append(f"round {seed}: resumed with ${exp.spent_before:.6f}, traces show ${spent_in_traces:.6f}")
    total = _trace_money(exp_folder)
    if total > exp.max_total_cost + 1e-9:
        tally.overspend.append(total - exp.max_total_cost)
    ran_again = {t for t, _ in mod.CALLS} & finished_before
    tally.twice += len(ran_again)
    cells = {t.id for t in exp.tasks}
    if set(result.runs["task_id"]) != cells or len(result.runs) != len(cells):
        tally.lost += 1


def _rows(folder: Path) -> list[dict[str, Any]]:
    path = folder / "rows.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


async def folder_rows(rounds: int) -> list[Row]:
    """``rounds`` kill-and-resume rounds, one at a time (each spawns two Python processes)."""
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="agentlab-chaos-folders-") as d:
        script = Path(d) / "chaos_child.py"
        script.write_text(CHILD)
        for seed in range(rounds):
            await asyncio.to_thread(_round, seed, Path(d), script, tally)
    size = f"{tally.rounds} rounds ({tally.kills_in_flight} killed with a call in flight)"
    bad_money = len(tally.forgotten) + len(tally.overspend)
    return [
        Row(
            "chaos.folder_owners",
            "chaos: a second process ran a held folder",
            tally.second_owners,
            "rounds",
            f"{tally.second_owners} of {tally.kills_in_flight}",
            "0",
            judged(tally.second_owners == 0),
            note="; ".join(tally.notes)[:300],
            extra={"size": size},
        ),
        Row(
            "chaos.folder_money",
            "chaos: SIGKILL then resume, money forgotten or overspent",
            bad_money,
            "rounds",
            f"{len(tally.forgotten)} forgotten · {len(tally.overspend)} over the total, of {tally.rounds}",
            "0",
            judged(bad_money == 0),
            extra={
                "size": size,
                "forgotten": tally.forgotten[:5],
                "overspend": tally.overspend[:5],
            },
        ),
        Row(
            "chaos.folder_cells",
            "chaos: cells run twice or lost across kill and resume",
            tally.twice + tally.lost,
            "cells",
            f"{tally.twice} run twice · {tally.lost} rounds with a cell lost",
            "0",
            judged(tally.twice + tally.lost == 0),
            extra={"size": size},
        ),
    ]


def _ray_round(seed: int, base: Path, tally: Tally) -> None:
    import agentlab as al

    rnd = random.Random(seed)
    folder = base / f"ray{seed}"
    folder.mkdir()
    n = rnd.randint(3, 6)
    doomed = {f"t{i}": rnd.randint(1, 2) for i in rnd.sample(range(n), rnd.randint(1, 2))}  # task -> call it dies in

    def factory(task: Any, seed: int) -> Any:
        def fn(messages: Any, tools: Any) -> Any:
            calls = sum(1 for m in messages if m["role"] == "assistant") + 1
            marker = folder / f"killed-{task.id}"
            if doomed.get(task.id) == calls and not marker.exists():
                marker.write_text("x")
                os.kill(os.getpid(), signal.SIGKILL)  # the worker dies with this call in flight
            words = 10 + (seed + calls * 7) % 90
            return al.reply("x " * words, ("lookup", {"key": "k"})) if calls < 3 else al.reply("done " * words)

        return al.FunctionModel(fn)

    @al.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return "v " * 20

    def build() -> Any:
        return al.Experiment(
            [{"id": f"t{i}", "input": f"q{i} {seed}"} for i in range(n)],
            {"a": {"prices": al.Prices(3, 15), "max_tokens": 300}},
            tools=[lookup],
            model=factory,
            folder=folder,
            backend="ray",
            concurrency=2,
            progress=False,
            max_total_cost=rnd.uniform(0.05, 0.2),
        )

    exp_folder = folder / "experiment"
    first = build()
    runs = first.run().runs
    tally.rounds += 1
    lost = runs[runs["reason"] == "worker failed"]
    tally.kills_in_flight += len(lost)
    for _, row in lost.iterrows():
        shown = _trace_money_of(exp_folder / "traces" / f"{row['run_id']}.jsonl")
        if abs(row["cost"] - shown) > 1e-9:
            tally.forgotten.append(abs(row["cost"] - shown))
            tally.notes.append(f"round {seed}: lost cell billed ${row['cost']:.6f}, trace shows ${shown:.6f}")
    assert first.ledger is not None
    if first.ledger.reserved > 1e-12 or abs(first.ledger.spent - _trace_money(exp_folder)) > 1e-9:
        tally.forgotten.append(first.ledger.reserved + abs(first.ledger.spent - _trace_money(exp_folder)))
    second = build()
    again = second.run().runs.set_index("task_id")
    for task in lost[
        "task_id"
    ]:  # each lost cell ran again: done, or refused by the total (never still "worker failed")
        if task not in again.index or again.loc[task, "reason"] not in (
            "done",
            "experiment budget",
        ):
            tally.lost += 1
    total = _trace_money(exp_folder)
    if total > second.max_total_cost + 1e-9:
        tally.overspend.append(total - second.max_total_cost)


def _trace_money_of(path: Path) -> float:
    return _trace_money_files([path])


def _trace_money_files(files: list[Path]) -> float:
    """Dollars these trace files show: calls' costs, plus a reservation with no reply and no run end."""
    total = 0.0
    for f in files:
        events = []
        for line in f.read_bytes().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        total += sum(e.get("cost", 0.0) for e in events if e.get("kind") == "model_called")
        if events and events[-1].get("kind") == "model_request":
            total += events[-1].get("reserved", 0.0)
    return total


async def ray_rows(rounds: int) -> list[Row]:
    """``rounds`` experiments on the real local Ray, each with one or two workers killed mid-call, then resumed."""
    key, label, goal = (
        "chaos.ray_workers",
        "chaos: Ray workers killed mid-call, money or cells lost",
        "0",
    )
    if rounds <= 0:
        return [missing(key, label, goal, "n/a (skipped at quick size: starting Ray takes ~25 s)")]
    try:
        import ray
    except ImportError:
        return [missing(key, label, goal, "n/a (ray not installed: pip install 'agentlab[ray]')")]
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tally = Tally()
    try:
        with tempfile.TemporaryDirectory(prefix="agentlab-chaos-ray-") as d:
            for seed in range(rounds):
                await asyncio.to_thread(_ray_round, seed, Path(d), tally)
    finally:
        if started:
            ray.shutdown()
    bad = len(tally.forgotten) + len(tally.overspend) + tally.lost
    return [
        Row(
            key,
            label,
            bad,
            "rounds",
            f"{len(tally.forgotten)} money forgotten · {len(tally.overspend)} over the total · {tally.lost} cells "
            "lost, "
            f"of {tally.rounds} rounds ({tally.kills_in_flight} workers killed)",
            goal,
            judged(bad == 0),
            note="; ".join(tally.notes)[:300],
            extra={"rounds": tally.rounds, "killed": tally.kills_in_flight},
        )
    ]

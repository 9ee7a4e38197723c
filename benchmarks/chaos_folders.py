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

from .report import Row, judged

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
    """Dollars the folder's trace files show: calls' costs, plus a reservation with no reply and no run end."""
    total = 0.0
    for f in [*(folder / "traces").glob("*.jsonl"), *(folder / "attempts").glob("*.jsonl")]:
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


def _round(seed: int, base: Path, script: Path, tally: Tally) -> None:
    rnd = random.Random(seed)
    folder = base / f"r{seed}"
    env = {**os.environ, "CHAOS_SEED": str(seed), "HOLD": f"t{rnd.randint(0, 3)}:{rnd.randint(1, 2)}"}
    first = subprocess.Popen([sys.executable, str(script), str(folder)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert first.stdout is not None
        in_flight = any(line.strip() == "IN FLIGHT" for line in first.stdout)  # blocks until the line (or the end)
        if in_flight:
            tally.kills_in_flight += 1
            second = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True,
                                    env={**env, "HOLD": ""}, timeout=120)
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
        Row("chaos.folder_owners", "chaos: a second process ran a held folder", tally.second_owners, "rounds",
            f"{tally.second_owners} of {tally.kills_in_flight}", "0", judged(tally.second_owners == 0),
            note="; ".join(tally.notes)[:300], extra={"size": size}),
        Row("chaos.folder_money", "chaos: SIGKILL then resume, money forgotten or overspent", bad_money, "rounds",
            f"{len(tally.forgotten)} forgotten · {len(tally.overspend)} over the total, of {tally.rounds}", "0",
            judged(bad_money == 0), extra={"size": size, "forgotten": tally.forgotten[:5], "overspend": tally.overspend[:5]}),
        Row("chaos.folder_cells", "chaos: cells run twice or lost across kill and resume", tally.twice + tally.lost, "cells",
            f"{tally.twice} run twice · {tally.lost} rounds with a cell lost", "0", judged(tally.twice + tally.lost == 0),
            extra={"size": size}),
    ]

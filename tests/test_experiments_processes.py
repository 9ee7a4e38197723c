"""The total budget across processes and crashes: one owner per folder, and a SIGKILL forgets no money.

Real subprocesses, synchronised through their pipes (a line on stdout when a
call is in flight, a line on stdin to let it go): no sleeps, no timing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = textwrap.dedent('''
    import asyncio, os, sys
    import agentlab
    from agentlab import FunctionModel, Prices, reply, tool

    CALLS = []
    HOLD = os.environ.get("HOLD", "")  # "task:call" held in flight, e.g. "t3:2"
    HOW = os.environ.get("HOW", "forever")  # forever (until killed) | stdin (until a line arrives)

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return "value " * 20

    def factory(task, seed):
        async def fn(messages, tools):
            n = sum(1 for m in messages if m["role"] == "assistant")
            CALLS.append((task.id, n + 1))
            print("CALL", task.id, n + 1, flush=True)
            if HOLD == f"{task.id}:{n + 1}":
                print("IN FLIGHT", flush=True)
                if HOW == "stdin":
                    await asyncio.to_thread(sys.stdin.readline)
                else:
                    await asyncio.get_running_loop().create_future()
            if n < 2:
                return reply("thinking " * 30, ("lookup", {"key": str(n)}))
            return reply("done " * 30)
        return FunctionModel(fn)

    def build(folder, total=None):
        tasks = [{"id": f"t{i}", "input": f"question {i}"} for i in range(6)]
        return agentlab.Experiment(
            tasks, {"a": {"prices": Prices(input=3, output=15), "max_tokens": 400}}, tools=[lookup], model=factory,
            folder=folder, concurrency=2, progress=False, max_total_cost=total,
        )

    if __name__ == "__main__":
        # A terminal's Ctrl-C reaches this process, whoever started the test run: a shell's background job (a CI
        # runner's "cmd &") starts its children with SIGINT ignored, which Python keeps, and agentlab leaves alone.
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        total = float(sys.argv[2]) if len(sys.argv) > 2 else None
        build(sys.argv[1], total).run()
        print("FINISHED", flush=True)
''')


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "expdef.py"
    path.write_text(SRC)
    return path


def start(script: Path, folder: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), str(folder), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def wait_in_flight(proc: subprocess.Popen[str]) -> list[str]:
    """Read the child's lines until it says a call is in flight (a blocking read: no polling)."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line.strip())
        if line.strip() == "IN FLIGHT":
            return seen
    raise AssertionError(
        f"the child ended before its call was in flight: {proc.wait()} {proc.stderr.read() if proc.stderr else ''}"
    )


def load(script: Path):
    spec = importlib.util.spec_from_file_location("expdef", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _parse(line: bytes) -> dict | None:
    """One trace line, or None for a line a kill left torn (the lab's reader skips those too)."""
    try:
        return json.loads(line)
    except ValueError:
        return None


def trace_money(folder: Path) -> tuple[float, float]:
    """Read every trace file by hand: (dollars billed, dollars held by a call that has no reply and no run end)."""
    billed = held = 0.0
    for f in [*(folder / "traces").glob("*.jsonl"), *(folder / "attempts").glob("*.jsonl")]:
        events = [e for e in map(_parse, f.read_bytes().splitlines()) if e is not None]
        billed += sum(e["cost"] for e in events if e["kind"] == "model_called")
        kinds = [e["kind"] for e in events]
        if "run_finished" not in kinds and kinds and kinds[-1] == "model_request":
            held += events[-1]["reserved"]
    return billed, held


def rows_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rows.jsonl").read_bytes().splitlines() if line.strip()]


def test_a_second_process_on_a_running_folder_is_refused_and_nothing_runs_twice(script, tmp_path):
    folder = tmp_path / "exp"
    first = start(script, folder, HOLD="t0:1", HOW="stdin")
    try:
        wait_in_flight(first)
        second = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert "FolderInUse" in second.stderr and f"in use by process {first.pid} on" in second.stderr
        assert "CALL" not in second.stdout  # refused before any model call, any read or any write
        out, err = first.communicate("go\n", timeout=120)
    finally:
        first.kill()
    assert first.returncode == 0, err
    assert "FINISHED" in out and "trace write failed" not in out + err
    rows = rows_of(folder / "experiment")
    assert sorted(r["task_id"] for r in rows) == [f"t{i}" for i in range(6)]  # each cell once
    assert {r["outcome"] for r in rows} == {"done"}
    assert json.loads((folder / "experiment" / "manifest.json").read_text())["name"] == "experiment"
    assert not [p.name for p in (folder / "experiment").iterdir() if p.name.endswith(".tmp")]

    again = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "CALL" not in again.stdout and len(rows_of(folder / "experiment")) == 6  # nothing left to run


def test_deleting_owner_lock_gives_the_folder_no_second_owner_and_no_cell_runs_twice(script, tmp_path):
    """A "stale lock" clean-up that deletes ``owner.lock`` while its owner runs lets no second process in."""
    folder = tmp_path / "exp"
    first = start(script, folder, HOLD="t0:1", HOW="stdin")
    try:
        seen = wait_in_flight(first)
        (folder / "experiment" / "owner.lock").unlink()
        second = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert "FolderInUse" in second.stderr and "CALL" not in second.stdout
        out, err = first.communicate("go\n", timeout=120)
    finally:
        first.kill()
    assert first.returncode == 0 and "FINISHED" in out, err
    rows = rows_of(folder / "experiment")
    assert sorted(r["task_id"] for r in rows) == [f"t{i}" for i in range(6)]  # each cell once
    calls = [line for line in seen + out.splitlines() if line.startswith("CALL")]
    assert len(calls) == len(set(calls)) == 18  # 6 cells x 3 calls, none made twice


def test_the_folder_lock_holds_when_owner_lock_is_deleted_or_replaced_in_the_same_process(tmp_path):
    from agentlab.experiments import FolderInUse
    from agentlab.experiments.folder import Folder

    folder = Folder(tmp_path / "exp")
    with folder.own():
        lock = tmp_path / "exp" / "owner.lock"
        lock.unlink()
        with pytest.raises(FolderInUse, match="one process runs an experiment at a time"), Folder(folder.path).own():
            pass
        lock.write_text("{}")  # a fresh file in its place
        with pytest.raises(FolderInUse), Folder(folder.path).own():
            pass
    with Folder(folder.path).own():  # released with its owner: the next one gets it
        assert json.loads(lock.read_text())["pid"] == os.getpid()


def test_a_second_run_in_the_same_process_is_refused_while_the_first_holds_the_folder(script, tmp_path):
    import asyncio

    from agentlab.experiments import FolderInUse

    mod = load(script)
    folder = tmp_path / "exp"
    first = mod.build(folder)

    async def both():
        started = asyncio.Event()
        first.subscribe(lambda e: started.set() if e.kind == "cell_started" else None)
        task = asyncio.ensure_future(first.arun())
        await started.wait()
        with pytest.raises(FolderInUse, match="in use by process"):
            await mod.build(folder).arun()
        return await task

    result = asyncio.run(both())
    assert len(result.runs) == 6 and (result.runs["outcome"] == "done").all()


def test_sigkill_mid_call_then_resume_counts_every_cent_the_traces_show(script, tmp_path):
    folder = tmp_path / "exp"
    total = 0.2
    proc = start(script, folder, str(total), HOLD="t3:2")
    try:
        wait_in_flight(proc)  # t3's second call is sent; t3 has paid for its first
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.communicate(timeout=60)
    exp_folder = folder / "experiment"
    billed, held = trace_money(exp_folder)
    assert held > 0  # the call in flight at the kill left its reservation in its trace, and no reply

    mod = load(script)
    exp = mod.build(folder, total)
    seen_at_start = []
    exp.subscribe(lambda e: seen_at_start.append(e.spent) if e.kind == "experiment_started" else None)
    result = exp.run()
    assert seen_at_start == [pytest.approx(billed + held, abs=1e-9)]  # everything spent before the kill, to the cent
    assert exp.spent_before == pytest.approx(billed + held, abs=1e-9)

    runs = result.runs.set_index("task_id")
    assert runs.loc["t3", "outcome"] == "done"  # the killed cell ran again ...
    assert (exp_folder / "attempts" / f"{runs.loc['t3', 'run_id']}.1.jsonl").exists()  # ... and its first try is kept
    billed_after, held_after = trace_money(exp_folder)
    assert held_after == pytest.approx(held)  # the killed attempt's hold still counts
    assert exp.ledger.spent == pytest.approx(billed_after + held_after, abs=1e-9)  # the ledger and the traces agree
    assert exp.ledger.spent <= total + 1e-12
    assert exp.ledger.reserved == pytest.approx(0.0, abs=1e-12)


def test_ctrl_c_stops_an_experiment_at_safe_points_keeps_its_rows_and_a_rerun_finishes(script, tmp_path):
    """SIGINT mid-call: Experiment.run() (on the lab's driver) stops every run, saves every row, and returns."""
    folder = tmp_path / "exp"
    proc = start(script, folder, HOLD="t2:1")
    try:
        wait_in_flight(proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "FINISHED" in out and "Traceback" not in err
    rows = {r["task_id"]: r for r in rows_of(folder / "experiment")}
    assert rows["t2"]["reason"] == "cancelled"  # the run in flight ended as Stopped("cancelled"), and says so
    assert {r["reason"] for r in rows.values()} <= {"done", "cancelled"}
    assert sorted(rows) == [f"t{i}" for i in range(6)]  # every cell has its row: finished, cut, or not started

    result = load(script).build(folder).run()
    assert (result.runs["outcome"] == "done").all()

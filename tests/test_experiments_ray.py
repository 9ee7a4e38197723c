"""The Ray backend: the same rows as the local one, and the total budget held by a Ray actor."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from agentlab.scenarios.shop_study import shop_experiment

from .helpers import PRICES

ray = pytest.importorskip("ray", reason="the Ray backend needs the extra: pip install 'agentlab-loop[ray]'")


def test_ray_backend_gives_the_same_rows_as_local(local_ray, tmp_path):
    local = shop_experiment(folder=tmp_path / "local", tasks=3, max_total_cost=3.0, progress=False).run()
    remote = shop_experiment(
        folder=tmp_path / "ray", tasks=3, max_total_cost=3.0, progress=False, backend="ray", concurrency=4
    ).run()
    cols = [c for c in local.runs.columns if c != "seconds"]
    pd.testing.assert_frame_equal(local.runs[cols], remote.runs[cols])
    assert len(remote.steps) == len(local.steps)  # the workers' traces landed in the experiment folder


def test_ray_ledger_actor_holds_the_total_across_workers(local_ray, tmp_path):
    exp = shop_experiment(folder=tmp_path, tasks=12, max_total_cost=0.3, progress=False, backend="ray", concurrency=4)
    runs = exp.run().runs
    assert runs["cost"].sum() <= 0.3
    assert (runs["reason"].isin(["experiment budget"])).any()


def test_a_worker_killed_mid_cell_is_paid_for_released_and_run_again_on_resume(local_ray, tmp_path):
    """The worker dies in its second model call: the row bills what the trace shows, the hold is spent, the rest
    runs.
    """
    import agentlab as al

    marker = tmp_path / "killed-once"

    def factory(task, seed):
        import os
        import signal

        from agentlab import FunctionModel, reply

        def fn(messages, tools):
            n = sum(1 for m in messages if m["role"] == "assistant")
            if task.id == "t1" and n == 1 and not marker.exists():
                marker.write_text("x")
                os.kill(os.getpid(), signal.SIGKILL)  # the worker dies with this call in flight
            return reply("looking " * 20, ("lookup", {"key": "k"})) if n < 2 else reply("done " * 20)

        return FunctionModel(fn)

    @al.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return "v " * 20

    def build():
        return al.Experiment(
            [{"id": f"t{i}", "input": f"q{i}"} for i in range(3)],
            {"a": {"prices": PRICES, "max_tokens": 300}},
            tools=[lookup],
            model=factory,
            folder=tmp_path,
            backend="ray",
            concurrency=2,
            max_total_cost=0.5,
            progress=False,
        )

    first = build()
    runs = first.run().runs.set_index("task_id")
    lost = runs.loc["t1"]
    assert (lost["outcome"], lost["reason"]) == ("error", "worker failed") and "died" in lost["error"]
    trace = [
        json.loads(line)
        for line in (tmp_path / "experiment" / "traces" / f"{lost['run_id']}.jsonl").read_bytes().splitlines()
    ]
    billed = sum(e["cost"] for e in trace if e["kind"] == "model_called")
    held = trace[-1]["reserved"] if trace[-1]["kind"] == "model_request" else 0.0
    assert billed > 0 and held > 0
    assert lost["cost"] == pytest.approx(billed + held, abs=1e-12)  # its spend, recovered from its trace
    assert first.ledger.reserved == pytest.approx(0.0, abs=1e-12)  # the hold was released (as spent) ...
    assert list(runs.loc[["t0", "t2"], "outcome"]) == ["done"] * 2  # ... so the other cells were not refused
    assert first.ledger.spent == pytest.approx(runs["cost"].sum(), abs=1e-9)

    second = build()
    again = second.run().runs.set_index("task_id")
    assert (again["outcome"] == "done").all()  # "worker failed" is a rerun reason
    assert second.spent_before == pytest.approx(runs["cost"].sum(), abs=1e-9)  # the lost attempt still counts


def test_a_ray_worker_returns_at_the_deadline_despite_a_stubborn_tool(local_ray, tmp_path):
    """A tool that swallows its cancellation cannot hold the worker: it runs on the lab's driver, not asyncio.run."""
    import asyncio
    import threading

    import agentlab as al

    let_go = tmp_path / "let-go"

    @al.tool
    async def stubborn() -> str:
        """Refuse to be cancelled."""
        while not let_go.exists():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass
        return "late"

    def factory(task, seed):
        return al.ScriptedModel([al.reply(None, ("stubborn", {})), al.reply("never")])

    exp = al.Experiment(
        [{"id": "t0", "input": "q"}],
        {"a": {"prices": PRICES, "deadline_s": 1.0}},
        tools=[stubborn],
        model=factory,
        folder=tmp_path,
        backend="ray",
        progress=False,
    )
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(result=exp.run()), daemon=True)
    worker.start()
    worker.join(60)
    let_go.write_text("x")
    assert not worker.is_alive(), "the Ray cell waited for the abandoned tool"
    assert list(box["result"].runs["reason"]) == ["deadline"] and list(box["result"].runs["steps"]) == [1]

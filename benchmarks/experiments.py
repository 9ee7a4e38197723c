"""Experiments: runs per second, the machinery's overhead per run, peak memory, Ray's cost per cell.

The workload is the suite's: 5-step runs (four instant lookups, then an
answer) from a scripted offline model, traced to disk. Figures are ratios
of runs made in the same process, so the machine's load cancels out.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .report import Row, fmt, judged, missing

RUNS_PER_S_GOAL = 100.0
OVERHEAD_GOAL = 0.10
RAY_GOAL_MS = 20.0
STEPS = 5


def _experiment(n: int, folder: Path, concurrency: int, backend: str = "local") -> Any:
    import agentlab as al

    from .workload import ASYNC_TOOL, run_options, script

    replies = script(STEPS - 1)

    def model(task: Any, seed: int) -> Any:
        return al.ScriptedModel(replies)

    tasks = [{"id": f"t{i}", "input": f"look up the keys ({i})"} for i in range(n)]
    return al.Experiment(
        tasks,
        {"w": run_options(STEPS - 1)},
        tools=[ASYNC_TOOL],
        model=model,
        folder=folder,
        concurrency=concurrency,
        progress=False,
        backend=backend,
    )


async def _time_experiment(
    n: int, concurrency: int, backend: str = "local", store_cpu: list[float] | None = None
) -> float:
    """The experiment's wall time; then, untimed, its runs stored by the background worker process (before the
    folder goes), whose CPU seconds are appended to ``store_cpu``."""
    from agentlab.trace import _background

    with tempfile.TemporaryDirectory(prefix="agentlab-bench-exp-") as d:
        exp = _experiment(n, Path(d), concurrency, backend)
        cpu0 = _background.batcher().stats["cpu_s"]
        t0 = time.perf_counter()
        result = await exp.arun()
        took = time.perf_counter() - t0
        if not await asyncio.to_thread(_background.flush, 600):
            raise RuntimeError("the experiment's runs were not stored within 600 s")
        if store_cpu is not None:
            store_cpu.append(_background.batcher().stats["cpu_s"] - cpu0)
        if not (result.runs["outcome"] == "done").all():
            raise RuntimeError("a benchmark run did not finish as scripted")
        return took


async def _time_bare(n: int) -> float:
    import agentlab as al

    from .workload import ASYNC_TOOL, run_options, script

    replies = script(STEPS - 1)
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-bare-") as d:
        t0 = time.perf_counter()
        for i in range(n):
            await al.arun(
                f"look up the keys ({i})",
                [ASYNC_TOOL],
                model=al.ScriptedModel(replies),
                trace=d,
                **run_options(STEPS - 1),
            )
        return time.perf_counter() - t0


async def throughput_rows(n: int, reps: int) -> list[Row]:
    await _time_experiment(min(n, 20), 8)  # warm-up: imports, prices
    rows = []
    rates = {}
    for c in (1, 8, 64):
        best = min([await _time_experiment(n, c) for _ in range(reps)])
        rates[c] = n / best
    rows.append(
        Row(
            "exp.runs_per_s",
            f"Experiments: runs/s, {n} runs of {STEPS} steps, traced",
            rates[64],
            "runs/s",
            f"{fmt(rates[64])} runs/s at concurrency 64 ({fmt(rates[8])} at 8, {fmt(rates[1])} at 1)",
            f"≥ {RUNS_PER_S_GOAL:g} runs/s at 64",
            judged(rates[64] >= RUNS_PER_S_GOAL),
            extra={"rates": rates},
        )
    )
    exp_t, bare_t, store_cpu = [], [], []
    for _ in range(reps):  # interleaved, so drift in the machine's load hits both alike
        bare_t.append(await _time_bare(n))
        exp_t.append(await _time_experiment(n, 1, store_cpu=store_cpu))
    overhead = min(exp_t) / min(bare_t) - 1
    paired = sorted(e / b - 1 for e, b in zip(exp_t, bare_t, strict=True))  # each repetition's own ratio: the spread
    rows.append(
        Row(
            "exp.overhead",
            "Experiments: machinery overhead per run over bare arun()",
            overhead,
            "ratio",
            f"{overhead * 100:+.1f} % ({fmt(min(exp_t) / n * 1000)} ms vs {fmt(min(bare_t) / n * 1000)} ms per run, "
            f"concurrency 1, best of {reps} interleaved; each repetition's own ratio "
            f"{' / '.join(f'{p * 100:+.1f} %' for p in paired)}; the store, written after by a worker process: "
            f"{fmt(min(store_cpu) / n * 1000)} ms of CPU per run)",
            f"≤ {OVERHEAD_GOAL * 100:g} %",
            judged(overhead <= OVERHEAD_GOAL),
            extra={"experiment_s": exp_t, "bare_s": bare_t, "store_cpu_s": store_cpu, "paired": paired},
        )
    )
    return rows


def memory_row(n: int) -> Row:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.experiments", "memory", str(n)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=Path(__file__).resolve().parent.parent,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return Row(
        "exp.peak_rss",
        f"Experiments: peak RSS, {n} runs at concurrency 64",
        data["peak_mib"],
        "MiB",
        f"{fmt(data['peak_mib'])} MiB ({fmt(data['before_mib'])} MiB before the experiment; "
        f"{fmt((data['peak_mib'] - data['before_mib']) * 1024 / n)} KiB per run)",
        extra=data,
    )


async def ray_row(cells: int) -> Row:
    key, label = "exp.ray_overhead", f"Experiments: Ray overhead per cell (local Ray, {cells} cells)"
    goal = f"≤ {RAY_GOAL_MS:g} ms"
    if cells <= 0:
        return missing(key, label, goal, "n/a (skipped at quick size: starting Ray takes ~25 s)")
    try:
        import ray
    except ImportError:
        return missing(key, label, goal, "n/a (ray not installed: pip install 'agentlab-loop[ray]')")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        await _time_experiment(4, 2, "ray")  # warm-up: worker processes import agentlab
        ray_t = min([await _time_experiment(cells, 2, "ray") for _ in range(2)])
        local_t = min([await _time_experiment(cells, 2) for _ in range(2)])
    finally:
        if started:
            ray.shutdown()
    per_cell = (ray_t - local_t) / cells * 1000
    return Row(
        key,
        label,
        per_cell,
        "ms",
        f"{fmt(per_cell)} ms ({fmt(ray_t)} s vs {fmt(local_t)} s local, concurrency 2)",
        goal,
        judged(per_cell <= RAY_GOAL_MS),
        extra={"ray_s": ray_t, "local_s": local_t},
    )


async def experiment_rows(n: int, reps: int, ray_cells: int) -> list[Row]:
    rows = await throughput_rows(n, reps)
    rows.append(await asyncio.to_thread(memory_row, n))
    rows.append(await ray_row(ray_cells))
    return rows


def _peak_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


if __name__ == "__main__" and sys.argv[1:2] == ["memory"]:
    count = int(sys.argv[2])

    async def _main() -> dict[str, float]:
        await _time_experiment(10, 8)
        before = _rss_mib()
        await _time_experiment(count, 64)
        return {"before_mib": before, "peak_mib": _peak_mib()}

    print(json.dumps(asyncio.run(_main())))

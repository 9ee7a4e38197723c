"""Memory: peak RSS of a long traced run, and trace bytes that grow linearly.

Each size runs in a fresh interpreter (``python -m benchmarks.memory``), so
the peak RSS is that process's alone, not whatever the other benchmarks left;
``tracemalloc`` gives the run's own Python heap peak (what grows with steps).
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

from .report import Row, fmt, judged

LINEAR_GOAL = 1.1


def _peak_kib() -> int:
    """This process's peak RSS. VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's size."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux; may include the parent's


async def _one_run(steps: int, folder: Path) -> dict[str, Any]:
    import agentlab as al

    from .workload import SYNC_TOOL, run_options, script

    warm = folder / "warm-up"  # loads prices, pydantic and the rest before the measured run
    await al.arun("warm up", [SYNC_TOOL], model=al.ScriptedModel(script(2)), trace=warm, **run_options(2))
    replies = script(steps)
    tracemalloc.start()
    result = await al.arun(
        "look up the keys", [SYNC_TOOL], model=al.ScriptedModel(replies), trace=folder, **run_options(steps)
    )
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    (file,) = folder.glob("*.jsonl")  # the warm-up run is in its own folder
    return {
        "steps": steps,
        "peak_kib": _peak_kib(),
        "heap_peak_kib": heap_peak / 1024,
        "trace_bytes": file.stat().st_size,
        "done": result.outcome == "done",
    }


def measure_in_child(steps: int) -> dict[str, Any]:
    """Run one traced run of ``steps`` steps in a fresh interpreter; its numbers as a dict."""
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-") as d:
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.memory", str(steps), d],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=Path(__file__).resolve().parent.parent,
        )
    if out.returncode != 0:
        raise RuntimeError(f"memory benchmark child failed:\n{out.stderr[-2000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    if not data["done"]:
        raise RuntimeError(f"the {steps}-step memory run did not finish as scripted")
    return data


def memory_rows(steps: int) -> list[Row]:
    small, mid, big = (measure_in_child(n) for n in (steps // 4, steps // 2, steps))
    per_step = {d["steps"]: d["trace_bytes"] / (d["steps"] + 1) for d in (small, mid, big)}
    linear = per_step[big["steps"]] / per_step[small["steps"]]
    return [
        Row(
            "memory.peak_rss",
            f"Memory: peak RSS, {steps}-step traced run",
            big["peak_kib"] / 1024,
            "MiB",
            f"{fmt(big['peak_kib'] / 1024)} MiB (the run's Python heap peak {fmt(big['heap_peak_kib'])} KiB; "
            f"at {small['steps']} steps {fmt(small['heap_peak_kib'])} KiB)",
            extra={"children": [small, mid, big]},
        ),
        Row(
            "memory.trace_linear",
            f"Memory: trace bytes/step at {steps} vs {small['steps']} steps",
            linear,
            "ratio",
            f"{linear:.2f} ({fmt(per_step[small['steps']])} → {fmt(per_step[big['steps']])} B/step)",
            f"≤ {LINEAR_GOAL} (linear)",
            judged(linear <= LINEAR_GOAL),
            extra={"bytes_per_step": per_step},
        ),
    ]


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_one_run(int(sys.argv[1]), Path(sys.argv[2])))))

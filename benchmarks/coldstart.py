"""Cold start: ``import agentlab`` plus the first ``Run()``, in a fresh interpreter.

Timed inside the child process (so the interpreter's own start-up is not
counted), median of several fresh processes. The first process warms the
price memo and writes the bytecode cache, as the first run on a machine does.
(This sandbox sets ``PYTHONDONTWRITEBYTECODE``, which would make every child
recompile agentlab from source, ~35 ms that no installed copy pays: the
children run without it.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .report import Row, fmt, judged
from .workload import median

GOAL_MS = 100.0
CHILD = """
import json, time
t0 = time.perf_counter()
import agentlab
t1 = time.perf_counter()
agentlab.Run("q", model=agentlab.ScriptedModel([agentlab.reply("hi")]), max_cost=0.5)
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "run": t2 - t1}))
"""


def _once() -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def coldstart_rows(reps: int) -> list[Row]:
    _once()  # warms the price memo and the OS file cache, as any earlier run would have
    samples = [_once() for _ in range(reps)]
    imp = median([s["import"] for s in samples]) * 1e3
    run = median([s["run"] for s in samples]) * 1e3
    total = median([s["import"] + s["run"] for s in samples]) * 1e3
    ok = total <= GOAL_MS
    return [
        Row(
            "cold.import_run",
            "Cold `import agentlab` + first `Run()`",
            total,
            "ms",
            f"{fmt(total)} ms (import {fmt(imp)} ms, Run() {fmt(run)} ms)",
            f"≤ {GOAL_MS:.0f} ms",
            judged(ok),
            "" if ok else "most of the import is asyncio (+ssl) and the engine's own modules",
            {"import_ms": imp, "run_ms": run, "reps": reps},
        ),
    ]

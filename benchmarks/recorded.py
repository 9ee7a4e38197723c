"""Importing recorded runs: a 50 MB folder of Claude Code sessions, time and memory.

The folder joins the real sessions in ``tests/fixtures/recorded/claude_code``
(Claude Code files from marot/spotter: a session with a model switch, a
compaction and two subagent files, a tool-heavy session, a multi-turn one),
each copy with fresh ids, and tool results padded back to the size real ones
have (the fixtures' were trimmed), so the folder has the real shapes: calls
spread over several lines, interleaved results, progress lines, subagents.

The import runs in a fresh interpreter (``python -m benchmarks.recorded``) so
its peak memory is its own: the extra resident memory at the peak of the first
import (VmHWM minus the RSS before loading) is compared with the folder's size
on disk, and so is the Python heap's peak (tracemalloc, in an untimed import).
The time is the median of three imports, wall clock and CPU; the load average
is shown beside it, as the machine is shared (2 cores): wall time there is
roughly CPU time x load / cores once the load passes the core count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .report import Row, fmt, judged

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "recorded" / "claude_code"
SOURCE_ENV = "AGENTLAB_BENCH_SESSIONS"
"""A folder of real, untrimmed Claude Code sessions to join instead of the trimmed fixtures
(e.g. marot/spotter's ``test/fixtures/transcripts``, 17 MB, MIT): ``AGENTLAB_BENCH_SESSIONS=DIR``."""
SESSION = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
TIME_GOAL_S = 2.0
MEMORY_GOAL = 2.0
RESULT_PAD = 2400  # characters of tool output per result: real sessions average ~1.5 KB a line


def _renamed(line: dict[str, Any], tag: str) -> dict[str, Any]:
    """The line with every id made unique to this copy (uuids, message ids, tool ids, session)."""
    text = json.dumps(line)
    for key in ("toolu_", "msg_", "req_"):
        text = text.replace(key, f"{key}{tag}")
    d = json.loads(text)
    for k in ("uuid", "parentUuid", "logicalParentUuid", "sessionId"):
        if isinstance(d.get(k), str):
            d[k] = f"{tag}-{d[k]}"
    return d


def _padded(d: dict[str, Any]) -> dict[str, Any]:
    content = (d.get("message") or {}).get("content")
    if d.get("type") == "user" and isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("content"), str):
                b["content"] = (b["content"] + " ") * max(1, RESULT_PAD // max(len(b["content"]), 1))
                d["toolUseResult"] = {"stdout": b["content"], "stderr": "", "interrupted": False}
    return d


def _real_sessions() -> list[tuple[str, list[dict[str, Any]], dict[str, list[dict[str, Any]]]]]:
    """Every real Claude Code session of the source folder: (name, its lines, its subagent files' lines)."""
    source = Path(os.environ.get(SOURCE_ENV) or FIXTURE)
    out = []
    for main in sorted(source.glob("*.jsonl")):
        subs = {
            f.name: [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
            for f in sorted((source / main.stem / "subagents").glob("*.jsonl"))
        }
        out.append((main.stem, [json.loads(x) for x in main.read_text().splitlines() if x.strip()], subs))
    return out


def synthesise(folder: Path, megabytes: float) -> int:
    """Write Claude Code sessions into ``folder`` until it holds ``megabytes``; return its bytes.

    The real sessions of the fixtures (three sessions, two subagent files) are joined
    in turn, each copy with fresh ids, so the folder holds their different shapes
    (long tool-heavy stretches, compactions, model switches, multi-turn sessions,
    subagents) rather than one session repeated."""
    sessions = _real_sessions()
    fix = (
        (lambda d: _padded(d)) if not os.environ.get(SOURCE_ENV) else (lambda d: d)
    )  # the fixtures' results were trimmed
    total, n = 0, 0
    while total < megabytes * 1e6:
        name, lines, subs = sessions[n % len(sessions)]
        tag = f"s{n:04d}"
        main = folder / f"{tag}-{name}.jsonl"
        with open(main, "w") as f:
            for d in lines:
                f.write(json.dumps(fix(_renamed(d, tag))) + "\n")
        total += main.stat().st_size
        if subs:
            subdir = folder / main.stem / "subagents"
            subdir.mkdir(parents=True)
            for fname, sub in subs.items():
                with open(subdir / fname, "w") as f:
                    for d in sub:
                        f.write(json.dumps(fix(_renamed(d, tag))) + "\n")
                total += (subdir / fname).stat().st_size
        n += 1
    return total


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


REPS = 3
"""Timed imports of the folder in the child (the figure is their median: the machine is shared)."""


def _measure(folder: Path) -> dict[str, Any]:
    import gc
    import os
    import statistics
    import tracemalloc

    import agentlab as al

    al.load_recorded(FIXTURE / "tool_heavy.jsonl")  # warm-up: imports, price lookups
    al.load_recorded(FIXTURE / f"{SESSION}.jsonl")
    gc.collect()
    before = _rss_kib("VmRSS")
    load = [os.getloadavg()[0]]
    walls, cpus = [], []
    runs = steps = 0
    for _ in range(REPS):
        t0, c0 = time.perf_counter(), time.process_time()
        traces = al.load_recorded(folder)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        if not steps:  # the first import's peak: nothing else has run in this process yet
            peak = _rss_kib("VmHWM")
            runs, steps = len(traces), int(len(traces.steps))
        del traces
        gc.collect()
    load.append(os.getloadavg()[0])
    # the Python heap's own peak (tracemalloc slows the import; it is not timed)
    tracemalloc.start()
    al.load_recorded(folder)
    heap_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "seconds": statistics.median(walls),
        "cpu_seconds": statistics.median(cpus),
        "walls": walls,
        "cpus": cpus,
        "load": max(load),
        "extra_kib": peak - before,
        "heap_peak_bytes": heap_peak,
        "runs": runs,
        "steps": steps,
    }


def measure_in_child(megabytes: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-recorded-") as d:
        folder = Path(d) / "sessions"
        folder.mkdir()
        size = synthesise(folder, megabytes)
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.recorded", str(folder)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=Path(__file__).resolve().parent.parent,
        )
        if out.returncode != 0:
            raise RuntimeError(f"benchmarks.recorded failed: {out.stderr.strip()[-400:]}")
        data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        data["bytes"] = size
        return data


def recorded_rows(megabytes: float) -> list[Row]:
    m = measure_in_child(megabytes)
    mb = m["bytes"] / 1e6
    secs, cpu = m["seconds"], m["cpu_seconds"]
    ratio = m["extra_kib"] * 1024 / m["bytes"]
    heap = m["heap_peak_bytes"] / m["bytes"]
    return [
        Row(
            "recorded.import",
            f"import a {mb:.0f} MB Claude Code folder, redaction on",
            secs,
            "s",
            f"{fmt(secs)} s wall, {fmt(cpu)} s CPU (median of {REPS}; {m['runs']} runs, {m['steps']:,} steps, "
            f"{mb / secs:.0f} MB/s; load {m['load']:.1f} on {os.cpu_count()} cores)",
            f"<= {TIME_GOAL_S:g} s for 50 MB",
            judged(secs <= TIME_GOAL_S * mb / 50),
            "",
        ),
        Row(
            "recorded.memory",
            "peak extra memory / folder size",
            ratio,
            "x",
            f"{ratio:.2f}x ({m['extra_kib'] / 1024:.0f} MiB resident for {mb:.0f} MB; Python heap peak {heap:.2f}x)",
            f"<= {MEMORY_GOAL:g}x",
            judged(ratio <= MEMORY_GOAL),
            "",
        ),
    ]


if __name__ == "__main__":
    if len(sys.argv) > 1:  # the child: load the folder, print the figures as one JSON line
        print(json.dumps(_measure(Path(sys.argv[1]))))
    else:  # by hand: make a 50 MB folder of fixture-shaped sessions, measure it in a child, print the rows
        for row in recorded_rows(50):
            print(f"{row.label}: {row.shown} (goal {row.goal}: {row.status})")

"""``python -m benchmarks.costs``: carried cost + cache busts of a 1,000-step run, and a diff of two of them.

A benchmark, not a test: it prints the wall time of each (best of three) on this machine. The runs are imported
records (``recorded.build``), each step a tool call whose result the next steps carry, with the prompt cache read
and written as a caching agent's would be; the second run parts from the first at step 500.
"""

from __future__ import annotations

import argparse
import time

from agentlab.costs import cache_busts, carried_cost, diff_runs
from agentlab.recorded.build import RecordedRun, RecordedStep, build_run
from agentlab.trace import Trace


def long_run(steps: int, run_id: str, part_at: int | None = None) -> Trace:
    recorded = []
    context = 2_000
    for k in range(1, steps + 1):
        n = k if part_at is None or k < part_at else k + 10_000
        use = {"type": "tool_use", "id": f"toolu_{k}", "name": "read", "input": {"n": n}}
        usage = {
            "input_tokens": 3,
            "output_tokens": 60,
            "cache_creation_input_tokens": 400,
            "cache_read_input_tokens": context,
        }
        context += 403
        after = [{"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": f"line {k}: " + "text " * 60}]
        recorded.append(
            RecordedStep([use], usage, "claude-sonnet-4-5", requested_at=k, replied_at=k + 0.5, after=after)
        )
    run = RecordedRun(
        run_id,
        "bench",
        "bench",
        [{"role": "user", "content": "Read it all."}],
        recorded,
        task="Read it all.",
        system="You read.",
        model="claude-sonnet-4-5",
    )
    return Trace(build_run(run))


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.costs", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1_000)
    args = p.parse_args(argv)
    a = long_run(args.steps, "bench-a")
    b = long_run(args.steps, "bench-b", part_at=args.steps // 2)
    carried_cost(a), cache_busts(a)  # imports and first-use set-up outside the timing
    carried = best(lambda: carried_cost(a))
    busts = best(lambda: cache_busts(a))
    both = best(lambda: (carried_cost(a), cache_busts(a)))
    diffed = best(lambda: diff_runs(a, b).html())
    print(f"{args.steps:,}-step run: carried cost {carried:.3f} s, cache busts {busts:.3f} s, both {both:.3f} s")
    print(f"diff of two {args.steps:,}-step runs, HTML rendered: {diffed:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

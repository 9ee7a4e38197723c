"""``python -m benchmarks``: run every benchmark, print one table, write it as JSON.

Options: ``--quick`` (tiny sizes, seconds), ``--only W1,W3``, ``--out FILE``
(default benchmarks/results/latest.json for a whole full-size run, partial.json for a quick or ``--only``
one: the README's table is the latest whole run, and a test holds it to that file), ``--doc FILE`` (also put
the table in a markdown file between its bench markers, e.g. README.md and docs/benchmarks.md; repeatable).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import asdict
from pathlib import Path

from . import machine, report, suite

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
"""The last whole full-size run: the table README.md and docs/benchmarks.md show."""
PARTIAL = RESULTS.with_name("partial.json")
"""A quick or ``--only`` run: never mistaken for the whole table."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes: checks the code runs, figures mean nothing")
    p.add_argument(
        "--only",
        default="",
        help="comma-separated: W1,W2,W3,traces,store,panel,memory,caching,cold,recorded,streaming,chaos,"
        "chaos-folders,chaos-ray",
    )
    p.add_argument("--out", type=Path, default=None, help="where to write the JSON results")
    p.add_argument(
        "--doc", type=Path, action="append", default=[], help="markdown file whose bench table to replace (repeatable)"
    )
    args = p.parse_args(argv)
    known = {name for name, _, _ in suite.benches()}
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    if only - known:
        p.error(
            f"--only: unknown benchmark(s) {', '.join(sorted(only - known))}; choose from {', '.join(sorted(known))}"
        )
    sizes = suite.QUICK if args.quick else suite.FULL
    where = machine.describe()
    print(
        f"agentlab benchmarks ({'quick' if args.quick else 'full'} sizes) on {where['cpu']}, "
        f"{where['cores']} cores, load {where['load (1 min) at start']}",
        flush=True,
    )
    whole = not args.quick and not only
    out = args.out or (RESULTS if whole else PARTIAL)
    rows = asyncio.run(suite.run_all(sizes, only or None, progress=lambda s: print(s, flush=True)))
    print()
    print(report.table(rows))
    report.write_json(out, rows, where, {"sizes": asdict(sizes), "quick": args.quick, "only": sorted(only)})
    print(f"\nwrote {out}")
    for doc in args.doc:
        report.update_doc(doc, rows, where)
        print(f"updated the table in {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

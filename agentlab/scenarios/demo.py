"""The experiment ``agentlab demo`` ends with: a small shop study and its summary."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..experiments.spec import summary_text
from .shop_study import CONFIGS, shop_experiment

DEMO_CONFIGS = {k: CONFIGS[k] for k in ("baseline", "cached", "tight budget")}


def demo_experiment(folder: Path, out: TextIO) -> None:
    """Run 6 shop questions × 3 configs (a fresh folder each time) and print the summary."""
    import shutil

    target = folder / "demo"
    shutil.rmtree(target, ignore_errors=True)
    exp = shop_experiment(
        folder=folder, name="demo", tasks=6, configs=DEMO_CONFIGS, max_total_cost=0.50, progress=False
    )
    result = exp.run()
    print(f"\nexperiment: {exp!r}", file=out)
    print(summary_text(result), file=out)
    print(f"rows:     {exp.folder.rows}", file=out)

"""What an experiment gives back: rows, frames, a summary table and plots."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._safe_text import clean, html_text
from .cells import ROW_COLUMNS, config_columns
from .grid import Config, describe


def bootstrap_ci(values: Sequence[float], *, n: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """A bootstrap interval of the mean (seeded: the same rows give the same interval)."""
    x = np.asarray([v for v in values if v == v], dtype=float)
    if len(x) == 0:
        return (float("nan"), float("nan"))
    if len(x) == 1:
        return (float(x[0]), float(x[0]))
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n, len(x)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


class ExperimentResult:
    """Every cell's row (``.runs``), the per-step and per-call frames, ``.summary()`` and plots."""

    def __init__(self, rows: list[dict[str, Any]], configs: Sequence[Config], folder: Path, max_total_cost: float | None) -> None:
        self.rows = rows
        self.configs = list(configs)
        self.folder = folder
        self.max_total_cost = max_total_cost

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per task × config × repeat; each config option is its own column."""
        axes = config_columns(self.configs)
        options = {c.name: describe(c.params) for c in self.configs}
        records = []
        for r in self.rows:
            rec = dict(r)
            for k in axes:
                rec[k] = options.get(r["config"], {}).get(k)
            records.append(rec)
        base = ["task_id", "config", *axes]
        cols = base + [c for c in ROW_COLUMNS if c not in base]
        df = pd.DataFrame.from_records(records)
        if df.empty:
            return pd.DataFrame(columns=cols)
        extra = [c for c in df.columns if c not in cols]
        df = df[cols + extra]
        df["score"] = pd.to_numeric(df["score"], errors="coerce")
        return df

    @cached_property
    def _traces(self) -> Any:
        from ..trace import Traces, load_run

        ids = [r["run_id"] for r in self.rows if r.get("outcome") != "not run"]
        loaded = []
        for rid in ids:
            try:
                loaded.append(load_run(rid, self.folder / "traces"))
            except (FileNotFoundError, LookupError):
                continue
        return Traces(loaded, self.folder / "traces")

    def _tag(self, frame: pd.DataFrame) -> pd.DataFrame:
        keys = self.runs[["run_id", "task_id", "config", "repeat"]]
        return keys.merge(frame, on="run_id", how="inner")

    @cached_property
    def steps(self) -> pd.DataFrame:
        """One row per model call of every run, with ``task_id``/``config``/``repeat``."""
        return self._tag(self._traces.steps)

    @cached_property
    def calls(self) -> pd.DataFrame:
        """One row per tool call of every run, with ``task_id``/``config``/``repeat``."""
        return self._tag(self._traces.calls)

    @property
    def spent(self) -> float:
        """Dollars spent by all rows (runs and grading)."""
        df = self.runs
        return float(df["cost"].sum() + df["score_cost"].sum()) if len(df) else 0.0

    def summary(self) -> pd.DataFrame:
        """Per config: runs, success rate, cost mean/median/p90 with a 95 % bootstrap interval, steps, stop reasons."""
        df = self.runs
        out = []
        for c in self.configs:
            g = df[df["config"] == c.name]
            if g.empty:
                continue
            ran = g[g["outcome"] != "not run"]
            scored = ran["score"].dropna()
            success = float(scored.mean()) if len(scored) else float((ran["outcome"] == "done").mean()) if len(ran) else float("nan")
            lo, hi = bootstrap_ci(list(ran["cost"]))
            reasons = g["reason"].value_counts()
            out.append({
                "config": c.name, "runs": len(g), "not_run": int((g["outcome"] == "not run").sum()),
                "success": success, "cost_mean": float(ran["cost"].mean()) if len(ran) else float("nan"),
                "cost_lo": lo, "cost_hi": hi,
                "cost_median": float(ran["cost"].median()) if len(ran) else float("nan"),
                "cost_p90": float(ran["cost"].quantile(0.9)) if len(ran) else float("nan"),
                "steps_mean": float(ran["steps"].mean()) if len(ran) else float("nan"),
                "stop_reasons": ", ".join(f"{k} {v}" for k, v in reasons.items()),
            })
        return pd.DataFrame(out).set_index("config") if out else pd.DataFrame()

    # ---------------------------------------------------------------- plots
    def plot_cost_vs_success(self, ax: Any = None) -> Any:
        from . import plots

        return plots.cost_vs_success(self, ax=ax)

    def plot_cost_distribution(self, ax: Any = None) -> Any:
        from . import plots

        return plots.cost_distribution(self, ax=ax)

    def plot_stop_reasons(self, ax: Any = None) -> Any:
        from . import plots

        return plots.stop_reasons(self, ax=ax)

    def plot_context_growth(self, ax: Any = None) -> Any:
        from . import plots

        return plots.context_growth(self, ax=ax)

    def __repr__(self) -> str:
        df = self.runs
        done = int((df["outcome"] == "done").sum()) if len(df) else 0
        return f"<ExperimentResult {len(df)} runs, {done} done, ${self.spent:.4f} spent; folder {self.folder}>"

    def _repr_html_(self) -> str:
        # issue 24: the folder, the config names and the stop reasons are foreign text; to_html escapes the table
        summary = self.summary().to_html(float_format=lambda v: f"{v:.4g}", escape=True)
        return f"<p class='agentlab-experiment-result'>{html_text(repr(self))}</p>" + clean(summary)

"""What an experiment gives back: rows, frames, a summary table and plots."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._safe_text import clean, html_text, no_math_html
from ..redact import Redactor
from .cells import ROW_COLUMNS, config_columns
from .folder import RERUN_REASONS
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


class UnequalSamples(UserWarning):
    """A summary compares configs that have different numbers of samples."""


def success_of(runs: pd.DataFrame) -> pd.Series:
    """Each row's success: a number in [0, 1], or NaN where the row is no sample.

    What success means, per row:

    * a run that ended ``done``: its score (a bool counts as 1 or 0); with
      no scorer (no score in its config) a done run is a success; a done run
      whose scorer gave no verdict (``None``) is no sample;
    * a run that stopped (its own budget, the step limit, ``max_tokens``, a
      fatal error...) or whose cell failed: 0, whatever a scorer said of its
      partial text: the config did not get the answer;
    * a cell the experiment cut short or never ran (``not run``, or a rerun
      reason: ``experiment budget``, ``cancelled``, ``setup failed``,
      ``worker failed``): no sample, since it says nothing about the config.
    """
    score = pd.to_numeric(runs["score"], errors="coerce") if "score" in runs else pd.Series(np.nan, index=runs.index)
    done = runs["outcome"] == "done"
    scored_configs = set(runs.loc[done & score.notna(), "config"])
    has_scores = runs["config"].isin(scored_configs)
    out = pd.Series(0.0, index=runs.index)
    out[done] = np.where(has_scores[done], score[done], 1.0)
    out[(runs["outcome"] == "not run") | runs["reason"].isin(RERUN_REASONS)] = np.nan
    return out


class ExperimentResult:
    """Every cell's row (``.runs``), the per-step and per-call frames, ``.summary()`` and plots."""

    def __init__(
        self, rows: list[dict[str, Any]], configs: Sequence[Config], folder: Path, max_total_cost: float | None
    ) -> None:
        self.rows = rows
        self.configs = list(configs)
        self.folder = folder
        self.max_total_cost = max_total_cost

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per task × config × repeat; each config option is its own column."""
        axes = config_columns(self.configs)
        redactor = Redactor()  # an option may be a credential (a model factory's key): the frame is often saved
        options = {c.name: redactor.redact(describe(c.params)) for c in self.configs}
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
        """Per config: runs, samples, success with a 95 % interval, cost mean/median/p90 with one, cost per
        success, steps, stop reasons.

        ``success`` is the mean of :func:`success_of` over the config's
        samples (a stopped run is a failure; a run the experiment cut short
        is no sample). ``cost_per_success`` is every dollar the config's
        runs spent divided by their successes (``inf`` with none). Warns
        (:class:`UnequalSamples`) when configs have unequal samples: compare
        them paired by task with :meth:`compare`.
        """
        df = self.runs
        out = []
        for c in self.configs:
            g = df[df["config"] == c.name]
            if g.empty:
                continue
            ran = g[g["outcome"] != "not run"]
            wins = success_of(g).dropna()
            lo, hi = bootstrap_ci(list(ran["cost"]))
            s_lo, s_hi = bootstrap_ci(list(wins))
            reasons = g["reason"].value_counts()
            spent, won = float(ran["cost"].sum()), float(wins.sum())
            out.append(
                {
                    "config": c.name,
                    "runs": len(g),
                    "not_run": int((g["outcome"] == "not run").sum()),
                    "samples": len(wins),
                    "success": float(wins.mean()) if len(wins) else float("nan"),
                    "success_lo": s_lo,
                    "success_hi": s_hi,
                    "cost_mean": float(ran["cost"].mean()) if len(ran) else float("nan"),
                    "cost_lo": lo,
                    "cost_hi": hi,
                    "cost_median": float(ran["cost"].median()) if len(ran) else float("nan"),
                    "cost_p90": float(ran["cost"].quantile(0.9)) if len(ran) else float("nan"),
                    "cost_per_success": spent / won if won > 0 else (float("inf") if len(ran) else float("nan")),
                    "steps_mean": float(ran["steps"].mean()) if len(ran) else float("nan"),
                    "stop_reasons": ", ".join(f"{k} {v}" for k, v in reasons.items()),
                }
            )
        samples = {r["config"]: r["samples"] for r in out}
        if len(set(samples.values())) > 1:
            warnings.warn(
                "the summary compares configs on unequal samples ("
                + ", ".join(f"{k} {v}" for k, v in samples.items())
                + "): a grid cut short or cells that failed; compare two configs on the tasks both ran with "
                "result.compare(a, b)",
                UnequalSamples,
                stacklevel=2,
            )
        return pd.DataFrame(out).set_index("config") if out else pd.DataFrame()

    def compare(self, a: str, b: str, *, n: int = 1000, seed: int = 0) -> pd.DataFrame:
        """Config ``b`` against config ``a``, paired by task: success and cost, with 95 % intervals of the difference.

        Only tasks both configs have samples of count; each task's repeats
        are averaged first, and the bootstrap resamples tasks. So the
        interval measures the configs' difference, not how hard the task mix
        is (repeats of one task are not independent runs).
        """
        names = {c.name for c in self.configs}
        for name in (a, b):
            if name not in names:
                raise ValueError(f"no config named {name!r}; configs: {', '.join(sorted(names))}")
        df = self.runs.assign(_success=success_of(self.runs))
        rows = {}
        for metric, col, keep in (
            ("success", "_success", df["_success"].notna()),
            ("cost", "cost", df["outcome"] != "not run"),
        ):
            per_task = df[keep].groupby(["config", "task_id"])[col].mean()
            left = per_task.get(a, pd.Series(dtype=float))
            right = per_task.get(b, pd.Series(dtype=float))
            tasks = sorted(set(left.index) & set(right.index))
            diffs = [float(right[t] - left[t]) for t in tasks]
            lo, hi = bootstrap_ci(diffs, n=n, seed=seed)
            rows[metric] = {
                a: float(left[tasks].mean()) if tasks else float("nan"),
                b: float(right[tasks].mean()) if tasks else float("nan"),
                "difference": float(np.mean(diffs)) if diffs else float("nan"),
                "lo": lo,
                "hi": hi,
                "tasks": len(tasks),
            }
        return pd.DataFrame.from_dict(rows, orient="index")

    def repeat_spread(self) -> pd.DataFrame:
        """How much repeats of one task vary, per config: the mean within-task standard deviation of cost
        and success, beside the spread between tasks (tasks with at least two samples)."""
        df = self.runs.assign(_success=success_of(self.runs))
        df = df[df["_success"].notna()]
        out = []
        for c in self.configs:
            g = df[df["config"] == c.name]
            by = g.groupby("task_id")
            multi = [t for t, n in by.size().items() if n >= 2]
            if not multi:
                continue
            within = g[g["task_id"].isin(multi)].groupby("task_id")
            out.append(
                {
                    "config": c.name,
                    "tasks": len(multi),
                    "cost_sd_within": float(within["cost"].std().mean()),
                    "cost_sd_between": float(by["cost"].mean().std()) if by.ngroups > 1 else float("nan"),
                    "success_sd_within": float(within["_success"].std().mean()),
                    "success_sd_between": float(by["_success"].mean().std()) if by.ngroups > 1 else float("nan"),
                }
            )
        return pd.DataFrame(out).set_index("config") if out else pd.DataFrame()

    # ---------------------------------------------------------------- plots
    def plot_cost_vs_success(self, ax: Any = None) -> Any:
        """Success rate against mean cost, one point per config (with its interval): the trade-off at a glance."""
        from . import experiment_plots as plots

        return plots.cost_vs_success(self, ax=ax)

    def plot_cost_distribution(self, ax: Any = None) -> Any:
        """Each config's spread of cost per run, so a long tail is not hidden by the mean."""
        from . import experiment_plots as plots

        return plots.cost_distribution(self, ax=ax)

    def plot_stop_reasons(self, ax: Any = None) -> Any:
        """How the runs of each config ended (done, budget, step limit...), stacked."""
        from . import experiment_plots as plots

        return plots.stop_reasons(self, ax=ax)

    def plot_context_growth(self, ax: Any = None) -> Any:
        """Median context size per step for each config: the growth that makes cost quadratic."""
        from . import experiment_plots as plots

        return plots.context_growth(self, ax=ax)

    def __repr__(self) -> str:
        df = self.runs
        done = int((df["outcome"] == "done").sum()) if len(df) else 0
        return f"<ExperimentResult {len(df)} runs, {done} done, ${self.spent:.4f} spent; folder {self.folder}>"

    def _repr_html_(self) -> str:
        # the folder, the config names and the stop reasons are foreign text; to_html escapes the table
        summary = self.summary().to_html(float_format=lambda v: f"{v:.4g}", escape=True)
        df = self.runs
        done = int((df["outcome"] == "done").sum()) if len(df) else 0
        head = f"Experiment: {len(df)} runs, {done} done, ${self.spent:.4f} spent; folder {self.folder}"
        return no_math_html(f"<p class='agentlab-experiment-result'>{html_text(head)}</p>" + clean(summary))

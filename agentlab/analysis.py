"""Cost analysis on recorded runs: pure functions of the trace DataFrames.

The lab exists to make cost visible, and the seed's point about cost is a
shape: every step re-sends the whole history, so the context grows linearly
and the *cumulative* cost grows with the square of the run's length. A step
limit alone does not bound that. The functions here put numbers on it:

* :func:`step_costs` — tokens, cost, cumulative cost and context growth per step;
* :func:`fit_cost_curve` — a quadratic fit of cumulative cost against step
  number, its goodness of fit, and a forecast for a longer run;
* :class:`CostProjection` — the teaching model (a starting context, tokens
  added per step, prices) with and without prompt caching;
* :func:`reprice` — a recorded run under another model or caching choice;
* :func:`budget_whatif` — which recorded runs other budgets would have
  stopped, where and why, replaying the engine's own rules;
* :func:`loop_recovery`, :func:`retry_counts`, :func:`tool_latency`,
  :func:`parallel_speedup` — the loop's other vital signs.

Inputs are the frames of ``agentlab.load_runs`` (columns in docs/traces.md).
Nothing here reads files, calls a model or draws; pandas and numpy load when a
function is called, not when agentlab is imported.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any, overload

from ._account import Account, Hold
from ._checks import is_whole
from .budget import (
    COST_GUARDS,
    Budget,
    CostGuard,
    check_after_step,
    check_before_call,
    check_call,
    check_limit,
    time_left,
)
from .messages import Usage
from .pricing import Prices, lookup_prices
from .vocab import RESUMABLE, EventKind, Outcome

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

STEP_COLUMNS = ("run_id", "step", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens", "cost")
CALL_COLUMNS = ("run_id", "step", "tool", "start", "end")
RUN_COLUMNS = ("run_id", "outcome", "reason")
BUDGET_STOPS = RESUMABLE  # kept for code that imported it from here; the rule lives in vocab.py
"""Recorded stops that say nothing about what a run would have done with more room."""


# ------------------------------------------------------------------ input checks
def _need(df: Any, name: str, columns: Iterable[str]) -> None:
    """Fail with a message naming the frame and its missing columns, not a KeyError from pandas."""
    if not (hasattr(df, "columns") and hasattr(df, "iloc")):
        raise TypeError(
            f"{name} must be a pandas DataFrame (the {name!r} frame of agentlab.load_runs), got {type(df).__name__}"
        )
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"{name} is missing column(s) {', '.join(map(repr, missing))}: expected the {name!r} frame of "
            "agentlab.load_runs (see docs/traces.md)"
        )


def _frames(traces: Any) -> tuple[Any, Any, Any, Any]:
    """(runs, steps, calls, events) of a ``Traces`` object or a mapping of frames; absent ones are None."""
    get: Callable[[str], Any]
    if isinstance(traces, Mapping):
        get = traces.get
    elif all(hasattr(traces, a) for a in ("runs", "steps")):

        def get(key: str) -> Any:
            return getattr(traces, key, None)
    else:
        raise TypeError(
            "traces must be what agentlab.load_runs returns (with .runs and .steps frames) or a dict of "
            f"those frames, got {type(traces).__name__}"
        )
    return get("runs"), get("steps"), get("calls"), get("events")


def one_run(steps: pd.DataFrame, run_id: str | None = None, *, name: str = "steps") -> pd.DataFrame:
    """The rows of one run, sorted by step. ``run_id`` may be omitted when there is only one."""
    _need(steps, name, ("run_id", "step"))
    ids = list(dict.fromkeys(steps["run_id"]))
    if run_id is None:
        if len(ids) > 1:
            shown = ", ".join(map(repr, ids[:5])) + (" ..." if len(ids) > 5 else "")
            raise ValueError(f"{name} holds {len(ids)} runs: pass run_id= one of {shown}")
        return steps.sort_values("step").reset_index(drop=True)
    if run_id not in ids:
        raise ValueError(f"run_id {run_id!r} is not in {name} (it holds {len(ids)} run(s))")
    return steps[steps["run_id"] == run_id].sort_values("step").reset_index(drop=True)


def as_prices(prices: Prices | str, *, name: str = "prices") -> Prices:
    """A :class:`Prices` from a value or a model id, with a clear error for unknown models."""
    if isinstance(prices, Prices):
        return prices
    if isinstance(prices, str):
        found = lookup_prices(prices)
        if found is None:
            raise ValueError(
                f"{name}: no price is known for model {prices!r}; pass agentlab.Prices(input=..., output=...) "
                "(USD per million tokens)"
            )
        return found
    raise TypeError(f"{name} must be an agentlab.Prices or a model id string, got {type(prices).__name__}")


# -------------------------------------------------------------------- per step
def step_costs(steps: pd.DataFrame) -> pd.DataFrame:
    """Tokens, cost and cumulative cost of every step, and how much the context grew.

    ``context_growth`` is this step's context minus the previous step's (the
    first step's is its whole context): what each step adds to every later
    call's bill. ``cumulative_cost`` is summed again from ``cost`` so a
    repriced frame stays consistent.
    """
    _need(steps, "steps", STEP_COLUMNS)
    df = steps.sort_values(["run_id", "step"], kind="stable").reset_index(drop=True)
    tokens = ["input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"]
    out = df[["run_id", "step", *tokens, "cost"]].copy()
    for col in tokens:
        out[col] = out[col].fillna(0).astype("int64")
    out["context_tokens"] = out["input_tokens"] + out["cache_read_tokens"] + out["cache_write_tokens"]
    out["context_growth"] = out.groupby("run_id")["context_tokens"].diff().fillna(out["context_tokens"]).astype("int64")
    out["cost"] = out["cost"].astype(float)
    out["cumulative_cost"] = out.groupby("run_id")["cost"].cumsum()
    return out[["run_id", "step", *tokens, "context_tokens", "context_growth", "cost", "cumulative_cost"]]


def run_totals(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per run: steps, tokens and cost summed from the step rows."""
    per = step_costs(steps)
    return (
        per.groupby("run_id", sort=False)
        .agg(
            steps=("step", "size"),
            input_tokens=("input_tokens", "sum"),
            cache_read_tokens=("cache_read_tokens", "sum"),
            cache_write_tokens=("cache_write_tokens", "sum"),
            output_tokens=("output_tokens", "sum"),
            last_context=("context_tokens", "last"),
            cost=("cost", "sum"),
        )
        .reset_index()
    )


# ------------------------------------------------------------- the quadratic
@dataclass(frozen=True, slots=True)
class CostFit:
    """Cumulative cost after step n ≈ ``a·n² + b·n + c`` (USD), fitted by least squares.

    ``r_squared`` says how well the parabola fits; ``linear_r_squared`` is the
    best straight line's, for contrast: the gap is the quadratic growth the
    seed warns about.
    """

    a: float
    b: float
    c: float
    r_squared: float
    linear_r_squared: float
    steps: int
    run_id: str | None = None

    @overload
    def predict(self, n: float) -> float: ...
    @overload
    def predict(self, n: np.ndarray) -> np.ndarray: ...
    def predict(self, n: float | np.ndarray) -> float | np.ndarray:
        """Forecast cumulative cost (USD) after ``n`` steps (elementwise for an array of step numbers)."""
        return self.a * n * n + self.b * n + self.c

    def step_cost(self, n: int) -> float:
        """Forecast cost (USD) of step ``n`` alone."""
        return self.predict(n) - self.predict(n - 1)

    def forecast(self, upto: int) -> pd.DataFrame:
        """Steps 1..``upto`` with the forecast step and cumulative cost."""
        import pandas as pd

        if not is_whole(upto, 1):
            raise ValueError(f"upto must be an int >= 1, got {upto!r}")
        n = list(range(1, upto + 1))
        return pd.DataFrame(
            {"step": n, "cost": [self.step_cost(k) for k in n], "cumulative_cost": [self.predict(k) for k in n]}
        )

    def steps_until(self, max_cost: float) -> int | None:
        """The first step whose forecast cumulative cost passes ``max_cost``; None if it never does."""
        if not isinstance(max_cost, (int, float)) or isinstance(max_cost, bool) or not max_cost > 0:
            raise ValueError(f"max_cost must be a number > 0, got {max_cost!r}")
        a, b, c = self.a, self.b, self.c - max_cost
        if abs(a) < 1e-18:
            if b <= 0:
                return None
            root = -c / b
        else:
            disc = b * b - 4 * a * c
            if disc < 0:
                return None
            roots = sorted(((-b - math.sqrt(disc)) / (2 * a), (-b + math.sqrt(disc)) / (2 * a)))
            ahead = [r for r in roots if self.predict(math.floor(r) + 1) > max_cost and r >= 0]
            if not ahead:
                return None
            root = ahead[0]
        n = max(1, math.floor(root) + 1)
        while n > 1 and self.predict(n - 1) > max_cost:  # float edge at an exact root
            n -= 1
        return n

    def budget_note(self, max_steps: int, max_cost: float) -> str:
        """Why a step limit alone does not bound cost, in numbers from this fit."""
        at_limit = self.predict(max_steps)
        hit = self.steps_until(max_cost)
        where = f"the ${max_cost:.2f} budget is passed at step {hit}" if hit else f"${max_cost:.2f} is never reached"
        return (
            f"a step limit of {max_steps} allows ${at_limit:.2f} "
            f"({at_limit / max_cost:.1f}x the ${max_cost:.2f} budget); {where}; "
            f"doubling the run to {2 * max_steps} steps costs ${self.predict(2 * max_steps):.2f} "
            f"({self.predict(2 * max_steps) / at_limit:.1f}x)"
            if at_limit > 0
            else f"a step limit of {max_steps} allows ${at_limit:.2f}; {where}"
        )

    def __str__(self) -> str:
        return (
            f"cumulative cost ≈ {self.a:.3g}·n² + {self.b:.3g}·n + {self.c:.3g} USD "
            f"(R² {self.r_squared:.4f} vs {self.linear_r_squared:.4f} for a line; {self.steps} steps)"
        )


def _r_squared(y: Any, fitted: Any) -> float:
    import numpy as np

    ss_res = float(np.sum((y - fitted) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0:
        return 1.0 if ss_res == 0 else 0.0
    return 1.0 - ss_res / ss_tot


def fit_cost_curve(steps: pd.DataFrame, run_id: str | None = None) -> CostFit:
    """Fit cumulative cost against step number with a quadratic (least squares).

    Needs at least three steps with a recorded cost. A run with no cost at all
    (a model whose prices are unknown) is refused with a pointer to
    :func:`reprice` rather than fitted to a flat zero.
    """
    import numpy as np

    rows = one_run(step_costs(steps), run_id)
    rid = str(rows["run_id"].iloc[0]) if len(rows) else run_id
    if len(rows) < 3:
        raise ValueError(
            f"fitting a quadratic needs at least 3 steps; run {rid!r} has {len(rows)}"
            if len(rows)
            else "steps is empty: there is no run to fit"
        )
    y = rows["cumulative_cost"].to_numpy(float)
    if not np.isfinite(y).all() or not (y > 0).any():
        raise ValueError(
            f"run {rid!r} has no recorded cost (were its prices unknown?): price it first with "
            "agentlab.analysis.reprice(steps, prices=...)"
        )
    x = rows["step"].to_numpy(float)
    a, b, c = (float(v) for v in np.polyfit(x, y, 2))
    lin = np.polyval(np.polyfit(x, y, 1), x)
    return CostFit(a, b, c, _r_squared(y, np.polyval([a, b, c], x)), _r_squared(y, lin), len(rows), rid)


# ---------------------------------------------------------- the teaching model
@dataclass(frozen=True)
class CostProjection:
    """A run on paper: the context starts at ``first_input`` tokens and every
    step appends ``added_per_step`` (the model's reply plus the tool results),
    each reply being ``output_per_step`` tokens.

    Without caching, step k pays for its whole context at the input rate, so
    step costs grow linearly and the run's cost with the square of its length.
    With prompt caching, step k reads the previous request back from the cache
    (cheap) and writes only what is new (a little dearer than input): still
    quadratic, with a much smaller coefficient. (Anthropic caches only prompts
    above a minimum length, about 1,024 tokens; the projection ignores that.)

    ``prices`` is an :class:`~agentlab.Prices` or a model id.
    """

    first_input: int = 2000
    added_per_step: int = 3286
    output_per_step: int = 400
    prices: Prices | str = "claude-sonnet-4-5"
    caching: bool = False

    def __post_init__(self) -> None:
        for name in ("first_input", "added_per_step", "output_per_step"):
            v = getattr(self, name)
            if not is_whole(v, 0):
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        if self.output_per_step > self.added_per_step:
            raise ValueError(
                f"output_per_step ({self.output_per_step}) cannot exceed added_per_step ({self.added_per_step}): "
                "each reply is part of what the next step sends"
            )
        object.__setattr__(self, "prices", as_prices(self.prices))
        if not isinstance(self.caching, bool):
            raise TypeError(f"caching must be True or False, got {self.caching!r}")

    @classmethod
    def growing(
        cls,
        first_input: int = 2000,
        reaches: int = 25_000,
        at_step: int = 8,
        *,
        output_per_step: int = 400,
        prices: Prices | str = "claude-sonnet-4-5",
        caching: bool = False,
    ) -> CostProjection:
        """A projection whose context grows from ``first_input`` to ``reaches`` tokens by ``at_step``.

        The defaults are the seed's example: 2,000 tokens at step one, 25,000 at step eight.
        """
        if not is_whole(at_step, 2):
            raise ValueError(f"at_step must be an int >= 2, got {at_step!r}")
        if not is_whole(reaches, first_input):
            raise ValueError(f"reaches must be an int >= first_input ({first_input}), got {reaches!r}")
        added = round((reaches - first_input) / (at_step - 1))
        return cls(first_input, added, output_per_step, prices, caching)

    def with_caching(self, caching: bool = True) -> CostProjection:
        """The same projection with prompt caching on (or off): cached prefixes billed at the read rate."""
        return CostProjection(self.first_input, self.added_per_step, self.output_per_step, self.prices, caching)

    def context(self, k: int) -> int:
        """Tokens sent at step ``k`` (1-based)."""
        self._check_step(k)
        return self.first_input + (k - 1) * self.added_per_step

    def usage(self, k: int) -> Usage:
        """The usage Anthropic would report for step ``k``."""
        ctx = self.context(k)
        if not self.caching:
            return Usage(input_tokens=ctx, output_tokens=self.output_per_step)
        read = 0 if k == 1 else self.context(k - 1)
        return Usage(
            output_tokens=self.output_per_step, cache_read_input_tokens=read, cache_creation_input_tokens=ctx - read
        )

    def step_cost(self, k: int) -> float:
        """USD of step ``k`` alone."""
        assert isinstance(self.prices, Prices)
        return self.prices.cost(self.usage(k))

    def total_cost(self, n: int) -> float:
        """USD of a run of ``n`` steps."""
        self._check_step(n)
        return sum(self.step_cost(k) for k in range(1, n + 1))

    def frame(self, n: int = 8) -> pd.DataFrame:
        """Steps 1..``n`` in the shape of the ``steps`` frame, ready for the plots."""
        import pandas as pd

        self._check_step(n)
        rows = []
        total = 0.0
        for k in range(1, n + 1):
            u = self.usage(k)
            cost = self.step_cost(k)
            total += cost
            rows.append(
                {
                    "run_id": "projection (cached)" if self.caching else "projection",
                    "step": k,
                    "input_tokens": u.input_tokens,
                    "output_tokens": u.output_tokens,
                    "cache_write_tokens": u.cache_creation_input_tokens,
                    "cache_read_tokens": u.cache_read_input_tokens,
                    "context_tokens": u.context_tokens,
                    "cost": cost,
                    "cumulative_cost": total,
                }
            )
        return pd.DataFrame(rows)

    @staticmethod
    def _check_step(k: int) -> None:
        if not is_whole(k, 1):
            raise ValueError(f"step must be an int >= 1, got {k!r}")


# ------------------------------------------------------------------ repricing
def reprice(steps: pd.DataFrame, prices: Prices | str, *, caching: bool | None = None) -> pd.DataFrame:
    """The same steps priced at other ``prices`` (a :class:`Prices` or a model id). No model is called.

    ``caching``: ``None`` keeps the recorded split between plain input and
    cache reads/writes; ``False`` prices every context token as plain input
    (no caching); ``True`` assumes an ideal cache: each step reads the previous
    request back from the cache and writes only what is new.
    """
    if caching not in (None, True, False):
        raise TypeError(f"caching must be None, True or False, got {caching!r}")
    p = as_prices(prices)
    out = step_costs(steps)
    if caching is False:
        out["input_tokens"] = out["context_tokens"]
        out["cache_read_tokens"] = 0
        out["cache_write_tokens"] = 0
    elif caching is True:
        prev = out.groupby("run_id")["context_tokens"].shift(1).fillna(0).astype("int64")
        read = prev.where(prev <= out["context_tokens"], 0)  # a shrunk context cannot be read back
        out["input_tokens"] = 0
        out["cache_read_tokens"] = read
        out["cache_write_tokens"] = out["context_tokens"] - read
    out["cost"] = [
        p.cost(Usage(int(i), int(o), int(w), int(r)))
        for i, o, w, r in zip(
            out["input_tokens"], out["output_tokens"], out["cache_write_tokens"], out["cache_read_tokens"], strict=True
        )
    ]
    out["cumulative_cost"] = out.groupby("run_id")["cost"].cumsum()
    return out


# ----------------------------------------------------------------- what-if
@dataclass(frozen=True, slots=True)
class _Verdict:
    outcome: str  # done | stopped | unknown
    reason: str
    steps: int
    spent: float


def _replay(
    rows: list[dict[str, Any]],
    run: dict[str, Any],
    *,
    max_steps: int | None,
    max_cost: float | None,
    deadline_s: float | None,
    guard: CostGuard,
    prices: Prices | None,
    caches: bool,
    max_tokens: int,
    requests: Mapping[int, Mapping[str, Any]],
) -> _Verdict:
    """Walk one recorded run step by step under other limits, in the engine's order of checks.

    The money goes through the engine's own :class:`~agentlab._account.Account` (each call reserved,
    then charged what it was billed), and every limit through :mod:`agentlab.budget`'s rules, so the
    replay stops where the engine would."""
    n = len(rows)
    if max_cost is not None and prices is None:
        return _Verdict("unknown", "no prices known for this run's model: max_cost cannot be checked", 0, 0.0)
    budget = Budget(max_steps=max_steps, max_cost=max_cost, deadline_s=deadline_s, cost_guard=guard)
    account = Account(str(run.get("run_id", "")))

    def rates(n: int) -> tuple[float, float]:
        return prices.worst_rates(n, caches) if prices is not None else (0.0, 0.0)

    for i, r in enumerate(rows):
        k = i + 1
        # Before the call: the engine's own rules (budget.py), in its order.
        call_start = r["t"] - r["latency"]
        if stop := check_before_call(budget, k - 1, call_start):
            return _Verdict("stopped", str(stop.reason), k - 1, account.spent)
        allowed, worst = max_tokens, 0.0
        if prices is not None:
            # The engine's own check (budget.check_call), on what the trace recorded;
            # an exact count would have returned the billed context.
            step = int(r["step"])
            rec = requests.get(step, {})
            args = dict(
                steps=k - 1,
                spent=account.spent,
                estimate=int(rec.get("estimate", r["context_tokens"])),
                bound=int(rec.get("bound", r["context_tokens"])),
                billed_by_estimate=bool(i and rows[i - 1].get("estimated")),
                fees=0.0,
                rates=rates,
                max_tokens=max_tokens,
            )
            checked = check_call(budget, **args)  # type: ignore[arg-type]
            if checked.wants_count and rec.get("can_count", True):
                checked = check_call(budget, **args, counted=int(r["context_tokens"]))  # type: ignore[arg-type]
            if checked.stop is not None:
                return _Verdict("stopped", str(checked.stop.reason), k - 1, account.spent)
            allowed, worst = checked.max_tokens, checked.worst_case
        hold = account.reserve(0, (0.0, 0.0), allowed, worst)  # a replay answers to no shared total
        assert isinstance(hold, Hold)
        # The call: the deadline bounds it (a reply that came after it was never had); a smaller max_tokens cuts
        # the reply off.
        if _came_late(budget, r["t"]):
            return _Verdict("stopped", "deadline", k, account.spent)
        usage = Usage(r["input_tokens"], r["output_tokens"], r["cache_write_tokens"], r["cache_read_tokens"])
        if allowed < r["output_tokens"] and prices is not None:
            usage = replace(usage, output_tokens=allowed)
            account.charge(hold, "usage", prices.cost(usage), usage)
            return _Verdict("stopped", "max_tokens", k, account.spent)
        account.charge(hold, "usage", r["cost"], usage)
        if k == n and run["outcome"] == "done":
            return _Verdict("done", "done", k, account.spent)
        # The tools of this step run until the next call starts (or the run ends).
        tools_end = rows[i + 1]["t"] - rows[i + 1]["latency"] if k < n else run["seconds"]
        if _came_late(budget, tools_end):
            return _Verdict("stopped", "deadline", k, account.spent)
        if k == n and run["outcome"] == "stopped" and run["reason"] not in RESUMABLE:
            break  # the last step itself ended the run (fatal, loop detected, ...): no after-step checks
        # After the step: the engine's after-step rule (cost, deadline, steps).
        if stop := check_after_step(budget, k, account.spent, tools_end):
            return _Verdict("stopped", str(stop.reason), k, account.spent)
    reason, outcome = str(run["reason"]), str(run["outcome"])
    n = max(n, int(run.get("steps") or 0))  # a last call that failed counts as a step but has no row
    if outcome == "incomplete" or reason in RESUMABLE:
        rec_cost = run.get("max_cost")
        if (
            reason == "budget"
            and max_cost is not None
            and rec_cost is not None
            and not _nan(rec_cost)
            and max_cost <= rec_cost
        ):
            return _Verdict("stopped", "budget", n, account.spent)
        return _Verdict("unknown", f"ran past the recording (which ended: {reason or outcome})", n, account.spent)
    return _Verdict(outcome, reason, n, account.spent)


def _came_late(budget: Budget, t: float) -> bool:
    """Did what ended at working time ``t`` end after the deadline (so the engine had cut it)? What ends exactly
    at it was had, as the engine has a reply that comes with no time left (the next check then stops the run)."""
    left = time_left(budget, t)
    return left is not None and left < 0


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _limits(name: str, values: Any, *, integer: bool = False) -> list[Any]:
    """One limit or a list of them, each checked by the rule ``run()`` uses (:func:`agentlab.budget.check_limit`)."""
    single = values is None or isinstance(values, (numbers.Real, Decimal, str, bytes))
    seq = [values] if single else list(values)
    if not seq:
        raise ValueError(f"{name} needs at least one value (None means no limit)")
    return [check_limit(name, v, integer=integer) for v in seq]


def budget_whatif(
    traces: Any,
    *,
    max_steps: int | None | Sequence[int | None] = None,
    max_cost: float | None | Sequence[float | None] = None,
    deadline_s: float | None | Sequence[float | None] = None,
    cost_guard: CostGuard = "hard",
) -> pd.DataFrame:
    """Which recorded runs a grid of other budgets would have stopped, where and why.

    Computed from the traces alone, replaying the engine's rules in its order:
    before each call the step limit, the deadline (working time ``t``) and,
    with ``cost_guard="hard"``, the worst-case pre-call check (the exact
    input, as billed, plus a minimal reply must fit what is left; with
    ``"estimate"`` the recorded input estimate instead; a clamped
    ``max_tokens`` shorter than the recorded reply cuts it off, reason
    ``"max_tokens"``); the deadline during the call and the tools; after the
    step the spent-vs-``max_cost`` check (the only cost check of
    ``cost_guard="after"``), the deadline and the step limit.

    Each limit is a value or a list of values (``None`` = no limit); the
    grid is every combination. One row per (run, budget): ``outcome``
    ("done" | "stopped" | "unknown": the hypothetical run would have gone on
    past the end of the recording), ``reason``, ``steps`` (the engine's step
    count at the stop), ``spent``, ``recorded_spent``, ``saved``, ``changed``.
    """
    import pandas as pd

    if cost_guard not in COST_GUARDS:
        raise ValueError(f"cost_guard must be 'hard', 'estimate' or 'after', got {cost_guard!r}")
    runs, steps, _, events = _frames(traces)
    _need(runs, "runs", (*RUN_COLUMNS, "model", "seconds"))
    _need(steps, "steps", (*STEP_COLUMNS, "latency", "t"))
    grid = list(
        itertools.product(
            _limits("max_steps", max_steps, integer=True),
            _limits("max_cost", max_cost),
            _limits("deadline_s", deadline_s),
        )
    )
    started = _run_started(events)
    requests = _request_estimates(events)
    extra = [c for c in ("latency", "t", "estimated") if c in steps.columns]
    per = step_costs(steps).merge(steps[["run_id", "step", *extra]], on=["run_id", "step"], how="left")
    by_run = {rid: g.to_dict("records") for rid, g in per.groupby("run_id", sort=False)}
    out = []
    for run in runs.to_dict("records"):
        rid = run["run_id"]
        rows = by_run.get(rid, [])
        info = started.get(rid, {})
        prices = _run_prices(info.get("prices"), run.get("model"))
        caches = any(r["cache_write_tokens"] or r["cache_read_tokens"] for r in rows)
        max_tokens = int(info.get("max_tokens") or 1024)
        recorded = sum(r["cost"] for r in rows)
        for ms, mc, dl in grid:
            v = _replay(
                rows,
                run,
                max_steps=ms,
                max_cost=mc,
                deadline_s=dl,
                guard=cost_guard,
                prices=prices,
                caches=caches,
                max_tokens=max_tokens,
                requests=requests.get(rid, {}),
            )
            out.append(
                {
                    "run_id": rid,
                    "max_steps": ms,
                    "max_cost": mc,
                    "deadline_s": dl,
                    "outcome": v.outcome,
                    "reason": v.reason,
                    "steps": v.steps,
                    "spent": v.spent,
                    "recorded_spent": recorded,
                    "saved": recorded - v.spent,
                    "changed": v.outcome != run["outcome"] or v.reason != run["reason"] or v.steps != len(rows),
                }
            )
    cols = [
        "run_id",
        "max_steps",
        "max_cost",
        "deadline_s",
        "outcome",
        "reason",
        "steps",
        "spent",
        "recorded_spent",
        "saved",
        "changed",
    ]
    frame = pd.DataFrame(out, columns=cols)
    for c in ("max_steps", "max_cost", "deadline_s"):
        frame[c] = frame[c].astype(float)  # NaN = no limit, as in the runs frame
    return frame


def whatif_summary(grid: pd.DataFrame) -> pd.DataFrame:
    """Per budget of a :func:`budget_whatif` grid: runs done, stopped (by reason), unknown, and dollars."""
    _need(grid, "grid", ("max_steps", "max_cost", "deadline_s", "outcome", "reason", "spent", "saved"))
    keys = ["max_steps", "max_cost", "deadline_s"]
    stopped = grid["outcome"] == "stopped"
    flags = {
        f"stopped: {r}": (stopped & (grid["reason"] == r)).astype(int)
        for r in sorted(grid.loc[stopped, "reason"].unique())
    }
    g = grid.assign(
        runs=1,
        done=(grid["outcome"] == "done").astype(int),
        stopped=stopped.astype(int),
        unknown=(grid["outcome"] == "unknown").astype(int),
        **flags,
    )
    cols = ["runs", "done", "stopped", "unknown", *flags, "spent", "saved"]
    return g.groupby(keys, dropna=False, sort=True)[cols].sum().reset_index()


def _run_started(events: Any) -> dict[str, dict[str, Any]]:
    if events is None:
        return {}
    _need(events, "events", ("run_id", "kind", "data"))
    sel = events[events["kind"] == EventKind.RUN_STARTED]
    return {rid: (d if isinstance(d, dict) else {}) for rid, d in zip(sel["run_id"], sel["data"], strict=True)}


def _request_estimates(events: Any) -> dict[str, dict[int, dict[str, Any]]]:
    """Per run and step, what the guard had before the call: the estimate, the bound, whether it could count."""
    if events is None:
        return {}
    _need(events, "events", ("run_id", "step", "kind", "data"))
    sel = events[events["kind"] == EventKind.MODEL_REQUEST]
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for rid, step, d in zip(sel["run_id"], sel["step"], sel["data"], strict=True):
        if isinstance(d, dict) and d.get("estimated_input_tokens") is not None:
            rec: dict[str, Any] = {"estimate": int(d["estimated_input_tokens"])}
            if d.get("input_bound") is not None:
                rec["bound"] = int(d["input_bound"])
                rec["can_count"] = bool(d.get("can_count"))
            out.setdefault(rid, {})[int(step)] = rec
    return out


def _run_prices(recorded: Any, model: Any) -> Prices | None:
    if isinstance(recorded, dict) and recorded.get("input") is not None and recorded.get("output") is not None:
        table = lookup_prices(model) if isinstance(model, str) else None
        if table is not None and (table.input, table.output) == (recorded["input"], recorded["output"]):
            return table  # the table's own entry also knows the long-context tier
        return Prices(
            input=recorded["input"],
            output=recorded["output"],
            cache_read=recorded.get("cache_read"),
            cache_write=recorded.get("cache_write"),
        )
    return lookup_prices(model) if isinstance(model, str) else None


# ------------------------------------------------------- the other vital signs
@dataclass(frozen=True, slots=True)
class Recovery:
    """Of the runs the loop guard nudged, how many went on to finish."""

    nudged: int
    recovered: int
    run_ids: tuple[str, ...]

    @property
    def rate(self) -> float | None:
        """Recovered / nudged, or None when no run was nudged."""
        return self.recovered / self.nudged if self.nudged else None

    def __str__(self) -> str:
        if not self.nudged:
            return "no run was nudged"
        return f"{self.recovered} of {self.nudged} nudged runs finished ({self.rate:.0%})"


def loop_recovery(runs: pd.DataFrame) -> Recovery:
    """Loop-detection recovery rate: nudged runs that still ended with an answer."""
    _need(runs, "runs", ("run_id", "outcome", "nudges"))
    nudged = runs[runs["nudges"].fillna(0) > 0]
    ok = nudged[nudged["outcome"] == "done"]
    return Recovery(len(nudged), len(ok), tuple(ok["run_id"]))


def retry_counts(calls: pd.DataFrame, events: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per run: tool calls, calls that needed retries, extra tool attempts, and model-call retries."""
    import pandas as pd

    _need(calls, "calls", ("run_id", "attempts"))
    c = calls.assign(extra=(calls["attempts"].fillna(1).astype(int) - 1).clip(lower=0))
    out = c.groupby("run_id", sort=False).agg(
        tool_calls=("extra", "size"),
        retried_calls=("extra", lambda s: int((s > 0).sum())),
        tool_retries=("extra", "sum"),
    )
    if events is not None:
        _need(events, "events", ("run_id", "kind"))
        model = events[events["kind"] == EventKind.MODEL_RETRY].groupby("run_id").size().rename("model_retries")
        out = out.join(model, how="outer")
    else:
        out["model_retries"] = 0
    out = (
        out.fillna(0).astype(int)
        if len(out)
        else pd.DataFrame(columns=["tool_calls", "retried_calls", "tool_retries", "model_retries"])
    )
    return out.reset_index().rename(columns={"index": "run_id"})


def _executed(calls: pd.DataFrame) -> pd.DataFrame:
    """Calls whose tool actually ran (a nudge answers from memory; a skipped call never started)."""
    if "outcome" in calls.columns:
        calls = calls[calls["outcome"] != Outcome.NUDGED]
    return calls.assign(duration=calls["end"].astype(float) - calls["start"].astype(float))


def tool_latency(calls: pd.DataFrame, percentiles: Sequence[float] = (50, 90, 99)) -> pd.DataFrame:
    """Per tool: how many calls ran, and their duration percentiles and maximum (seconds)."""
    _need(calls, "calls", CALL_COLUMNS)
    ps = list(percentiles)
    if not ps or any(isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 100 for p in ps):
        raise ValueError(f"percentiles must be numbers in 0..100, got {percentiles!r}")
    ran = _executed(calls)
    g = ran.groupby("tool")["duration"]
    out = g.size().rename("calls").to_frame()
    for p in ps:
        out[f"p{p:g}"] = g.quantile(p / 100)
    out["max"] = g.max()
    return out.reset_index()


def parallel_speedup(calls: pd.DataFrame) -> pd.DataFrame:
    """Per turn (run, step): the sum of call durations divided by the turn's wall time.

    Three 0.4 s reads run together give a speed-up near 3; writes run alone,
    so a turn of writes stays at 1. Turns whose calls took no time are NaN.
    """
    _need(calls, "calls", CALL_COLUMNS)
    ran = _executed(calls)
    g = ran.groupby(["run_id", "step"], sort=False)
    out = g.agg(
        calls=("tool", "size"), busy=("duration", "sum"), first=("start", "min"), last=("end", "max")
    ).reset_index()
    out["wall"] = out["last"] - out["first"]
    out["speedup"] = (out["busy"] / out["wall"]).where(out["wall"] > 0)
    return out[["run_id", "step", "calls", "busy", "wall", "speedup"]]

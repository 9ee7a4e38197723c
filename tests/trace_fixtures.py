"""Runs every trace test compares frames on: native runs of every scenario and every recorded import,
and the comparison itself (column by column, dtype by dtype, value by value)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

import agentlab as al
from agentlab import reply, scenarios
from agentlab.trace.schema import TABLES

from .helpers import PRICES

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "fixtures" / "recorded"


@al.tool(mode="read")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def same(a: object, b: object) -> bool:
    """Equal, with NaN equal to NaN, at any depth."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def assert_same_frames(logs: al.Traces, store: al.Traces) -> None:
    """Column by column, dtype by dtype, value by value."""
    for name in TABLES:
        x, y = getattr(logs, name), getattr(store, name)
        assert list(x.columns) == list(y.columns), name
        assert x.index.equals(y.index), name
        for col in x.columns:
            assert x[col].dtype == y[col].dtype, (name, col, x[col].dtype, y[col].dtype)
            if x[col].dtype == object or str(x[col].dtype) == "json":
                bad = [i for i, (a, b) in enumerate(zip(x[col], y[col], strict=True)) if not same(a, b)]
                assert not bad, (name, col, bad[:3], x[col].iloc[bad[0]], y[col].iloc[bad[0]])
            else:
                pd.testing.assert_series_equal(x[col], y[col], check_exact=True, obj=f"{name}.{col}")


def from_logs(folder: Path) -> al.Traces:
    """The frames as the logs alone give them (the store moved aside while reading)."""
    store, aside = folder / "_store", folder.parent / f"{folder.name}-store-aside"
    if store.exists():
        store.rename(aside)
    try:
        return al.load_runs(folder)
    finally:
        if aside.exists():
            aside.rename(store)


def native_runs(folder: Path) -> None:
    """Every scenario, plus runs the scenarios do not make: a NaN score, an incomplete log, a non-ASCII task."""
    for s in scenarios.all():
        setup = s.setup(seed=1)
        setup.run(trace=folder)
        setup.close()
    al.run(
        "naïve ünïcode task ✓",
        [lookup],
        model=al.ScriptedModel([reply(None, ("lookup", {"key": "ß"})), reply("done")]),
        trace=folder,
        prices=PRICES,
        clock=al.FakeClock(),
        max_cost=1.0,
        run_id="unicode",
    )
    cut = al.run(
        "to be cut",
        [lookup],
        model=al.ScriptedModel([reply(None, ("lookup", {"key": "a"})), reply("done")]),
        trace=folder,
        prices=PRICES,
        clock=al.FakeClock(),
        max_cost=1.0,
        run_id="cut",
    )
    log = folder / f"{cut.run_id}.jsonl"
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:-3]))  # died before it finished
    sub_run(folder)


def a_run(folder: Path, run_id: str, steps: int = 2) -> None:
    """A priced run of ``steps`` lookups named ``run_id``, traced into ``folder`` on a fake clock."""
    script = [reply(f"step {i}", ("lookup", {"key": f"{run_id}-{i}"})) for i in range(steps)] + [reply("done")]
    al.run(
        f"task {run_id}",
        [lookup],
        model=al.ScriptedModel(script),
        trace=folder,
        prices=PRICES,
        clock=al.FakeClock(),
        max_cost=1.0,
        run_id=run_id,
    )


def sub_run(folder: Path) -> None:
    """A run whose tool runs another agent: the parent's log has a sub_run event naming the child."""

    @al.tool(mode="read", name="ask_agent")
    def ask_agent(question: str) -> str:
        """Ask a sub-agent."""
        script = [reply(None, ("lookup", {"key": "c"})), reply("sub done")]
        child = al.run(
            "sub task",
            [lookup],
            model=al.ScriptedModel(script),
            prices=PRICES,
            trace=folder,
            clock=al.FakeClock(),
            max_cost=1.0,
        )
        return child.text

    script = [reply(None, ("ask_agent", {"question": "q"})), reply("done")]
    al.run(
        "parent task",
        [ask_agent],
        model=al.ScriptedModel(script),
        trace=folder,
        prices=PRICES,
        clock=al.FakeClock(),
        max_cost=1.0,
        run_id="parent",
    )
    assert '"kind":"sub_run"' in (folder / "parent.jsonl").read_text()


def every_fixture(tmp_path_factory) -> dict[str, Path]:
    """A folder of native runs and one of every recorded fixture imported."""
    native = tmp_path_factory.mktemp("native")
    native_runs(native)
    imported = tmp_path_factory.mktemp("imported")
    for source in sorted(p for p in RECORDED.iterdir() if p.is_dir()):
        al.import_recorded(source, imported)
    return {"native": native, "imported": imported}


def outside_copies(folder: Path) -> dict[str, dict[str, int]]:
    """What a reader of the store folder as it stands sees (DuckDB over ``_store/<table>/*/*.parquet``, as the docs
    invite): per table, each run it finds and in how many parts. Retries a read that races a file's removal."""
    import duckdb

    out: dict[str, dict[str, int]] = {}
    for table in TABLES:
        files = str(folder / "_store" / table / "*" / "*.parquet")
        owner = "_run" if table == "events" else "run_id"
        for attempt in range(50):
            if not list((folder / "_store" / table).glob("*/*.parquet")):
                out[table] = {}
                break
            try:
                rows = duckdb.sql(
                    f"select {owner}, count(distinct filename) from read_parquet('{files}', filename = true) "
                    f"group by {owner}"
                ).fetchall()
            except (duckdb.IOException, duckdb.InvalidInputException):  # a file removed between listing and reading
                if attempt == 49:
                    raise
                continue
            out[table] = dict(rows)
            break
    return out


def assert_at_most_once_outside(folder: Path) -> dict[str, dict[str, int]]:
    """No run in two parts of any table, as an outside reader sees the store folder."""
    seen = outside_copies(folder)
    twice = {t: {r: n for r, n in runs.items() if n > 1} for t, runs in seen.items()}
    assert not any(twice.values()), twice
    return seen

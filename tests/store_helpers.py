"""Builders shared by the store's tests: a tool, and frames compared store against logs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

import agentlab as al
from agentlab.trace.frames import TABLES


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

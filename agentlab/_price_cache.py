"""A small on-disk memo of resolved model prices, so a cold ``Run()`` stays fast.

Resolving a price through genai-prices imports its whole data set (pydantic
models, an HTTP client, ~90 ms here): more than the rest of ``import
agentlab`` and a first ``Run()`` together, and it landed inside the first
run's deadline. The rates agentlab needs per model are a dozen numbers, so
they are kept in ``~/.cache/agentlab/prices.json`` (or ``$AGENTLAB_CACHE``)
after the first lookup.

The memo is keyed by the installed genai-prices data (its files' sizes and
modification times, read without importing it) and by the fields of
:class:`~agentlab.pricing.Prices`: an upgrade of either makes it stale, and a
stale or unreadable memo is simply rebuilt. Each entry keeps the days its price holds (the table dates some
price changes ahead): on the first day past them it is looked up again. The file keeps a memo for each of
the last few installs that wrote it (environments share one home). Nothing here can fail a run:
an unwritable cache folder only means the next cold start looks up again.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CACHE_ENV = "AGENTLAB_CACHE"
FILE = "prices.json"
KEEP = 8
"""Installs of the price data whose memos the file keeps. Environments (a notebook's kernel, a project's venv)
share one home: with one memo for the file, each cold start of the one rebuilt the other's, importing the
whole price data (~90 ms, inside its first run's deadline) every time they took turns."""
_memo: dict[str, Any] | None = None
_built: list[Any] = [None, {}]
"""The memo the objects were built from, and the objects by (class, model id): the engine asks on every reply."""


@functools.cache
def _fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def cache_dir() -> Path:
    """``$AGENTLAB_CACHE``, else ``$XDG_CACHE_HOME/agentlab``, else ``~/.cache/agentlab``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentlab"


LOOKUP_RULES = 3
"""The version of how a lookup reads genai-prices (2: batch variants ride along; 3: a price that varies by the hour
is its dearest, not the one at the first lookup's hour, and each entry keeps the days it holds): a memo made by
other rules is not used."""


@functools.cache
def data_key(fields: tuple[str, ...]) -> str:
    """What the memo is valid for: the price data installed, and the shape of ``Prices``.

    Worked out once a process: ``find_spec`` and three ``stat`` calls cost ~0.1 ms, and the
    engine asks for the served model's prices on every reply (an alias is served as a dated id).
    """
    spec = importlib.util.find_spec("genai_prices")  # finds the package without importing it
    parts = [",".join(fields), f"rules:{LOOKUP_RULES}"]
    if spec is not None and spec.origin:
        folder = Path(spec.origin).parent
        for name in ("data.py", "data_snapshot.py", "types.py"):
            try:
                st = (folder / name).stat()
                parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                parts.append(f"{name}:-")
    return "|".join(parts)


Window = tuple[str | None, str | None]
"""The days a looked-up price holds: from the table's last price change on or before the day it was looked up
to its next one after (ISO dates, ``None`` open-ended). genai-prices dates some changes ahead of time."""


_EVERY_DAY: Window = (None, None)

_day: list[Any] = ["", 0.0]
"""Today (ISO) and the moment it ends (epoch seconds): the engine asks for a price on every reply."""


def today() -> str:
    """Today's date in UTC, ISO: the day a price is looked up for (a test moves it through :data:`_day`)."""
    if time.time() >= _day[1]:
        now = datetime.now(UTC)
        midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
        _day[:] = [now.date().isoformat(), midnight.timestamp()]
    return str(_day[0])


def holds(window: Window, day: str) -> bool:
    """Whether a price with ``window`` is the price on ``day`` (ISO dates compare as text)."""
    start, until = window
    return (start is None or start <= day) and (until is None or day < until)


def window_of(
    model_id: str,
    cls: type,
    lookup: Callable[[str], Any],
    window: Callable[[str], Window] | None = None,
) -> tuple[Any, Window]:
    """Today's ``lookup(model_id)`` (a dataclass of ``cls`` or None) with the days it holds (``window(model_id)``;
    every day, without one), answered from the memo when it can be: an entry made before a price change the
    table dated ahead is looked up again once that day comes."""
    global _memo
    key = data_key(_fields(cls))
    if _memo is None or _memo.get("key") != key:
        _memo = _read(cache_dir() / FILE, key)
    if _built[0] is not _memo:  # objects built from another memo (or none yet): start again
        _built[:] = [_memo, {}]
    objects, models = _built[1], _memo["models"]
    built = objects.get((cls, model_id))
    if built is not None and (built[1] == _EVERY_DAY or holds(built[1], today())):
        return built  # a price the table never changes needs no date: the engine asks on every reply
    day = today()
    entry = models.get(model_id)
    if isinstance(entry, dict) and "value" in entry and holds((entry.get("from"), entry.get("until")), day):
        value = entry["value"]
        built = (None if value is None else cls(**value), (entry.get("from"), entry.get("until")))
        objects[cls, model_id] = built  # frozen: one object serves every reply
        return built
    found = lookup(model_id)
    held = window(model_id) if window is not None else _EVERY_DAY
    models[model_id] = {
        "value": None if found is None else dataclasses.asdict(found),
        "from": held[0],
        "until": held[1],
    }
    _write(cache_dir() / FILE, _memo)
    objects[cls, model_id] = (found, held)
    return found, held


def _read(path: Path, key: str) -> dict[str, Any]:
    """This install's memo (``{"key", "models"}``) from the file; empty when it has none or cannot be read."""
    models = _memos(path).get(key)
    return {"key": key, "models": models if isinstance(models, dict) else {}}


def _memos(path: Path) -> dict[str, Any]:
    """Every install's models in the file, by data key (``{}`` for a missing, broken or older file)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    memos = data.get("memos") if isinstance(data, dict) else None
    return memos if isinstance(memos, dict) else {}


def _write(path: Path, memo: dict[str, Any]) -> None:
    """This install's memo into the file beside the others' (read again now: another process may have written
    since), the newest last and at most :data:`KEEP` of them; atomically (a temporary file, then a rename): a
    concurrent reader never sees half a file."""
    import tempfile  # (here: only a first lookup writes, and ``import agentlab`` need not load it)

    memos = _memos(path)
    memos.pop(memo["key"], None)
    memos[memo["key"]] = memo["models"]
    while len(memos) > KEEP:
        memos.pop(next(iter(memos)))  # the install that wrote longest ago
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".prices-", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"memos": memos}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: the next cold start looks the price up again

"""The experiment folder: a manifest, the rows of finished cells, and the run traces.

``manifest.json`` records the spec (task ids and input hashes, config
options and hashes, repeats, limits) and code/package versions;
``rows.jsonl`` gets one line per finished cell, written with one unbuffered
write after the run's trace is complete, so a SIGKILL loses no finished
run; ``traces/`` holds every run's JSONL trace.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from ..trace.files import inside
from .grid import Config, describe
from .tasks import Task

RERUN_REASONS = frozenset({"experiment budget", "cancelled", "setup failed"})
"""A row with one of these reasons did not finish its work: a rerun runs the cell again."""


def spec_of(tasks: list[Task], configs: list[Config], repeats: int) -> dict[str, Any]:
    return {
        "tasks": {t.id: hashlib.sha256(t.input.encode("utf-8", "surrogatepass")).hexdigest()[:16] for t in tasks},
        "configs": {c.name: {"hash": c.digest(), "options": describe(c.params)} for c in configs},
        "repeats": repeats,
    }


@lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """Package versions for the manifest (looked up once per process: the lookup scans sys.path)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("agentlab", "anthropic", "pandas"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def conflicts(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed between the folder's spec and this one (adding tasks, configs or repeats is fine)."""
    out = []
    for tid, h in new["tasks"].items():
        if tid in old.get("tasks", {}) and old["tasks"][tid] != h:
            out.append(f"task {tid!r} has a different input")
    for name, c in new["configs"].items():
        was = old.get("configs", {}).get(name)
        if was is not None and was["hash"] != c["hash"]:
            out.append(f"config {name!r} changed: {was['options']} -> {c['options']}")
    return out


class Folder:
    """One experiment's folder on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path  # issue 24: every file in it is placed by inside(), which refuses a way out (a planted link)
        self.manifest = inside(path, "manifest.json")
        self.rows = inside(path, "rows.jsonl")
        self.traces = inside(path, "traces")

    def open(self, spec: dict[str, Any], *, name: str, limits: dict[str, Any]) -> None:
        """Create the folder, or check that it was made by a compatible spec, and record the spec."""
        if self.manifest.exists():
            old = json.loads(self.manifest.read_text(encoding="utf-8"))
            problems = conflicts(old.get("spec", {}), spec)
            if problems:
                raise ValueError(
                    f"the folder {self.path} holds experiment {old.get('name')!r}, made by a different spec: "
                    + "; ".join(problems[:5])
                    + ". Pass a new name= (or another folder) to start a new experiment there."
                )
            merged = {
                "tasks": {**old["spec"].get("tasks", {}), **spec["tasks"]},
                "configs": {**old["spec"].get("configs", {}), **spec["configs"]},
                "repeats": max(old["spec"].get("repeats", 1), spec["repeats"]),
            }
        else:
            merged = spec
        self.traces.mkdir(parents=True, exist_ok=True)
        manifest = {"name": name, "spec": merged, "limits": limits, "versions": dict(versions()), "argv": sys.argv[:1]}
        tmp = inside(self.path, "manifest.tmp")
        tmp.write_text(json.dumps(manifest, indent=1, default=str), encoding="utf-8")
        tmp.replace(self.manifest)  # atomic: a kill leaves the old manifest or the new one

    def finished_rows(self) -> dict[tuple[str, str, int], dict[str, Any]]:
        """The last row of every cell that finished (killed-mid-write lines are skipped)."""
        out: dict[tuple[str, str, int], dict[str, Any]] = {}
        if not self.rows.exists():
            return out
        for line in self.rows.read_bytes().splitlines():
            try:
                row = orjson.loads(line)
            except ValueError:
                continue
            key = (row["task_id"], row["config"], row["repeat"])
            if row.get("reason") in RERUN_REASONS or row.get("outcome") == "not run":
                out.pop(key, None)
            else:
                out[key] = row
        return out

    def appender(self) -> Any:
        self.path.mkdir(parents=True, exist_ok=True)
        return open(self.rows, "ab", buffering=0)


def row_line(row: dict[str, Any]) -> bytes:
    return orjson.dumps(row, default=str, option=orjson.OPT_APPEND_NEWLINE)

"""Traces: every event of a run, one JSON line each, flushed as it happens.

(Minimal writer; the loaders and DataFrames grow in the traces issue.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .events import Event

RUNS_ENV = "AGENTLAB_RUNS"


def runs_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The runs folder: ``path``, else ``$AGENTLAB_RUNS``, else ``./runs``."""
    return Path(path or os.environ.get(RUNS_ENV) or "runs")


class TraceWriter:
    """A subscriber that appends each event to ``<runs>/<run_id>.jsonl``."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.dir = runs_dir(path)
        self._files: dict[str, Any] = {}

    def __call__(self, event: Event) -> None:
        f = self._files.get(event.run_id)
        if f is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            f = self._files[event.run_id] = open(self.dir / f"{event.run_id}.jsonl", "a", encoding="utf-8")
        f.write(json.dumps(event.as_record(), ensure_ascii=False, default=str) + "\n")
        f.flush()

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


def load_run(run_id: str, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """The events of one run, as dicts."""
    file = runs_dir(path) / f"{run_id}.jsonl"
    with open(file, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]

"""Tasks of an experiment: what each run is asked, with an optional target.

Tasks come as strings, dicts, a pandas DataFrame or a JSONL file; they all
become :class:`Task` values with a stable id (the given one, or a hash of the
input), so a rerun finds the same cells.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Task:
    """One task: ``input`` is what the run is asked; ``meta`` becomes extra columns."""

    id: str
    input: str
    target: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    # A task given as a dict reads as one in a scorer: ``task["target"]`` as well as ``task.target``.
    def as_dict(self) -> dict[str, Any]:
        """The task as the dict it may have been given as: ``id``, ``input``, ``target`` and the metadata."""
        return {**self.meta, "id": self.id, "input": self.input, "target": self.target}

    def __getitem__(self, key: str) -> Any:
        d = self.as_dict()
        if key not in d:
            raise KeyError(f"task {self.id!r} has no {key!r}: it has {', '.join(map(repr, d))}")
        return d[key]

    def get(self, key: str, default: Any = None) -> Any:
        """``task.get("target")``, as on the dict the task was given as."""
        return self.as_dict().get(key, default)

    def keys(self) -> list[str]:
        return list(self.as_dict())

    def __contains__(self, key: object) -> bool:
        return key in self.as_dict()


def input_id(text: str) -> str:
    """A stable id from a task's input (the same input always gets the same id)."""
    return "t" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def load_tasks(tasks: Any) -> list[Task]:
    """Every accepted task shape -> a list of :class:`Task`; bad input is named before anything runs."""
    if isinstance(tasks, (str, os.PathLike)) and str(tasks).endswith(".jsonl"):
        path = Path(tasks)
        if not path.exists():
            raise FileNotFoundError(f"tasks file {path} does not exist")
        items: list[Any] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    elif hasattr(tasks, "to_dict") and hasattr(tasks, "columns"):  # a pandas DataFrame
        items = tasks.to_dict("records")
    elif isinstance(tasks, str):
        raise TypeError("tasks must be a list of tasks or a path ending in .jsonl, not a single string")
    elif isinstance(tasks, Iterable):
        items = list(tasks)
    else:
        raise TypeError(f"tasks must be a list, a DataFrame or a .jsonl path, got {type(tasks).__name__}")
    if not items:
        raise ValueError("the experiment has no tasks")
    out = [_task(item, n) for n, item in enumerate(items)]
    seen: dict[str, int] = {}
    for n, t in enumerate(out):
        if t.id in seen:
            raise ValueError(f"duplicate task id {t.id!r} (tasks {seen[t.id]} and {n}); task ids must be unique")
        seen[t.id] = n
    return out


def _task(item: Any, n: int) -> Task:
    if isinstance(item, Task):
        return item
    if isinstance(item, str):
        if not item.strip():
            raise ValueError(f"task {n} is an empty string")
        return Task(input_id(item), item)
    if isinstance(item, Mapping):
        if "input" not in item or not isinstance(item["input"], str) or not item["input"].strip():
            raise ValueError(f"task {n} needs a non-empty string 'input', got {dict(item)!r}")
        given = item.get("id")
        tid = input_id(item["input"]) if given is None or given != given else str(given)  # NaN from a DataFrame
        target = item.get("target")
        target = None if target is None or target != target else str(target)
        meta = {k: v for k, v in item.items() if k not in ("id", "input", "target")}
        return Task(tid, item["input"], target, meta)
    raise TypeError(f"task {n} must be a string or a dict with 'input', got {type(item).__name__}")

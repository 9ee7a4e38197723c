"""Where traces live: the runs folder, and finding one run's file in it."""

from __future__ import annotations

import os
from pathlib import Path

RUNS_ENV = "AGENTLAB_RUNS"
SUFFIX = ".jsonl"

_written: dict[str, Path] = {}
"""Run id -> the absolute folder this process wrote it to, so ``result.trace``
finds a run written with ``trace="some/folder"`` (or before a ``chdir``)."""


def remember(run_id: str, folder: Path) -> None:
    """Note where this process writes ``run_id`` (the writer calls this)."""
    _written[run_id] = folder.resolve()


def runs_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The runs folder: ``path``, else ``$AGENTLAB_RUNS``, else ``./runs``."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a folder path (str or Path) or None, got {type(path).__name__}")
    return Path(path or os.environ.get(RUNS_ENV) or "runs")


def trace_files(path: str | os.PathLike[str] | None) -> list[Path]:
    p = runs_dir(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(
            f"no runs folder at {str(p)!r}: pass path= (a folder or a .jsonl file) or set ${RUNS_ENV}"
        )
    return sorted(p.glob(f"*{SUFFIX}"), key=lambda f: f.name)  # one folder: by name is Path order, 5x faster


def find_run_file(run_id: str, path: str | os.PathLike[str] | None) -> Path:
    if not isinstance(run_id, str) or not run_id.strip():
        raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
    if run_id.endswith(SUFFIX) and Path(run_id).is_file():
        return Path(run_id)
    if "/" in run_id or "\\" in run_id:
        raise ValueError(f"run_id must be a run id (or a path to a {SUFFIX} file), got {run_id!r}")
    folders = [runs_dir(path)]
    if path is None and run_id in _written:
        folders.insert(0, _written[run_id])
    for folder in folders:
        file = folder / f"{run_id}{SUFFIX}"
        if file.is_file():
            return file
    folder = folders[-1]
    matches = sorted(folder.glob(f"{run_id}*{SUFFIX}")) if folder.is_dir() else []
    if len(matches) == 1:  # a unique prefix, like a short git hash
        return matches[0]
    known = [m.stem for m in matches] or ([f.stem for f in sorted(folder.glob(f"*{SUFFIX}"))][-5:] if folder.is_dir() else [])
    hint = f"; runs there include: {', '.join(known)}" if known else ("" if folder.is_dir() else " (no such folder)")
    if len(matches) > 1:
        raise ValueError(f"run_id {run_id!r} matches {len(matches)} runs in {str(folder)!r}{hint}")
    raise FileNotFoundError(
        f"no trace for run {run_id!r} in {str(folder)!r}{hint} (a run made with trace=False writes none; "
        f"pass path= or set ${RUNS_ENV} if it went elsewhere)"
    )

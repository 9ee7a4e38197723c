"""The experiment folder: a manifest, the rows of finished cells, and the run traces.

``manifest.json`` records the spec (task ids and input hashes, config
options and hashes, repeats, limits) and code/package versions;
``rows.jsonl`` gets one line per finished cell, written with one unbuffered
write after the run's trace is complete, so a SIGKILL loses no finished
run; ``traces/`` holds every run's JSONL trace, and ``attempts/`` the traces
of earlier attempts at cells that were run again (they hold spending too).

One process runs a folder at a time: :meth:`Folder.own` takes an exclusive
lock on the folder itself (released by the operating system when the process
dies, however it dies; deleting a file cannot undo it), and a second process
gets :class:`FolderInUse` at once, before it reads, runs or writes anything.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import platform
import socket
import sys
import tempfile
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from ..errors import AgentlabError
from ..redact import Redactor
from ..trace.files import inside
from ._spend import Spend, trace_spend
from .grid import Config, describe
from .tasks import Task

try:  # POSIX advisory locks
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

RERUN_REASONS = frozenset({"experiment budget", "cancelled", "setup failed", "worker failed"})
"""A row with one of these reasons did not finish its work: a rerun runs the cell again."""

TRACE_SUFFIX = ".jsonl"


class FolderInUse(AgentlabError, RuntimeError):
    """Another process (or another run in this one) is running the experiment in this folder."""


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

    from .._version import installed_version

    out = {"python": platform.python_version(), "agentlab": installed_version()}  # the distribution is agentlab-loop
    for pkg in ("anthropic", "pandas"):
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
        self.path = path  # every file in it is placed by inside(), which refuses a way out (a planted link)
        self.manifest = inside(path, "manifest.json")
        self.rows = inside(path, "rows.jsonl")
        self.traces = inside(path, "traces")
        self.redactor = Redactor()

    @contextlib.contextmanager
    def own(self) -> Iterator[None]:
        """Hold the folder for this process while the block runs; :class:`FolderInUse` if another holds it.

        The lock is on the folder itself (a descriptor of the directory), which no clean-up can unlink and
        replace while the owner runs: a lock on a file inside it would let a second process in the moment
        someone deleted the file as "stale". The lock goes with the open descriptor, so a killed owner frees
        the folder without leaving anything to clean up. ``owner.lock`` keeps the owner's pid and host for
        the error message (and is locked too, which keeps out an older agentlab that locks only that file).
        """
        self.path.mkdir(parents=True, exist_ok=True)
        held = os.open(self.path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)) if fcntl is not None else -1
        try:
            lock = self.path / "owner.lock"
            self._take(held, lock)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                self._take(fd, lock)
                me = {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "since": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                }
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(me).encode(), 0)
                yield
            finally:
                os.close(fd)  # releases its lock
        finally:
            if held >= 0:
                os.close(held)  # releases the folder

    def _take(self, fd: int, lock: Path) -> None:
        """An exclusive lock on ``fd`` at once, or :class:`FolderInUse` naming the owner ``lock`` records."""
        if fcntl is None or fd < 0:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderInUse(
                f"the experiment folder {self.path} is in use by {_owner(lock)}: one process runs an "
                "experiment at a time. Wait for it to finish (or stop it), then run again to continue; "
                "or pass another name= for a separate experiment."
            ) from None

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
        # A config's options are the user's text (a model factory's key among them): redacted. The hashes are
        # kept whole, as the next run compares them.
        configs = {n: {**c, "options": self.redactor.redact(c["options"])} for n, c in merged["configs"].items()}
        merged = {**merged, "configs": configs}
        manifest = {"name": name, "spec": merged, "limits": limits, "versions": dict(versions()), "argv": sys.argv[:1]}
        _write_atomically(self.manifest, json.dumps(manifest, indent=1, default=str).encode("utf-8"))

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

    def spent(self, kept: dict[tuple[str, str, int], dict[str, Any]]) -> Spend:
        """Everything this folder's runs spent: ``kept`` rows, and every other trace (earlier attempts,
        cells stopped or killed mid-run, cells no longer in the spec).

        A kept row was written after its run's trace was complete, so its
        cost is its trace's; the other traces are read (see :mod:`._spend`).
        """
        total = Spend(sum(_money(r.get("cost")) + _money(r.get("score_cost")) for r in kept.values()), 0.0)
        counted = {r["run_id"] for r in kept.values() if r.get("run_id")}
        counted |= {f"{rid}-grade" for rid in counted}  # a kept row's score_cost is its grading run's spend
        for folder in (self.traces, self.attempts):
            if folder.is_dir():
                for f in folder.iterdir():
                    if f.suffix == TRACE_SUFFIX and not (folder == self.traces and f.stem in counted):
                        total = total + trace_spend(f)
        return total

    def trace_ids(self) -> frozenset[str]:
        """The run ids that have a trace in ``traces/`` now, from one listing of the folder (what lets a cell
        with no earlier attempt skip two checks on disk: see :class:`~.cells.CellRunner`)."""
        try:
            with os.scandir(self.traces) as entries:
                return frozenset(e.name[: -len(TRACE_SUFFIX)] for e in entries if e.name.endswith(TRACE_SUFFIX))
        except FileNotFoundError:
            return frozenset()

    @property
    def attempts(self) -> Path:
        return self.path / "attempts"

    def appender(self) -> RowFile:
        self.path.mkdir(parents=True, exist_ok=True)
        return RowFile(self.rows, self.redactor)


class RowFile:
    """``rows.jsonl`` open for appending: each row is redacted, then written with one unbuffered write (a
    SIGKILL after it loses nothing).

    An error's text (a tool factory's, a fatal tool error's, a scorer's) quotes what the code it came from
    held, credentials included; a task's own fields may be credentials too. :meth:`write` returns the row as
    written, so what an experiment returns is what its folder holds."""

    def __init__(self, path: Path, redactor: Redactor) -> None:
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - closed by close(), at the experiment's end
        self._redactor = redactor

    def write(self, row: dict[str, Any]) -> dict[str, Any]:
        row = self._redactor.redact_fields(row)
        self._file.write(row_line(row))
        return row

    def close(self) -> None:
        self._file.close()


def keep_attempt(traces: Path, run_id: str) -> None:
    """Move an earlier attempt's trace out of the way of a new one (its spending still counts; see
    :meth:`Folder.spent`).
    """
    old = traces / f"{run_id}{TRACE_SUFFIX}"
    if not old.exists():
        return
    attempts = traces.parent / "attempts"
    attempts.mkdir(exist_ok=True)
    n = 1
    while (attempts / f"{run_id}.{n}{TRACE_SUFFIX}").exists():
        n += 1
    old.replace(attempts / f"{run_id}.{n}{TRACE_SUFFIX}")


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all, through a temporary file of this writer's own (never a shared name)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic: a reader sees the old file or the new one
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _owner(lock: Path) -> str:
    try:
        info = json.loads(lock.read_text(encoding="utf-8"))
        return f"process {int(info['pid'])} on {info['host']} (since {info['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _money(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def row_line(row: dict[str, Any]) -> bytes:
    return orjson.dumps(row, default=str, option=orjson.OPT_APPEND_NEWLINE)

"""Storing finished runs off the run's path: one thread per process writes them to the store in batches.

A store part costs a fixed ~10-17 ms (four Parquet files, each encoded and
renamed into place) however few runs it holds, about as long as a whole
50-step run. So :class:`~._compact.StoredTraceWriter` no longer writes the part
itself: when a run finishes it hands the run's log to this batcher (a dict
insert under a lock) and returns. A daemon thread, started when there is work
and gone when there is none, waits up to :data:`LINGER_S` for other runs to
finish, then stores all of them as one part per folder and day.

What this keeps:

- **Nothing lost, nothing half-written.** The log is each run's record, written
  and closed before the run is handed over; the store is derived from it. A
  process killed before a batch is written leaves those runs unstored, and
  ``load_runs`` reads them from their logs (the same frames, tested);
  ``agentlab compact`` stores them. A part is renamed into place file by file,
  and counts only once its last file is there, so a kill mid-batch leaves no
  half part (see :mod:`._store`).
- **Written before a normal exit.** An ``atexit`` hook writes what is pending
  (up to :data:`EXIT_WAIT_S`), and says on stderr which runs it could not store.
- **Errors are reported.** A batch that fails is warned
  (:class:`~.writer.TraceWriteWarning`) in the caller's thread at the next
  hand-over or :func:`flush`, or on stderr at exit if neither comes.
- **No lingering thread.** The thread ends once nothing is pending;
  :func:`flush` returns once every pending run is written.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

LINGER_S = 1.0
"""How long a finished run waits for others before its batch is written (off the run's path: a longer wait
means bigger batches, so less CPU per run; ``load_runs`` reads a run from its log until then)."""
MAX_BATCH = 500
"""Runs stored in one part at most (a batch's logs are held in memory while its tables are built)."""
EXIT_WAIT_S = 60.0
"""At a normal exit, how long the pending runs may take to be written before the process leaves without them."""


class StoreBatcher:
    """Runs waiting to be stored, by folder, and the thread that stores them.

    ``store(folder, files)`` writes one batch (by default :func:`._compact.store_runs`).
    """

    def __init__(self, store: Callable[[Path, list[Path]], object] | None = None, linger_s: float = LINGER_S) -> None:
        self._store = store
        self.linger_s = linger_s
        self._cond = threading.Condition(threading.Lock())
        self._pending: dict[Path, dict[Path, None]] = {}  # folder -> its runs' logs (ordered, each once)
        self._since: float | None = None  # when the oldest pending run was handed over
        self._writing: dict[Path, list[Path]] = {}  # the batch being written now
        self._flushing = 0  # callers waiting in flush(): write at once, no lingering
        self._thread: threading.Thread | None = None
        self._ended: threading.Thread | None = None  # the last thread, ending (joined by flush)
        self._errors: list[str] = []  # failed batches not yet reported in a caller's thread

    # ---------------------------------------------------------- the run's side
    def submit(self, folder: Path, file: Path) -> None:
        """Hand over a finished run's log; returns at once."""
        self.report()
        with self._cond:
            self._pending.setdefault(folder, {})[file] = None
            if self._since is None:
                self._since = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="agentlab-store", daemon=True)
                self._thread.start()
            elif self._count() >= MAX_BATCH:
                self._cond.notify_all()

    def flush(self, timeout: float | None = None, *, report: bool = True) -> bool:
        """Write every pending run now and wait until it is written (or ``timeout`` seconds passed).

        Returns whether nothing is left pending; failed batches are warned here (``report``)."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: self._thread is None or not (self._pending or self._writing), timeout)
                done = not (self._pending or self._writing)
                ending = self._ended if self._thread is None else None
            finally:
                self._flushing -= 1
        if ending is not None:
            ending.join()  # it has nothing left to do: once flush returns, no thread of ours is left
        if report:
            self.report()
        return done

    def pending(self) -> dict[Path, list[Path]]:
        """The runs handed over and not stored yet (being written included), by folder."""
        with self._cond:
            out = {folder: list(files) for folder, files in self._pending.items()}
            for folder, files in self._writing.items():
                out.setdefault(folder, []).extend(files)
            return out

    def report(self) -> None:
        """Warn, in the calling thread, of every batch that failed since the last report."""
        if not self._errors:
            return
        with self._cond:
            errors, self._errors = self._errors, []
        for message in errors:
            from .writer import TraceWriteWarning

            warnings.warn(message, TraceWriteWarning, stacklevel=3)

    # ---------------------------------------------------------- the thread's side
    def _count(self) -> int:
        return sum(len(files) for files in self._pending.values())

    def _due(self) -> bool:
        if self._flushing or self._count() >= MAX_BATCH:
            return True
        return self._since is not None and time.monotonic() - self._since >= self.linger_s

    def _work(self) -> None:
        try:
            self._loop()
        finally:  # an unexpected end too: a flush waiting for it is let go, and the next submit starts a thread
            with self._cond:
                if self._thread is threading.current_thread():  # not a normal end (that cleared it)
                    self._ended, self._thread = self._thread, None
                    self._writing = {}
                self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._pending and not self._due():
                    assert self._since is not None
                    self._cond.wait(max(0.0, self._since + self.linger_s - time.monotonic()))
                if not self._pending:
                    self._ended, self._thread = self._thread, None  # a submit from now on starts a new thread
                    return
                batch = {folder: list(files) for folder, files in self._pending.items()}
                self._pending.clear()
                self._since = None
                self._writing = batch
            for folder, files in batch.items():
                for start in range(0, len(files), MAX_BATCH):
                    self._write(folder, files[start : start + MAX_BATCH])
            with self._cond:
                self._writing = {}
                self._cond.notify_all()

    def _write(self, folder: Path, files: list[Path]) -> None:
        try:
            if self._store is not None:
                self._store(folder, files)
            else:
                from ._compact import store_runs

                store_runs(folder, files)
        except BaseException as exc:  # noqa: BLE001 - reported in the caller's thread, and the thread goes on
            names = ", ".join(f.stem for f in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
            message = (
                f"{len(files)} finished run(s) ({names}) were not all added to the store in {folder}: "
                f"{type(exc).__name__}: {exc} (their logs are whole, and load_runs reads them; "
                f"`agentlab compact {folder}` stores them)"
            )
            with self._cond:
                self._errors.append(message)


# -------------------------------------------------------------- one per process
_lock = threading.Lock()
_batcher: StoreBatcher | None = None


def batcher() -> StoreBatcher:
    """The process's batcher (made when first needed)."""
    global _batcher
    with _lock:
        if _batcher is None:
            _batcher = StoreBatcher()
        return _batcher


def flush(timeout: float | None = None) -> bool:
    """Store every finished run handed over by a :class:`~._compact.StoredTraceWriter` in this process now, and
    wait until they are stored (or ``timeout`` seconds passed); returns whether none is left pending.

    Not needed to read them: ``load_runs`` reads a run not stored yet from its log, with the same frames.
    A failed batch is warned here (:class:`~.writer.TraceWriteWarning`)."""
    b = _batcher
    return True if b is None else b.flush(timeout)


def _at_exit() -> None:
    """A normal exit: the pending runs are written first, or the process says which were not and how to add them."""
    b = _batcher
    if b is None:
        return
    done = b.flush(EXIT_WAIT_S, report=False) if b.pending() else True
    with b._cond:
        errors, b._errors = b._errors, []
    for message in errors:
        print(f"agentlab: {message}", file=sys.stderr)
    if not done:
        for folder, files in b.pending().items():
            print(
                f"agentlab: {len(files)} finished run(s) in {folder} were not added to the store before exit "
                f"(waited {EXIT_WAIT_S:g} s; their logs are whole, and load_runs reads them; "
                f"`agentlab compact {folder}` stores them)",
                file=sys.stderr,
            )


def _after_fork_in_child() -> None:
    """A forked child starts with no batcher: the parent's thread writes the parent's runs (threads do not fork)."""
    global _batcher, _lock
    _batcher = None
    _lock = threading.Lock()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

"""Storing finished runs off the run's path: one thread per process writes them to the store in batches.

A store part costs a fixed ~10-17 ms (four Parquet files, each encoded and
renamed into place) however few runs it holds, about as long as a whole
50-step run. So :class:`~._compact.StoredTraceWriter` no longer writes the part
itself: when a run finishes it hands the run's log to this batcher (a dict
insert under a lock) and returns. A daemon thread, started when there is work,
waits up to :data:`LINGER_S` for other runs to finish, then has all of them
stored as one part per folder and day by a worker process
(:mod:`._store_worker`). A process, not the thread itself: building a part is
mostly Python holding the GIL, and a thread doing it slowed the runs still
going by 14 % (their event loop and tool hand-offs waited on the GIL), where
the worker runs on another core. The thread only waits on the worker's pipe;
after :data:`IDLE_S` with nothing to store, it closes the worker and ends.

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
- **No lingering thread or process.** They end :data:`IDLE_S` after the last
  batch, or at once by :func:`shutdown`; :func:`flush` returns once every
  pending run is written.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import AgentlabError

LINGER_S = 1.0
"""How long a finished run waits for others before its batch is written (off the run's path: a longer wait
means bigger batches, so less CPU per run; ``load_runs`` reads a run from its log until then)."""
MAX_BATCH = 500
"""Runs stored in one part at most (a batch's logs are held in memory while its tables are built)."""
EXIT_WAIT_S = 60.0
"""At a normal exit, how long the pending runs may take to be written before the process leaves without them."""
IDLE_S = 30.0
"""How long the thread and its worker process wait for more runs after a batch before they end (starting a
worker costs ~0.5 s of CPU: its imports of pandas and pyarrow)."""
WORKER_COMMAND = [sys.executable, "-m", "agentlab.trace._store_worker"]


class StoreFailed(AgentlabError):
    """The worker could not store a batch (its error, as text)."""


class _Worker:
    """The worker process and its two pipes: one request and one answer per batch."""

    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])  # so the child imports this same agentlab
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        self.proc = subprocess.Popen(
            WORKER_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, encoding="utf-8"
        )

    def store(self, folder: Path, files: list[Path]) -> float:
        """Store one batch; returns the worker's CPU seconds for it."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps({"folder": str(folder), "files": [str(f) for f in files]}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            raise StoreFailed(f"the store's worker process ended (exit code {self.proc.wait()})")
        answer = json.loads(line)
        if "error" in answer:
            raise StoreFailed(answer["error"])
        return float(answer.get("cpu_s", 0.0))

    def close(self) -> None:
        """End of input: the worker exits after the batch it is on (there is none: the batcher waits for each)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(EXIT_WAIT_S)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class StoreBatcher:
    """Runs waiting to be stored, by folder, and the thread that has them stored.

    ``store(folder, files)``, if given, writes a batch in the thread itself (tests, benchmarks); by default a
    worker process (:class:`_Worker`) does.
    """

    def __init__(
        self,
        store: Callable[[Path, list[Path]], object] | None = None,
        linger_s: float = LINGER_S,
        idle_s: float = IDLE_S,
    ) -> None:
        self._store = store
        self.linger_s = linger_s
        self.idle_s = idle_s
        self._cond = threading.Condition(threading.Lock())
        self._pending: dict[Path, dict[Path, None]] = {}  # folder -> its runs' logs (ordered, each once)
        self._since: float | None = None  # when the oldest pending run was handed over
        self._writing: dict[Path, list[Path]] = {}  # the batch being written now
        self._flushing = 0  # callers waiting in flush(): write at once, no lingering
        self._closing = False  # shutdown(): end the thread (and its worker) once nothing is pending
        self._thread: threading.Thread | None = None
        self._ended: threading.Thread | None = None  # the last thread, ending (joined by flush and shutdown)
        self.workers: list[_Worker] = []  # live worker processes (each owned by one thread; seen by fork)
        self._errors: list[str] = []  # failed batches not yet reported in a caller's thread
        self.stats: dict[str, float] = {"runs": 0, "batches": 0, "cpu_s": 0.0}
        """What the background did: runs stored, batches, and the CPU seconds spent storing them."""

    # ---------------------------------------------------------- the run's side
    def submit(self, folder: Path, file: Path) -> None:
        """Hand over a finished run's log; returns at once."""
        self.submit_all(folder, (file,))

    def submit_all(self, folder: Path, files: Iterable[Path]) -> None:
        """Hand over finished runs' logs, all under one lock (an experiment's, when it ends); returns at once."""
        self.report()
        with self._cond:
            idle = not self._pending
            waiting = self._pending.setdefault(folder, {})
            waiting.update(dict.fromkeys(files))
            if not waiting:
                del self._pending[folder]
                return
            if self._since is None:
                self._since = time.monotonic()
            if self._thread is None:
                self._closing = False
                self._thread = threading.Thread(target=self._work, name="agentlab-store", daemon=True)
                self._thread.start()
            elif idle or self._count() >= MAX_BATCH:
                self._cond.notify_all()  # an idle thread starts lingering; a full batch is written now
            # else the lingering thread already waits until the batch is due: no wake-up on the run's path

    def flush(self, timeout: float | None = None, *, report: bool = True) -> bool:
        """Write every pending run now and wait until it is written (or ``timeout`` seconds passed).

        Returns whether nothing is left pending; failed batches are warned here (``report``)."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: self._thread is None or not (self._pending or self._writing), timeout)
                done = not (self._pending or self._writing)
            finally:
                self._flushing -= 1
        if report:
            self.report()
        return done

    def shutdown(self, timeout: float | None = None, *, report: bool = True) -> bool:
        """:meth:`flush`, then end the thread and its worker process (a later run starts them again)."""
        done = self.flush(timeout, report=report)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread or self._ended
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return done and (thread is None or not thread.is_alive())

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
        if self._flushing or self._closing or self._count() >= MAX_BATCH:
            return True
        return self._since is not None and time.monotonic() - self._since >= self.linger_s

    def _work(self) -> None:
        own: list[_Worker] = []  # this thread's worker, if it started one
        try:
            self._loop(own)
        finally:  # however it ends: its worker is closed, and a flush waiting for the thread is let go
            for worker in own:
                worker.close()
                self.workers.remove(worker)
            with self._cond:
                if self._thread is threading.current_thread():
                    self._ended, self._thread = self._thread, None
                    self._writing = {}
                self._cond.notify_all()

    def _next_batch(self) -> dict[Path, list[Path]] | None:
        """Wait for a batch to be due (None: nothing came for ``idle_s``, or shutdown: the thread ends)."""
        idle_since = time.monotonic()
        with self._cond:
            while True:
                now = time.monotonic()
                if self._pending and self._due():
                    batch = {folder: list(files) for folder, files in self._pending.items()}
                    self._pending.clear()
                    self._since = None
                    self._writing = batch
                    return batch
                if self._pending:
                    assert self._since is not None
                    self._cond.wait(max(0.0, self._since + self.linger_s - now))
                elif self._closing or now - idle_since >= self.idle_s:
                    self._ended, self._thread = self._thread, None  # a submit from now on starts a new thread
                    self._cond.notify_all()
                    return None
                else:
                    self._cond.wait(idle_since + self.idle_s - now)

    def _loop(self, own: list[_Worker]) -> None:
        while (batch := self._next_batch()) is not None:
            for folder, files in batch.items():
                for start in range(0, len(files), MAX_BATCH):
                    self._write(folder, files[start : start + MAX_BATCH], own)
            with self._cond:
                self._writing = {}
                self._cond.notify_all()

    def _write(self, folder: Path, files: list[Path], own: list[_Worker]) -> None:
        try:
            if self._store is not None:
                c0 = time.thread_time()
                self._store(folder, files)
                cpu = time.thread_time() - c0
            else:
                if not own:
                    own.append(_Worker())
                    self.workers.append(own[0])
                try:
                    cpu = own[0].store(folder, files)
                except StoreFailed:
                    if own[0].proc.poll() is not None:  # it died: the next batch starts another
                        own[0].close()
                        self.workers.remove(own.pop())
                    raise
            self.stats["runs"] += len(files)
            self.stats["batches"] += 1
            self.stats["cpu_s"] += cpu
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


def shutdown(timeout: float | None = None) -> bool:
    """:func:`flush`, then end the background thread and its worker process (the next stored run starts them)."""
    b = _batcher
    return True if b is None else b.shutdown(timeout)


def _at_exit() -> None:
    """A normal exit: the pending runs are written first, or the process says which were not and how to add them."""
    b = _batcher
    if b is None:
        return
    done = b.shutdown(EXIT_WAIT_S, report=False)
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
    """A forked child starts with no batcher: the parent's thread writes the parent's runs (threads do not fork),
    and the child lets go of the parent's worker pipes (held open, they would keep the worker alive past the
    parent's death)."""
    global _batcher, _lock
    workers: list[Any] = _batcher.workers if _batcher is not None else []
    for worker in workers:
        for pipe in (worker.proc.stdin, worker.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()  # the child's copy (each write was flushed: there is nothing buffered to send)
            except (OSError, ValueError):
                pass
    _batcher = None
    _lock = threading.Lock()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

"""The store's worker process: stores the batches of finished runs the batcher sends it (:mod:`._background`).

Run as ``python -m agentlab.trace._store_worker``. Each request is one JSON line on stdin,
``{"folder": ..., "files": [...]}``; each answer one JSON line, ``{"stored": n, "cpu_s": ...}`` or
``{"error": "..."}``. It exits at the end of its input: when the batcher closes it, or when the process
that started it dies (killed or not), after the batch it is writing, so a part is never left half-written
by the parent's death. Ctrl-C in the terminal is left to the parent (which then writes what is pending).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

NICE = 10
"""The worker's scheduling priority, below the runs' (0): on a machine whose cores are all busy, the store
waits for the runs instead of taking a share of their CPU (at 10 it gets about a tenth of a core a busy run
would give it up, so the pending runs still get written, and at exit it has the process's cores to itself)."""


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C is the parent's to handle
    if hasattr(os, "nice"):
        try:
            os.nice(NICE)
        except OSError:  # not allowed here: the worker runs at the parent's priority
            pass
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # anything a library prints goes to stderr, not the answers
    from ._compact import store_runs

    for line in sys.stdin:
        if not line.strip():
            continue
        c0 = time.process_time()
        try:
            request = json.loads(line)
            stored = store_runs(Path(request["folder"]), [Path(f) for f in request["files"]])
            answer: dict[str, object] = {"stored": stored}
        except Exception as exc:  # noqa: BLE001 - sent back: the batcher reports it in the caller's thread
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        answer["cpu_s"] = time.process_time() - c0
        try:
            answers.write(json.dumps(answer) + "\n")
            answers.flush()
        except BrokenPipeError:  # the parent died meanwhile: the batch is stored, and no one waits for more
            os._exit(0)  # (a normal exit would try to flush the dead pipe again, and print that it failed)


if __name__ == "__main__":
    main()

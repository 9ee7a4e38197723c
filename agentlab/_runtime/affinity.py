"""Pinning a worker thread to the CPU of the thread that hands it a call, and taking the pin back.

Why: see :mod:`agentlab._runtime.threads` ("Where the worker wakes"). This
module only owns the system calls and the rule that a refusal turns the
pinning off for the rest of the process (the hand-off works the same without
it, only slower on a VM). Linux only: elsewhere
:func:`own_cpus` says ``None`` and nothing is pinned.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

_on = hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")
_getcpu: Any = None  # libc's sched_getcpu, loaded on the first pin (ctypes costs an import)


def own_cpus() -> frozenset[int] | None:
    """The calling thread's CPU set, to take back after a pin; ``None`` where pins are not made."""
    if not _on:
        return None
    try:
        return frozenset(os.sched_getaffinity(0))
    except OSError:
        return None


def pin_here(tid: int, cpus: frozenset[int]) -> bool:
    """Pin thread ``tid`` (a native id) to the CPU this thread runs on, if that CPU is one of ``cpus``; was it?"""
    global _on, _getcpu
    if not _on:
        return False
    try:
        if _getcpu is None:
            import ctypes

            _getcpu = ctypes.CDLL(None).sched_getcpu
        cpu = _getcpu()
        if cpu not in cpus:  # -1 (unknown), or a CPU the worker may not use
            return False
        os.sched_setaffinity(tid, (cpu,))
        return True
    except (OSError, AttributeError):  # refused (a sandbox), or no sched_getcpu in this libc
        _on = False
        return False


def restore(cpus: frozenset[int]) -> None:
    """Give the calling thread back its CPU set (after :func:`pin_here`, which a thread with no known set is never
    given). Never raises: a worker calls it outside the job it is about to run."""
    global _on
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:  # the allowed CPUs changed under us (a cgroup): every CPU the kernel still allows
        _on = False
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, range(os.cpu_count() or 1))

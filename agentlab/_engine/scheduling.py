"""One turn's tool calls: reads together, writes alone, in request order.

Pure planning: given each call's mode, split the turn into batches run one
after another. Consecutive reads share a batch (they run concurrently); a
write is a batch of its own, so it starts after every earlier call finished
and later calls wait for it. Results always go back in request order, which
the engine guarantees by writing each result into its request's slot.
"""

from __future__ import annotations

from collections.abc import Sequence


def plan_batches(modes: Sequence[str]) -> list[list[int]]:
    """Indices of calls grouped into batches: ``["read","read","write","read"]``
    gives ``[[0, 1], [2], [3]]``."""
    batches: list[list[int]] = []
    for i, mode in enumerate(modes):
        if mode == "read" and batches and modes[batches[-1][0]] == "read":
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches

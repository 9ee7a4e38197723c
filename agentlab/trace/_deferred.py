"""A column of JSON text read from disk only when a row of it is first read (the store's and the bulk reader's
``data``): shared by :mod:`._store`, :mod:`._columns` and :mod:`._json`, and importing none of them."""

from __future__ import annotations

import copy
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


class Deferred:
    """A JSON text column read the first time it is needed, once for every view of it.

    A million events' ``data`` is most of a load's bytes unpacked (the text of every event) and most of
    its time and memory, yet a cost analysis never reads it; so ``load_runs`` leaves it where it is (on
    disk in the store: :class:`StoredColumn`; in the logs' bytes, uncut, for the bulk reader) until a row
    of it is read. ``take`` gives another view of the same column, sharing the one read. A subclass says
    how the column is read (:meth:`_read`).
    """

    def __init__(self, length: int, order: Any = None) -> None:
        self._order = order  # positions into the column as read (None: as it is)
        self._cache: list[Any] = []  # shared by every view: [the column, read]
        self._lock = threading.Lock()
        self._len = length

    def __len__(self) -> int:
        return self._len

    def take(self, positions: Any) -> Deferred:
        import numpy as np

        view = copy.copy(self)  # what it reads from, the cache and its lock shared
        positions = np.asarray(positions, dtype=np.intp)
        view._order = positions if self._order is None else self._order[positions]
        view._len = len(positions)
        return view

    def _base(self) -> pa.ChunkedArray:
        with self._lock:
            if not self._cache:
                self._cache.append(self._read())
            return self._cache[0]

    def _read(self) -> pa.ChunkedArray:
        """The whole column's text, in its order (called once, under the lock)."""
        raise NotImplementedError

    def array(self) -> pa.ChunkedArray:
        """The column's text, read now if it was not yet (every view shares one read)."""
        base = self._base()
        if self._order is None:
            return base
        import pyarrow as pa

        return base.take(pa.array(self._order))

"""The events frame's ``data`` column: one dict per event, parsed only when read.

A million events loaded from the store would spend most of their load time
turning JSON into dicts nobody looks at; this pandas extension array keeps
the JSON text as the store holds it (an Arrow string array, zero-copy, or
still on disk: a :class:`~._deferred.Deferred`, read when a row is first read)
and parses an element the first time it is read, keeping the dict. Loaded from a
JSONL file, where every line was parsed anyway, it holds the parsed events
and cuts each one's ``data`` out of it when read.
Either way ``frame["data"].iloc[i]`` is a dict, and ``.map``, iteration and
``astype(object)`` see dicts; the dtype is ``json`` for both.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pandas as pd
from pandas.api.extensions import ExtensionArray, ExtensionDtype, register_extension_dtype, take

from ._deferred import Deferred
from ._tags import data_of, untag
from .schema import FLOAT_TAG


@register_extension_dtype
class JSONDtype(ExtensionDtype):
    """A dict per row, held as JSON until read."""

    name = "json"
    type = dict
    kind = "O"
    na_value = None

    @classmethod
    def construct_array_type(cls) -> builtins.type[JSONArray]:
        return JSONArray


def loads(text: Any) -> dict[str, Any]:
    value = orjson.loads(text)
    if FLOAT_TAG.encode() in (text if isinstance(text, bytes) else text.encode()):
        value = untag(value)
    return value


class JSONArray(ExtensionArray):
    """``parsed[i]`` is the dict once read (else None); ``raw`` the JSON text (an Arrow string array)
    or None (or a :class:`~._deferred.Deferred`: the text still on disk); ``events`` whole event records
    (from a log), whose ``data`` is cut out when read."""

    def __init__(
        self, parsed: np.ndarray, raw: Any = None, events: np.ndarray | list[Any] | None = None, cut: bool = False
    ) -> None:
        self._parsed = parsed
        self._raw = raw
        self._events = events
        self._cut = cut  # raw holds whole log lines: each row's data is cut out of its parsed line

    @classmethod
    def from_lines(cls, lines: Any) -> JSONArray:
        """Whole log lines (an Arrow string array over the logs' bytes, as read), each parsed and cut to
        its event's own fields when read: a load from the logs keeps their bytes, not a million dicts."""
        return cls(np.full(len(lines), None, dtype=object), lines, None, True)

    @classmethod
    def from_events(cls, records: list[dict[str, Any]]) -> JSONArray:
        """Each event's own fields (less the base ones), cut out of the record the first time it is read.
        The list is held as it is (turned into an array only for a take): copying a million pointers
        touches a million records, a tenth of a second when they are no longer in the cache."""
        return cls(np.full(len(records), None, dtype=object), None, records)

    def _event_array(self) -> np.ndarray:
        events = self._events
        if isinstance(events, np.ndarray):
            return events
        array = np.empty(len(events or ()), dtype=object)
        array[:] = events
        self._events = array
        return array

    # -- construction
    @classmethod
    def from_dicts(cls, values: Sequence[Any]) -> JSONArray:
        out = np.empty(len(values), dtype=object)
        out[:] = values if isinstance(values, list) else list(values)
        return cls(out)

    @classmethod
    def from_arrow(cls, raw: Any) -> JSONArray:
        """JSON text, one object per row (a pyarrow string array, or a :class:`~._deferred.Deferred` one),
        parsed element by element when read."""
        return cls(np.full(len(raw), None, dtype=object), raw)

    def _text(self) -> Any:
        """The JSON text as an Arrow array (read from the store now if it was deferred)."""
        if isinstance(self._raw, Deferred):
            self._raw = self._raw.array()
        return self._raw

    @classmethod
    def _from_sequence(cls, scalars: Any, *, dtype: Any = None, copy: bool = False) -> JSONArray:
        return cls.from_dicts(list(scalars))

    @classmethod
    def _from_factorized(cls, values: Any, original: Any) -> JSONArray:  # pragma: no cover - dicts do not factorize
        raise TypeError("json values (dicts) cannot be factorized")

    @classmethod
    def _concat_same_type(cls, to_concat: Sequence[JSONArray]) -> JSONArray:
        cuts = {a._cut for a in to_concat if a._raw is not None}
        if len(cuts) > 1:  # text of the data beside whole log lines: parsed now
            return cls.from_dicts([v for a in to_concat for v in a._all()])
        parsed = np.concatenate([a._parsed for a in to_concat]) if to_concat else np.empty(0, dtype=object)
        events = None
        if any(a._events is not None for a in to_concat):  # records beside text: each row keeps its own
            events = np.concatenate(
                [a._event_array() if a._events is not None else np.full(len(a), None, dtype=object) for a in to_concat]
            )
        if all(a._raw is None for a in to_concat):
            return cls(parsed, None, events)
        import pyarrow as pa  # some hold JSON text, so pyarrow is there

        chunks: list[Any] = []
        for a in to_concat:
            if a._raw is None:
                chunks.append(pa.nulls(len(a), pa.large_string()))
            else:
                raw = a._text().cast(pa.large_string())
                chunks.extend(raw.chunks if isinstance(raw, pa.ChunkedArray) else [raw])
        raw = pa.chunked_array(chunks, type=pa.large_string())
        return cls(parsed, raw, events, cuts == {True})

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (``to_pickle``, a Ray task's argument, ``deepcopy``): text still on disk is read
        first, since open files do not travel."""
        self._text()
        return self.__dict__.copy()

    # -- reading
    @property
    def dtype(self) -> JSONDtype:
        return JSONDtype()

    def __len__(self) -> int:
        return len(self._parsed)

    def _one(self, i: int) -> Any:
        value = self._parsed[i]
        if value is None and self._events is not None and self._events[i] is not None:
            value = self._parsed[i] = data_of(self._events[i])
        elif value is None and self._raw is not None:
            text = self._text()[i].as_py()
            if text is not None:
                value = self._parsed[i] = data_of(loads(text)) if self._cut else loads(text)
        return value

    def _all(self) -> list[Any]:
        """Every element, parsing those not read yet (one pass over the Arrow array)."""
        parsed = self._parsed
        if self._events is not None:
            events = self._events
            for i, v in enumerate(parsed):
                if v is None and events[i] is not None:
                    parsed[i] = data_of(events[i])
            self._events = None
        if self._raw is not None and any(v is None for v in parsed):
            texts = self._text().to_pylist()
            for i, v in enumerate(parsed):
                if v is None and texts[i] is not None:
                    parsed[i] = data_of(loads(texts[i])) if self._cut else loads(texts[i])
            self._raw = None
        return list(parsed)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, np.integer)):
            n = len(self)
            i = int(item)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for a json array of length {n}")
            return self._one(i % n)
        item = pd.api.indexers.check_array_indexer(self, item)
        if isinstance(item, slice):
            raw = self._raw
            if isinstance(raw, Deferred):
                raw = raw.take(np.arange(len(self))[item])
            elif raw is not None:
                raw = raw[item]
            events = None if self._events is None else self._event_array()[item]
            return JSONArray(self._parsed[item], raw, events, self._cut)
        positions = np.arange(len(self))[item]
        return self.take(positions)

    def __iter__(self) -> Any:
        return iter(self._all())

    def take(self, indices: Any, *, allow_fill: bool = False, fill_value: Any = None) -> JSONArray:
        indices = np.asarray(indices, dtype=np.intp)
        if (self._raw is not None or self._events is not None) and not (allow_fill and (indices < 0).any()):
            positions = np.where(indices < 0, indices + len(self), indices)
            return JSONArray(
                self._parsed.take(positions),
                None if self._raw is None else self._raw.take(positions),
                None if self._events is None else self._event_array().take(positions),
                self._cut,
            )
        values = np.empty(len(self), dtype=object)
        values[:] = self._all()
        return JSONArray(take(values, indices, allow_fill=allow_fill, fill_value=fill_value))

    def view(self, dtype: Any = None) -> Any:
        """The same rows (pandas takes a view of every column when it builds a frame): sharing the
        events as they are, rather than the default ``self[:]``, which would copy them."""
        if dtype is not None:
            return super().view(dtype)
        return JSONArray(self._parsed, self._raw, self._events, self._cut)

    def copy(self) -> JSONArray:
        return JSONArray(self._parsed.copy(), self._raw, self._events, self._cut)

    def isna(self) -> np.ndarray:
        if self._events is not None and self._raw is None:
            return np.zeros(len(self), dtype=bool)
        if self._raw is not None:
            na = np.asarray(self._text().is_null().to_numpy(zero_copy_only=False), dtype=bool)
            if self._events is not None:  # rows of records beside rows of text
                na &= np.array([e is None for e in self._event_array()], dtype=bool)
            return na
        return np.array([v is None for v in self._parsed], dtype=bool)

    @property
    def nbytes(self) -> int:
        return int(
            self._parsed.nbytes
            + (self._raw.nbytes if self._raw is not None and not isinstance(self._raw, Deferred) else 0)
            + (8 * len(self._events) if self._events is not None else 0)
        )

    def to_numpy(self, dtype: Any = None, copy: bool = False, na_value: Any = None) -> np.ndarray:
        out = np.empty(len(self), dtype=object)
        out[:] = self._all()
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.to_numpy()

    def astype(self, dtype: Any, copy: bool = True) -> Any:
        if isinstance(dtype, JSONDtype) or dtype == "json":
            return self.copy() if copy else self
        try:
            as_numpy = np.dtype(dtype)
        except TypeError:  # a pandas dtype (``str`` is pandas' StringDtype from pandas 3 on)
            as_numpy = None
        if as_numpy is not None and as_numpy.kind == "O":
            return self.to_numpy()
        if as_numpy is None or as_numpy.kind in "US":  # text: each value as str() shows it, as for an object column
            import pandas as pd

            return pd.array([None if v is None else str(v) for v in self.to_numpy()], dtype=dtype)
        return super().astype(dtype, copy=copy)

    def map(self, mapper: Any, na_action: Any = None) -> Any:
        """``mapper`` over the dicts; the result takes the dtype of what it returns (bools give a mask)."""
        from pandas.core.algorithms import map_array

        return map_array(self.to_numpy(), mapper, na_action=na_action)

    def __eq__(self, other: Any) -> Any:
        values = self._all()
        if isinstance(other, (JSONArray, list, np.ndarray)):
            return np.array([a == b for a, b in zip(values, list(other), strict=True)], dtype=bool)
        return np.array([v == other for v in values], dtype=bool)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._all()
        self._parsed[key] = value

    def _formatter(self, boxed: bool = False) -> Any:
        return repr

"""Small pure helpers for records read back: NaN tags undone, an event's own fields cut out, and what both
readers (per run and in bulk) ask of a log: whether it holds a NaN tag or a blob marker, and whether its base
fields are plausible."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from ._blobs import REF_MARKER
from .schema import BASE, FLOAT_TAG

_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def untag(value: Any) -> Any:
    """``{"$float": "NaN"}`` (how the writer keeps JSON valid) back to the float, at any depth."""
    if type(value) is dict:
        if len(value) == 1 and FLOAT_TAG in value and value[FLOAT_TAG] in _FLOATS:
            return _FLOATS[value[FLOAT_TAG]]
        return {k: untag(v) for k, v in value.items()}
    if type(value) is list:
        return [untag(v) for v in value]
    return value


_MARKERS = tuple((m, m.index(b"$")) for m in (FLOAT_TAG.encode(), REF_MARKER))
"""The float tag and the blob marker, each with the place of the ``$`` both hold."""
_DOLLAR = re.compile(rb"\$(?:" + b"|".join(re.escape(m[at + 1 :]) for m, at in _MARKERS) + rb")")

_NEXT = [m[at + 1] for m, at in _MARKERS]
NEXT_SPREAD = _NEXT[0] ^ _NEXT[1]
NEXT_ANY = _NEXT[0] | NEXT_SPREAD
"""What the byte after a marker's ``$`` must be, as one test: ``(byte | NEXT_SPREAD) == NEXT_ANY`` holds for the
byte after the ``$`` of each marker (and for two other letters), so a log where no ``$`` is followed by such a
byte holds neither marker. The bulk reader tests it over a log's bytes in numpy before :func:`markers`."""


def markers(data: bytes) -> tuple[bool, bool]:
    """Whether a log's bytes hold the float tag (its floats are then untagged), and the blob marker (its blobs
    are then put back). One regular expression whose every match starts at a ``$`` (the engine skips to each
    at C speed), the bytes before it then compared: one pass, though these logs hold a ``$`` in every budget
    message."""
    found = [False, False]
    for match in _DOLLAR.finditer(data):
        at = match.start()
        for n, (marker, dollar) in enumerate(_MARKERS):
            if at >= dollar and data.startswith(marker, at - dollar):
                found[n] = True
        if found[0] and found[1]:
            break
    return found[0], found[1]


BASE_FIELDS = tuple(f.name for f in BASE)
"""The fields every trace line has; the rest of a line is its kind's ``data``."""


def data_of(e: dict[str, Any]) -> dict[str, Any]:
    """An event's own fields: a copy less the base fields."""
    d = e.copy()
    for k in BASE_FIELDS:
        d.pop(k, None)
    return d


BASE_VALUES = itemgetter("kind", "step", "seq", "t")
"""An event's base values that :func:`plausible` checks (a KeyError where one is missing: not plausible)."""

INT_LIMIT = 2**62
"""An int the frames hold lies strictly within ``±INT_LIMIT``: a bigger one (``int64`` columns, and sums of
them) is a line the reader skips, never a wrapped number."""


def fits(values: Any) -> bool:
    """Whether every int of ``values`` (a sequence, or a numpy array: its own min and max) lies within
    ``±INT_LIMIT`` (an empty one does)."""
    if not len(values):
        return True
    low, high = (values.min(), values.max()) if hasattr(values, "min") else (min(values), max(values))
    return bool(-INT_LIMIT < low and high < INT_LIMIT)


def well_typed(steps: Sequence[Any], seqs: Sequence[Any], ts: Sequence[Any], kinds: Sequence[Any] | None) -> bool:
    """Whether a log's base values, one per event, are of the types the frames take: each step and seq an int
    (not a bool), each t a number, each kind text (``kinds`` None: the caller checks them another way). A pass
    per field at C speed; the kind-specific fields are checked where the frames read them."""
    return (
        {*map(type, steps)} == {int}
        and {*map(type, seqs)} == {int}
        and {*map(type, ts)} <= {float, int}
        and (kinds is None or {*map(type, kinds)} == {str})
    )


def plausible(kinds: Sequence[Any], steps: Sequence[Any], seqs: Sequence[Any], ts: Sequence[Any]) -> bool:
    """Whether a log's base values are :func:`well_typed` and every step and seq :func:`fits`: a log that is
    not is read line by line. The per-run reader asks it of each log; the bulk one asks the same two rules (the
    ranges over all of a run's ints at once, in numpy), so a log passes both or neither."""
    return well_typed(steps, seqs, ts, kinds) and fits(steps) and fits(seqs)

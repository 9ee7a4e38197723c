"""Small pure helpers for records read back: NaN tags undone, an event's own fields cut out."""

from __future__ import annotations

import math
from typing import Any

from ..events import BASE
from .writer import FLOAT_TAG

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


BASE_FIELDS = tuple(f.name for f in BASE)
"""The fields every trace line has; the rest of a line is its kind's ``data``."""


def data_of(e: dict[str, Any]) -> dict[str, Any]:
    """An event's own fields: a C-level copy less the base fields (about 40% faster than a comprehension)."""
    d = e.copy()
    for k in BASE_FIELDS:
        d.pop(k, None)
    return d

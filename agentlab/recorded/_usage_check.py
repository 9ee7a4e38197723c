"""Token counts as a record states them: whole and non-negative, or said to be wrong.

The importers read counts written by other programs; a count that is a
fraction, negative or not a number is a bug in the record (or in a converter
before it), and pricing it as if it were right would hide it. :func:`count`
keeps such a value visible (it does not round or clamp it away) and
:func:`usage_problems` names it, so the import's audit reports it.

(The lab's own usage check for live replies lives with the money rules; this is
the importers' reading of the same rule, kept small until the two are one.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

COUNTS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def count(value: Any) -> int | float:
    """A recorded token count: an ``int`` when it is a whole number (``12``, ``12.0``, ``"12"``),
    ``0`` when absent, and otherwise the number as written (``2.5``, ``-3``, NaN for text) so the
    audit can say so."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        return math.nan
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        try:
            return count(float(value))
        except ValueError:
            return math.nan
    return math.nan


def usage_problems(usage: Mapping[str, Any] | None) -> list[str]:
    """What is wrong with the four token counts of ``usage`` (empty when they are whole and >= 0)."""
    out: list[str] = []
    for k in COUNTS:
        v = (usage or {}).get(k, 0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or isinstance(v, float) and not v.is_integer():
            out.append(f"{k} is {v!r}, not a whole number")
        elif v < 0:
            out.append(f"{k} is {v}, below zero")
    return out

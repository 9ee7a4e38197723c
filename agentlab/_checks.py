"""One rule for "a whole number of at least N", so every argument check says it the same way.

``True`` is an ``int`` to Python; it is never a count to the lab (``max_steps=True`` is a mistake,
not "1"), so a ``bool`` is refused wherever a whole number is asked for.
"""

from __future__ import annotations

import math
import numbers
from typing import TypeGuard


def is_whole(value: object, at_least: int | None = None) -> TypeGuard[int]:
    """Is ``value`` an ``int`` (not a ``bool``), and at least ``at_least`` when that is given?"""
    return isinstance(value, int) and not isinstance(value, bool) and (at_least is None or value >= at_least)


def whole(name: str, value: object, *, at_least: int = 1) -> int:
    """``value`` when it is a whole number of at least ``at_least``; else ``ValueError`` naming ``name``."""
    if not is_whole(value, at_least):
        raise ValueError(f"{name} must be an int >= {at_least}, got {value!r}")
    return value


def is_seconds(value: object) -> bool:
    """Is ``value`` a finite real number of seconds >= 0 (not a ``bool``, not NaN or an infinity)?"""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    seconds = float(value)
    return math.isfinite(seconds) and seconds >= 0

"""Reading back what the writer tagged: ``{"$float": "NaN"}`` is the float NaN again."""

from __future__ import annotations

import math
from typing import Any

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

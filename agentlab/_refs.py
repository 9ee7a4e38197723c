"""``module:attribute`` references, the one way a spec file or a command line names Python code."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any


def load_object(ref: str, base: Path | None = None) -> Any:
    """The object ``ref`` (``"package.module:attribute"``) names; ``base`` (a spec file's folder,
    or the current directory) is importable first, so a ``mytools.py`` beside it is found.
    A bad reference is a ``ValueError`` that says what was expected and what failed."""
    if ":" not in ref:
        raise ValueError(f"{ref!r} must look like module:attribute")
    module, attr = ref.split(":", 1)
    base = Path.cwd() if base is None else base
    if str(base) not in sys.path:
        sys.path.insert(0, str(base))
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load {ref!r}: {exc}") from exc

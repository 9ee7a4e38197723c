"""The installed version, read from the distribution's metadata (one place: pyproject.toml).

The distribution is ``agentlab-loop`` (the import name stays ``agentlab``); a source
checkout that was never installed reports ``0+unknown`` rather than guessing.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "agentlab-loop"


def installed_version() -> str:
    """``agentlab-loop``'s version as pip installed it, or ``"0+unknown"`` when it is not installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"

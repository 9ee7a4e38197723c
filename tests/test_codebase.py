"""Promises about the code itself: a readable engine and an import that does nothing heavy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import agentlab

ENGINE_LINE_BUDGET = 570


def test_engine_stays_short_enough_to_read_in_one_sitting():
    """loop.py is the file a newcomer reads top to bottom: keep it within its line budget."""
    lines = (Path(agentlab.__file__).parent / "loop.py").read_text().count("\n")
    assert lines <= ENGINE_LINE_BUDGET, f"loop.py has {lines} lines; move a piece into its own module"


def test_importing_agentlab_loads_no_heavy_library():
    """import agentlab stays cheap: widgets, plots, pandas and the HTTP client load when used."""
    code = (
        "import sys, agentlab\n"
        "heavy = [m for m in ('matplotlib', 'ipywidgets', 'pandas', 'anthropic', 'nbformat') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""

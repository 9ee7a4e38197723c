"""The README's example is executable documentation: it runs, and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_ten_line_example_runs_and_prints_the_result_it_shows():
    """The first python block of the README runs offline and prints a Done like its comment."""
    block = python_blocks()[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})
    printed = out.getvalue().strip()
    shown = re.search(r"print\(result\)\s+# (.*)", block).group(1).rstrip(".")
    assert printed.startswith(shown.split(", ...")[0])
    assert len(block.strip().splitlines()) <= 12

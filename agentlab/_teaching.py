"""Where the teaching notebooks are, and copying them out for a user.

A wheel carries them in ``agentlab/_notebooks/`` (``setup.py`` puts them there); a
source checkout (an editable install) has them in ``notebooks/`` beside the package.
The notebooks need no other files: the data they read ships inside the package
(:mod:`agentlab.datasets`), and each writes its traces under ``runs/<its name>/``
next to itself.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def notebooks_dir() -> Path:
    """The folder the installed package's notebooks are in."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_notebooks", package.parent / "notebooks"):
        if any(candidate.glob("*.ipynb")):
            return candidate
    raise FileNotFoundError(f"no teaching notebooks found in {package / '_notebooks'} (a broken install?)")


def copy_notebooks(folder: Path) -> tuple[list[Path], list[Path]]:
    """Copy every notebook into ``folder`` (made if missing). Returns (copied, kept): a file
    already there is kept as it is, since it may hold the user's own edits and outputs."""
    folder.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    for source in sorted(notebooks_dir().glob("*.ipynb")):
        target = folder / source.name
        if target.exists():
            kept.append(target)
            continue
        shutil.copyfile(source, target)
        copied.append(target)
    return copied, kept

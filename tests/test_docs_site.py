"""`make docs` is strict for real: its exact command fails on a broken link.

(MkDocs' ``--quiet`` drops the warnings ``--strict`` counts, so a recipe with both would pass
anything; this runs the Makefile's own command line on a two-page site with one broken link.)
The full site is built by ``make docs``, which ``make test`` runs before the tests.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs", reason="the docs extra is not installed")


def docs_command() -> list[str]:
    recipe = re.search(r"^docs:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1)
    recipe = recipe.split("  #", 1)[0].replace("$(BIN)/", f"{Path(sys.executable).parent}/")
    return shlex.split(recipe)


def test_the_docs_command_fails_on_a_broken_link_and_passes_without_one(tmp_path):
    argv = docs_command()
    env_assignments = [a for a in argv if re.fullmatch(r"[A-Z_0-9]+=.*", a)]
    command = argv[len(env_assignments) :]
    assert command[1:3] == ["build", "--strict"] and "--quiet" not in command and "-q" not in command
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nnav:\n  - index.md\n  - other.md\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n")
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the other page](other.md) and [a lost one](lost.md).\n")
    broken = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert broken.returncode != 0 and "lost.md" in broken.stderr
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the other page](other.md).\n")
    fixed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert fixed.returncode == 0, fixed.stderr


def test_the_site_config_is_strict_and_checks_links_and_anchors():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True
    assert config["validation"]["links"] == {
        "not_found": "warn",
        "anchors": "warn",
        "absolute_links": "warn",
        "unrecognized_links": "warn",
    }
    assert "scripts/mkdocs_hooks.py" in config["hooks"]

"""The package as a stranger gets it: the built wheel, installed in a fresh virtual environment.

Built from a copy of the source tree (sdist first, then the wheel from the sdist, as PyPI users
get it), without build isolation so no download is needed. The fresh venv has no pip of its
own; this environment's pip installs the wheel into it with ``--no-deps --no-index``, and a
``.pth`` line lends it this environment's site-packages for the dependencies (a path added that
way is not scanned for ``.pth`` files, so the source checkout's editable install does not leak
in). Then, from an empty folder: ``import agentlab`` comes from the wheel, the README's first
example runs, the CLI knows its version and copies the notebooks out, and mypy sees a typed
package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.markdown import CodeBlockParser

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["agentlab", "notebooks", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"]
NOTEBOOKS = len(list((ROOT / "notebooks").glob("*.ipynb")))
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

pytest.importorskip("build", reason="the wheel test needs `build` (in the dev extra)")


def first_readme_example() -> str:
    """The README's first Python block, as Sybil (which runs the docs' blocks) finds it."""
    document = Sybil(parsers=[CodeBlockParser("python")]).parse(ROOT / "README.md")
    return next(iter(document.examples())).parsed


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the built wheel installed; returns its bin folder."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "runs", ".ipynb_checkpoints")
    for name in SOURCES:
        path = ROOT / name
        (shutil.copytree(path, src / name, ignore=ignore) if path.is_dir() else shutil.copy2(path, src / name))
    dist = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = dist.glob("agentlab_loop-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    bindir = venv / "bin"
    site = subprocess.run(
        [bindir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # a checkout on the path is not an install
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(bindir / "python"),
            "install",
            "--no-deps",
            "--no-index",
            "--force-reinstall",
            "--quiet",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        env=clean,
    )
    return bindir


def run_in(folder: Path, *argv: str | Path, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ANTHROPIC_API_KEY")}
    env["AGENTLAB_RUNS"] = str(folder / "runs")
    return subprocess.run(
        [str(a) for a in argv], cwd=folder, env=env, capture_output=True, text=True, timeout=300, **kw
    )


def test_the_wheel_carries_licence_notice_types_notebooks_and_their_data(installed):
    (wheel,) = installed.parent.parent.glob("dist/agentlab_loop-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "agentlab/py.typed",
        "agentlab/data/NOTICE.md",
        "agentlab/data/recorded/claude_code_multi_turn.jsonl",
        "agentlab/data/recorded/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl",
        "agentlab/data/shop.sql",
    } <= names
    assert f"agentlab_loop-{VERSION}.dist-info/licenses/LICENSE" in names
    assert len([n for n in names if n.startswith("agentlab/_notebooks/") and n.endswith(".ipynb")]) == NOTEBOOKS
    metadata = zipfile.ZipFile(wheel).read(f"agentlab_loop-{VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in metadata and "Project-URL: Documentation" in metadata
    assert "Classifier: Typing :: Typed" in metadata and "Provides-Extra: all" in metadata


def test_the_readme_first_example_runs_from_the_installed_wheel(installed, tmp_path):
    where = run_in(
        tmp_path, installed / "python", "-c", "import agentlab; print(agentlab.__file__, agentlab.__version__)"
    )
    assert where.returncode == 0, where.stderr
    path, version = where.stdout.split()
    assert Path(path).is_relative_to(installed.parent) and version == VERSION
    result = run_in(tmp_path, installed / "python", "-c", first_readme_example())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Done('Order 1042 was held at the depot.', steps=2")


def test_the_installed_command_knows_its_version_and_copies_the_notebooks_out(installed, tmp_path):
    version = run_in(tmp_path, installed / "agentlab", "--version")
    assert version.stdout.strip() == f"agentlab {VERSION} (distribution agentlab-loop)"
    copied = run_in(tmp_path, installed / "agentlab", "notebooks", "nb")
    assert copied.returncode == 0, copied.stderr
    assert len(list((tmp_path / "nb").glob("*.ipynb"))) == NOTEBOOKS and "jupyter lab nb" in copied.stdout
    none = run_in(tmp_path, installed / "agentlab")
    assert none.returncode == 2 and "usage: agentlab" in none.stderr


def test_a_users_mypy_sees_a_typed_package(installed, tmp_path):
    pytest.importorskip("mypy")
    (tmp_path / "user.py").write_text(
        "import agentlab as al\n\n"
        "result = al.run('hi', [], model=al.ScriptedModel([al.reply('x')]))\n"
        "reveal_type(result)\n"
    )
    checked = run_in(
        tmp_path,
        sys.executable,
        "-m",
        "mypy",
        "--no-incremental",
        "--python-executable",
        installed / "python",
        "user.py",
    )
    assert "missing library stubs" not in checked.stdout and "import-untyped" not in checked.stdout
    assert 'Revealed type is "agentlab.results.Done | agentlab.results.Stopped"' in checked.stdout, checked.stdout

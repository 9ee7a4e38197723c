"""The teaching notebooks: each one runs end to end, offline, in a fresh real Jupyter kernel."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def _builder():
    spec = importlib.util.spec_from_file_location("build_notebooks", ROOT / "scripts" / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_notebooks", module)
    spec.loader.exec_module(module)
    return module


def _sources(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells]


def test_there_are_seven_lessons_in_the_articles_order():
    """One notebook per lesson, numbered in order, each opening with a markdown title."""
    assert [p.stem for p in NOTEBOOKS] == [
        "01-the-loop-step-by-step", "02-three-budgets", "03-three-kinds-of-failure", "04-loop-detection",
        "05-parallel-tool-calls", "06-traces-step-four", "07-cost-analysis", "09-real-runs",
    ]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
        assert sum(c.cell_type == "markdown" for c in nb.cells) >= 3, f"{path.name} explains too little"


def test_committed_notebooks_match_the_build_script():
    """The notebooks are generated: their cells equal scripts/build_notebooks.py's, so they never drift."""
    built = _builder().NOTEBOOKS
    for path in NOTEBOOKS:
        committed = nbformat.read(path, as_version=4)
        expected = nbformat.v4.new_notebook(cells=built[path.stem])
        assert _sources(committed) == _sources(expected), f"{path.name}: run scripts/build_notebooks.py"


@pytest.mark.kernel
@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_end_to_end_in_a_fresh_kernel(path, tmp_path, monkeypatch):
    """Every cell executes without error offline, and the lesson's plots and tables are in the outputs."""
    from nbclient import NotebookClient

    monkeypatch.setenv("AGENTLAB_RUNS", str(tmp_path / "runs"))
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    mimes = {m for o in outputs for m in o.get("data", {})}
    assert "text/html" in mimes or "text/plain" in mimes
    if any("plots." in c.source for c in nb.cells if c.cell_type == "code"):
        assert "image/png" in mimes, f"{path.name} draws a plot that did not render"
    assert list((tmp_path / "runs").glob("*.jsonl")) or path.stem.startswith("01"), "the runs left no traces"

"""An import that takes more than a second shows a progress bar: tqdm in a terminal, a widget in a notebook.

The threshold is forced (0 s, or never) instead of waiting for a slow import:
no test here sleeps or depends on how fast the machine is.
"""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import pytest

import agentlab.recorded as recorded
from agentlab.recorded import import_recorded, load_recorded

tqdm_auto = pytest.importorskip("tqdm.auto")
tqdm_notebook = pytest.importorskip("tqdm.notebook")
ipywidgets = pytest.importorskip("ipywidgets")

CC = Path(__file__).parent / "fixtures" / "recorded" / "claude_code"
FOLDER_BYTES = sum(f.stat().st_size for f in CC.rglob("*.jsonl"))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def notebook_bars(monkeypatch):
    """tqdm.auto as it is in a Jupyter kernel (the widget bar), keeping every bar made."""
    made: list[tqdm_notebook.tqdm] = []

    class Bar(tqdm_notebook.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(tqdm_auto, "tqdm", Bar)
    return made


def test_agentlab_import_past_the_threshold_draws_a_bar_over_the_folders_bytes_in_a_terminal(monkeypatch, tmp_path):
    monkeypatch.setattr(recorded, "PROGRESS_AFTER_S", 0.0)
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    written = import_recorded(CC, tmp_path / "runs")
    assert written.runs > 0
    drawn = term.getvalue()
    assert "importing:" in drawn
    assert f"/{tqdm_auto.tqdm.format_sizeof(FOLDER_BYTES)} " in drawn  # the total: the files read, in bytes


def test_an_import_under_the_threshold_draws_nothing_in_a_terminal(monkeypatch, tmp_path):
    monkeypatch.setattr(recorded, "PROGRESS_AFTER_S", 1e9)
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    import_recorded(CC, tmp_path / "runs")
    assert term.getvalue() == ""


def test_no_bar_reaches_output_that_is_not_a_terminal(monkeypatch, tmp_path):
    """CI logs and redirected stderr get no carriage-return noise."""
    monkeypatch.setattr(recorded, "PROGRESS_AFTER_S", 0.0)
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    import_recorded(CC, tmp_path / "runs")
    assert log.getvalue() == ""


def test_in_a_notebook_an_import_past_the_threshold_shows_a_widget_that_ends_full_and_hides(
    monkeypatch, notebook_bars, capsys, tmp_path
):
    folder = tmp_path / "projects"
    shutil.copytree(CC, folder)
    (folder / "NOTES.md").write_text("not a session: never read, so not in the bar's total\n" * 100)
    monkeypatch.setattr(recorded, "PROGRESS_AFTER_S", 0.0)
    traces = load_recorded(folder)
    assert len(traces) > 1
    (bar,) = notebook_bars
    assert bar.displayed  # shown although a kernel's output is no TTY
    assert isinstance(bar.container, ipywidgets.HBox)
    # every byte counted: a bar left short of its total would stay on the page, red
    assert bar.n == bar.total == FOLDER_BYTES
    assert bar.container.layout.visibility == "hidden"


def test_in_a_notebook_a_quick_import_shows_no_widget(monkeypatch, notebook_bars, capsys):
    monkeypatch.setattr(recorded, "PROGRESS_AFTER_S", 1e9)
    load_recorded(CC)
    (bar,) = notebook_bars
    assert not bar.displayed

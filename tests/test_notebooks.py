"""The teaching notebooks: each one runs end to end, offline, in a fresh real Jupyter kernel,
and what is committed is what a reader sees without running anything (GitHub, nbviewer, an HTML export)."""

from __future__ import annotations

import html
import importlib.util
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))
LESSONS = [
    "01-the-loop-step-by-step",
    "02-three-budgets",
    "03-three-kinds-of-failure",
    "04-loop-detection",
    "05-parallel-tool-calls",
    "06-traces-step-four",
    "07-cost-analysis",
]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CUT_MID_WORD = re.compile(r"\w(?:…|\.\.\.)(?=\W|$)(?!\s*\(\+[\d,]+ char)")
"""A word that ends in an ellipsis: text cut by a display width ("was p...", "carrier_stat…").
A cut that says how much it hides ("… (+141 chars)", a trace summary's task line) is a summary, not a cut."""


def _builder():
    spec = importlib.util.spec_from_file_location("build_notebooks", ROOT / "scripts" / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_notebooks", module)
    spec.loader.exec_module(module)
    return module


def _sources(cells) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in cells]


def _read(path: Path):
    return nbformat.read(path, as_version=4)


def _shown_text(output) -> str:
    """What a reader may see of one output: its HTML and its plain-text fallback (a terminal, an
    export, a viewer without widgets shows the fallback), so both must read whole."""
    if output.output_type == "stream":
        return output.text
    data = output.get("data", {})
    shown = [data.get("text/plain", "")]
    if "text/html" in data and WIDGET_VIEW not in data:
        shown.append(html.unescape(re.sub(r"<[^>]+>", " ", data["text/html"])))
    return "\n".join(shown)


def test_the_seven_lessons_come_first_in_the_articles_order():
    """The article's seven lessons are 01-07, in order; later notebooks (08, 09, ...) follow, numbered uniquely."""
    stems = [p.stem for p in NOTEBOOKS]
    assert stems[:7] == LESSONS
    numbers = [int(s[:2]) for s in stems]
    assert numbers == sorted(set(numbers)), f"notebook numbers repeat or skip order: {stems}"
    for path in NOTEBOOKS:
        nb = _read(path)
        nbformat.validate(nb)
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
        assert sum(c.cell_type == "markdown" for c in nb.cells) >= 3, f"{path.name} explains too little"


@pytest.mark.parametrize("name", LESSONS)
def test_each_lesson_opens_saying_it_runs_offline_and_what_a_real_key_changes(name):
    first = _read(ROOT / "notebooks" / f"{name}.ipynb").cells[0].source
    assert "offline" in first.lower(), f"{name}: the first cell does not say it runs offline"
    assert "ANTHROPIC_API_KEY" in first, f"{name}: the first cell does not say what a real API key changes"


def test_committed_notebooks_match_the_build_script():
    """The notebooks are generated: their cells equal scripts/build_notebooks.py's, so they never drift."""
    builder = _builder()
    for path in NOTEBOOKS:
        assert path.stem in builder.NOTEBOOKS, f"{path.name} is not in scripts/build_notebooks.py"
        assert _sources(_read(path).cells) == _sources(builder.cells_of(path.stem)), (
            f"{path.name}: run scripts/build_notebooks.py"
        )


def test_the_first_lesson_writes_the_loop_by_hand_before_using_run_step():
    sources = [c.source for c in _read(ROOT / "notebooks" / f"{LESSONS[0]}.ipynb").cells if c.cell_type == "code"]
    by_hand = next(i for i, s in enumerate(sources) if "model.complete(" in s and "tool_result" in s)
    uses_step = next(i for i, s in enumerate(sources) if "run.step()" in s)
    assert by_hand < uses_step
    assert len(sources[by_hand].splitlines()) <= 22, "the bare loop should stay about fifteen lines"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_outputs_are_whole_and_clean(path):
    """Every code cell ran; no error, no stderr or warning, no text cut mid-word by a display width."""
    nb = _read(path)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, f"{path.name} c{i} was not executed: build with --execute"
        for out in cell.outputs:
            assert out.output_type != "error", f"{path.name} c{i}: {out.get('ename')}: {out.get('evalue')}"
            assert not (out.output_type == "stream" and out.name == "stderr"), (
                f"{path.name} c{i} wrote to stderr: {out.text[:200]}"
            )
            text = _shown_text(out)
            assert "Warning:" not in text, f"{path.name} c{i} shows a warning: {text[:200]}"
            cut = CUT_MID_WORD.search(text)
            assert cut is None, (
                f"{path.name} c{i} shows text cut mid-word: ...{text[max(0, cut.start() - 60) : cut.end()]}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_figure_is_saved_twice(path):
    """A chart appears once: a cell that both draws through pyplot and returns the figure shows it twice."""
    seen: dict[str, int] = {}
    for i, cell in enumerate(_read(path).cells):
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png:
                assert png not in seen, f"{path.name} c{i} shows the figure of c{seen[png]} again"
                seen[png] = i


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_notebook_writes_its_runs_to_its_own_folder(path):
    """No notebook reads a shared runs/ folder whose content depends on what ran before."""
    setup = next(c.source for c in _read(path).cells if c.cell_type == "code")
    own = f'os.path.join("runs", "{path.stem}")'
    assert own in setup and 'os.environ["AGENTLAB_RUNS"] = RUNS' in setup, f"{path.name} does not use runs/{path.stem}"


def _panels(state: dict) -> list[dict]:
    """Each agentlab panel in a saved widget state: its phase text and its gauges' values."""
    models = state["state"]

    def walk(model_id: str):
        model = models[model_id.removeprefix("IPY_MODEL_")]
        yield model
        for child in model["state"].get("children", []):
            yield from walk(child)

    panels = []
    for model_id, model in models.items():
        if "agentlab-panel" in model["state"].get("_dom_classes", []):
            inside = list(walk(model_id))
            status = next(
                m["state"]["value"] for m in inside if "agentlab-status-box" in m["state"].get("_dom_classes", [])
            )
            phase = re.search(r"class='agentlab-phase'[^>]*>([^<]*)<", status).group(1)
            gauges = [m["state"]["value"] for m in inside if m["model_name"] == "FloatProgressModel"]
            panels.append({"phase": phase, "gauges": gauges})
    return panels


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_saved_widgets_show_the_finished_run_not_the_initial_panel(path):
    """Every widget a cell displays is in the saved state, and every panel was saved after its run; a notebook
    that displays none saves no widget state and shows no panel as bare text (a panel that failed to render)."""
    nb = _read(path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    shown = [o["data"][WIDGET_VIEW]["model_id"] for o in outputs if WIDGET_VIEW in o.get("data", {})]
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE)
    if not shown:
        assert state is None, f"{path.name} displays no widget but saved widget state for {len(state['state'])}"
        bare = [t for t in map(_shown_text, outputs) if re.match(r"agentlab run \S+: ", t)]
        assert bare == [], f"{path.name} shows a run's panel as text only: {bare[:1]}"
        return
    assert state, f"{path.name} displays widgets but saved no widget state"
    missing = [m for m in shown if m not in state["state"]]
    assert not missing, f"{path.name}: displayed widgets {missing} are not in the saved state (they render as errors)"
    fallbacks = [
        o["data"].get("text/plain", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if WIDGET_VIEW in o.get("data", {})
    ]
    stale = [
        t.splitlines()[0] for t in fallbacks if t.startswith("agentlab run") and t.splitlines()[0].endswith(": ready")
    ]
    assert not stale, f"{path.name}: a panel's text fallback was saved before its run: {stale}"
    for panel in _panels(state):
        assert not (panel["phase"].startswith("ready") and not any(panel["gauges"])), (
            f"{path.name}: a panel was saved in its initial state ({panel}); build with --execute"
        )


def _shape(models: dict, model_id: str) -> tuple:
    """A widget's kind, its agentlab classes and its children's shapes, in a widget state as a notebook saves it;
    the level a gauge shows is left out (a run's outcome, not the panel's layout)."""
    model = models[model_id.removeprefix("IPY_MODEL_")]
    classes = sorted(c for c in model["state"].get("_dom_classes", []) if not c.startswith("agentlab-level-"))
    children = tuple(_shape(models, child) for child in model["state"].get("children", []))
    return (model["model_name"], tuple(classes), children)


def test_every_saved_panel_is_laid_out_as_this_agentlab_builds_one():
    """A committed panel is the panel the package builds today, widget for widget: a change to the panel's layout
    (the log split in two, a gauge added) fails here until the notebooks are rebuilt with --execute, instead of
    GitHub, nbviewer and the docs site showing the old panel."""
    widgets = pytest.importorskip("ipywidgets", reason="the panel needs pip install 'agentlab-loop[lab]'")
    import agentlab as al

    built = []  # the two layouts a Lab has: with its live chart and without (chart=False), as a notebook saves them
    for chart in (True, False):
        lab = al.scenarios.get("growing-context").setup().lab(chart=chart)
        try:
            live = widgets.Widget.get_manager_state(drop_defaults=False)["state"]
            built.append(_shape(live, lab.panel.widget.model_id))
        finally:
            lab.close()
    assert built[0] != built[1]
    saved, stale = 0, []
    for path in NOTEBOOKS:
        state = _read(path).metadata.get("widgets", {}).get(WIDGET_STATE)
        models = state["state"] if state else {}
        for model_id, model in models.items():
            if "agentlab-panel" in model["state"].get("_dom_classes", []):
                saved += 1
                if _shape(models, model_id) not in built:
                    stale.append(path.name)
    assert saved >= 3, f"only {saved} saved panels: the notebooks that show one (01, 09, 10) were saved without it"
    assert not stale, f"panels in {sorted(set(stale))} were saved by an older layout; build them with --execute"


@pytest.mark.kernel
@pytest.mark.timeout(600)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_end_to_end_in_a_fresh_kernel(path, tmp_path):
    """Every cell executes without error offline, the plots render, and the runs land in the notebook's own folder."""
    nb = _read(path)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    illegible: list[str] = []
    _builder().execute(nb, tmp_path, illegible=illegible)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert illegible == [], f"{path.name} shows an illegible figure: {illegible}"
    mimes = {m for o in outputs for m in o.get("data", {})}
    assert "text/html" in mimes or "text/plain" in mimes
    if any("plots." in c.source for c in nb.cells if c.cell_type == "code"):
        assert "image/png" in mimes, f"{path.name} draws a plot that did not render"
    if WIDGET_VIEW in mimes:
        assert all(p["phase"] != "ready" for p in _panels(nb.metadata["widgets"][WIDGET_STATE]))
    assert list((tmp_path / "runs" / path.stem).rglob("*.jsonl")), "the runs left no traces in the notebook's folder"


CLAIM = re.compile(r'<span class="claim">(.*?)</span>')


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_marked_claim_is_what_the_output_beside_it_shows(path):
    """A number the prose states is marked ``<span class="claim">…</span>`` and must appear in the
    output of the code cell just before or just after it: prose cannot drift from what ran."""
    cells = _read(path).cells
    for i, cell in enumerate(cells):
        if cell.cell_type != "markdown":
            continue
        claims = CLAIM.findall(cell.source)
        if not claims:
            continue
        near = [c for c in (_code_before(cells, i), _code_after(cells, i)) if c is not None]
        shown = " ".join(_shown_text(o) for c in near for o in c.get("outputs", []))
        missing = [c for c in claims if c not in shown]
        assert not missing, f"{path.name} c{i} claims {missing}, which no output beside it shows"


def _code_before(cells, i):
    return next((c for c in reversed(cells[:i]) if c.cell_type == "code"), None)


def _code_after(cells, i):
    return next((c for c in cells[i + 1 :] if c.cell_type == "code"), None)


def _print_of(cell_sources: list[str]) -> str:
    """What the cells print, run in order in one fresh namespace with top-level ``await`` (as a kernel does)."""
    import ast
    import asyncio
    import contextlib
    import io

    namespace: dict = {}
    exec("import agentlab as al\nfrom agentlab import plots", namespace)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in cell_sources:
            code = compile(source, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            pending = eval(code, namespace)
            if pending is not None:
                asyncio.run(pending)
    return out.getvalue()


def test_05s_demonstrations_print_the_same_thing_on_every_execution_and_as_saved(tmp_path, monkeypatch):
    """The race is lost the same way every time (the second write replaces the first), the unequal reads
    finish in a known order that is not the order asked, and the results go back in the order asked;
    twice in a row, and as the saved notebook shows."""
    monkeypatch.setenv("AGENTLAB_RUNS", str(tmp_path))
    name = "05-parallel-tool-calls"
    builder = _builder()
    tagged = [c for c in builder.cells_of(name) if builder.SAME_EVERY_RUN in c.metadata.get("tags", [])]
    assert len(tagged) == 3
    first, second = _print_of([c.source for c in tagged]), _print_of([c.source for c in tagged])
    assert first == second
    assert "finished in:       get_customer, search_orders, get_order" in first
    assert "results sent back: get_order, get_customer, search_orders" in first
    assert "add_note declared 'read': notes kept = ['second']" in first
    assert "add_note declared 'write': notes kept = ['first', 'second']" in first
    assert "the last read sees the note: True" in first
    saved = [
        c
        for c in _read(ROOT / "notebooks" / f"{name}.ipynb").cells
        if builder.SAME_EVERY_RUN in c.metadata.get("tags", [])
    ]
    assert "".join(o.text for c in saved for o in c.outputs if o.output_type == "stream") == first


def test_importing_agentlab_changes_no_pandas_setting_and_notebook_marks_tables_as_not_math():
    """A frame whose cell holds two dollar amounts (a budget's stop detail) is typeset as math unless the
    kernel called ``al.notebook()``; after it, pandas marks the table with the classes MathJax skips.
    ``import agentlab`` alone changes nothing (a subprocess, so this session's options do not count)."""
    import subprocess

    import pandas as pd

    import agentlab as al
    from agentlab._notebook import PANDAS_OPTIONS
    from agentlab._safe_text import NO_MATH

    names = list(PANDAS_OPTIONS)
    probe = f"import pandas as pd; before = [pd.get_option(n) for n in {names!r}]; import agentlab; "
    probe += f"print(before == [pd.get_option(n) for n in {names!r}])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "True", out.stderr
    frame = pd.DataFrame({"reason": ["budget"], "detail": ["spent $0.0556 of $0.05 after step 4"]})
    with pd.option_context(*[x for kv in PANDAS_OPTIONS.items() for x in (kv[0], pd.get_option(kv[0]))]):
        pd.set_option("display.html.use_mathjax", True)
        assert NO_MATH not in frame._repr_html_()  # what a kernel without the set-up shows
        al.notebook()
        table = frame._repr_html_()
        assert f'class="dataframe {NO_MATH}"' in table and "spent $0.0556 of $0.05" in table
        assert pd.get_option("display.max_colwidth") is None

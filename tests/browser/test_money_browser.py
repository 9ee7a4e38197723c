"""Dollar amounts read as money, never as math, wherever the lab's notebooks and outputs are shown.

JupyterLab 4 and Notebook 7 (MathJax 3), nbconvert's HTML export and the docs
site's notebook pages (mkdocs-jupyter; both MathJax 2) typeset text between two
``$`` as LaTeX: ``$0.04 of $0.50`` turns into an italic ``0.04of0.50``. The
ten teaching notebooks and a notebook of the lab's own outputs (every result,
trace, step and experiment repr, the report notebook's cells, a frame with a
budget's stop detail) are opened in each front end in Debian's Chromium; any
typeset math fails the test, naming the text it came from.

The test can fail: a sentinel cell with real math (``$x^2$``) closes every
page, and the page counts only once MathJax has typeset it. The exported pages
load MathJax 2 from a CDN this machine cannot reach, so the same URL is served
from Debian's ``libjs-mathjax`` (``scripts/ensure-browser.sh`` installs it).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .jupyter_server import CHROMIUM, WAIT_MS, jupyter_server, launch_chromium

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))
MATHJAX2 = Path("/usr/share/javascript/mathjax")
CDN_MATHJAX2 = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/"
SENTINEL = "SENTINEL-MATH: $x^2$"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason="Debian's chromium is not installed at /usr/bin/chromium "
        "(scripts/ensure-browser.sh installs it; never `playwright install`)",
    ),
]

TYPESET = """() => {
  const math = [...document.querySelectorAll('mjx-container, .MathJax, .MathJax_CHTML, .MathJax_Display')];
  const block = el => el.closest('.jp-Cell, .cell, .jp-OutputArea-output, .jp-RenderedHTMLCommon') || el.parentElement;
  return math.map(el => (block(el) || el).textContent.replace(/\\s+/g, ' ').slice(0, 160));
}"""
"""The text around every piece of typeset math on the page."""


# ------------------------------------------------------------ what is shown
def _bundle(obj: Any) -> dict[str, Any]:
    """``obj`` as a kernel would display it: IPython's own formatters, the repr the lab defines."""
    from IPython.core.formatters import DisplayFormatter

    data, _ = DisplayFormatter().format(obj)
    return {k: v for k, v in data.items() if k in ("text/html", "text/markdown", "text/plain")}


def lab_outputs_notebook(tmp_path: Path) -> nbformat.NotebookNode:
    """A notebook whose outputs are the lab's reprs of real offline runs (each has at least one dollar amount)."""
    import asyncio

    import pandas as pd

    import agentlab as al
    from agentlab import scenarios
    from agentlab.report import export_notebook
    from agentlab.trace import load_run, load_runs

    runs = tmp_path / "runs"
    setups = {
        "budget": scenarios.get("growing-context").setup(trace=str(runs)),
        "done": scenarios.get("not-found-hint").setup(trace=str(runs)),
    }
    results = {name: asyncio.run(s.arun()) for name, s in setups.items()}
    stopped, done = results["budget"], results["done"]
    assert stopped.reason == "budget" and stopped.detail.count("$") >= 2, stopped.detail
    trace = load_run(stopped.run_id, runs)
    traces = load_runs(runs)
    shown: list[tuple[str, Any]] = [
        ("a stopped run", stopped),
        ("a finished run", done),
        ("its trace", trace),
        ("its last step", trace.step(int(trace.steps["step"].max()))),
        ("a folder of traces", traces),
    ]
    with pd.option_context("display.html.use_mathjax", True):  # pandas' default, restored after the block
        al.notebook()  # the documented set-up call every course notebook makes
        frame = _bundle(traces.runs[["run_id", "reason", "cost", "detail"]])
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# The lab's outputs"))
    for title, obj in shown:
        cell = nbformat.v4.new_code_cell(title)
        cell.outputs = [nbformat.v4.new_output("display_data", data=_bundle(obj))]
        nb.cells.append(cell)
    cell = nbformat.v4.new_code_cell("traces.runs")
    cell.outputs = [nbformat.v4.new_output("execute_result", data=frame, execution_count=1)]
    nb.cells.append(cell)
    report = export_notebook(stopped.run_id, tmp_path / "report.ipynb", runs)
    nb.cells += [c for c in nbformat.read(report, as_version=4).cells if c.cell_type == "markdown"]
    dollars = sum(("$" in json.dumps(c)) or ("&#36;" in json.dumps(c)) for c in nb.cells)
    assert dollars >= 8, "the outputs lost their dollar amounts"
    return nb


def with_sentinel(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    nb.cells.append(nbformat.v4.new_markdown_cell(SENTINEL))
    return nb


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, nbformat.NotebookNode]:
    """Every teaching notebook and the lab's outputs, each closed by the sentinel cell."""
    tmp = tmp_path_factory.mktemp("money")
    shown = {p.stem: with_sentinel(nbformat.read(p, as_version=4)) for p in NOTEBOOKS}
    shown["lab-outputs"] = with_sentinel(lab_outputs_notebook(tmp))
    return shown


def _math_in(found: list[str]) -> list[str]:
    return [t for t in found if "SENTINEL-MATH" not in t]


def _sentinel_typeset(found: list[str]) -> bool:
    return any("SENTINEL-MATH" in t for t in found)


# ------------------------------------------------------------ JupyterLab and Notebook 7
def _open_in(app: str, page: Any, port: int, token: str, name: str) -> list[str]:
    path = "lab/tree" if app == "jupyterlab" else "notebooks"
    # ``reset``: JupyterLab's saved workspace would reopen the notebook checked before, and its sentinel and
    # its math would be counted for this one; each notebook is checked alone.
    fresh = "reset&" if app == "jupyterlab" else ""
    page.goto(f"http://127.0.0.1:{port}/{path}/{name}.ipynb?{fresh}token={token}")
    page.wait_for_function(
        "() => [...document.querySelectorAll('mjx-container')].some(m => "
        "(m.closest('.jp-RenderedMarkdown') || {}).textContent?.includes('SENTINEL-MATH'))",
        timeout=WAIT_MS,
    )
    return page.evaluate(TYPESET)


def _all_cells_rendered(settings: Path) -> None:
    """Every cell rendered at once (no windowing), so the whole notebook is on the page to be checked."""
    tracker = settings / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True, exist_ok=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("app", ["jupyterlab", "notebook"])
def test_no_dollar_amount_is_typeset_as_math_in_jupyterlab_or_notebook_7(app, pages, tmp_path):
    from playwright.sync_api import sync_playwright

    root = tmp_path / "root"
    root.mkdir()
    names = list(pages) if app == "jupyterlab" else ["lab-outputs", NOTEBOOKS[6].stem]  # Notebook 7: same renderer
    for name in names:
        nbformat.write(pages[name], root / f"{name}.ipynb")
    settings = tmp_path / "settings"
    _all_cells_rendered(settings)
    found: dict[str, list[str]] = {}
    with jupyter_server(app, root, tmp_path) as (port, token), sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            for name in names:
                shown = _open_in(app, page, port, token, name)
                assert _sentinel_typeset(shown)
                found[name] = _math_in(shown)
                text = page.locator(".jp-Notebook").inner_text()
                assert "$" in text, f"{name}: no dollar amount is shown at all"
        finally:
            browser.close()
    typeset = {k: v for k, v in found.items() if v}
    assert not typeset, f"{app} typeset dollar amounts as math: {json.dumps(typeset, indent=1)[:4000]}"


# ------------------------------------------------------------ the exported HTML and the docs site
def _exported(nb: nbformat.NotebookNode, how: str, tmp: Path, name: str) -> Path:
    path = tmp / f"{name}.ipynb"
    nbformat.write(nb, path)
    if how == "nbconvert":
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter().from_notebook_node(nb)
    else:  # the docs site: mkdocs-jupyter's own conversion, in a page of its own
        from mkdocs_jupyter.nbconvert2 import nb2html

        page = _site_hooks().code_is_not_math(nb2html(str(path)))  # as the site's build post-processes it
        body = f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{page}</body></html>"
    out = tmp / f"{name}.{how}.html"
    out.write_text(body, encoding="utf-8")
    return out


def _site_hooks() -> Any:
    """scripts/mkdocs_hooks.py, the docs build's own page post-processing."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mkdocs_hooks", REPO / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _serve_mathjax(route: Any) -> None:
    """The CDN's MathJax 2.7 URLs, answered from Debian's copy (its ``latest.js`` loads ``MathJax.js``)."""
    url = route.request.url
    rel = url.split("/2.7.7/", 1)[1].split("?", 1)[0]
    if rel == "latest.js":
        src = url.replace("latest.js", "MathJax.js")
        loader = f"var s = document.createElement('script'); s.src = {json.dumps(src)}; document.head.appendChild(s);"
        route.fulfill(body=loader, content_type="application/javascript")
        return
    f = MATHJAX2 / rel
    if f.is_file():
        route.fulfill(body=f.read_bytes(), content_type="application/javascript" if f.suffix == ".js" else None)
    else:
        route.fulfill(status=404)


@pytest.mark.timeout(1800)
@pytest.mark.skipif(not (MATHJAX2 / "MathJax.js").exists(), reason="Debian's libjs-mathjax is not installed")
@pytest.mark.parametrize("how", ["nbconvert", "docs-site"])
def test_no_dollar_amount_is_typeset_as_math_in_the_exported_html(how, pages, tmp_path):
    from playwright.sync_api import sync_playwright

    found: dict[str, list[str]] = {}
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.route(CDN_MATHJAX2 + "**", _serve_mathjax)
            page.route(
                "http*://**", lambda r: r.abort() if not r.request.url.startswith(CDN_MATHJAX2) else r.fallback()
            )
            for name, nb in pages.items():
                page.goto(_exported(nb, how, tmp_path, name).as_uri())
                page.wait_for_function("() => window.MathJax && MathJax.isReady", timeout=WAIT_MS)
                page.evaluate("() => new Promise(done => MathJax.Hub.Queue(done))")  # after everything queued
                shown = page.evaluate(TYPESET)
                assert _sentinel_typeset(shown), f"{how} {name}: MathJax did not typeset the sentinel"
                found[name] = _math_in(shown)
                assert "$" in page.locator("body").inner_text(), f"{how} {name}: no dollar amount is shown"
        finally:
            browser.close()
    typeset = {k: v for k, v in found.items() if v}
    assert not typeset, f"{how} typeset dollar amounts as math: {json.dumps(typeset, indent=1)[:4000]}"

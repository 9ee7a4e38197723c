"""Nothing the lab renders runs code or fetches anything (issue 24), checked in a real Chromium.

Every HTML and markdown output of the lab (the panel, the repr of every
result type, the report notebook and its nbconvert HTML, experiment views)
is made from runs whose every field a tool, a model or a shared trace can
set carries the payloads below, then loaded into Debian's Chromium. A local
listener counts every hit on the URLs the payloads name; the page counts
every script that ran (``window.__ran``, ``onerror``, ``fetch``,
``XMLHttpRequest``) and every request it tried. Any count above zero fails.
So the test cannot pass by showing nothing, each page made from them must
show the payloads' text. (pandas' own ``<style scoped>`` is a template's.)
"""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import agentlab as al
from agentlab import reply

from .jupyter_server import CHROMIUM, WAIT_MS, launch_chromium

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason="Debian's chromium is not installed at /usr/bin/chromium "
        "(scripts/ensure-browser.sh installs it; never `playwright install`)",
    ),
]

MARK = "PAYLOAD-SHOWN"


def payloads(port: int) -> str:
    """One string holding every way text has been made to run or fetch in a notebook, a page or markdown."""
    leak = f"http://127.0.0.1:{port}"
    ran = "window.__ran.push"
    return "\n".join(
        [
            MARK,
            f"<img src=x onerror=\"{ran}('img onerror')\">",
            f"<script>{ran}('script')</script>",
            f"\"'><svg onload={ran}('svg onload')>",
            f"'><details open ontoggle={ran}('details ontoggle')>",
            f"![m]({leak}/markdown-image?secret=1)",
            f"![r][ref]\n\n[ref]: {leak}/reference-image",
            f"[j](javascript:{ran}('markdown link'))",
            f"<a href=\"javascript:{ran}('html link')\">click</a>",
            f"<img src='{leak}/html-image'>",
            f"<iframe src='{leak}/iframe'></iframe>",
            f"<link rel=stylesheet href='{leak}/stylesheet'>",
            f"<style>@import url({leak}/css-import);</style>",
            f"<{leak}/autolink> and a bare {leak}/bare-url",
            f"<object data='{leak}/object'></object>",
            "| a table | break |\n|---|---|\n",
            "``` a fence\n` a backtick *emphasis* _under_ # heading",
            "$x$ and $$y$$, \\(z\\)",
            "a lone surrogate \ud83d here",
        ]
    )


class Listener:
    """A local HTTP server that counts every request (the place every payload URL points at)."""

    def __init__(self) -> None:
        hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.hits = hits
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Listener:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------ the hostile runs
def hostile_tools(p: str) -> list[Any]:
    @al.tool(mode="read")
    def lookup(order_id: int) -> str:
        """Look an order up."""
        return f"order {order_id}: {p}"

    @al.tool(mode="read")
    def broken(order_id: int) -> str:
        """Fails with a message for the model."""
        raise al.ToolError(f"no order {order_id}: {p}", hint=p)

    @al.tool(mode="write")
    def explode(note: str) -> str:
        """A bug: its traceback is shown."""
        raise RuntimeError(f"bug: {p}")

    return [lookup, broken, explode]


def hostile_runs(folder: Path, p: str) -> tuple[al.Done, al.Stopped]:
    tools = hostile_tools(p)
    done = al.run(
        p,
        tools,
        model=al.ScriptedModel(
            [
                reply(p, ("lookup", {"order_id": 7, "why": p}), ("broken", {"order_id": 8})),
                reply(p, ("lookup", {"order_id": 7, "why": p})),
                reply(p),
            ]
        ),
        system=p,
        trace=folder,
    )
    stopped = al.run(p, tools, model=al.ScriptedModel([reply(p, ("explode", {"note": p}))]), system=p, trace=folder)
    assert isinstance(done, al.Done) and isinstance(stopped, al.Stopped), (done, stopped)
    return done, stopped


def poisoned(value: Any, p: str, key: str = "") -> Any:
    """A shared or imported trace's worst case: the payload appended to every string a record holds
    (ids, tool names, modes, outcomes, reasons, block types included), only the event kind kept."""
    if isinstance(value, dict):
        return {k: (v if k in ("kind", "v") else poisoned(v, p, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [poisoned(v, p, key) for v in value]
    if isinstance(value, str):
        return value + p
    return value


def poisoned_trace(source: Path, out: Path, p: str) -> Path:
    records = [json.loads(line) for line in source.read_text().splitlines()]
    out.write_text("".join(json.dumps(poisoned(copy.deepcopy(r), p)) + "\n" for r in records))
    return out


# ---------------------------------------------------------- every output made
def outputs(tmp_path: Path, p: str) -> dict[str, str]:
    """Name -> HTML of every place the lab renders run text as HTML or markdown."""
    import ipywidgets as w
    import nbformat
    from nbconvert import HTMLExporter

    from agentlab.approval import ApprovalRequest
    from agentlab.experiments import ExperimentResult
    from agentlab.report import export_notebook
    from agentlab.trace import Traces, load_run

    runs = tmp_path / "runs"
    done, stopped = hostile_runs(runs, p)
    shared = poisoned_trace(runs / f"{done.run_id}.jsonl", tmp_path / "shared.jsonl", p)
    shared_stopped = poisoned_trace(runs / f"{stopped.run_id}.jsonl", tmp_path / "shared-stopped.jsonl", p)
    traces = {
        "run": load_run(done.run_id, runs),
        "stopped run": load_run(stopped.run_id, runs),
        "shared trace": load_run(str(shared)),
        "shared stopped trace": load_run(str(shared_stopped)),
    }
    out: dict[str, str] = {"Done repr": done._repr_html_(), "Stopped repr": stopped._repr_html_()}
    for name, trace in traces.items():
        out[f"{name}: Trace repr"] = trace._repr_html_()
        for view in trace:
            out[f"{name}: step {view.step} repr"] = view._repr_html_()
        out[f"{name}: calls frame"] = trace.calls._repr_html_()
        out[f"{name}: events frame"] = trace.events._repr_html_()
    out["Traces repr"] = Traces(list(traces.values()), runs)._repr_html_()

    exporter = HTMLExporter(template_name="basic")
    for name, file in (
        ("run", done.run_id),
        ("stopped run", stopped.run_id),
        ("shared trace", str(shared)),
        ("shared stopped trace", str(shared_stopped)),
    ):
        nb_path = export_notebook(file, tmp_path / "export" / f"{len(out)}.ipynb", runs=runs)
        nb = nbformat.read(str(nb_path), as_version=4)
        out[f"{name}: report notebook in nbconvert HTML"] = exporter.from_notebook_node(nb)[0]
        out[f"{name}: report notebook markdown, CommonMark"] = _commonmark(
            "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        )

    lab = al.Lab(
        p,
        hostile_tools(p),
        model=al.ScriptedModel(
            [reply(p, ("lookup", {"order_id": 7, "why": p}), ("broken", {"order_id": 8})), reply(p)]
        ),
        trace=tmp_path / "lab",
        refresh_s=0,
        chart=False,
    )
    lab.run()
    lab.panel.ask(
        ApprovalRequest(tool=p, args={"note": p}, call_id=p, mode="write", step=1, description=p), lambda _v: None
    )
    lab.panel.say(p, error=True)
    lab.panel.flush()
    out["Lab panel"] = "".join(_widget_html(lab.panel.widget, w))

    from agentlab.experiments.grid import Config

    q = p.replace(
        "\ud83d", ""
    )  # rows with a lone surrogate are the experiments' own matter (its frames are arrow strings)
    rows = [{**r, "reason": q, "run_id": q, "task_id": q, "config": q} for r in _experiment_rows(tmp_path)]
    result = ExperimentResult(rows, [Config(q, {"max_steps": 3, "system": q})], Path(f"/tmp/{q}"), 1.0)
    out["ExperimentResult repr"] = result._repr_html_()
    return out


def _experiment_rows(tmp_path: Path) -> list[dict[str, Any]]:
    exp = al.Experiment(
        ["where is 7?", "where is 8?"],
        {"a": {"prices": al.Prices(input=3, output=15)}},
        model=lambda task, seed, **o: al.ScriptedModel([reply("shipped")]),
        folder=tmp_path / "exp",
        progress=False,
    )
    return list(exp.run().rows)


def _commonmark(text: str) -> str:
    """Markdown as a CommonMark renderer with raw HTML on would show it (JupyterLab's marked is one)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True, "linkify": False}).enable("table").render(text)


def _widget_html(widget: Any, w: Any) -> list[str]:
    found = [widget.value] if isinstance(widget, (w.HTML, w.HTMLMath)) else []
    for child in getattr(widget, "children", ()):
        found += _widget_html(child, w)
    return found


# ------------------------------------------------------------------ the test
WATCH = """
window.__ran = [];
window.addEventListener('error',
    e => window.__ran.push('error event: ' + (e.message || e.target && e.target.tagName)), true);
const realFetch = window.fetch;
window.fetch = (...a) => { window.__ran.push('fetch ' + a[0]); return realFetch(...a); };
const realOpen = XMLHttpRequest.prototype.open;
XMLHttpRequest.prototype.open = function (...a) { window.__ran.push('xhr ' + a[1]); return realOpen.apply(this, a); };
"""


def test_no_output_of_the_lab_runs_a_script_or_fetches_anything_in_a_real_browser(tmp_path):
    from playwright.sync_api import sync_playwright

    with Listener() as listener:
        p = payloads(listener.port)
        pages = outputs(tmp_path, p)
        failures: dict[str, Any] = {}
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                for name, body in pages.items():
                    page = browser.new_page()
                    requested: list[str] = []
                    page.on("request", lambda r, requested=requested: requested.append(r.url))
                    page.route("**/*", lambda route: route.abort())  # nothing leaves the page; each try is counted
                    page.add_init_script(WATCH)
                    page.set_content(
                        f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>",
                        wait_until="load",
                    )
                    found = page.evaluate("""() => {
                        const bad = [];
                        for (const el of document.querySelectorAll('*')) {
                            for (const a of el.attributes) {
                                const v = a.value.trim().toLowerCase();
                                if (a.name.startsWith('on')) bad.push(el.tagName + ' ' + a.name);
                                if ((a.name === 'href' || a.name === 'src' || a.name === 'data' || a.name === 'action')
                                    && !v.startsWith('#')) bad.push(el.tagName + ' ' + a.name + '=' + v);
                            }
                            const active = ['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED', 'LINK', 'IMG', 'SVG', 'DETAILS'];
                            if (active.includes(el.tagName)
                                && !el.classList.contains('agentlab-thinking')
                                && !el.classList.contains('agentlab-full'))
                                bad.push('element ' + el.tagName);
                        }
                        for (const a of document.querySelectorAll('a'))  // a javascript: link would run now
                            a.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}));
                        return {ran: window.__ran, bad: bad, text: document.body.innerText};
                    }""")
                    page.close()
                    problems = {
                        k: v
                        for k, v in (("ran", found["ran"]), ("elements", found["bad"]), ("requests", requested))
                        if v
                    }
                    if MARK in body and MARK not in found["text"]:
                        problems["payload not shown"] = found["text"][:300]
                    if problems:
                        failures[name] = problems
            finally:
                browser.close()
        assert not failures, json.dumps(failures, indent=1)[:6000]
        assert listener.hits == [], listener.hits


def test_the_exported_notebook_of_a_shared_trace_fetches_nothing_when_jupyterlab_opens_it(tmp_path):
    """The issue's own reproduction: `agentlab report --notebook` of a shared, poisoned trace, opened in
    JupyterLab (its markdown renderer and sanitizer, which lets ``<img src=http...>`` through)."""
    import nbformat
    from playwright.sync_api import sync_playwright

    from agentlab.report import export_notebook

    from .jupyter_server import jupyter_server

    root = tmp_path / "root"
    root.mkdir()
    with Listener() as listener:
        p = payloads(listener.port)
        done, _ = hostile_runs(tmp_path / "runs", p)
        shared = poisoned_trace(tmp_path / "runs" / f"{done.run_id}.jsonl", tmp_path / "shared.jsonl", p)
        nb_path = export_notebook(str(shared), root / "report.ipynb", runs=tmp_path / "runs")
        expected = sum(
            MARK in c.source for c in nbformat.read(str(nb_path), as_version=4).cells if c.cell_type == "markdown"
        )
        assert expected >= 3
        # Every cell rendered, on screen or not: no windowing, so the check cannot depend on the page's layout.
        tracker = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
        tracker.mkdir(parents=True)
        (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
        with jupyter_server("jupyterlab", root, tmp_path) as (port, token), sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 2000})
                page.set_default_timeout(WAIT_MS)
                requested: list[str] = []
                page.on("request", lambda r: requested.append(r.url))
                page.add_init_script("window.__ran = [];")  # JupyterLab fetches its own API: the listener counts ours
                page.goto(f"http://127.0.0.1:{port}/lab/tree/report.ipynb?token={token}")
                try:
                    page.wait_for_function(
                        """([mark, n]) => [...document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown')]
                                            .filter(e => e.textContent.includes(mark)).length >= n""",
                        arg=[MARK, expected],
                    )
                except Exception:
                    page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
                    shown = page.evaluate(
                        "() => document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown').length"
                    )
                    raise AssertionError(
                        f"{shown} markdown cells rendered, {expected} expected; see {tmp_path}"
                    ) from None
                found = page.evaluate("""() => {
                    const bad = [];
                    for (const el of document.querySelectorAll('.jp-RenderedMarkdown *')) {
                        for (const a of el.attributes) {
                            if (a.name.startsWith('on')) bad.push(el.tagName + ' ' + a.name);
                            if (['href', 'src', 'data'].includes(a.name) && !a.value.startsWith('#'))
                                bad.push(el.tagName + ' ' + a.name + '=' + a.value);
                        }
                        const active = ['IMG', 'IFRAME', 'OBJECT', 'SVG', 'SCRIPT', 'LINK'];
                        if (active.includes(el.tagName)) bad.push(el.tagName);
                    }
                    return {ran: window.__ran, bad: bad};
                }""")
            finally:
                browser.close()
        leaked = [u for u in requested if f":{listener.port}/" in u]
        assert found == {"ran": [], "bad": []} and leaked == [] and listener.hits == [], (found, leaked, listener.hits)

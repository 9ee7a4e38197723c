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


# ------------------------------------------------------------------ the built site, read as a reader gets it
@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The whole site, built once by the Makefile's own command into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    argv = docs_command()
    env_assignments = dict(a.split("=", 1) for a in argv if re.fullmatch(r"[A-Z_0-9]+=.*", a))
    command = argv[len(env_assignments) :] + ["--site-dir", str(out)]
    import os

    built = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=900, env={**os.environ, **env_assignments}
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return out


def notebook_pages(site: Path) -> list[Path]:
    return sorted((site / "notebooks").glob("*/index.html"))


def test_no_notebook_page_loads_a_widget_script_from_another_site(site):
    pages = notebook_pages(site)
    assert len(pages) >= 10
    with_widgets = 0
    for page in pages:
        html = page.read_text()
        assert "unpkg.com" not in html and "@*" not in html, page
        if "application/vnd.jupyter.widget-state+json" in html:
            with_widgets += 1
            assert "assets/widgets/html-manager-1.0.15/embed.js" in html, page
    assert with_widgets >= 1
    assert (site / "assets/widgets/html-manager-1.0.15/embed.js").stat().st_size > 1_000_000


def test_a_notebook_page_shows_its_saved_panel_with_the_network_cut_off(site):
    """Served on 127.0.0.1 with every other address refused, a notebook page still draws its saved panel."""
    import functools
    import http.server
    import threading

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    from .browser.jupyter_server import CHROMIUM, launch_chromium

    if not Path(CHROMIUM).exists():
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM} (scripts/ensure-browser.sh installs it)")
    with_panel = [p for p in notebook_pages(site) if "agentlab-panel" in p.read_text()]
    assert with_panel, "no notebook page has a saved panel to show"
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    refused: list[str] = []
    try:
        with sync_api.sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = browser.new_page()

                def only_here(route):
                    if route.request.url.startswith(f"http://127.0.0.1:{server.server_port}/"):
                        route.continue_()
                    else:
                        refused.append(route.request.url)
                        route.abort()

                page.route("**/*", only_here)
                relative = with_panel[0].relative_to(site).parent.as_posix()
                page.goto(f"http://127.0.0.1:{server.server_port}/{relative}/", timeout=120_000)
                page.locator(".agentlab-panel button.agentlab-button-run").first.wait_for(
                    state="visible", timeout=120_000
                )
                assert page.locator(".agentlab-panel .agentlab-gauge-steps").count() >= 1
            finally:
                browser.close()
    finally:
        server.shutdown()
    assert not [u for u in refused if "widget" in u or u.endswith(".js")], refused


def reference_text(site: Path) -> tuple[str, str]:
    """The API reference page: its HTML, and the text a reader sees (tags stripped)."""
    import html as html_lib

    page = (site / "reference" / "index.html").read_text()
    return page, html_lib.unescape(re.sub(r"<[^>]+>", "", page))


def test_the_api_reference_shows_real_defaults_and_the_run_options(site):
    page, text = reference_text(site)
    assert "DEFAULTS." not in text
    run = text[text.index("run(") :]
    assert re.search(r"max_cost\s*:\s*float \| None\s*=\s*0\.5", run), run[:600]  # the value, as help() shows
    assert text.count("Run options (every way of starting a run takes these)") >= 3  # run, arun, Run, Lab
    assert re.search(r"approval_stops_clock \(default False\)", text)


def test_the_api_reference_has_links_not_raw_role_markers(site):
    page, text = reference_text(site)
    raw = re.findall(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj):`[^`]*`", text)
    assert raw == [], raw[:10]
    links = re.findall(r'<a class="autorefs autorefs-internal"[^>]*href="#agentlab\.[^"]+"', page)
    assert len(links) >= 20, len(links)

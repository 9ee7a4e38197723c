"""The Lab panel in a real browser: JupyterLab on 127.0.0.1, Debian's Chromium driven by Playwright.

The page's own buttons are clicked (Run, Pause, Run, Stop) and the gauges and
status are read from the DOM. Synchronisation is always a wait on a DOM
condition with a generous timeout, never a fixed sleep. A screenshot of the
panel is saved as a test artifact (and, with AGENTLAB_UPDATE_DOCS_IMG=1, as
docs/img/panel.png, the README's).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from .jupyter_server import CHROMIUM, REPO, WAIT_MS, jupyter_server, launch_chromium

pytestmark = pytest.mark.browser

NOTEBOOK_CODE = """\
import asyncio
import agentlab as al
from agentlab import reply

STOCK = {"apples": 12, "pears": 0, "plums": 40, "figs": 7}

@al.tool(mode="read")
def check_stock(item: str) -> str:
    \"\"\"How many of an item are in stock.\"\"\"
    if item not in STOCK:
        raise al.ToolError(f"No item called {item!r}.", hint="use one of: " + ", ".join(STOCK))
    return f"{STOCK[item]} {item} in stock"

ITEMS = ["apples", "kiwis", "pears", "plums", "figs"]

calls = []
clicked = {"pause": asyncio.Event(), "stop": asyncio.Event()}
HOLD = {3: "pause", 6: "stop"}  # model calls that answer only once that button has been clicked

async def shopkeeper(messages, tools):
    # the run waits for the page at the steps the test clicks at, not for a clock: a click always lands mid-run
    calls.append(1)
    if len(calls) in HOLD:
        await clicked[HOLD[len(calls)]].wait()
    n = len(messages) // 2
    item = ITEMS[n % len(ITEMS)]
    return reply(f"Checking {item} next (round {n}).", ("check_stock", {"item": item}))

lab = al.Lab("Count what is in stock.", [check_stock], model=al.FunctionModel(shopkeeper, name="shopkeeper"),
             max_steps=30, max_cost=0.10, deadline_s=120, trace=RUNS)
# ipykernel 7 may deliver a click on a subshell's thread: the Lab hands it to the kernel's loop, and so do we,
# after it (the calls run in turn there), so the held model call is released once the click has been acted on.
LOOP = asyncio.get_running_loop()
for name, event in clicked.items():
    lab.panel.buttons[name].on_click(lambda _button, event=event: LOOP.call_soon_threadsafe(event.set))
lab
"""


def write_notebook(root: Path, runs: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(f"RUNS = {str(runs)!r}\n" + NOTEBOOK_CODE)]
    path = root / "panel.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server on a free 127.0.0.1 port, with everything under tmp_path."""
    root, runs = tmp_path / "root", tmp_path / "runs"
    root.mkdir()
    write_notebook(root, runs)
    with jupyter_server("jupyterlab", root, tmp_path, {"AGENTLAB_RUNS": str(runs)}) as (port, token):
        yield {"url": f"http://127.0.0.1:{port}", "token": token, "runs": runs}


def steps_shown(page) -> int:
    text = page.locator(".jp-OutputArea .agentlab-gauge-steps .agentlab-gauge-text").inner_text()
    return int(text.split("/")[0])


def wait_steps_at_least(page, n: int) -> None:
    page.wait_for_function(
        """n => { const el = document.querySelector('.jp-OutputArea .agentlab-gauge-steps .agentlab-gauge-text');
                  return el && parseInt(el.textContent) >= n; }""",
        arg=n,
        timeout=WAIT_MS,
    )


def wait_phase(page, pattern: str) -> str:
    page.wait_for_function(
        """p => { const el = document.querySelector('.jp-OutputArea .agentlab-phase');
                  return el && new RegExp(p).test(el.textContent); }""",
        arg=pattern,
        timeout=WAIT_MS,
    )
    return page.locator(".jp-OutputArea .agentlab-phase").inner_text()


@pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason="Debian's chromium is not installed at /usr/bin/chromium "
    "(scripts/ensure-browser.sh installs it; never `playwright install`)",
)
def test_panel_buttons_drive_the_run_in_a_real_browser(jupyterlab, tmp_path):
    """In JupyterLab, clicking Run, Pause, Run, Stop moves the run and the gauges/status in the page follow."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1100})
            page.set_default_timeout(WAIT_MS)
            page.goto(f"{jupyterlab['url']}/lab/tree/panel.ipynb?token={jupyterlab['token']}")

            # The status bar says Idle before a kernel exists: wait for "| Idle" (a live kernel).
            page.get_by_text(re.compile(r"\|\s*Idle")).first.wait_for()
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            page.locator('[data-command="runmenu:run-all"]').click()
            page.locator(".jp-InputPrompt", has_text="[1]").first.wait_for()

            panel = page.locator(".jp-OutputArea .agentlab-panel")
            panel.wait_for(state="visible")
            page.locator(
                ".jp-OutputArea .agentlab-gauge-steps progress, .jp-OutputArea .agentlab-gauge-steps .progress-bar, "
                ".jp-OutputArea .agentlab-gauge-steps .widget-progress"
            ).first.wait_for(state="attached")
            assert wait_phase(page, "^ready$") == "ready"
            assert page.locator(".jp-OutputArea .agentlab-gauge-steps .agentlab-gauge-text").inner_text() == "0 / 30"
            # A fresh panel: the chart's empty axes, drawn by the package's own script; no image, so no broken icon.
            page.locator(".jp-OutputArea svg.agentlab-chart .agentlab-chart-empty").wait_for(state="visible")
            assert page.locator(".jp-OutputArea .agentlab-panel img").count() == 0

            page.locator(".jp-OutputArea button.agentlab-button-run").click()
            wait_steps_at_least(page, 2)
            page.locator(".jp-OutputArea button.agentlab-button-pause").click()
            wait_phase(page, "^paused$")
            paused_at = steps_shown(page)
            assert paused_at >= 2
            assert page.locator(".jp-OutputArea button.agentlab-button-pause").is_disabled()

            page.locator(".jp-OutputArea button.agentlab-button-run").click()
            wait_steps_at_least(page, paused_at + 2)
            page.locator(".jp-OutputArea button.agentlab-button-stop").click()
            status = wait_phase(page, "^stopped: cancelled")
            assert "cancelled" in status

            final_steps = steps_shown(page)
            assert final_steps >= paused_at + 2
            cost_text = page.locator(".jp-OutputArea .agentlab-gauge-cost .agentlab-gauge-text").inner_text()
            assert re.fullmatch(r"\$0\.\d{4} / \$0\.10", cost_text), cost_text
            time_text = page.locator(".jp-OutputArea .agentlab-gauge-time .agentlab-gauge-text").inner_text()
            assert re.fullmatch(r"\d+\.\d s / 120 s", time_text), time_text
            assert page.locator(".jp-OutputArea .agentlab-gauge-steps.agentlab-level-ok").count() == 1
            entries = page.locator(".jp-OutputArea .agentlab-step")
            shown = entries.evaluate_all("els => els.map(e => e.dataset.step)")
            assert shown == [str(k) for k in range(len(shown), 0, -1)]  # newest first, none missing
            assert len(shown) in (final_steps, final_steps + 1)  # + the step Stop cut short, when it hit one mid-step
            assert page.locator(".jp-OutputArea .agentlab-outcome-recoverable").count() >= 1
            assert page.locator(".jp-OutputArea .agentlab-outcome-ok").count() >= 1
            run_button = page.locator(".jp-OutputArea button.agentlab-button-run")
            expect(run_button).to_be_enabled(timeout=WAIT_MS)  # a cancelled run can go on

            # The chart is drawn in the page from the numbers the kernel sent: one point a step shown.
            tokens_line = page.locator(".jp-OutputArea svg.agentlab-chart polyline.agentlab-chart-tokens")
            tokens_line.wait_for(state="visible")
            points = tokens_line.get_attribute("points") or ""
            assert final_steps - 1 <= len(points.split()) <= final_steps, points  # (a step cut short has no point)
            assert page.locator(".jp-OutputArea svg.agentlab-chart polyline.agentlab-chart-cost").count() == 1
            shot = tmp_path / "panel.png"
            panel.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000
            if os.environ.get("AGENTLAB_UPDATE_DOCS_IMG") == "1":  # refresh the README's picture on request only
                shutil.copyfile(shot, REPO / "docs" / "img" / "panel.png")
            artifacts = os.environ.get("AGENTLAB_ARTIFACTS")
            if artifacts:
                Path(artifacts).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(shot, Path(artifacts) / "panel.png")
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"))
            (tmp_path / "failure.txt").write_text(page.locator(".jp-OutputArea").first.inner_text())
            raise
        finally:
            browser.close()

"""Approve and Deny clicked in a real browser, in JupyterLab and in Jupyter Notebook 7.

The same notebook runs in both front-ends: a run whose write needs approval.
The test clicks Approve on the first write and Deny on the second and reads
the outcome from the page. Synchronisation is a wait on a DOM condition,
never a fixed sleep.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .jupyter_server import CHROMIUM, WAIT_MS, jupyter_server, launch_chromium

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason="Debian's chromium is not installed at /usr/bin/chromium "
        "(scripts/ensure-browser.sh installs it; never `playwright install`)",
    ),
]

NOTEBOOK_CODE = """\
import agentlab as al
from agentlab import reply

LEDGER = []

@al.tool(mode="write", approve=True)
def refund(order_id: int, amount: float) -> str:
    \"\"\"Refund an order.\"\"\"
    LEDGER.append((order_id, amount))
    return f"refunded {amount} on order {order_id}"

model = al.ScriptedModel([
    reply("Refunding order 7.", ("refund", {"order_id": 7, "amount": 30.0})),
    reply("Refunding order 8 too.", ("refund", {"order_id": 8, "amount": 999.0})),
    reply("Both refunded."),
])
lab = al.Lab("Refund orders 7 and 8.", [refund], model=model, max_steps=5, max_cost=0.10, deadline_s=600,
             trace=False, chart=False)
lab
"""


def write_notebook(root: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(NOTEBOOK_CODE)]
    nbformat.write(nb, root / "approve.ipynb")


@pytest.fixture(params=["jupyterlab", "notebook"])
def frontend(request, tmp_path):
    """JupyterLab or Notebook 7 on a free 127.0.0.1 port, everything under tmp_path."""
    app = request.param
    if app == "notebook":
        pytest.importorskip("notebook", reason="Jupyter Notebook 7 is not installed (pip install notebook)")
    root = tmp_path / "root"
    root.mkdir()
    write_notebook(root)
    path = "lab/tree/approve.ipynb" if app == "jupyterlab" else "notebooks/approve.ipynb"
    with jupyter_server(app, root, tmp_path) as (port, token):
        yield {"app": app, "url": f"http://127.0.0.1:{port}/{path}?token={token}"}


def wait_text(page, selector: str, pattern: str) -> str:
    page.wait_for_function(
        """([s, p]) => { const el = document.querySelector(s);
                         return el && el.offsetParent !== null && new RegExp(p).test(el.textContent); }""",
        arg=[selector, pattern],
        timeout=WAIT_MS,
    )
    return page.locator(selector).inner_text()


def test_approve_and_deny_in_the_browser(frontend, tmp_path):
    """The first refund is approved and runs; the second is denied and the run stops, fatal."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1100})
            page.set_default_timeout(WAIT_MS)
            page.goto(frontend["url"])
            # Run the cell from the keyboard (the same in both front-ends); a request sent before
            # the kernel is up waits for it. A key pressed before the editor is ready is lost, so
            # press again only while the prompt shows the cell was never queued (never twice).
            prompt = page.locator(".jp-Cell .jp-InputPrompt").first
            for _attempt in range(5):
                page.locator(".jp-Cell .cm-content").first.click()
                page.keyboard.press("Shift+Enter")
                try:
                    page.wait_for_function(
                        r"""el => /\[(\*|\d+)\]/.test(el.textContent)""", arg=prompt.element_handle(), timeout=15000
                    )
                    break
                except PlaywrightTimeout:
                    continue
            page.locator(".jp-OutputArea .agentlab-panel").wait_for(state="visible")
            assert wait_text(page, ".jp-OutputArea .agentlab-phase", "^ready$") == "ready"
            approval = page.locator(".jp-OutputArea .agentlab-approval")
            assert not approval.is_visible()

            page.locator(".jp-OutputArea button.agentlab-button-run").click()
            text = wait_text(page, ".jp-OutputArea .agentlab-approval", "refund")
            assert '"order_id": 7' in text and '"amount": 30' in text
            assert page.locator(".jp-OutputArea button.agentlab-button-stop").is_enabled()  # Stop still works
            page.locator(".jp-OutputArea button.agentlab-approve").click()

            text = wait_text(page, ".jp-OutputArea .agentlab-approval", '"order_id": 8')
            assert '"amount": 999' in text
            page.locator(".jp-OutputArea button.agentlab-deny").click()

            status = wait_text(page, ".jp-OutputArea .agentlab-phase", "^stopped: fatal")
            assert "denied in the panel" in status
            assert not approval.is_visible()
            assert page.locator(".jp-OutputArea .agentlab-gauge-steps .agentlab-gauge-text").inner_text() == "2 / 5"
            assert page.locator(".jp-OutputArea .agentlab-outcome-ok").count() == 1  # only the approved refund ran
            page.locator(".jp-OutputArea .agentlab-panel").screenshot(
                path=str(tmp_path / f"approve-{frontend['app']}.png")
            )
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"))
            raise
        finally:
            browser.close()

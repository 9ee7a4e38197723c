"""A run, told: the terminal report, and the exported notebook (validated, then executed in a real kernel)."""

from __future__ import annotations

import io
import re

import nbformat
import pytest

import agentlab as al
from agentlab import reply
from agentlab._safe_text import NO_MATH
from agentlab.report import export_notebook, report_text


@al.tool(mode="read")
def get_order(order_id: int) -> str:
    """Look an order up."""
    if order_id == 9:
        raise al.ToolError("Order 9 not found.", hint="search by email.")
    return f"order {order_id}: 2 mugs, shipped"


@al.tool(mode="write")
def refund(order_id: int, reason: str) -> str:
    """Refund an order."""
    return f"refunded order {order_id}"


SCRIPT = [
    reply("Looking.", ("get_order", {"order_id": 9})),
    reply(None, ("get_order", {"order_id": 7})),
    reply(None, ("get_order", {"order_id": 8}), ("get_order", {"order_id": 7})),
    reply("Refunding.", ("refund", {"order_id": 7, "reason": "broken | chipped `mug`"})),
    reply("Order 7 was refunded."),
]


def a_finished_run(folder) -> al.Done:
    result = al.run(
        "Refund the broken mugs from order 7",
        [get_order, refund],
        model=al.ScriptedModel(SCRIPT),
        trace=folder,
        max_cost=0.5,
        system="You are a careful support agent.",
        clock=al.FakeClock(),
    )
    assert isinstance(result, al.Done)
    return result


def test_the_text_report_shows_every_step_with_its_calls_and_results(tmp_path):
    """report_text tells the ending, then each step's messages, tool arguments, outcome kinds and results."""
    done = a_finished_run(tmp_path)
    text = report_text(done.run_id, tmp_path)
    assert text.startswith(f"Run {done.run_id} · done")
    assert "task: Refund the broken mugs from order 7" in text
    assert [int(k) for k in re.findall(r"^Step (\d+) of run", text, re.M)] == [1, 2, 3, 4, 5]
    step1 = text.split("Step 1 of run")[1].split("Step 2 of run")[0]
    assert 'get_order [read]({"order_id": 9}) → recoverable' in step1
    assert "Order 9 not found. Next step: search by email." in step1
    step4 = text.split("Step 4 of run")[1]
    assert 'refund [write]({"order_id": 7, "reason": "broken | chipped `mug`"}) → ok' in step4
    assert "run done: done" in text.split("Step 5 of run")[1]


def test_the_report_of_an_unknown_run_names_it(tmp_path):
    """Asking for a run that is not there raises an error naming the run id and the folder."""
    a_finished_run(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no trace for run 'nope' in .*"):
        report_text("nope", tmp_path)


def test_the_exported_notebook_validates_and_has_a_cell_per_step(tmp_path):
    """export_notebook writes a valid notebook: a markdown cell per step with calls and results, and code to load
    and plot.
    """
    done = a_finished_run(tmp_path / "runs")
    out = export_notebook(done.run_id, tmp_path / "out" / "run.ipynb", runs=tmp_path / "runs")
    nb = nbformat.read(str(out), as_version=4)
    nbformat.validate(nb)
    shown = [c.source.removeprefix(f'<div class="{NO_MATH}">\n\n') for c in nb.cells if c.cell_type == "markdown"]
    steps = [s for s in shown if s.startswith("## Step ")]  # each in a block no MathJax typesets: dollars stay money
    assert [s.splitlines()[0] for s in steps] == [f"## Step {k}" for k in range(1, 6)]
    money = [c.source for c in nb.cells if c.cell_type == "markdown" and "&#36;" in c.source]
    assert money and all(m.startswith(f'<div class="{NO_MATH}">') and "$" not in m for m in money)
    assert "Order 9 not found" in steps[0] and "recoverable" in steps[0]
    assert "broken \\| chipped `mug`" in steps[3]  # a pipe cannot break the table, a backtick not the code span
    assert nb.metadata["agentlab"]["run_id"] == done.run_id
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert f"agentlab.load_run({done.run_id!r}" in code and "cost_curve" in code


def test_exporting_to_a_path_that_is_not_a_notebook_is_refused(tmp_path):
    """out_path must end in .ipynb; the error names the parameter and nothing is written."""
    done = a_finished_run(tmp_path)
    with pytest.raises(ValueError, match=r"out_path must end in \.ipynb"):
        export_notebook(done.run_id, tmp_path / "report.txt", runs=tmp_path)
    assert not (tmp_path / "report.txt").exists()


def test_the_cli_report_command_prints_and_exports(tmp_path):
    """`agentlab report RUN_ID` prints the report; with --notebook it writes the notebook."""
    from agentlab.cli import main

    done = a_finished_run(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert main(["report", done.run_id, "--runs", str(tmp_path)], out=out, err=err) == 0, err.getvalue()
    assert "Step 4 of run" in out.getvalue()
    nb_path = tmp_path / "cli.ipynb"
    assert main(["report", done.run_id, "--runs", str(tmp_path), "--notebook", str(nb_path)], out=out, err=err) == 0
    nbformat.validate(nbformat.read(str(nb_path), as_version=4))


@pytest.mark.kernel
def test_the_exported_notebook_runs_in_a_real_kernel_and_plots_the_cost_curve(tmp_path):
    """Executed by nbclient, the notebook loads the run, shows its steps and draws the cost curve as an image."""
    nbclient = pytest.importorskip("nbclient")
    done = a_finished_run(tmp_path / "runs")
    out = export_notebook(done.run_id, tmp_path / "run.ipynb", runs=tmp_path / "runs")
    nb = nbformat.read(str(out), as_version=4)
    nbclient.NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    texts = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert f"Run {done.run_id} · done" in texts
    assert any("image/png" in o.get("data", {}) for o in outputs)
    htmls = " ".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
    assert "cumulative_cost" in htmls  # the steps DataFrame was displayed


def test_a_bug_in_a_tool_is_reported_with_its_traceback(tmp_path):
    """An unclassified exception stops the run as fatal, and the report shows the line of the tool that raised it."""

    @al.tool(mode="read")
    def parse(text: str) -> str:
        """Parse a number."""
        table = {"one": 1}
        return str(table[text])  # KeyError on anything else: a bug

    stopped = al.run(
        "parse",
        [parse],
        model=al.ScriptedModel([reply(None, ("parse", {"text": "two"}))]),
        trace=tmp_path,
        max_cost=None,
    )
    assert stopped.reason == "fatal"
    text = report_text(stopped.run_id, tmp_path)
    assert "KeyError: 'two'" in text and "return str(table[text])" in text
    out = export_notebook(stopped.run_id, tmp_path / "bug.ipynb", runs=tmp_path)
    cells = nbformat.read(str(out), as_version=4).cells
    assert any("Traceback of parse" in c.source and "table[text]" in c.source for c in cells)

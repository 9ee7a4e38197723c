"""The README's example is executable documentation: it runs, and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_ten_line_example_runs_and_prints_the_result_it_shows():
    """The first python block of the README runs offline and prints a Done like its comment."""
    block = python_blocks()[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})
    printed = out.getvalue().strip()
    shown = re.search(r"print\(result\)\s+# (.*)", block).group(1).rstrip(".")
    assert printed.startswith(shown.split(", ...")[0])
    assert len(block.strip().splitlines()) <= 12


# ------------------------------------------------------------ every figure and path the README states, from the code
def readme_block_after(heading: str, fence: str = "text") -> str:
    text = README.read_text()
    return text[text.index(heading) :].split(f"```{fence}\n", 1)[1].split("```", 1)[0]


def test_the_demo_output_in_the_readme_is_what_agentlab_demo_prints(tmp_path):
    """Columns, rows and figures as `agentlab demo` prints them (only the seconds and the run ids' suffixes vary)."""
    from agentlab.cli import main

    out, err = io.StringIO(), io.StringIO()
    assert main(["demo", "--runs", str(tmp_path / "runs"), "--no-plots"], out=out, err=err) == 0, err.getvalue()
    printed, shown = out.getvalue().splitlines(), readme_block_after("## What `make demo` prints").splitlines()

    def table(lines: list[str]) -> list[list[str]]:
        """The rows, cut into cells at the rule line's column spans (a cell may hold a space: "step limit")."""
        rows = lines[: lines.index("")]
        spans = [m.span() for m in re.finditer(r"-+", rows[1])]
        return [
            [row[a:b].strip() if k < len(spans) - 1 else row[a:].strip() for k, (a, b) in enumerate(spans)]
            for row in rows
        ]

    def steady(row: list[str]) -> list[str]:
        return row[:4] + row[5:6]  # all but the seconds and the run id (its suffix is new each run)

    assert table(printed)[:2] == table(shown)[:2]  # the header and its rule: the same columns
    assert [steady(r) for r in table(printed)[2:]] == [steady(r) for r in table(shown)[2:]]
    for row in table(shown)[2:]:
        assert re.fullmatch(r"\S+-[0-9a-f]{6}", row[-1])  # a run id as the demo makes them
    ended = [line for line in printed if "runs ended as their lesson says" in line][0]
    assert ended.split(", in")[0] in "\n".join(shown)
    experiment = printed[printed.index(next(p for p in printed if p.startswith("experiment:"))) :][:6]
    assert [line.rstrip() for line in experiment] == shown[shown.index(experiment[0]) :][:6]


def test_the_sql_block_reads_the_folder_the_experiment_above_it_writes():
    import agentlab as al

    text = README.read_text()
    folder = re.search(r'folder="([^"]+)", name="([^"]+)"\)', text)
    exp = al.Experiment(["q"], {"a": {}}, model="offline", folder=folder.group(1), name=folder.group(2))
    paths = re.findall(r'al\.(?:sql|load_runs)\([^)]*?"([^"]+/traces)"\)', text)
    assert paths and all(Path(p) == exp.folder.traces for p in paths), (paths, exp.folder.traces)


def test_make_lab_passes_allow_root_exactly_when_run_as_root():
    import os
    import subprocess

    makefile = (README.parent / "Makefile").read_text()
    recipe = re.search(r"^lab:.*\n\t(.+)$", makefile, flags=re.M).group(1)
    command = recipe.replace("$(BIN)/jupyter", "echo jupyter").replace("$$", "$")
    shown = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert ("--allow-root" in shown) == (os.getuid() == 0), shown
    assert "--allow-root" in README.read_text().split("## Ten lines")[0]  # and the README says so


def test_a_cached_sessions_tokens_in_read_the_same_in_every_view():
    """The shipped Claude Code session: the headline's input tokens are what its steps and its runs row add up to."""
    import agentlab as al

    session = al.load_recorded(al.datasets.claude_code_session())
    run = session.runs.iloc[0]
    everything = int(run["input_tokens"] + run["cache_read_tokens"] + run["cache_write_tokens"])
    assert everything == int(session.steps["context_tokens"].sum())
    headline = repr(session).splitlines()[2]
    assert f"{everything:,} in (" in headline and f"{int(run['input_tokens']):,} uncached" in headline


def test_help_agentlab_opens_with_an_example_that_runs_as_shown():
    import doctest

    import agentlab

    assert len(agentlab.__doc__) > 600 and ">>> al.run(" in agentlab.__doc__
    finder, runner = doctest.DocTestFinder(recurse=False), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(agentlab):
        runner.run(test)
    assert runner.summarize(verbose=False) == (0, runner.tries) and runner.tries >= 4


def test_the_make_test_time_the_readme_states_is_the_one_measured_in_docs_benchmarks():
    figure = re.compile(r"\*\*(\d+ min \d+ s)\*\*")
    readme = figure.search(README.read_text().split("\n## Tests\n", 1)[1])
    bench = figure.search(
        (README.parent / "docs" / "benchmarks.md").read_text().split("## How long `make test` takes")[1]
    )
    assert readme and bench and readme.group(1) == bench.group(1)


def test_the_readme_leads_with_install_commands_that_work_and_not_with_pypi():
    install = README.read_text().split("## Install", 1)[1].split("## Ten lines", 1)[0]
    first_block = install.split("```sh\n", 1)[1].split("```", 1)[0]
    assert "pip install agentlab-loop" not in first_block and "make demo" in first_block
    assert "not on PyPI yet" in install


def test_the_benchmark_tables_are_the_last_whole_run_make_bench_recorded():
    """README.md and docs/benchmarks.md show, between their bench markers, exactly the table of the last whole
    full-size ``make bench`` run (benchmarks/results/latest.json): no figure typed by hand, none left from an
    older run; a partial (``--only``) or quick run writes partial.json and cannot pass for it."""
    import json

    from benchmarks import report

    data = json.loads((README.parent / "benchmarks" / "results" / "latest.json").read_text())
    assert data["config"]["quick"] is False and not data["config"].get("only"), data["config"]
    rows = [report.Row(**r) for r in data["rows"]]
    expected = report.markdown(rows, data["machine"])
    for page in (README, README.parent / "docs" / "benchmarks.md"):
        shown = page.read_text().split(report.START + "\n", 1)[1].split(report.END, 1)[0]
        assert shown == expected, f"{page.name}'s bench table is not latest.json's: run make bench"

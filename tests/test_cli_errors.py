"""Every error the CLI reports on bad input is one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap

import pytest

import agentlab as al
from agentlab.cli import main


@pytest.fixture
def a_run(tmp_path):
    result = al.run("q", model=al.ScriptedModel([al.reply("hi")]), trace=tmp_path / "runs")
    return result.run_id, tmp_path / "runs"


def spec(tmp_path, body: str) -> str:
    path = tmp_path / "exp.toml"
    path.write_text(textwrap.dedent(body))
    return str(path)


def one_line_error(argv: list[str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert main(argv, out=out, err=err) == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1, err.getvalue()
    assert lines[0].startswith(f"agentlab {argv[0]}: ") and "Traceback" not in lines[0]
    return lines[0]


def test_report_to_a_notebook_path_that_cannot_be_written(a_run):
    run_id, runs = a_run
    line = one_line_error(["report", run_id, "--runs", str(runs), "--notebook", "/proc/nope/x.ipynb"])
    assert "No such file or directory" in line and "/proc/nope" in line


def test_report_to_a_notebook_path_that_is_a_folder(a_run, tmp_path):
    run_id, runs = a_run
    (tmp_path / "x.ipynb").mkdir()
    assert "Is a directory" in one_line_error(
        ["report", run_id, "--runs", str(runs), "--notebook", str(tmp_path / "x.ipynb")]
    )


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (
            'name = "x"\ntasks = "missing.jsonl"\n[axes]\nmax_steps = [2]\n',
            "missing.jsonl does not exist",
        ),
        ('name = "x"\ntasks = [\n', "not valid TOML"),
        (
            'tasks = "t.jsonl"\nmodel = "nosuchmodule:factory"\n[axes]\nmax_steps = [2]\n',
            "cannot load 'nosuchmodule:factory'",
        ),
        (
            'tasks = "t.jsonl"\nmodel = "claude-haiku-4-5"\nrepeats = 0\n[axes]\nmax_steps = [2]\n',
            "repeats must be an int >= 1",
        ),
        ('tasks = "t.jsonl"\n[axes]\nmax_stepz = [2]\n', "max_stepz"),
    ],
    ids=["tasks file missing", "bad toml", "model module missing", "bad repeats", "unknown option"],
)
def test_experiment_spec_errors(tmp_path, body, named):
    (tmp_path / "t.jsonl").write_text(json.dumps({"id": "a", "input": "q"}))
    assert named in one_line_error(["experiment", spec(tmp_path, body), "--quiet"])


def test_experiment_spec_that_is_a_folder(tmp_path):
    (tmp_path / "exp.toml").mkdir()
    assert "Is a directory" in one_line_error(["experiment", str(tmp_path / "exp.toml"), "--quiet"])


def test_experiment_whose_folder_another_run_holds(tmp_path):
    (tmp_path / "t.jsonl").write_text(json.dumps({"id": "a", "input": "q"}))
    (tmp_path / "m.py").write_text(
        "from agentlab import FunctionModel, reply\ndef f(task, seed):\n    return FunctionModel(lambda m, t: "
        "reply('ok'))\n"
    )
    path = spec(tmp_path, 'name = "busy"\ntasks = "t.jsonl"\nmodel = "m:f"\n[axes]\nmax_steps = [2]\n')
    from agentlab.experiments.folder import Folder

    with Folder(tmp_path / "experiments" / "busy").own():
        assert "is in use by process" in one_line_error(["experiment", path, "--quiet"])
    assert main(["experiment", path, "--quiet"], out=io.StringIO(), err=io.StringIO()) == 0  # free again


def test_the_installed_command_prints_no_traceback(tmp_path):
    """The same through the real entry point: stderr holds exactly the one line."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from agentlab.cli import main; sys.exit(main())",
            "experiment",
            spec(tmp_path, 'tasks = "missing.jsonl"\n[axes]\nmax_steps = [2]\n'),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("agentlab experiment: tasks file"), done.stderr

"""The command line a pip user meets: --version, --json, `agentlab runs`, `agentlab notebooks`,
`run --tools module:attr`, and hints that work outside a source checkout."""

from __future__ import annotations

import io
import json
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from agentlab.cli import main

FIXTURES = "tests/fixtures/recorded/claude_code"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_version_names_the_version_and_the_distribution(capsys):
    import agentlab

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"agentlab {agentlab.__version__} (distribution agentlab-loop)"


def test_run_json_is_one_object_with_the_outcome_numbers_and_trace(tmp_path):
    code, out, err = cli("run", "--scenario", "ping-pong", "--runs", str(tmp_path), "--json")
    assert code == 1  # the lesson ends at the step limit
    result = json.loads(out)
    assert (result["outcome"], result["reason"], result["steps"]) == ("stopped", "step limit", 8)
    assert result["cost"] > 0 and (tmp_path / f"{result['run_id']}.jsonl").exists()
    assert result["trace"] == str(tmp_path / f"{result['run_id']}.jsonl")
    assert "step 1:" in err  # progress still streams, on stderr


def test_report_json_has_the_summary_and_every_step(tmp_path):
    _, out, _ = cli("run", "--scenario", "parallel-lookups", "--runs", str(tmp_path), "--json")
    run_id = json.loads(out)["run_id"]
    code, out, _ = cli("report", run_id[:12], "--runs", str(tmp_path), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["summary"]["run_id"] == run_id and report["summary"]["outcome"] == "done"
    assert [s["step"] for s in report["steps"]] == [1, 2]
    assert {c["tool"] for c in report["calls"]} and all(c["run_id"] == run_id for c in report["calls"])


def test_runs_lists_a_folder_newest_first_in_text_and_json(tmp_path):
    ids = [
        json.loads(cli("run", "--scenario", name, "--runs", str(tmp_path), "--json")[1])["run_id"]
        for name in ("parallel-lookups", "truncated")
    ]
    code, out, _ = cli("runs", str(tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["run", "id", "outcome"]
    assert [line.split()[0] for line in lines[2:4]] == ids[::-1]
    assert "2 run(s) in" in out
    assert "offline truncated (priced as claude-sonnet-4-5)" in out  # never the bare Claude id: Claude did not run
    code, out, _ = cli("runs", str(tmp_path), "--json")
    listed = json.loads(out)["runs"]
    assert [r["run_id"] for r in listed] == ids[::-1] and listed[1]["reason"] == "done"
    assert listed[0]["reason"] == "max_tokens" and listed[0]["started_at"].endswith("+00:00")


def test_runs_of_a_missing_folder_is_exit_2_naming_it(tmp_path):
    code, _, err = cli("runs", str(tmp_path / "nowhere"))
    assert code == 2 and "nowhere is not a folder" in err


def test_import_json_lists_the_runs_written_from_a_real_claude_code_session(tmp_path):
    code, out, _ = cli("import", f"{FIXTURES}/tool_heavy.jsonl", "--out", str(tmp_path), "--json")
    assert code == 0
    written = json.loads(out)["written"]
    assert [w["run_id"] for w in written] == ["tool_heavy"]
    assert (tmp_path / "tool_heavy.jsonl").exists()
    _, out, _ = cli("runs", str(tmp_path), "--json")
    assert json.loads(out)["runs"][0]["model"] == "claude-opus-4-6"


def test_experiment_json_has_the_summary_and_a_row_per_run(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(
        textwrap.dedent("""
        preset = "shop"
        name = "tiny"
        repeats = 1
        [configs.baseline]
        max_steps = 6
    """)
    )
    code, out, err = cli("experiment", str(spec), "--quiet", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [row["config"] for row in doc["summary"]] == ["baseline"]
    assert len(doc["runs"]) == doc["summary"][0]["runs"] > 0
    assert {"outcome", "cost", "config"} <= set(doc["runs"][0])


def test_run_tools_accepts_module_attr_like_the_experiment_spec(tmp_path, monkeypatch, request):
    """A list, a single tool and a factory tools(task) all work; a bad reference is exit 2, named."""
    (tmp_path / "mytools.py").write_text(
        textwrap.dedent('''
        import agentlab as al

        @al.tool(mode="read")
        def lookup(key: str) -> str:
            """Look a key up."""
            return key

        TOOLS = [lookup]
        seen = []

        def make(task):
            seen.append(task.input)
            return [lookup]
    ''')
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mytools", raising=False)
    request.addfinalizer(lambda: sys.modules.pop("mytools", None))  # this file's mytools is no other test's
    for ref in ("mytools:TOOLS", "mytools:lookup", "mytools:make"):
        code, _, err = cli("run", "what is x?", "--tools", ref, "--model", "offline", "--runs", str(tmp_path / "runs"))
        assert code == 0, err
        assert f"tools: lookup (from {ref})" in err
    assert sys.modules["mytools"].seen == ["what is x?"]
    code, _, err = cli("run", "x", "--tools", "mytools:missing", "--runs", str(tmp_path / "runs"))
    assert code == 2 and "cannot load 'mytools:missing'" in err


def test_notebooks_copies_every_teaching_notebook_and_never_overwrites(tmp_path):
    target = tmp_path / "nb"
    code, out, _ = cli("notebooks", str(target))
    assert code == 0
    copied = sorted(p.name for p in target.glob("*.ipynb"))
    shipped = sorted(p.name for p in (Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
    assert copied == shipped and len(copied) >= 9 and copied[0].startswith("01-")
    assert all(nbformat.read(target / name, as_version=4).cells for name in copied)
    assert f"jupyter lab {target}" in out and "agentlab-loop[lab]" in out
    mine = target / copied[0]
    mine.write_text("my edits")
    code, out, _ = cli("notebooks", str(target))
    assert code == 0 and mine.read_text() == "my edits" and "kept yours" in out

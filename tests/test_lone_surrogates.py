"""A lone surrogate (text cut from a UTF-16 source) crashes nothing that measures or writes text (issue 24).

It cannot be encoded as UTF-8: the cost guard's byte bound, the SDK's request,
the notebook writer, arrow-backed frames and an experiment's ids all used to
raise ``UnicodeEncodeError`` on one. Each now counts it or shows it as U+FFFD.
"""

from __future__ import annotations

import nbformat

import agentlab as al
from agentlab import reply
from agentlab.models.anthropic import AnthropicModel
from agentlab.report import export_notebook
from agentlab.testing import MessagesServer

CUT = "half an emoji: \ud83d, then more"


@al.tool(mode="read")
def cut_text() -> str:
    """Returns text cut in the middle of a UTF-16 pair."""
    return CUT


def test_a_tool_result_with_a_lone_surrogate_reaches_the_api_as_a_replacement_character(tmp_path):
    with MessagesServer([reply(None, ("cut_text", {})), reply("done")]) as server:
        model = AnthropicModel("claude-sonnet-4-5", client=server.client(api_key="sk-ant-test-surrogate"))
        result = al.run("read it", [cut_text], model=model, trace=tmp_path)
        sent = server.requests[-1].body["messages"][-1]["content"][0]["content"]
    assert isinstance(result, al.Done), result
    assert "half an emoji: \ufffd, then more" in str(sent)
    trace = al.load_run(result.run_id, tmp_path)
    assert "\ufffd" in trace.calls["result_preview"].iloc[0]  # frames are arrow strings: UTF-8 only
    out = export_notebook(result.run_id, tmp_path / "report.ipynb", runs=tmp_path)
    assert "half an emoji: \ufffd" in "".join(c.source for c in nbformat.read(str(out), as_version=4).cells)


def test_the_cost_guards_byte_bound_counts_a_lone_surrogate_instead_of_crashing():
    from agentlab.budget import input_bound

    assert input_bound(CUT) >= len(CUT.encode("utf-8", "surrogatepass"))
    assert input_bound({"role": "user", "content": [{"type": "text", "text": CUT}]}) > len(CUT)


def test_an_experiment_task_with_a_lone_surrogate_runs(tmp_path):
    exp = al.Experiment(
        [CUT],
        {"a": {"prices": al.Prices(input=3, output=15)}},
        model=lambda task, seed, **o: al.ScriptedModel([reply(f"ok {CUT}")]),
        folder=tmp_path,
        progress=False,
    )
    result = exp.run()
    assert list(result.runs["outcome"]) == ["done"]
    assert "<table" in result._repr_html_()


def test_redaction_reads_text_with_a_lone_surrogate():
    """The secret scanner never trips on half an emoji: the text is checked, and a key beside it still goes."""
    from agentlab.redact import Redactor

    text = "cut emoji \ud83d then sk-ant-api03-" + "A" * 40
    out = Redactor(env=False).redact(text)
    assert "\ud83d" in out and "sk-ant-api03-" + "A" * 40 not in out

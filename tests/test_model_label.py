"""An offline run is never shown as if Claude ran it: panels, reports and legends say "offline, priced as"."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import agentlab as al
from agentlab import reply, scenarios
from agentlab.forking import fork
from agentlab.models.anthropic import AnthropicModel
from agentlab.report import report_text
from agentlab.testing import MessagesServer
from agentlab.trace import TraceWriter

PRICED = "claude-sonnet-4-5"
BARE = re.compile(r"(?<!priced as )claude-sonnet-4-5")
"""The Claude id anywhere but after "priced as": what would tell a reader Claude ran."""


def offline_lab(folder: Path) -> al.Lab:
    lab = scenarios.get("ping-pong").setup(clock=al.FakeClock()).lab(trace=folder)
    lab.run()
    return lab


def panel_texts(lab: al.Lab) -> str:
    bundle = lab._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    return bundle["text/plain"] + "\n" + lab.panel.status.value


def test_an_offline_runs_panel_and_report_say_offline_priced_as_never_the_bare_claude_id(tmp_path):
    lab = offline_lab(tmp_path)
    shown = panel_texts(lab)
    report = report_text(lab.engine.run_id, tmp_path)
    for text in (shown, report, repr(lab.engine)):
        assert f"offline ping-pong (priced as {PRICED})" in text
        assert not BARE.search(text), BARE.search(text)


def test_a_fork_legend_names_an_offline_model_as_offline(tmp_path):
    pytest.importorskip("matplotlib")
    from agentlab import plots

    lab = offline_lab(tmp_path)
    parent = al.load_run(lab.engine.run_id, tmp_path)
    f = fork(parent, at_step=3, model=al.ScriptedModel([reply("found nothing")]), subscribers=[TraceWriter(tmp_path)])
    asyncio.run(f.run())
    ax = plots.fork_curve(parent, al.load_run(f.run_id, tmp_path))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(f"offline scripted (priced as {PRICED})" in t for t in legend), legend
    assert not any(BARE.search(t) for t in legend), legend


def test_a_recorded_run_keeps_its_model_id_and_model_offline_is_priced_as_its_default():
    """An imported record names no stand-in (its model did run); `model="offline"` says what it is priced as."""
    from agentlab._model_label import model_label, started_label

    assert started_label({"model": "claude-opus-4-6", "model_name": None}) == "claude-opus-4-6"
    assert model_label(PRICED, "offline") == f"offline (priced as {PRICED})"
    assert model_label(PRICED, "replay of run-1") == f"offline replay of run-1 (priced as {PRICED})"
    assert started_label({}) == "—"


def test_a_claude_run_is_shown_by_its_bare_id(tmp_path):
    with MessagesServer() as server:
        server.add(reply("Nothing to look up."))
        model = AnthropicModel(PRICED, client=server.client(api_key="sk-ant-test-label-0123456789"))
        lab = al.Lab("Say hello.", [], model=model, trace=tmp_path, clock=al.FakeClock())
        lab.run()
    for text in (panel_texts(lab), report_text(lab.engine.run_id, tmp_path)):
        assert f"· {PRICED} ·" in text or f"model {PRICED} " in text
        assert "offline" not in text


def test_whether_the_model_bills_decides_the_label_whatever_it_is_named(tmp_path):
    """A Claude model given a name of its own is still Claude; an unnamed stand-in is still offline."""
    with MessagesServer() as server:
        server.add(reply("Nothing to look up."))
        model = AnthropicModel(PRICED, client=server.client(api_key="sk-ant-test-label-0123456789"))
        model.name = "my support bot"
        claude = al.Lab("Say hello.", [], model=model, trace=tmp_path, clock=al.FakeClock())
        claude.run()
    stand_in = al.FunctionModel(lambda m, t: reply("hi"))
    stand_in.name = None  # no label at all: only the missing bill says it is not Claude
    unnamed = al.run("Say hello.", [], model=stand_in, trace=tmp_path, clock=al.FakeClock())
    claude_report = report_text(claude.engine.run_id, tmp_path)
    assert f"model {PRICED} " in claude_report and "offline" not in claude_report
    assert "offline" not in panel_texts(claude)
    offline_report = report_text(unnamed.run_id, tmp_path)
    assert f"offline (priced as {PRICED})" in offline_report and not BARE.search(offline_report)

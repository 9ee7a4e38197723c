"""A run's cache waste beside its cost: in the runs frame (``with_cache_waste``), in the report, and live in the
notebook panel's cost gauge, all by the one rule ``cache_busts`` applies.

The runs are built to bust the prompt cache (``tests/costs_runs.py``: the real SDK against ``MessagesServer``,
which simulates the cache, on a fake clock).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import agentlab as al
from agentlab.costs import WasteMeter, cache_busts, cache_waste, with_cache_waste
from agentlab.lab._html import gauge_html
from agentlab.lab._state import PanelState
from agentlab.lab._text import panel_text
from agentlab.report import report_text
from agentlab.trace import compact

from .costs_runs import busting_run
from .trace_fixtures import from_logs


@pytest.mark.parametrize("cause", ["steady", "TTL ran out", "model changed", "tools changed"])
def test_the_live_meter_adds_up_to_the_finished_runs_cache_waste(cause: str, tmp_path: Path) -> None:
    """Fed the events as they arrive, the meter's total is the finished trace's cache_waste, to the cent."""
    events: list[al.Event] = []
    trace, _, _ = busting_run(cause, tmp=tmp_path, subscribers=[events.append])
    meter = WasteMeter()
    for e in events:
        if e.kind == "run_started":
            meter.started(e.data)
        elif e.kind == "model_called":
            meter.called(e.data, e.step, e.t)
    expected = float(cache_waste(trace).iloc[0])
    assert meter.total == pytest.approx(expected, abs=1e-12)
    assert meter.busts == int(cache_busts(trace).bust.sum())
    assert (meter.total > 0) == (cause != "steady")


def test_the_runs_frame_with_cache_waste_shows_each_runs_waste_beside_its_cost_from_logs_and_store(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "runs"
    steady, _, _ = busting_run("steady", tmp=folder)
    busted, _, _ = busting_run("TTL ran out", tmp=folder)
    logs = with_cache_waste(from_logs(folder))
    columns = list(logs.columns)
    assert columns[columns.index("cost") + 1] == "cache_waste"
    waste = dict(zip(logs.run_id, logs.cache_waste, strict=True))
    assert waste[steady.run_id] == 0.0
    assert waste[busted.run_id] == pytest.approx(float(cache_busts(busted).waste.sum()), abs=1e-12)
    assert 0 < waste[busted.run_id] < float(logs.set_index("run_id").cost[busted.run_id])
    compact(folder)
    stored = al.load_runs(folder)
    assert set(stored.sources.values()) == {"store"}
    again = with_cache_waste(stored)
    assert dict(zip(again.run_id, again.cache_waste, strict=True)) == pytest.approx(waste, abs=1e-12)
    assert "cache_waste" not in stored.runs.columns  # a derived column: the loaded frame is left as it was
    one = with_cache_waste(busted)  # one trace, as load_run gives it
    assert one.cache_waste.iloc[0] == pytest.approx(waste[busted.run_id], abs=1e-12)


def test_the_report_puts_the_runs_cache_waste_beside_its_cost(tmp_path: Path) -> None:
    trace, _, _ = busting_run("tools changed", tmp=tmp_path)
    text = report_text(trace.run_id, tmp_path)
    waste, spent = float(cache_waste(trace).iloc[0]), trace.summary["cost"]
    assert f"cache waste: ${waste:.4f} of ${spent:.4f} spent, in 1 bust(s)" in text


def test_the_panels_cost_gauge_shows_the_cache_waste_as_the_run_goes(tmp_path: Path) -> None:
    """Before any cache use no waste is shown; after the cache is written, $0; after the bust (step 4), its price,
    in the gauge's text (terminal) and its HTML (the dollar kept from MathJax)."""
    states: list[tuple[int, str]] = []
    state = PanelState()

    def watch(event: al.Event) -> None:
        state.apply(event)
        if event.kind in ("run_started", "model_called"):
            states.append((event.step, state.gauge("cost").text))

    trace, _, _ = busting_run("TTL ran out", tmp=tmp_path, subscribers=[watch])
    waste = float(cache_waste(trace).iloc[0])
    assert "cache waste" not in states[0][1]  # run_started: nothing cached yet
    by_step = dict(states[1:])
    assert by_step[1].endswith("· cache waste $0.0000") and by_step[3].endswith("· cache waste $0.0000")
    assert by_step[4].endswith(f"· cache waste ${waste:.4f} (1 bust)")
    assert state.waste.total == pytest.approx(waste, abs=1e-12)
    html = gauge_html(state.gauge("cost"))
    assert "$" not in html and f"cache waste &#36;{waste:.4f}" in html
    assert f"cache waste ${waste:.4f} (1 bust)" in panel_text(state)


def test_a_bust_on_a_model_without_a_price_is_unknown_waste_not_zero() -> None:
    meter = WasteMeter()
    meter.started({"model": "no-such-model-anywhere", "prices": None})
    write = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 4_000}
    meter.called({"usage": {**write, "cache_read_input_tokens": 0}})
    assert meter.total == 0.0 and meter.cache_used
    meter.called({"usage": {**write, "cache_read_input_tokens": 0}})  # the 4,000 held were not read: a bust
    assert meter.busts == 1 and math.isnan(meter.total)

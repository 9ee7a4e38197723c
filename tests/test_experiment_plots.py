"""Experiment plots draw on standalone figures, as agentlab.plots do: a notebook shows each once."""

from __future__ import annotations

import matplotlib.pyplot as plt

import agentlab as al


def test_experiment_plots_never_open_a_pyplot_figure(tmp_path):
    tasks = [{"input": "q1", "target": "a"}, {"input": "q2", "target": "b"}]
    model = lambda messages, tools: al.reply("a")  # noqa: E731
    exp = al.Experiment(tasks, al.grid(max_steps=[2]), model=al.FunctionModel(model), folder=tmp_path, progress=False)
    result = exp.run()
    before = plt.get_fignums()
    axes = [
        result.plot_cost_vs_success(),
        result.plot_cost_distribution(),
        result.plot_stop_reasons(),
        result.plot_context_growth(),
    ]
    assert plt.get_fignums() == before
    assert all(ax.figure is not None for ax in axes)

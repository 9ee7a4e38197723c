"""The Ray backend: the same rows as the local one, and the total budget held by a Ray actor."""

from __future__ import annotations

import pandas as pd
import pytest

from agentlab.scenarios.shop_study import shop_experiment

ray = pytest.importorskip("ray", reason="the Ray backend needs the extra: pip install 'agentlab[ray]'")


def test_ray_backend_gives_the_same_rows_as_local(local_ray, tmp_path):
    local = shop_experiment(folder=tmp_path / "local", tasks=3, max_total_cost=3.0, progress=False).run()
    remote = shop_experiment(folder=tmp_path / "ray", tasks=3, max_total_cost=3.0, progress=False, backend="ray",
                             concurrency=4).run()
    cols = [c for c in local.runs.columns if c != "seconds"]
    pd.testing.assert_frame_equal(local.runs[cols], remote.runs[cols])
    assert len(remote.steps) == len(local.steps)  # the workers' traces landed in the experiment folder


def test_ray_ledger_actor_holds_the_total_across_workers(local_ray, tmp_path):
    exp = shop_experiment(folder=tmp_path, tasks=12, max_total_cost=0.3, progress=False, backend="ray", concurrency=4)
    runs = exp.run().runs
    assert runs["cost"].sum() <= 0.3
    assert (runs["reason"].isin(["experiment budget"])).any()

"""Shared test set-up: no accidental network, and traces go to a temporary folder."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# Any model call to a host other than 127.0.0.1 must fail loudly in the tests.
os.environ["AGENTLAB_LOCAL_ONLY"] = "1"
os.environ.pop("ANTHROPIC_API_KEY", None)
# The price memo (agentlab/price_cache.py) goes to a folder of this test session, never the user's home.
if "AGENTLAB_CACHE" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="agentlab-cache-")
    os.environ["AGENTLAB_CACHE"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, True)  # left behind by every test session before


@pytest.fixture(autouse=True)
def _runs_in_tmp(tmp_path, monkeypatch):
    """Every test writes its traces under its own temporary folder."""
    monkeypatch.setenv("AGENTLAB_RUNS", str(tmp_path / "runs"))


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray for the whole test session (starting one takes seconds)."""
    ray = pytest.importorskip("ray", reason="the Ray backend needs the extra: pip install 'agentlab[ray]'")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()

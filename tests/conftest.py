"""Shared test set-up: no accidental network, and traces go to a temporary folder."""

from __future__ import annotations

import atexit
import inspect
import os
import re
import shutil
import tempfile
from pathlib import Path

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


# ------------------------------------------------------------ tiers
# Each test gets one of three markers, by what it uses (`make test-fast` runs the unit tier; `make test` all):
#   slow: a real Jupyter kernel, Chromium, Ray, the notebooks, the docs, the wheel;
#   integration: real servers and SDK round trips, subprocesses, the Parquet store, MCP;
#   unit: everything else (in-process, offline models, fake clocks).
SLOW_FILES = frozenset(
    {
        "test_lab_kernel.py",
        "test_notebooks.py",
        "test_experiments_ray.py",
        "test_docs_examples.py",
        "test_docs_site.py",
        "test_readme.py",
        "test_wheel.py",
    }
)
SLOW_MARKERS = frozenset({"kernel", "browser"})
SLOW_FIXTURES = frozenset({"local_ray"})
INTEGRATION_FILES = frozenset(
    {
        "test_anthropic_adapter.py",
        "test_anthropic_errors.py",
        "test_anthropic_money.py",
        "test_anthropic_policy.py",
        "test_anthropic_server.py",
        "test_anthropic_stream_sdk.py",
        "test_conformance.py",
        "test_cost_guard_exact.py",
        "test_lost_replies.py",
        "test_streaming.py",
        "test_model_label.py",
        "test_cli.py",
        "test_cli_errors.py",
        "test_codebase.py",
        "test_experiments_processes.py",
        "test_experiments_driver.py",
        "test_fork.py",
        "test_mcp.py",
        "test_shop.py",
        "test_terminal_output.py",
        "test_lone_surrogates.py",
        "test_trace_blobs.py",
        "test_trace_columnar.py",
        "test_trace_schema.py",
        "test_trace_store.py",
        "test_trace_store_background.py",
        "test_trace_store_read.py",
        "test_trace_robustness.py",
        "test_recorded_real.py",
        "test_benchmarks_smoke.py",
    }
)


INTEGRATION_USES = re.compile(r"\b(?:subprocess|Popen|MessagesServer|multiprocessing|os\.kill|os\.fork)\b")
"""What a test's own code uses that makes it an integration test wherever its file is."""
LONG_PROPERTY = 200
"""A Hypothesis test asking for this many examples or more is an integration test (a long property run)."""


def tier(item: pytest.Item) -> str:
    """The tier of one collected test: ``slow``, ``integration`` or ``unit``."""
    if (
        "browser" in item.path.parts
        or item.path.name in SLOW_FILES
        or SLOW_MARKERS & set(item.keywords)
        or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
    ):
        return "slow"
    if item.path.name in INTEGRATION_FILES:
        return "integration"
    function = getattr(item, "function", None)
    settings = getattr(function, "_hypothesis_internal_use_settings", None)
    if settings is not None and settings.max_examples >= LONG_PROPERTY:
        return "integration"
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        source = ""
    return "integration" if INTEGRATION_USES.search(source) else "unit"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m unit`` does not import the files whose every test is slow (kernels, browsers, docs ...)."""
    if config.getoption("markexpr", "") != "unit":
        return None
    slow = collection_path.name in SLOW_FILES or collection_path.name in INTEGRATION_FILES
    return True if slow or collection_path.name == "browser" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, tier(item)))

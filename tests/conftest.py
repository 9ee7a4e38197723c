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


@pytest.fixture(autouse=True)
def _forget_user_secret_rules():
    """The ``add_secret_*`` rules are process-wide: a test (or a page's example) that adds some must not change how
    every later test redacts (with a rule of the user's, a streamed reply is released only at its end)."""
    yield
    from agentlab.redact import clear_user_rules

    clear_user_rules()


# How long Ray's parts may take to come up. On a shared 2-core machine under load (a test session beside seven
# others, load 12) the raylet and the first workers took more than Ray's defaults (30 s, 60 s); three minutes each
# is still a bound, so a Ray that truly cannot start fails the session instead of hanging it.
RAY_START_WAIT_S = 180
RAY_START_TRIES = 3
_RAY_ENV = {
    "RAY_raylet_start_wait_time_s": str(RAY_START_WAIT_S),  # the raylet's own start-up wait
    "RAY_worker_register_timeout_seconds": str(RAY_START_WAIT_S),  # a worker process registering with the raylet
    "RAY_gcs_server_request_timeout_seconds": str(RAY_START_WAIT_S),  # the driver waiting for the GCS
    "RAY_gcs_rpc_server_connect_timeout_s": str(RAY_START_WAIT_S),
    "RAY_health_check_failure_threshold": "30",  # a raylet slow to answer under load is not declared dead
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage report leaves the machine
}


_RAY_FAILURES: list[str] = []


def _start_ray(ray) -> None:
    """ray.init with the waits above, up to RAY_START_TRIES times; what failed goes to _RAY_FAILURES."""
    for name, value in _RAY_ENV.items():
        os.environ.setdefault(name, value)  # read by ray.init and by the raylet / GCS processes it starts
    for _ in range(RAY_START_TRIES):
        if ray.is_initialized():
            return
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=200 * 2**20)
        except Exception as exc:  # Ray's start-up raises bare Exception / RuntimeError / TimeoutError
            _RAY_FAILURES.append(f"{type(exc).__name__}: {exc}")
            ray.shutdown()


def pytest_collection_finish(session):
    """Start Ray once, before the first test, when a selected test needs it.

    Ray forks its servers with a ``preexec_fn``: in a process where earlier tests left threads (tool workers, the
    watchdog), a fork taken while one of them holds a lock can hang the child and the start with it (a whole
    ``make test`` lost its Ray tests so). Here nothing has run yet, and no test's timeout is spent on the start.
    """
    if any("local_ray" in getattr(item, "fixturenames", ()) for item in session.items):
        try:
            import ray
        except ImportError:
            return  # the fixture skips, naming the extra
        _start_ray(ray)


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray (2 CPUs) for the whole test session, started with waits sized for a loaded 2-core machine.

    Skipped, with the reason, only when Ray is not installed; a Ray that is installed but did not come up after
    RAY_START_TRIES starts is an error that names each failure, never a skip or a silent pass.
    """
    ray = pytest.importorskip(
        "ray", reason="Ray is not installed: the Ray backend needs pip install 'agentlab-loop[ray]'"
    )
    if not ray.is_initialized() and not _RAY_FAILURES:  # (a selection the collection hook did not see)
        _start_ray(ray)
    if not ray.is_initialized():
        pytest.fail(f"Ray did not start in {RAY_START_TRIES} tries: " + " | ".join(_RAY_FAILURES), pytrace=False)
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
SLOW_MARKERS = frozenset({"kernel", "browser", "slow"})
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

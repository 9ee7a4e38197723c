"""The Ray tests pass on a busy 2-core machine: the harness's Ray start-up is sized for load, not for an idle box.

This runs tests/test_experiments.py then tests/test_experiments_ray.py in one child pytest while two processes spin
on the CPU beside it (the load a shared CI machine sees): the Ray tests come after tests that leave threads behind,
as in a whole `make test`. It asserts every test ran and passed: a timeout at start-up is an error, and a skip would
be a silent pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray is not installed: the Ray backend needs pip install 'agentlab-loop[ray]'")

ROOT = Path(__file__).resolve().parents[1]
BUSY_LOOP = "while True: pass"
MODULES = ["tests/test_experiments.py", "tests/test_experiments_ray.py"]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_ray_tests_pass_with_two_busy_loops_beside_them(tmp_path):
    busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(2)]
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *MODULES],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
        )
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    summary = re.search(r"(\d+) passed", done.stdout)
    assert summary and int(summary.group(1)) >= 40, tail  # the experiments' tests and the four Ray tests
    assert not re.search(r"\d+ (skipped|error|failed)", done.stdout), tail

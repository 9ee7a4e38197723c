"""A run's set-up, as a user sees it: its id, its own retry-jitter generator, run()'s Ctrl-C handler put back."""

from __future__ import annotations

import copy
import pickle
import random
import re
import signal
import threading

import pytest

import agentlab as al
from agentlab.loop import Run


def _run(**kw: object) -> Run:
    return Run("go", model="offline", max_cost=None, **kw)  # type: ignore[arg-type]


def test_a_run_without_an_id_gets_twelve_random_hex_digits():
    ids = {_run().run_id for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[0-9a-f]{12}", i) for i in ids)


def test_each_run_draws_its_own_retry_jitter():
    """Two runs' default generators do not draw the same numbers (each is seeded from fresh random bits)."""
    a, b = _run().rng, _run().rng
    assert [a.random() for _ in range(4)] != [b.random() for _ in range(4)]
    assert _run().rng.getrandbits(64) != _run().rng.getrandbits(64)
    assert 0.0 < _run().rng.uniform(0.0, 1.0) < 1.0  # never the zero state of an unseeded generator


def test_a_runs_default_generator_is_a_random_random_that_can_be_seeded_saved_and_copied():
    rng = _run().rng
    assert isinstance(rng, random.Random)
    rng.seed(7)
    reference = random.Random(7)
    assert [rng.random() for _ in range(3)] == [reference.random() for _ in range(3)]
    fresh = _run().rng
    state = fresh.getstate()
    first = [fresh.random() for _ in range(5)]
    fresh.setstate(state)
    assert [fresh.random() for _ in range(5)] == first
    for copier in (lambda r: pickle.loads(pickle.dumps(r)), copy.deepcopy):
        original = _run().rng
        clone = copier(original)
        assert [clone.randrange(10**9) for _ in range(3)] == [original.randrange(10**9) for _ in range(3)]


def test_a_generator_passed_in_is_the_one_the_run_uses():
    mine = random.Random(3)
    assert _run(rng=mine).rng is mine


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
@pytest.mark.parametrize("sync_tool", [False, True])
def test_run_leaves_the_ctrl_c_handler_as_it_found_it(tmp_path, sync_tool):
    """Python's own handler is put back after run(); a handler of someone else's (or SIG_IGN) is never replaced."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("a SIGINT handler other than Python's default is installed")

    def look(key: str) -> str:
        """Look a key up."""
        return key

    tools = [al.tool(look)] if sync_tool else []
    al.run("go", tools, model="offline", max_cost=None, trace=tmp_path)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    seen: list[int] = []

    def theirs(signum: int, frame: object) -> None:
        seen.append(signum)

    for handler in (theirs, signal.SIG_IGN):
        previous = signal.signal(signal.SIGINT, handler)
        try:
            al.run("go", tools, model="offline", max_cost=None, trace=tmp_path)
            assert signal.getsignal(signal.SIGINT) is handler
        finally:
            signal.signal(signal.SIGINT, previous)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

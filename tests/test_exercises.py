"""Every lesson's exercise: its check fails on the notebook's unchanged placeholder, passes on the solution,
and gives the same verdict every time (offline, $0)."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from agentlab.scenarios import exercises

ROOT = Path(__file__).resolve().parent.parent
CHECK = re.compile(r"exercises\.(check_\w+)\((\w+)\)")


def _module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


BUILDER = _module("build_notebooks", ROOT / "scripts" / "build_notebooks.py")
SOLUTIONS = _module("course_solutions", ROOT / "notebooks" / "solutions" / "lessons.py")
SOLVED = {"my_loop": "bare_loop", "predictions": "BUDGET_PREDICTIONS"}
"""The placeholder's name in a notebook, where the solution's name differs."""


def _tagged(name: str, tag: str) -> list[str]:
    return [c.source for c in BUILDER.NOTEBOOKS[name] if tag in c.get("metadata", {}).get("tags", [])]


LESSON_EXERCISES = [n for n in BUILDER.NOTEBOOKS if n[:2] in {"01", "02", "03", "04", "05", "06", "07"}]


def _exercise(name: str) -> tuple[str, str, str]:
    """(the placeholder cell's code, the checker's name, the name the learner defines)."""
    (placeholder,), (check,) = _tagged(name, "exercise"), _tagged(name, "check")
    checker, defined = CHECK.search(check).groups()
    return placeholder, checker, defined


def test_every_lesson_one_to_seven_ends_with_an_exercise_and_its_check():
    for name in LESSON_EXERCISES:
        cells = BUILDER.NOTEBOOKS[name]
        assert "exercise" in cells[-2].metadata.get("tags", []) and "check" in cells[-1].metadata.get("tags", [])
        assert cells[-3].cell_type == "markdown" and cells[-3].source.count("Exercise") >= 1
        assert "notebooks/solutions/lessons.py" in cells[-3].source  # the way to the solution, not the solution
    assert len(LESSON_EXERCISES) == 7


@pytest.mark.parametrize("name", LESSON_EXERCISES)
def test_the_check_fails_on_the_placeholder_and_passes_on_the_solution(name):
    placeholder, checker, defined = _exercise(name)
    grade = getattr(exercises, checker)
    learner: dict[str, Any] = {}
    exec(placeholder, learner)  # the notebook's cell as a learner first runs it
    untouched = grade(learner[defined])
    assert not untouched.passed and untouched.reason, f"{name}: the unchanged placeholder passes"
    solved = grade(getattr(SOLUTIONS, SOLVED.get(defined, defined)))
    assert solved.passed, f"{name}: the solution does not pass: {solved}"
    assert grade(getattr(SOLUTIONS, SOLVED.get(defined, defined))) == solved  # same code, same verdict
    assert grade(learner[defined]) == untouched


def test_a_dispatcher_that_runs_everything_in_order_is_not_yet_parallel():
    async def one_at_a_time(calls, tools):
        return [await tools[c["name"]](**c["input"]) for c in calls]

    verdict = exercises.check_dispatcher(one_at_a_time)
    assert not verdict.passed and "did not run together" in verdict.reason


def test_repeating_that_ignores_argument_key_order_or_types_is_not_yet_right():
    def by_text(calls):  # the arguments' text as written: key order makes two calls differ
        last = calls[-1]
        return sum(str(c) == str(last) for c in calls) >= 3

    assert not exercises.check_repeating(by_text).passed


def test_a_reservation_that_ignores_the_reply_is_not_yet_right():
    def input_only(spent, max_cost, input_tokens, max_tokens, prices):
        return max_cost is None or spent + input_tokens * prices.input / 1e6 <= max_cost

    verdict = exercises.check_reservation(input_only)
    assert not verdict.passed and "said True" in verdict.reason


def _held(score):
    return {g.scenario for g in score.games if g.held}


def test_the_capstone_scores_loops_the_same_way_every_time_and_ranks_them():
    """Each lesson is decided on what happened, so the score is exact: the bare loop keeps only its step
    limit, the capstone loop keeps all nine, and playing the bare loop again changes nothing."""
    bare = exercises.capstone(SOLUTIONS.bare_loop, name="bare")
    again = exercises.capstone(SOLUTIONS.bare_loop, name="bare")
    best = exercises.capstone(SOLUTIONS.capstone_loop, name="best")
    assert _held(bare) == _held(again) == {"ping-pong"}
    assert [g.reason for g in bare.games] == [g.reason for g in again.games]
    assert _held(best) == set(exercises.sb.LESSONS) and best.of == len(exercises.sb.LESSONS)
    assert repr(best).startswith(f"best: {best.of} of {best.of} lessons held")


def test_parallel_reads_are_judged_by_the_order_calls_started_and_ended_not_by_a_stopwatch():
    """Reads that overlap pass however slow the machine is; reads one after another fail however fast."""
    game = exercises.sb.play(SOLUTIONS.capstone_loop, "parallel-lookups")
    assert game.held and game.reads_at_once >= 2
    assert len(game.tool_log) == 6 and {e[2] for e in game.tool_log} == {"get_order", "get_customer", "search_orders"}
    one_by_one = exercises.sb.play(SOLUTIONS.bare_loop, "parallel-lookups")
    assert one_by_one.reason == "done" and one_by_one.reads_at_once == 1 and not one_by_one.held
    slow = dataclasses.replace(game, seconds=60.0)  # a machine so busy the game took a minute
    quick = dataclasses.replace(one_by_one, seconds=0.01)
    assert slow.held and not quick.held

"""The scoreboard referees any loop the same way: metered calls, what the model was shown, a loop
that hangs given up on, and each scenario's lesson as a test on the outcome."""

from __future__ import annotations

import json
import threading

import agentlab as al
from agentlab.models.base import ModelRequest
from agentlab.scenarios import scoreboard as sb


async def _tell_the_model_everything(setup):
    """A loop with a step limit only: every failure goes back to the model as text."""
    functions = {t.name: t.fn for t in setup.tools}
    messages = [{"role": "user", "content": setup.task}]
    for _ in range(setup.options["max_steps"]):
        reply = await setup.model.complete(ModelRequest(None, messages, [t.definition() for t in setup.tools], 1024))
        messages.append({"role": "assistant", "content": reply["content"]})
        calls = [b for b in reply["content"] if b["type"] == "tool_use"]
        if not calls:
            return "done"
        results = []
        for c in calls:
            try:
                text, failed = json.dumps(functions[c["name"]](**c["input"]), default=str), False
            except Exception as e:
                text, failed = f"{type(e).__name__}: {e}", True
            results.append({"type": "tool_result", "tool_use_id": c["id"], "content": text, "is_error": failed})
        messages.append({"role": "user", "content": results})
    return "step limit"


def test_agentlab_keeps_every_lesson_on_the_scoreboard():
    """With each scenario's budgets and the default policy, agentlab passes all nine tests."""
    games = sb.play_all({"agentlab": sb.agentlab_loop(policy=al.Policy())})
    assert {g.scenario: g.held for g in games} == {s: True for s in sb.LESSONS}
    board = sb.board(games)
    assert board.loc["lessons held", "agentlab"] == f"{len(sb.LESSONS)} of {len(sb.LESSONS)}"


def test_the_referee_sees_what_the_model_was_shown_and_prices_every_call():
    """A loop that hands a 503 to the model answers, but the lesson does not hold; the referee's
    dollars equal agentlab's own bill for the same scripted calls."""
    naive = sb.play(_tell_the_model_everything, "flaky-upstream")
    assert naive.reason == "done" and not naive.held
    assert any("503" in text for text in naive.shown)
    probing = sb.play(_tell_the_model_everything, "permission-probing")
    assert probing.reason == "done" and probing.calls > 2 and not probing.held

    ours = sb.play(sb.agentlab_loop(), "ping-pong")
    result = al.scenarios.get("ping-pong").setup().run(trace=False)
    assert ours.calls == result.steps
    assert abs(ours.spent - result.spent) < 0.002  # the same estimate rule, kept incrementally by the engine


def test_a_loop_that_hangs_is_given_up_on_and_its_later_calls_are_not_scored():
    """A contestant stuck in a tool is scored "hung" at the give-up time; once given up on, it may
    not call the model again."""
    stuck, finished = threading.Event(), threading.Event()
    later: list[BaseException] = []

    async def stuck_after_one_call(setup):
        await setup.model.complete(ModelRequest(None, [{"role": "user", "content": setup.task}], [], 256))
        stuck.wait(10)  # blocks its thread, as a tool that never answers would
        try:
            await setup.model.complete(ModelRequest(None, [{"role": "user", "content": setup.task}], [], 256))
        except RuntimeError as exc:
            later.append(exc)
        finished.set()
        return "done"

    game = sb.play(stuck_after_one_call, "ping-pong", give_up_s=0.2)
    stuck.set()
    assert game.reason.startswith("hung") and game.calls == 1 and not game.held
    assert finished.wait(10)  # the abandoned thread goes on once released
    assert later and "gave up" in str(later[0])


def test_the_loops_on_one_scenario_play_at_the_same_time_each_scored_on_its_own_game():
    """Two loops that can only finish together (each waits for the other at a barrier) both finish: the loops on
    a scenario play at once, so loops stuck on the same tool cost the referee's give-up once. Each game keeps its
    own shop, calls and order, and the games come back in scenario order, then loop order."""
    together = threading.Barrier(2, timeout=30)  # a guard against a hang, not a timing

    def meeting(label):
        async def loop(setup):
            await setup.model.complete(ModelRequest(None, [{"role": "user", "content": setup.task}], [], 256))
            together.wait()
            return f"met ({label})"

        return loop

    games = sb.play_all({"a": meeting("a"), "b": meeting("b")}, ["ping-pong"], give_up_s=60)
    assert [(g.scenario, g.loop, g.reason, g.calls) for g in games] == [
        ("ping-pong", "a", "met (a)", 1),
        ("ping-pong", "b", "met (b)", 1),
    ]
    ordered = sb.play_all({"one": sb.agentlab_loop(), "two": sb.agentlab_loop()}, ["ping-pong", "truncated"])
    assert [(g.scenario, g.loop) for g in ordered] == [
        ("ping-pong", "one"),
        ("ping-pong", "two"),
        ("truncated", "one"),
        ("truncated", "two"),
    ]
    assert all(g.held for g in ordered)

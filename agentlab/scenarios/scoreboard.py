"""A scoreboard: any agent loop against the shipped scenarios, with what each decision buys in numbers.

Notebook 10 grows a hand-written loop one decision at a time (a step limit, then cost, the deadline,
the three kinds of failure, loop detection, parallel reads) and plays every version, and agentlab,
against the same scenarios. The loops are the notebook's; this module only referees, the same way for
every contestant:

- the model is *metered*: every call is counted and priced here, from the reply's usage, whatever the
  loop itself counts (a naive loop counts nothing);
- what the model was shown is *observed*: the tool results in every request it received, so "the model
  never saw the 503" or "never heard the denial" is checked, not assumed;
- every tool call is *watched*: its start and its end go into one log in the order they happened, so
  "the reads ran together" is decided from that order (a read started while another was still
  running), never from a stopwatch a busy machine would fool;
- a loop runs on its own thread and is given up on after ``give_up_s`` of real time (a loop with no
  deadline hangs on the hanging tool for ever); the scenario's shop is then closed, which releases the
  hung tool so the abandoned thread ends. This is the one wall-clock decision, and its default leaves
  seconds of room past every scenario's own deadline. :func:`play_all` plays the loops on one scenario at
  the same time (notebook 10's six hand-written versions all hang on the hanging tool: one give-up, not six);
- each scenario says what "the lesson held" means (:data:`LESSONS`), as a test on what happened: the
  reason the loop gave, the calls, what the model was shown, the tool log, the refunds. The seconds a
  game took are shown, not judged.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..messages import Usage, estimate_tokens, normalize_reply
from ..models.base import ModelRequest
from ..pricing import resolve_prices
from .base import Setup
from .catalog import SCENARIOS

Loop = Callable[[Setup], Awaitable[Any]]
"""A contestant: ``async loop(setup) -> reason`` (a short string: "done", "budget", ...)."""


@dataclass
class Seen:
    """What the referee saw of one game: the model's calls, their cost, and the tool results it was shown."""

    calls: int = 0
    spent: float = 0.0
    shown: list[str] = field(default_factory=list)
    over: bool = False  # the referee gave up: a loop still running is refused the model from now on


def cost_of(model: str, request: ModelRequest, raw: Any) -> float:
    """USD of one call to ``model``: the reply's usage, or (an offline reply reports none) the engine's
    own estimate of the request and the reply, so every contestant is priced by the same rule."""
    prices = resolve_prices(model, None)
    if prices is None:
        return 0.0
    reply = normalize_reply(raw)
    usage = reply.usage or Usage(
        input_tokens=estimate_tokens(request.system or "")
        + estimate_tokens(request.tools)
        + sum(estimate_tokens(m) for m in request.messages),
        output_tokens=min(estimate_tokens(reply.content), request.max_tokens),
    )
    return prices.cost(usage)


class _Metered:
    """The scenario's model, counted and priced by the referee; the loop sees an ordinary model."""

    def __init__(self, inner: Any, seen: Seen) -> None:
        self.inner, self.seen = inner, seen
        self.model, self.name = inner.model, getattr(inner, "name", None)

    async def complete(self, request: ModelRequest) -> Any:
        if self.seen.over:
            raise RuntimeError("the referee gave up on this loop; its game is over")
        for message in request.messages:
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    self.seen.shown.append(str(block.get("content")))
        raw = await self.inner.complete(request)
        self.seen.calls += 1
        self.seen.spent += cost_of(self.model, request, raw)
        return raw


class _Watched:
    """The setup's tools, each call's start and end logged in the order they happened (any thread)."""

    def __init__(self, tools: list[Any]) -> None:
        self.log: list[tuple[int, str, str, str]] = []  # (order, "start" | "end", tool name, mode)
        self._order = itertools.count()
        self._lock = threading.Lock()
        for tool in tools:
            tool.fn = self._watch(tool.fn, tool.name, tool.mode)

    def _note(self, edge: str, name: str, mode: str) -> None:
        with self._lock:
            self.log.append((next(self._order), edge, name, mode))

    def _watch(self, fn: Callable[..., Any], name: str, mode: str) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def watched_async(*args: Any, **kwargs: Any) -> Any:
                self._note("start", name, mode)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    self._note("end", name, mode)

            return watched_async

        @functools.wraps(fn)
        def watched(*args: Any, **kwargs: Any) -> Any:
            self._note("start", name, mode)
            try:
                return fn(*args, **kwargs)
            finally:
                self._note("end", name, mode)

        return watched


def reads_at_once(log: tuple[tuple[int, str, str, str], ...]) -> int:
    """The most reads running at one time in a tool log: 1 when each read ended before the next began.

    Only the order of starts and ends counts, so a loaded machine that slows every call changes nothing.
    """
    running = most = 0
    for _, edge, _, mode in sorted(log):
        if mode == "read":
            running += 1 if edge == "start" else -1
            most = max(most, running)
    return most


@dataclass(frozen=True)
class Lesson:
    """What a scenario teaches, and the test an outcome must pass for the lesson to have held."""

    point: str
    held: Callable[[Game], bool]


@dataclass(frozen=True)
class Game:
    """One contestant on one scenario: how it ended, and what the referee measured."""

    scenario: str
    loop: str
    reason: str
    calls: int
    spent: float
    seconds: float
    shown: tuple[str, ...]
    refunds: int
    limits: dict[str, Any]
    tool_log: tuple[tuple[int, str, str, str], ...] = field(default=(), repr=False)
    """Every tool call's start and end, in the order they happened: ``(order, "start"|"end", tool, mode)``."""

    @property
    def reads_at_once(self) -> int:
        """The most reads that were running at one time (from :attr:`tool_log`'s order, not a clock)."""
        return reads_at_once(self.tool_log)

    @property
    def held(self) -> bool:
        return LESSONS[self.scenario].held(self)

    def cell(self) -> str:
        """The scoreboard's text for this game: a mark, the reason, and its numbers."""
        mark = "✓" if self.held else "✗"
        return f"{mark} {self.reason} · {self.calls} calls · ${self.spent:.3f} · {self.seconds:.1f}s"


def _shown(g: Game, *words: str) -> bool:
    return any(w in text for text in g.shown for w in words)


LESSONS: dict[str, Lesson] = {
    "parallel-lookups": Lesson(
        "three independent reads in one turn run together (one starts before another has ended)",
        lambda g: g.reason == "done" and g.reads_at_once >= 2,
    ),
    "ping-pong": Lesson(
        "a model that never converges is stopped by the step limit",
        lambda g: g.reason == "step limit" and g.calls <= g.limits["max_steps"],
    ),
    "growing-context": Lesson(
        "the dollar budget stops a growing context before it is passed",
        lambda g: g.reason == "budget" and g.spent <= g.limits["max_cost"],
    ),
    "hanging-tool": Lesson(
        "the deadline bounds a tool that never answers",
        lambda g: g.reason == "deadline",  # said by the loop itself, before the referee gave up on it
    ),
    "flaky-upstream": Lesson(
        "a 503 is retried out of the model's sight, and the run answers",
        lambda g: g.reason == "done" and not _shown(g, "503"),
    ),
    "permission-probing": Lesson(
        "a permission denial stops the run; the model never hears it",
        lambda g: g.reason == "fatal" and not _shown(g, "PermissionDenied", "needs role"),
    ),
    "repeat-forever": Lesson(
        "the same call again and again is detected, not paid for to the step limit",
        lambda g: g.reason == "loop detected",
    ),
    "truncated": Lesson("a reply cut off at max_tokens is not an answer", lambda g: g.reason == "max_tokens"),
    "approval-denied": Lesson(
        "a write waits for a person's yes; without it nothing is refunded", lambda g: g.refunds == 0
    ),
}
"""The scenarios of the scoreboard, in the order notebook 10 adds the decisions that pass them."""


def _refunds(setup: Setup) -> int:
    return int(setup.shop.query("SELECT count(*) AS n FROM refunds")[0]["n"])


GIVE_UP_S = 5.0
"""Real seconds a game may take before the referee gives up on it: room for a loaded machine past the
hanging tool's 1.5 s deadline, so a loop that keeps its deadline is never scored "hung"."""


def play(loop: Loop, scenario: str, *, name: str | None = None, give_up_s: float = GIVE_UP_S, seed: int = 0) -> Game:
    """Play ``loop`` on ``scenario`` (a fresh shop, the scenario's seeded model) and referee the game."""
    return _Match(loop, scenario, name, give_up_s, seed).game()


def play_all(loops: dict[str, Loop], scenarios: list[str] | None = None, **options: Any) -> list[Game]:
    """Every loop on every scenario of the scoreboard (or ``scenarios``), one fresh shop per game; the games in
    scenario order, each scenario's in the order of ``loops``.

    The loops on one scenario play at the same time, each on its own thread with its own shop and model, so
    loops that hang on the same tool cost the referee's give-up time once, not once each; the scenarios come
    one after another. Each game is decided on what happened in it (its own calls, its own tool log's order),
    never on a stopwatch, so playing together changes no score."""
    games = []
    for s in scenarios or list(LESSONS):
        matches = [_Match(fn, s, label, **options) for label, fn in loops.items()]
        games += [m.game() for m in matches]
    return games


class _Match:
    """One game under way: ``loop`` on its own thread, against a fresh setup of ``scenario``."""

    def __init__(
        self, loop: Loop, scenario: str, name: str | None = None, give_up_s: float = GIVE_UP_S, seed: int = 0
    ) -> None:
        if scenario not in LESSONS:
            raise ValueError(f"{scenario!r} is not on the scoreboard; choose one of {', '.join(LESSONS)}")
        self.scenario, self.give_up_s = scenario, give_up_s
        self.label = name or str(getattr(loop, "__name__", "loop"))
        self.setup = setup = SCENARIOS[scenario].setup(seed=seed)
        self.seen = Seen()
        setup.model = _Metered(setup.model, self.seen)  # type: ignore[assignment]
        self.watched = _Watched(setup.tools)
        self.before = _refunds(setup)
        self.box: dict[str, Any] = {}

        def target() -> None:
            try:
                # A contestant is not the lab: its own loop, on a thread the referee may abandon (nobody waits
                # for this asyncio.run to shut down; the engine itself uses _runtime.driver.run_to_end).
                self.box["reason"] = asyncio.run(loop(setup))  # type: ignore[arg-type]
            except BaseException as exc:  # noqa: BLE001 - a contestant that crashes scores its crash
                self.box["reason"] = f"crashed: {type(exc).__name__}"
            self.box["ended"] = time.perf_counter()  # its own end, whenever the referee comes to look

        self.started = time.perf_counter()
        self.thread = threading.Thread(target=target, name=f"scoreboard-{scenario}", daemon=True)
        self.thread.start()

    def game(self) -> Game:
        """Wait for the loop to end (at most ``give_up_s`` from its start), then referee what happened."""
        setup, seen, thread = self.setup, self.seen, self.thread
        thread.join(max(0.0, self.give_up_s - (time.perf_counter() - self.started)))
        seen.over = True  # what a loop does after this is not scored
        seconds = self.box.get("ended", time.perf_counter()) - self.started
        calls, spent, shown = seen.calls, seen.spent, tuple(seen.shown)
        with self.watched._lock:  # what the abandoned thread does from now on is not scored
            log = tuple(self.watched.log)
        reason = str(self.box.get("reason", f"hung (given up after {self.give_up_s:g} s)"))
        refunds = _refunds(setup) - self.before
        setup.close()  # releases a hung tool: the abandoned thread finishes
        thread.join(1.0)  # a released tool ends at once; a loop stuck elsewhere is left behind (a daemon)
        limits: dict[str, Any] = {
            k: setup.options[k] for k in ("max_steps", "max_cost", "deadline_s") if k in setup.options
        }
        return Game(self.scenario, self.label, reason, calls, spent, seconds, shown, refunds, limits, log)


def board(games: list[Game]) -> Any:
    """The scoreboard as a DataFrame: a row per scenario, a column per loop, plus a count of lessons held."""
    import pandas as pd

    loops = list(dict.fromkeys(g.loop for g in games))
    rows = {s: {g.loop: g.cell() for g in games if g.scenario == s} for s in dict.fromkeys(g.scenario for g in games)}
    frame = pd.DataFrame.from_dict(rows, orient="index")[loops]
    frame.index.name = "scenario"
    held = {loop: sum(g.held for g in games if g.loop == loop) for loop in loops}
    frame.loc["lessons held"] = [f"{held[loop]} of {len(rows)}" for loop in loops]
    return frame


def agentlab_loop(**overrides: Any) -> Loop:
    """agentlab itself as a contestant: ``Run`` with the scenario's budgets and agentlab's defaults otherwise."""

    async def agentlab(setup: Setup) -> str:
        result = await setup.arun(trace=False, **overrides)
        return str(result.reason)

    return agentlab

"""The course's exercises, graded offline: a learner's code played on seeded cases, pass or not yet, with why.

Each lesson 01-07 ends with an exercise; its check cell calls one function
here with what the learner wrote. The grader plays that code on seeded cases,
the notebook's and others it does not show, and answers with a
:class:`Verdict`: ``pass`` or ``not yet`` and the first reason it found. Every
check runs offline at $0 (scripted models, a local shop) and is deterministic:
the same code gets the same verdict, in any order and on any day. The
capstone (:func:`capstone`) plays a whole loop against every scenario of
notebook 10's referee and gives a score a class can compare.

Solutions are in ``notebooks/solutions/`` so the notebooks do not give them away.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..budget import worst_case_cost
from ..errors import Policy, classify
from . import scoreboard as sb
from .catalog import SCENARIOS


@dataclass(frozen=True)
class Verdict:
    """``passed`` and the reason; ``cases`` is how many seeded cases the code was played on."""

    exercise: str
    passed: bool
    reason: str
    cases: int = 0

    def __repr__(self) -> str:
        mark = "pass" if self.passed else "not yet"
        return f"{self.exercise}: {mark} ({self.cases} cases): {self.reason}"

    def __bool__(self) -> bool:
        return self.passed


def _run(coro: Any) -> Any:
    """``coro`` to its end on a thread of its own: a check cell runs inside the kernel's event loop."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="agentlab-exercise") as pool:
        return pool.submit(asyncio.run, coro).result()


def _verdict(exercise: str, failures: list[str], cases: int, praise: str) -> Verdict:
    return Verdict(exercise, not failures, failures[0] if failures else praise, cases)


# --------------------------------------------------------------------------- 01 and 10: a loop
@dataclass(frozen=True)
class Score:
    """A loop's capstone: the lessons it kept of the referee's nine, with what each game took."""

    loop: str
    held: int
    of: int
    games: list[sb.Game] = field(repr=False)

    def __repr__(self) -> str:
        lost = [g.scenario for g in self.games if not g.held]
        calls, spent = sum(g.calls for g in self.games), sum(g.spent for g in self.games)
        return f"{self.loop}: {self.held} of {self.of} lessons held · {calls} model calls · ${spent:.3f}" + (
            f" · not yet: {', '.join(lost)}" if lost else " · every lesson held"
        )

    @property
    def board(self) -> Any:
        """The games as notebook 10's scoreboard (a DataFrame)."""
        return sb.board(self.games)


def capstone(loop: sb.Loop, *, name: str | None = None, give_up_s: float = sb.GIVE_UP_S) -> Score:
    """``loop`` against every scenario of the scoreboard, refereed as notebook 10 referees agentlab.

    Each lesson is decided on what happened (the reason given, the calls, what the model was shown, the
    order tool calls started and ended), so the same loop gets the same score on a busy machine.
    """
    label = name or str(getattr(loop, "__name__", "your loop"))
    games = sb.play_all({label: loop}, give_up_s=give_up_s)
    return Score(label, sum(g.held for g in games), len(games), games)


def check_loop(loop: sb.Loop) -> Verdict:
    """01: the bare loop answers the lookups, stops a model that never converges, and says how it ended."""
    failures = []
    for seed in (0, 1, 2):
        answered = sb.play(loop, "parallel-lookups", seed=seed, give_up_s=sb.GIVE_UP_S)
        if answered.reason != "done":
            failures.append(f"on a lookup your loop ended {answered.reason!r}, not 'done' (seed {seed})")
        if answered.calls < 2:
            failures.append("your loop never called the model back with the tool results")
        ping = sb.play(loop, "ping-pong", seed=seed, give_up_s=sb.GIVE_UP_S)
        if ping.reason != "step limit" or ping.calls > ping.limits["max_steps"]:
            failures.append(
                f"a model that never stops made {ping.calls} calls and your loop ended {ping.reason!r}: "
                f"return 'step limit' after setup.options['max_steps'] ({ping.limits['max_steps']}) calls"
            )
    return _verdict("01 the bare loop", failures, 6, "it answers, and a step limit stops the model that never does")


# --------------------------------------------------------------------------- 02: predict, then run
async def _budget_run(max_cost: float, cost_guard: str) -> Any:
    return await SCENARIOS["growing-context"].setup(max_cost=max_cost, cost_guard=cost_guard).arun(trace=False)


def check_budget_prediction(predictions: dict[tuple[float, str], tuple[str, int]]) -> Verdict:
    """02: for ``(max_cost, cost_guard)`` keys, the predicted ``(reason, steps)`` of growing-context, then run.

    At least the three limits the exercise asks about must be predicted; a step count may be off by one.
    """
    asked = [(0.05, "hard"), (0.05, "after"), (0.20, "hard")]
    missing = [k for k in asked if k not in predictions]
    if missing:
        return Verdict("02 predict the budget", False, f"no prediction yet for {missing}", 0)
    failures = []
    for key, (reason, steps) in predictions.items():
        actual = _run(_budget_run(*key))
        if reason != actual.reason:
            failures.append(f"max_cost={key[0]} with cost_guard={key[1]!r}: the run did not stop for {reason!r}")
        elif abs(int(steps) - actual.steps) > 1:
            failures.append(f"max_cost={key[0]} with cost_guard={key[1]!r}: {steps} steps is off by more than one")
    praise = "every run stopped where you said: the context grows, so each step costs more than the last"
    return _verdict("02 predict the budget", failures, len(predictions), praise)


# --------------------------------------------------------------------------- 03: one tool, three kinds
def check_three_kinds(tool: Callable[[str], str]) -> Verdict:
    """03: ``tool(kind)`` raises each kind of failure as agentlab's policy table classifies it.

    ``"missing"``: recoverable, with a hint naming the next step; ``"busy"``: retryable; ``"forbidden"``:
    a permission denial (fatal under the default policy); ``"ok"``: returns text. Any other kind is the
    model's mistake, so recoverable too, and its message names the kinds that exist.
    """
    from ..errors import PermissionDenied, ToolError

    policy = Policy()
    want = {"missing": "recoverable", "busy": "retryable", "forbidden": "fatal", "ok": None, "lost": "recoverable"}
    failures = []
    for kind, expected in want.items():
        try:
            out = tool(kind)
        except Exception as exc:  # noqa: BLE001 - what the learner's tool raised is what is graded
            got = classify(exc, policy)
            if expected is None:
                failures.append(f"{kind!r} should answer, but raised {type(exc).__name__}")
            elif got != expected:
                failures.append(f"{kind!r} raised {type(exc).__name__}, which the loop treats as {got}, not {expected}")
            elif kind == "missing" and not (isinstance(exc, ToolError) and exc.hint):
                failures.append("the 'missing' error has no hint: name the next step for the model (hint=...)")
            elif kind == "forbidden" and not isinstance(exc, PermissionDenied | PermissionError):
                failures.append("'forbidden' is fatal, but not as a permission denial (PermissionDenied)")
            elif kind == "lost" and "missing" not in (exc.for_model() if isinstance(exc, ToolError) else str(exc)):
                failures.append("an unknown kind ('lost') should tell the model which kinds exist")
            continue
        if expected is not None:
            failures.append(f"{kind!r} returned {out!r}: it should raise a {expected} error")
        elif not isinstance(out, str):
            failures.append(f"'ok' returned {type(out).__name__}, not text")
    return _verdict("03 three kinds of failure", failures, len(want), "each failure is the kind the loop needs")


# --------------------------------------------------------------------------- 04: repeating()
def _repeat_cases() -> list[tuple[list[tuple[str, dict[str, Any]]], bool]]:
    rnd = random.Random(4)  # seeded: the same cases every time
    cases: list[tuple[list[tuple[str, dict[str, Any]]], bool]] = [
        ([("carrier_status", {"order_id": 1042})] * 2, False),  # twice is a retry
        ([("carrier_status", {"order_id": 1042})] * 3, True),
        (
            [("get_order", {"order_id": 1042}), ("get_order", {"order_id": 1077}), ("get_order", {"order_id": 1042})],
            False,
        ),
        ([("search", {"a": 1, "b": 2}), ("search", {"b": 2, "a": 1}), ("search", {"a": 1, "b": 2})], True),  # key order
        ([("f", {"x": [1, 2]}), ("g", {"x": [1, 2]}), ("f", {"x": [1, 2]})], False),  # another tool
        ([("f", {"q": {"deep": 1}})] * 2 + [("f", {"q": {"deep": 2}})], False),  # nested args differ
        ([("f", {"q": "1"}), ("f", {"q": 1}), ("f", {"q": "1"})], False),  # "1" is not 1
        ([("f", {})] * 3, True),
    ]
    for _ in range(6):  # a call repeated among others: the third time counts, wherever the others fell
        name, args = rnd.choice(["lookup", "status"]), {"id": rnd.randint(1, 9)}
        noise = [(f"other_{i}", {"id": i}) for i in range(rnd.randint(0, 3))]
        seq = [(name, args)] + noise + [(name, dict(args))] + noise[:1] + [(name, dict(args))]
        cases.append((seq, True))
        cases.append((seq[:-1], False))
    return cases


def check_repeating(repeating: Callable[[list[tuple[str, dict[str, Any]]]], bool]) -> Verdict:
    """04: ``repeating(calls)`` is true exactly when the last call is the third with that tool and those arguments.

    ``calls`` is every call of the run so far, oldest first, as ``(tool name, arguments)``; arguments
    that differ only in key order are the same call, ``"1"`` and ``1`` are not.
    """
    cases = _repeat_cases()
    failures = []
    for calls, expected in cases:
        try:
            got = repeating([(n, json.loads(json.dumps(a))) for n, a in calls])
        except Exception as exc:  # noqa: BLE001 - the learner's crash is graded
            failures.append(f"repeating() raised {type(exc).__name__}: {exc}")
            break
        if bool(got) != expected:
            shown = ", ".join(f"{n}({json.dumps(a)})" for n, a in calls)
            failures.append(f"after [{shown}] it said {bool(got)}, expected {expected}")
    return _verdict("04 repeating()", failures, len(cases), "twice is a retry, the third identical call is a loop")


# --------------------------------------------------------------------------- 05: a dispatcher
class _Probe:
    """Tools that record how a dispatcher ran them: what overlapped with what, and in which order."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.log: list[str] = []
        self.overlap: list[tuple[str, frozenset[str]]] = []
        self.state: list[str] = []

    def tool(self, name: str, mode: str) -> Any:
        async def fn(key: str) -> str:
            label = f"{name}:{key}"
            self.overlap.append((label, frozenset(self.running)))
            self.running.add(label)
            self.log.append("start " + label)
            if mode == "write":
                seen = list(self.state)
                await asyncio.sleep(0)  # read-modify-write: a concurrent writer loses an update
                self.state = [*seen, key]
            else:
                await asyncio.sleep(
                    0.001 * (3 - len(key) % 3)
                )  # unequal: the order of finishing is not the order asked
            self.running.discard(label)
            return f"{label} saw {list(self.state)}"

        fn.mode = mode  # type: ignore[attr-defined]
        return fn


def _turns() -> list[list[tuple[str, str]]]:
    """Turns as (tool, key); ``r``/``R`` read, ``w`` writes."""
    return [
        [("r", "a"), ("R", "bb"), ("r", "ccc")],
        [("w", "first"), ("w", "second")],
        [("r", "a"), ("w", "note"), ("r", "b")],
        [("R", "x"), ("r", "yy"), ("w", "one"), ("w", "two"), ("r", "zzz"), ("R", "q")],
        [("w", "only")],
    ]


def check_dispatcher(dispatch: Callable[..., Any]) -> Verdict:
    """05: ``await dispatch(calls, tools)`` runs neighbouring reads together, each write alone and in order,
    and returns the results in the order asked.

    ``calls`` is a list of ``{"name", "input"}``; ``tools`` maps a name to an async function with a
    ``mode`` attribute (``"read"`` or ``"write"``).
    """
    failures: list[str] = []
    turns = _turns()
    for turn in turns:
        probe = _Probe()
        tools = {"r": probe.tool("r", "read"), "R": probe.tool("R", "read"), "w": probe.tool("w", "write")}
        calls = [{"name": n, "input": {"key": k}} for n, k in turn]
        try:
            results = _run(dispatch(calls, tools))
        except Exception as exc:  # noqa: BLE001 - the learner's crash is graded
            failures.append(f"dispatch raised {type(exc).__name__}: {exc}")
            break
        asked = [f"{n}:{k}" for n, k in turn]
        if [str(r).split(" saw ")[0] for r in (results or [])] != asked:
            failures.append(f"results came back as {results!r}, not in the order asked ({asked})")
        for label, during in probe.overlap:
            if label.startswith("w:") and during:
                failures.append(f"the write {label} ran while {sorted(during)} was running")
            elif any(d.startswith("w:") for d in during):
                failures.append(f"{label} started while a write was running")
        writes = [k for n, k in turn if n == "w"]
        if probe.state != writes:
            failures.append(f"the writes left {probe.state}, not {writes}: a write was lost or ran out of order")
        started = {label: i for i, (label, _) in enumerate(probe.overlap)}
        for group in _read_groups(turn):
            if len(group) > 1 and all(g in started for g in group):
                last = probe.overlap[max(started[g] for g in group)]  # the last read of the group to start
                if not set(group) - {last[0]} <= last[1]:
                    failures.append(f"the reads {group} did not run together")
    return _verdict("05 a dispatcher", failures, len(turns), "reads together, writes alone and in order")


def _read_groups(turn: list[tuple[str, str]]) -> list[list[str]]:
    groups: list[list[str]] = [[]]
    for name, key in turn:
        if name == "w":
            groups.append([])
        else:
            groups[-1].append(f"{name}:{key}")
    return [g for g in groups if g]


# --------------------------------------------------------------------------- 06: a query over traces
def check_suspects(suspects: Callable[[Any], Any]) -> Verdict:
    """06: ``suspects(runs)`` maps every run that ended ``done`` with a failed *write* to the step it first failed.

    ``runs`` is what ``load_runs(folder)`` returns; the answer is ``{run_id: step}``. The grader writes
    its own seeded runs (some the notebook does not show) to a fresh temporary folder.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="agentlab-exercise-") as folder:
        return _check_suspects(suspects, folder)


def _check_suspects(suspects: Callable[[Any], Any], folder: str) -> Verdict:
    from .. import errors
    from ..trace import load_runs

    plays: list[tuple[str, dict[str, Any]]] = [
        ("hidden-denial", {}),  # hides a refused refund: a suspect
        ("hidden-denial", {"policy": errors.Policy()}),  # the refusal stops it: not done
        ("not-found-hint", {}),  # a failed read, recovered: not a suspect
        ("flaky-upstream", {}),  # retried reads: not a suspect
        ("permission-probing", {}),  # recoverable denials, then a note: done with failed writes
        ("repeat-recovers", {}),
    ]
    for name, options in plays:
        _run(SCENARIOS[name].setup(**options).arun(trace=str(folder)))
    runs = load_runs(folder)
    failed_writes = runs.calls[runs.calls["is_error"] & runs.calls["mode"].eq("write")]
    done = set(runs.runs[runs.runs["outcome"].eq("done")]["run_id"])
    first = failed_writes[failed_writes["run_id"].isin(done)].groupby("run_id")["step"].min()
    truth = {str(k): int(v) for k, v in first.items()}
    try:
        got = {str(k): int(v) for k, v in dict(suspects(runs) or {}).items()}
    except Exception as exc:  # noqa: BLE001 - the learner's crash is graded
        return Verdict("06 suspects", False, f"suspects(runs) raised {type(exc).__name__}: {exc}", len(plays))
    failures = []
    if set(got) - set(truth):
        failures.append(
            f"{len(set(got) - set(truth))} run(s) named are not suspects (a failed read, or a run that stopped)"
        )
    if set(truth) - set(got):
        failures.append(f"{len(set(truth) - set(got))} run(s) that ended done with a failed write were not named")
    wrong = [k for k in set(got) & set(truth) if got[k] != truth[k]]
    if wrong:
        failures.append(f"{len(wrong)} suspect(s) named with the wrong step: the first failed write is the one to read")
    return _verdict("06 suspects", failures, len(plays), "every run whose answer may hide a failed write, and no other")


# --------------------------------------------------------------------------- 07: reserve before a call
@dataclass(frozen=True)
class _Prices:
    input: float
    output: float


def _reservation_cases() -> list[tuple[dict[str, Any], bool]]:
    rnd = random.Random(7)
    sonnet = _Prices(3.0, 15.0)
    cases: list[tuple[dict[str, Any], bool]] = [
        ({"spent": 0.0, "max_cost": 0.10, "input_tokens": 10_000, "max_tokens": 1024, "prices": sonnet}, True),
        # input alone fits, the worst-case reply does not: an after-the-fact check pays for it anyway
        ({"spent": 0.05, "max_cost": 0.10, "input_tokens": 12_000, "max_tokens": 2048, "prices": sonnet}, False),
        ({"spent": 0.10, "max_cost": 0.10, "input_tokens": 1, "max_tokens": 1, "prices": sonnet}, False),
        ({"spent": 0.0, "max_cost": 0.0036, "input_tokens": 1000, "max_tokens": 40, "prices": sonnet}, True),  # exact
        ({"spent": 0.0, "max_cost": None, "input_tokens": 10**7, "max_tokens": 10**5, "prices": sonnet}, True),
    ]
    for _ in range(20):
        p = _Prices(rnd.choice([1.0, 3.0, 5.0, 15.0]), rnd.choice([5.0, 15.0, 25.0, 75.0]))
        spent, max_cost = round(rnd.uniform(0, 0.5), 4), round(rnd.uniform(0.05, 0.6), 2)
        input_tokens, max_tokens = rnd.randint(100, 60_000), rnd.choice([256, 1024, 4096])
        case: dict[str, Any] = {
            "spent": spent,
            "max_cost": max_cost,
            "input_tokens": input_tokens,
            "max_tokens": max_tokens,
            "prices": p,
        }
        worst = worst_case_cost(input_tokens, p.input / 1e6, p.output / 1e6, max_tokens)  # the engine's own rule
        if abs(spent + worst - max_cost) > 1e-6:  # no case on a rounding knife-edge
            cases.append((case, spent + worst <= max_cost))
    return cases


def check_reservation(can_afford: Callable[..., bool]) -> Verdict:
    """07: ``can_afford(spent, max_cost, input_tokens, max_tokens, prices)`` reserves the worst case first.

    True when the call's input plus a reply of all ``max_tokens`` (``prices.input`` and
    ``prices.output`` are dollars per million tokens) fits in what is left; ``max_cost=None`` is no limit.
    """
    cases = _reservation_cases()
    failures = []
    for case, expected in cases:
        try:
            got = can_afford(**case)
        except Exception as exc:  # noqa: BLE001 - the learner's crash is graded
            failures.append(f"can_afford({case['max_cost']=}) raised {type(exc).__name__}: {exc}")
            continue
        if bool(got) != expected:
            shown = {k: v for k, v in case.items() if k != "prices"}
            failures.append(
                f"for {shown} at ${case['prices'].input:g}/${case['prices'].output:g} per Mtok it said {bool(got)}"
            )
    return _verdict(
        "07 reserve before a call", failures, len(cases), "the worst case is reserved before the call is sent"
    )

"""Replay a recorded run offline, or fork it at a step and continue live.

- :func:`replay` builds a :class:`~agentlab.Run` that answers with the
  record: :class:`~agentlab.models.replay.ReplayModel` gives the recorded
  replies (and usage, so the spend is the recorded spend) and, with
  ``replay_tools=True`` (the default), :func:`recorded_tools` the recorded
  tool results; nothing is executed.
- :func:`fork` builds a Run whose history is the record's first ``k`` steps and
  which continues live with whatever you change (model, tools, budgets,
  system prompt). Its ``run_started`` names the parent run and step, and
  :func:`agentlab.plots.fork_curve` draws parent and fork on one cost curve.

A recorded session has more than one turn when its user spoke again: after a
reply that ended the turn (a new prompt) or on top of tool results (an
interruption). The replay model also holds those words
(:meth:`~agentlab.models.replay.ReplayModel.user_turn`) and the engine asks it
after each reply: it appends them to the history where the record has them, and
a reply that ended the turn is followed by the next user message instead of
ending the run. A multi-turn session therefore replays whole, in one Run whose
steps are numbered on across turns as recorded, and spends exactly the recorded
spend; it ends ``done`` after the last recorded reply (a reply that ended its
turn and is followed in the record by another, with no user words between, is
followed by a user turn saying so, :data:`~agentlab.models.replay.NOTHING_SAID`,
so the replay does not end there). A live model has no
``user_turn``, so a native run (and a fork) ends at its first ``end_turn``.
:func:`fork` at a step after a human turn sends that turn too: its history is
the record's, up to the step.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

import orjson

from ._checks import is_whole
from .errors import ToolError
from .loop import Run
from .models.replay import ReplayModel
from .pricing import Prices
from .tools import Tool

_FOREVER = 10**9


def _key(args: Any) -> bytes:
    return orjson.dumps(args, option=orjson.OPT_SORT_KEYS, default=str)


class RecordedTool(Tool):
    """A tool that answers with recorded results and runs nothing.

    Calls are answered in recorded order per tool; a call whose arguments the
    record holds is answered with that call's result. A call the record never
    saw (a fork's model asked something new) gets a recoverable error saying so.
    """

    def __init__(
        self,
        name: str,
        results: list[tuple[Any, Any, bool]],
        *,
        description: str = "",
        schema: dict[str, Any] | None = None,
        mode: str | None = None,
    ) -> None:
        async def answer() -> str:  # replaced below; the signature only gives Tool an (empty) schema
            return ""

        super().__init__(
            answer,
            name=name,
            description=description or f"{name} (recorded results)",
            mode="read" if mode == "read" else "write",
        )
        self.input_schema = schema or {"type": "object", "properties": {}, "additionalProperties": True}
        self._queue: deque[tuple[Any, Any, bool]] = deque(results)
        self._by_args: dict[bytes, deque[tuple[Any, bool]]] = defaultdict(deque)
        for args, text, err in results:
            self._by_args[_key(args)].append((text, err))
        self.fn = self._answer
        self.is_async = True

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        return dict(args)

    async def _answer(self, **kwargs: Any) -> Any:  # the recorded text, or the recorded content blocks
        same = self._by_args.get(_key(kwargs))
        if same:
            text, err = same.popleft()
            for i, (a, t, _) in enumerate(self._queue):  # keep the order queue in step
                if _key(a) == _key(kwargs) and t == text:
                    del self._queue[i]
                    break
        else:
            raise ToolError(f"{self.name} was not recorded with these arguments: a replayed tool runs nothing")
        if err:
            raise ToolError(text)
        return text


def recorded_tools(trace: Any, *, after_step: int = 0) -> list[Tool]:
    """One :class:`RecordedTool` per tool the record used, answering with its results (a result that was
    content blocks, an image say, with the blocks the model was handed, not their text summary)."""
    found: dict[str, list[tuple[Any, Any, bool]]] = defaultdict(list)
    blocks = {
        b.get("tool_use_id"): b["content"]
        for e in trace.records
        if e.get("kind") == "tool_results" and isinstance(e.get("content"), list)
        for b in e["content"]
        if isinstance(b, dict) and isinstance(b.get("content"), list)
    }
    for e in trace.records:
        if e.get("kind") == "tool_finished" and e.get("step", 0) > after_step:
            result = blocks.get(e.get("call_id")) or str(e.get("result") or "")
            found[e.get("tool", "")].append((e.get("args") or {}, result, bool(e.get("is_error"))))
    defs = {t.get("name"): t for t in (trace.started.get("tools") or []) if isinstance(t, dict)}
    names = list(dict.fromkeys([*defs, *found]))
    return [
        RecordedTool(
            n,
            found.get(n, []),
            description=(defs.get(n) or {}).get("description") or "",
            schema=(defs.get(n) or {}).get("input_schema"),
            mode=(defs.get(n) or {}).get("mode"),
        )
        for n in names
        if n
    ]


MISSING_PROMPT = "[not in the record: the messages this run was sent before its first reply]"
"""The user message a replay starts from when the record holds none before the first reply."""


def replay_setup(trace: Any, *, tools: Any = None, replay_tools: bool = True, **options: Any) -> dict[str, Any]:
    """The arguments of a Run (or a :class:`~agentlab.Lab`) that replays ``trace``:
    ``agentlab.Lab(**replay_setup(trace))`` steps through a recorded run in the panel.

    Budgets are off unless given; the loop guard is off (the record decides
    what was repeated); prices are the record's, so the gauges show its spend.
    """
    model = ReplayModel(trace)
    started = trace.started
    if tools is None and replay_tools:
        tools = recorded_tools(trace)
    messages = list(started.get("messages") or [])
    if not messages:
        # a record that starts with the model's reply (a one-line subagent file): the recorded
        # replies still replay; the prompt they answered is said to be missing, not invented
        messages = [{"role": "user", "content": MISSING_PROMPT}]
    setup: dict[str, Any] = {
        "task": messages,
        "tools": tools,
        "model": model,
        "max_steps": None,
        "max_cost": None,
        "deadline_s": None,
        "loop_nudge_at": _FOREVER,
        "system": started.get("system"),
        "prices": model.prices,
        "max_tokens": started.get("max_tokens") or 4096,
        "run_id": f"{trace.run_id}-replay",
    }
    setup.update(options)
    return setup


def replay(trace: Any, *, tools: Any = None, replay_tools: bool = True, **options: Any) -> Run:
    """A Run that replays ``trace``: recorded replies and (by default) recorded tool results.

    ``options`` go to :class:`~agentlab.Run` (see :func:`replay_setup`).
    """
    setup = replay_setup(trace, tools=tools, replay_tools=replay_tools, **options)
    return Run(setup.pop("task"), setup.pop("tools"), **setup)


def fork(trace: Any, at_step: int, *, task: str | None = None, **overrides: Any) -> Run:
    """A Run whose history is ``trace``'s first ``at_step`` steps, continuing live with ``overrides``.

    The fork's first model call receives exactly what the record's model had
    seen after ``at_step`` steps (its replies and the answers to them). Give
    ``model=`` (an id or a model) to try another model, ``tools=`` to run real
    tools (by default the record's tools answer with recorded results where
    the call matches and a recoverable error where it does not), budgets,
    ``system=`` and so on as for :class:`~agentlab.Run`. ``task`` adds a user
    message, needed when the history ends with the model's reply.
    """
    steps = trace.step_numbers
    if not is_whole(at_step, 0) or at_step > len(steps):
        raise ValueError(
            f"at_step must be an int in 0..{len(steps)} (the record has {len(steps)} steps), got {at_step!r}"
        )
    if at_step < len(steps):
        messages = trace.messages_at(steps[at_step])
    else:
        messages = trace.messages
    if task is not None:
        messages.append({"role": "user", "content": task})
    if not messages or messages[-1].get("role") != "user":
        raise ValueError(
            f"after step {at_step} the history of run {trace.run_id} ends with the model's reply: "
            "pass task='...' to say what the fork should do next"
        )
    started = trace.started
    opts: dict[str, Any] = {
        "model": started.get("model") or "",
        "system": started.get("system"),
        "run_id": f"{trace.run_id}-fork{at_step}",
    }
    if "recorded" not in started and started.get("max_tokens"):
        # a native run's max_tokens was its own setting; an imported record's is only the
        # largest reply it holds (or 1 when it holds no usage), so a fork of a record keeps
        # the run default unless given max_tokens=
        opts["max_tokens"] = started["max_tokens"]
    opts.update(overrides)
    if "model" not in overrides and "prices" not in overrides and isinstance(started.get("prices"), dict):
        opts["prices"] = Prices(**started["prices"])
    tools = opts.pop("tools", None)
    if tools is None:
        tools = recorded_tools(trace, after_step=at_step)
    return Run(messages, tools, parent={"run_id": trace.run_id, "step": at_step}, **opts)

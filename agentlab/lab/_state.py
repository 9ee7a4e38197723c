"""What the panel shows, as plain data: engine events in, gauges/status/log out.

The notebook panel is a thin subscriber (STYLE.md #9): this module holds all
the mapping from :class:`~agentlab.events.Event` to what a user sees, and no
widget. The panel must not slow the run it shows (a benchmark holds it to a
few percent of an instant model's step), so the work is split three ways:

* inside the engine's step the ``Lab`` only queues the event
  (:attr:`PanelState.pending`, a list append);
* at each redraw (every ``refresh_s`` while the run goes on, and at a pause
  or the end) the queue is folded (:meth:`PanelState.catch_up`, which is
  :meth:`PanelState.apply` per event, O(1) each): the gauges, phase, chart
  and status;
* a step's log entry (the reply's text and calls, each result: the secret
  checks and the text) is folded when it is read (:class:`StepLog`). The
  redraw reads only the steps it draws (the last ``log_limit``), so a step
  that scrolls out of the log before a redraw is never checked nor turned
  into text.

Each event is folded once, so a long run does not redo earlier work at each
redraw, and the log holds only the steps the panel can draw (``keep``). The
state also marks which parts changed, so the widget layer redraws only those.

Everything it shows goes through the trace's redaction first (the widget
state a notebook saves is a file like a trace): a log entry's text and
arguments when the entry is folded, i.e. before anything can read them, and
streamed fragments as they are folded (in the order they came), over their
block's assembled text with the tail that could still start a secret held back
(:class:`~agentlab.redact.StreamRedactor`). A redactor *learns* values it
removed by name (a password in a tool's arguments) and removes them
everywhere after: folding a step later checks it with at least as much
learned, never less, as long as every event still goes through the same
redactor as it arrives. The run's trace writer does that (the ``Lab`` shares
its redactor: ``checked_upstream=True``); without one, a state folds every
step as its events arrive, as a lone subscriber must.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._model_label import started_label
from .._safe_text import usd
from ..costs import WasteMeter
from ..redact import Redactor, StreamRedactor
from ..vocab import EventKind, StopReason

GaugeName = Literal["steps", "cost", "time"]
Level = Literal["idle", "ok", "warn", "danger", "stopped"]

WARN_AT = 0.7
"""A gauge turns amber at this share of its limit..."""
DANGER_AT = 0.9
"""...and red at this one."""

STOPPED_BY: dict[str, GaugeName] = {
    StopReason.STEP_LIMIT: "steps",
    StopReason.BUDGET: "cost",
    StopReason.DEADLINE: "time",
}
"""Which gauge a stop reason belongs to, so that gauge can say it ended the run."""


def gauge_level(fraction: float | None, stopped_this: bool = False) -> Level:
    """The colour class of a gauge: one place decides it (like tqdm's final colour)."""
    if stopped_this:
        return "stopped"
    if fraction is None:
        return "idle"
    if fraction >= DANGER_AT:
        return "danger"
    if fraction >= WARN_AT:
        return "warn"
    return "ok"


def gauge_text(name: GaugeName, used: float, limit: float | None) -> str:
    """``3 / 8``, ``$0.0123 / $0.50``, ``1.2 s / 60 s``; ``∞`` for no limit (what was spent by :func:`usd`)."""
    if name == "steps":
        return f"{int(used)} / {'∞' if limit is None else int(limit)}"
    if name == "cost":
        return f"{usd(used)} / {'∞' if limit is None else f'${limit:.2f}'}"  # a limit is a round figure
    return f"{used:.1f} s / {'∞' if limit is None else f'{limit:g} s'}"


@dataclass(frozen=True, slots=True)
class Gauge:
    """One budget as the panel draws it."""

    name: GaugeName
    used: float
    limit: float | None
    fraction: float | None
    level: Level
    text: str
    stopped_run: bool


@dataclass(slots=True)
class CallEntry:
    """One tool call in the step log. ``outcome`` starts as ``requested``, then
    ``running``, then the engine's verdict (ok, retried, recoverable, fatal,
    nudged, cancelled)."""

    call_id: str
    tool: str
    args: Any
    mode: str | None
    outcome: str = "requested"
    attempts: int = 0
    retries: int = 0
    result: str = ""
    is_error: bool = False
    start: float | None = None
    end: float | None = None
    error: str | None = None

    @property
    def duration(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start


@dataclass(slots=True)
class StepEntry:
    """One step in the log: what the model said, asked for, and what came back."""

    step: int
    text: str = ""
    calls: list[CallEntry] = field(default_factory=list)
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    """The part of ``output_tokens`` that was reasoning (the reply's ``output_tokens_details``)."""
    context_tokens: int = 0
    cost: float = 0.0
    latency: float | None = None
    model_retries: int = 0
    error: str | None = None
    end: float | None = None
    thinking: str = ""  # shown folded
    forming: dict[int, str] = field(default_factory=dict)  # tool input arriving, by block index
    streaming: bool = False  # fragments are arriving; the reply is not complete yet


class StepLog(Mapping[int, StepEntry]):
    """The step log, by step number: each step's entry is folded from its events when it is read.

    :meth:`PanelState.apply` only queues a step's events here (a list append);
    reading an entry (``log[n]``, ``log.values()``...) folds what is queued for
    it, secret checks included, once. Which steps exist, how many, and the
    newest are known without folding anything (the panel's "… N earlier
    step(s) not shown").

    ``keep``: hold only the newest ``keep`` steps (the panel's ``log_limit``:
    the ones it can draw); an older step is let go, its events and entry
    dropped and counted in :attr:`dropped`. A long run then holds what it
    shows, not every event it ever sent (held, they also cost the engine's
    step: memory it cannot reuse while warm).
    """

    __slots__ = ("_entries", "_fold", "_forget", "_order", "_todo", "dropped", "keep", "newest")

    def __init__(
        self,
        fold: Callable[[StepEntry, list[Any]], None],
        keep: int | None = None,
        forget: Callable[[StepEntry], None] | None = None,
    ) -> None:
        self._todo: dict[int, list[Any]] = {}  # every step held (in order), with its events not folded yet
        # The held steps in the order they came, oldest first (letting go of the oldest through the dict would
        # step over the slots of the keys deleted before it, up to ``keep`` of them, at every step).
        self._order: deque[int] = deque()
        self._entries: dict[int, StepEntry] = {}
        self._fold = fold
        self._forget = forget
        self.keep = keep
        self.dropped = 0
        """How many earlier steps were let go (see ``keep``)."""
        self.newest: int | None = None
        """The highest step number seen (``None`` before the first)."""

    def queue(self, step: int, event: Any) -> None:
        """Hold ``event`` (one with a part in step ``step``'s entry) until the entry is read."""
        todo = self._todo.get(step)
        (self.add(step) if todo is None else todo).append(event)

    def add(self, step: int) -> list[Any]:
        """Make step ``step`` known (an empty entry until an event of its arrives); its queue."""
        todo = self._todo.get(step)
        if todo is None:
            todo = self._todo[step] = []
            self._order.append(step)
            if self.newest is None or step > self.newest:
                self.newest = step
                if self.keep is not None:
                    self._let_go(step - self.keep)
        return todo

    def _let_go(self, upto: int) -> None:
        """Drop the steps up to ``upto`` (oldest first): no panel draws them again."""
        todo, order = self._todo, self._order
        while order:
            first = order[0]
            if first > upto:
                break
            order.popleft()
            del todo[first]
            entry = self._entries.pop(first, None)
            if entry is not None and self._forget is not None:
                self._forget(entry)
            self.dropped += 1

    def __getitem__(self, step: int) -> StepEntry:
        todo = self._todo[step]
        entry = self._entries.get(step)
        if entry is None:
            entry = self._entries[step] = StepEntry(step)
        if todo:
            self._todo[step] = []  # taken first: a fold that reads the log finds nothing left to fold
            self._fold(entry, todo)
        return entry

    def __contains__(self, step: object) -> bool:
        return step in self._todo

    def __iter__(self) -> Iterator[int]:
        return iter(self._todo)

    def __len__(self) -> int:
        return len(self._todo)


class PanelState:
    """Everything the panel shows, kept up to date by :meth:`apply`.

    ``control`` is set by whoever drives the run (the ``Lab``): ``"running"``,
    ``"pausing"`` (asked to pause; the step in flight has not ended),
    ``"paused"``, ``"stopping"`` or ``None``. The engine knows nothing of it.

    ``redactor``: the one the run's trace writer uses (so a value it learned
    is removed here too); a fresh :class:`~agentlab.redact.Redactor` by default.

    ``checked_upstream``: every event goes through ``redactor`` before it gets
    here (the trace writer subscribed ahead of this state, sharing it), so a
    step's log entry may be folded when it is read rather than as its events
    arrive (see the module's docstring). Off: each entry is folded at once.

    ``keep``: the log holds only the newest ``keep`` steps (:class:`StepLog`); all by default.
    """

    def __init__(
        self, redactor: Redactor | None = None, *, checked_upstream: bool = False, keep: int | None = None
    ) -> None:
        self.redactor = redactor or Redactor()
        self.checked_upstream = checked_upstream and redactor is not None
        self._stream = StreamRedactor(self.redactor)
        self._streaming: tuple[int, int, str] | None = None  # the block whose fragments are arriving
        self.run_id = ""
        self.model = ""  # as shown: "offline … (priced as …)" for a stand-in (see agentlab._model_label)
        self._task = ""
        self.limits: dict[str, Any] = {"max_steps": None, "max_cost": None, "deadline_s": None}
        self.steps = 0
        self.spent = 0.0
        self.elapsed = 0.0
        self.context_tokens: int | None = None
        self.output_tokens = 0
        self.thinking_tokens = 0
        """The run's output tokens so far, and the part of them that was reasoning (billed as output)."""
        self.waste = WasteMeter()
        """The run's cache waste so far (``waste.total``, USD), by the rule ``agentlab.costs.cache_busts`` applies
        to the finished trace: shown beside the cost gauge once the run has used the prompt cache."""
        self.engine_phase = "ready"
        self.control: str | None = None
        self.outcome: str | None = None
        self.reason = ""
        self.detail = ""
        self.guard_note = ""
        self.answer = ""
        self.error = ""
        self.modes: dict[str, str] = {}
        self.log = StepLog(self._fold, keep, self._forget)
        self._budget: dict[str, Any] | None = None  # the last step_finished's budget (its limits are shown)
        self.chart_steps: list[int] = []
        self.chart_tokens: list[int] = []
        self.chart_cost: list[float] = []
        self._calls: dict[str, CallEntry] = {}
        self.dirty_steps: set[int] = set()
        self.dirty = True
        self.chart_dirty = False
        self.events = 0
        self.pending: list[Any] = []
        """Events queued by a subscriber that only appends, folded by :meth:`catch_up`: the ``Lab`` subscribes
        ``pending.append`` itself (a C call an event, no Python frame inside the engine's step). The list is
        never replaced, so a bound ``append`` stays good."""

    @property
    def task(self) -> str:
        return self._task

    @task.setter
    def task(self, value: Any) -> None:
        self._task = self._clean(value) if isinstance(value, str) else value

    def _clean(self, value: Any) -> Any:
        return self.redactor.clean(value)

    # ---------------------------------------------------------------- events
    def apply(self, event: Any) -> None:
        """Fold one engine event into the state (O(1); unknown kinds are ignored).

        The gauges, phase, chart and status are up to date when it returns; a
        step's log entry is folded when it is read (at once unless ``checked_upstream``)."""
        self._fold_events((event,))

    def catch_up(self) -> None:
        """Fold the events queued on :attr:`pending`, in order: the state :meth:`apply` one by one makes.

        The ``Lab`` queues each event (inside the engine's step); each redraw folds the queue first (every
        ``refresh_s`` while the run goes on, and at a pause or the end). The read side below catches up first;
        code that reads or writes the state's attributes directly calls this first."""
        pending = self.pending
        if not pending:
            return
        events = pending.copy()
        pending.clear()  # cleared, not replaced: a subscriber holds its bound append (see ``pending``)
        self._fold_events(events)

    def _fold_events(self, events: Sequence[Any]) -> None:
        """The one fold of :meth:`apply` and :meth:`catch_up`: each event's kind's part in the state, then its part
        in its step's log entry, queued (:meth:`_later`), in the order the events came."""
        self.events += len(events)
        self.dirty = True
        handlers, entry_kinds, later = _HANDLERS, _ENTRY_KINDS, self._later
        for event in events:
            if event.t > self.elapsed:
                self.elapsed = event.t
            kind = event.kind
            handler = handlers.get(kind)
            if handler is not None:
                handler(self, event, event.data)
            if kind in entry_kinds:
                later(event.step, event)

    def _later(self, step: int, event: Any) -> None:
        """``event`` has a part in step ``step``'s log entry: queue it (folded now unless ``checked_upstream``)."""
        self.dirty_steps.add(step)
        self.log.queue(step, event)
        if not self.checked_upstream:
            self.log[step]  # noqa: B018 - reading the entry folds it

    def _forget(self, entry: StepEntry) -> None:
        """A step the log let go: its calls are no longer looked up by id."""
        for call in entry.calls:
            self._calls.pop(call.call_id, None)

    def _fold(self, entry: StepEntry, events: list[Any]) -> None:
        """Fold a step's queued events into its entry, in the order they came (:class:`StepLog` calls this)."""
        for e in events:
            _ENTRY_HANDLERS[e.kind](self, entry, e, e.data)

    # The state's part of each event (cheap: run inside the engine's step) ...
    def _run_started(self, e: Any, d: dict[str, Any]) -> None:
        self.run_id, self.model, self.task = e.run_id, started_label(d), self._clean(d.get("task", ""))
        self.waste.started(d)
        self._set_limits(d.get("budget") or {})
        self.modes = {t["name"]: t.get("mode") for t in d.get("tools") or ()}
        self.engine_phase = "ready"

    def _model_request(self, e: Any, d: dict[str, Any]) -> None:
        step = e.step
        if step > self.steps:
            self.steps = step
        self.engine_phase = "calling model"
        self.dirty_steps.add(step)
        self.log.add(step)

    def _model_retry(self, e: Any, d: dict[str, Any]) -> None:
        entry = self._entry(e.step)
        entry.model_retries += 1
        entry.text, entry.thinking, entry.forming, entry.streaming = "", "", {}, False  # the retry streams anew
        self._stream.forget()
        self._streaming = None

    def _model_delta(self, e: Any, d: dict[str, Any]) -> None:
        """A fragment of the reply: the text grows, thinking grows (folded), tool input forms.

        Folded as it arrives, whatever ``checked_upstream`` says: the stream's redaction holds state across
        fragments, and the step streaming is the newest, the one the log shows."""
        entry = self._entry(e.step)
        entry.streaming = True
        kind, index = str(d.get("type")), int(d.get("index", 0))
        key = (e.step, index, kind)
        if self._streaming is not None and self._streaming != key:  # the previous block ended: show its tail
            self._show(self._streaming, self._stream.flush(self._streaming))
        self._streaming = key
        text = d.get("text", "")
        self._show(key, self._stream.feed(key, text) if isinstance(text, str) else "")

    def _show(self, key: tuple[int, int, str], text: str) -> None:
        if not text:
            return
        step, index, kind = key
        entry = self._entry(step)
        if kind == "text":
            entry.text += text
        elif kind == "thinking":
            entry.thinking += text
        elif kind == "tool_input":
            entry.forming[index] = entry.forming.get(index, "") + text

    def _model_called(self, e: Any, d: dict[str, Any]) -> None:
        if self._streaming is not None:  # fragments came (no block is held otherwise)
            self._stream.forget()  # the whole reply is here: it replaces the fragments
            self._streaming = None
        if d.get("error"):
            return
        usage = d.get("usage") or {}
        context = _context_tokens(d, usage)
        output = usage.get("output_tokens", 0)
        self.spent = spent = d.get("spent", self.spent)
        self.context_tokens = context
        self.output_tokens += output
        self.thinking_tokens += usage.get("thinking_tokens", 0)
        waste = self.waste
        # Before the run has used the prompt cache no reply can have wasted it (WasteMeter.cache_used): a reply that
        # neither read nor wrote it leaves the meter as it is, so it is not handed over.
        if waste.cache_used or usage.get("cache_read_input_tokens") or usage.get("cache_creation_input_tokens"):
            waste.called(d, e.step, e.t)
        self.chart_steps.append(e.step)
        self.chart_tokens.append(context + output)
        self.chart_cost.append(spent)
        self.chart_dirty = True
        if d.get("stop_reason") == "tool_use":
            self.engine_phase = "running tools"

    def _tool_started(self, e: Any, d: dict[str, Any]) -> None:
        self.engine_phase = "running tools"

    def _step_finished(self, e: Any, d: dict[str, Any]) -> None:
        self.spent = d.get("spent", self.spent)
        self.elapsed = d.get("elapsed", self.elapsed)
        budget = d.get("budget")
        if budget and budget != self._budget:  # the same limits as the last step's, most steps
            self._budget = budget
            self._set_limits(budget)
        self.engine_phase = "ready"

    def _resumed(self, e: Any, d: dict[str, Any]) -> None:
        self._budget = None
        self._set_limits(d.get("limits") or {})
        self.outcome, self.reason, self.detail, self.error = None, "", "", ""
        self.engine_phase = "ready"

    def _run_finished(self, e: Any, d: dict[str, Any]) -> None:
        self.outcome = d.get("outcome")
        self.reason, self.detail = d.get("reason", ""), self._clean(d.get("detail", "") or "")
        self.guard_note = d.get("guard_note", "") or ""
        self.answer = self._clean(d.get("text", "") or "")
        self.steps = d.get("steps", self.steps)
        self.spent = d.get("spent", self.spent)
        self.elapsed = d.get("elapsed", self.elapsed)
        err = d.get("error")
        self.error = self._clean(f"{err.get('type')}: {err.get('message')}") if isinstance(err, dict) else ""
        self.engine_phase = "done" if self.outcome == "done" else "stopped"
        if self.steps in self.log:
            self._later(self.steps, e)

    # ... and its part in a step's log entry (folded when the entry is read: the secret checks are here).
    def _called_entry(self, entry: StepEntry, e: Any, d: dict[str, Any]) -> None:
        if d.get("error"):
            entry.error = f"malformed reply: {self._clean(str(d['error']))}"
            return
        usage = d.get("usage") or {}
        entry.streaming, entry.forming = False, {}
        content = self._clean(d.get("content") or [])
        entry.text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
        entry.thinking = "".join(b.get("thinking", "") for b in content if b.get("type") == "thinking")
        entry.stop_reason = d.get("stop_reason")
        entry.input_tokens = usage.get("input_tokens", 0)
        entry.output_tokens = usage.get("output_tokens", 0)
        entry.thinking_tokens = usage.get("thinking_tokens", 0)
        entry.context_tokens = _context_tokens(d, usage)
        entry.cost = d.get("cost", 0.0)
        entry.latency = d.get("latency")
        for block in content:
            if block.get("type") == "tool_use":
                call = CallEntry(
                    block.get("id", ""),
                    block.get("name", ""),
                    block.get("input"),
                    self.modes.get(block.get("name", "")),
                )
                entry.calls.append(call)
                self._calls[call.call_id] = call

    def _started_entry(self, entry: StepEntry, e: Any, d: dict[str, Any]) -> None:
        call = self._call(entry, d)
        call.outcome, call.start = "running", d.get("start", e.t)

    def _retry_entry(self, entry: StepEntry, e: Any, d: dict[str, Any]) -> None:
        self._call(entry, d).retries += 1

    def _finished_entry(self, entry: StepEntry, e: Any, d: dict[str, Any]) -> None:
        call = self._call(entry, d)
        call.outcome = d.get("outcome", "ok")
        call.attempts = d.get("attempts", 0)
        call.result = self._clean(d.get("result", ""))
        call.is_error = bool(d.get("is_error"))
        call.start, call.end = d.get("start", call.start), d.get("end", e.t)
        call.mode = d.get("mode", call.mode)
        err = d.get("error")
        call.error = self._clean(f"{err.get('type')}: {err.get('message')}") if isinstance(err, dict) else None

    def _end_entry(self, entry: StepEntry, e: Any, d: dict[str, Any]) -> None:
        """``step_finished``, ``run_finished``: when the step ended."""
        entry.end = e.t

    # --------------------------------------------------------------- helpers
    def _set_limits(self, budget: dict[str, Any]) -> None:
        for key in ("max_steps", "max_cost", "deadline_s"):
            if key in budget:
                self.limits[key] = budget[key]

    def _entry(self, step: int) -> StepEntry:
        """Step ``step``'s entry, folded up to now (for a change made at once: the stream's)."""
        self.dirty_steps.add(step)
        self.log.add(step)
        return self.log[step]

    def _call(self, entry: StepEntry, d: dict[str, Any]) -> CallEntry:
        call = self._calls.get(d.get("call_id", ""))
        if call is None:  # an event whose model_called we never saw (a late subscriber)
            call = CallEntry(d.get("call_id", ""), d.get("tool", ""), self._clean(d.get("args")), d.get("mode"))
            entry.calls.append(call)
            self._calls[call.call_id] = call
        return call

    # ------------------------------------------------------------ read side
    @property
    def stopped_by(self) -> GaugeName | None:
        """The gauge whose budget ended the run, if one did."""
        self.catch_up()
        return STOPPED_BY.get(self.reason) if self.outcome == "stopped" else None

    @property
    def finished(self) -> bool:
        self.catch_up()
        return self.outcome is not None

    @property
    def phase(self) -> str:
        """What a user reads as the run's phase: the driver's word wins while it applies."""
        self.catch_up()
        if self.outcome is not None:
            return self.engine_phase
        if self.control in ("pausing", "stopping"):
            return self.control
        if self.control == "paused":
            return "paused: tools awaiting approval" if self.engine_phase == "awaiting tools" else "paused"
        return self.engine_phase

    def gauge(self, name: GaugeName) -> Gauge:
        self.catch_up()
        used, limit = {
            "steps": (self.steps, self.limits["max_steps"]),
            "cost": (self.spent, self.limits["max_cost"]),
            "time": (self.elapsed, self.limits["deadline_s"]),
        }[name]
        fraction = None if not limit else used / limit
        stopped = self.stopped_by == name
        text = gauge_text(name, used, limit)
        if name == "cost" and self.waste.cache_used:
            text += f" · {self.cache_waste_text()}"
        return Gauge(name, used, limit, fraction, gauge_level(fraction, stopped), text, stopped)

    def cache_waste_text(self) -> str:
        """``"cache waste $0.0123 (2 busts)"``: what the run paid beyond what its prompt cache should have read."""
        self.catch_up()
        busts = self.waste.busts
        return f"cache waste {usd(self.waste.total)}" + (f" ({busts} bust{'s' * (busts != 1)})" if busts else "")

    def gauges(self) -> list[Gauge]:
        return [self.gauge("steps"), self.gauge("cost"), self.gauge("time")]

    def status_line(self) -> str:
        """One line: where the run is, and if it ended, why (with the numbers)."""
        self.catch_up()
        note = f" · {self.guard_note}" if self.guard_note else ""
        if self.outcome == "done":
            return "done" + note
        if self.outcome == "stopped":
            return f"stopped: {self.reason}" + (f" ({self.detail})" if self.detail else "") + note
        return self.phase

    def output_line(self) -> str:
        """The run's output tokens, and how many were reasoning: ``"1,200 tokens, of which thinking 800 (67%)"``
        (no clause before any reply reported thinking). Thinking is billed as output, so its share of the tokens
        is its share of the output bill."""
        self.catch_up()
        line = f"{self.output_tokens:,} tokens"
        if self.thinking_tokens:
            share = f" ({self.thinking_tokens / self.output_tokens:.0%})" if self.output_tokens else ""
            line += f", of which thinking {self.thinking_tokens:,}{share}"
        return line

    def take_dirty_steps(self) -> list[int]:
        self.catch_up()
        steps = sorted(self.dirty_steps)
        self.dirty_steps.clear()
        return steps


def _context_tokens(d: dict[str, Any], usage: dict[str, Any]) -> Any:
    """A ``model_called``'s context size: the engine's ``context_tokens`` (cache reads and writes included), else
    the reply's input tokens."""
    return d.get("context_tokens", usage.get("input_tokens", 0))


_HANDLERS: dict[str, Callable[[PanelState, Any, dict[str, Any]], None]] = {
    EventKind.RUN_STARTED: PanelState._run_started,
    EventKind.MODEL_REQUEST: PanelState._model_request,
    EventKind.MODEL_RETRY: PanelState._model_retry,
    EventKind.MODEL_DELTA: PanelState._model_delta,
    EventKind.MODEL_CALLED: PanelState._model_called,
    EventKind.TOOL_STARTED: PanelState._tool_started,
    EventKind.STEP_FINISHED: PanelState._step_finished,
    EventKind.RESUMED: PanelState._resumed,
    EventKind.RUN_FINISHED: PanelState._run_finished,
}
"""Each kind's part in the state, run as the event is folded (a kind of :data:`_ENTRY_KINDS` is then queued for its
step's log entry; ``tool_retry`` and ``tool_finished`` have no other part)."""

_ENTRY_HANDLERS: dict[str, Callable[[PanelState, StepEntry, Any, dict[str, Any]], None]] = {
    EventKind.MODEL_CALLED: PanelState._called_entry,
    EventKind.TOOL_STARTED: PanelState._started_entry,
    EventKind.TOOL_RETRY: PanelState._retry_entry,
    EventKind.TOOL_FINISHED: PanelState._finished_entry,
    EventKind.STEP_FINISHED: PanelState._end_entry,
    EventKind.RUN_FINISHED: PanelState._end_entry,
}
"""Each kind's part in its step's log entry, run when the entry is folded (what :meth:`PanelState._later` queues)."""

_ENTRY_KINDS = frozenset(_ENTRY_HANDLERS) - {EventKind.RUN_FINISHED}
"""The kinds queued for their own step's log entry (by :meth:`PanelState.apply` and :meth:`PanelState.catch_up`,
after the kind's handler); ``run_finished`` goes to the last step's, by its handler."""

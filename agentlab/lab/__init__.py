"""``Lab``: a run you can step, run, pause and stop from a notebook panel or from code.

The lab drives an :class:`agentlab.Run` and subscribes a panel to its events;
the engine knows nothing of either. Why it is shaped like this (measured on
ipykernel 6.31-7.4, ipywidgets 8.1):

* The run is a task on the kernel's running event loop, which gets a turn
  while the run goes on, so button clicks are handled and the panel redrawn.
  A plain loop in a cell would hold every click until it ended. The engine
  gives the turns: a step waiting on a model or a tool gives one by waiting,
  and a step whose tools answer at once gives one whenever anything is
  waiting on the loop (a click, a redraw that has come due) and at least
  every 2 ms (:mod:`agentlab._runtime.turns`). The drive adds one between
  steps only when the steps give none (:data:`TURN_S`). Blocking tools run on
  daemon threads the engine owns.
* The panel's subscriber only queues each event (it is the queue's
  ``append``: no Python code runs for the panel inside the engine's step).
  A ticker folds the queue and redraws every ``refresh_s`` while the run
  goes on, and the drive does at a pause or the end; the log's entries are
  folded only when they are drawn (:mod:`agentlab.lab._state`). So the panel
  adds little to a step, and nothing asks for a redraw by each event.
* Pause is the lab's job, not the engine's: the task checks a flag between
  steps. Until the step in flight ends, the panel says "pausing".
* Everything goes to widgets, never ``print()``, which a background task
  loses or sends to the wrong cell.
* One loop and one thread own the run and the panel: the loop the ``Lab`` was
  made on. ipykernel 7 may deliver a widget's click on a subshell's thread,
  which runs an event loop of its own; a click, an approval or a call from
  another thread is handed to the ``Lab``'s loop (:meth:`Lab._hop`). A run
  started on the subshell's loop once stepped there while Stop acted on the
  kernel's, and a Stop that raced the end of that step resumed the run it had
  just stopped (found by the browser test).

From a script (no running event loop) ``lab.run()`` and ``lab.step()`` simply
run to the next pause or the end and return the result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from types import EllipsisType
from typing import Any

from .._checks import whole
from .._model_label import model_label
from .._options import DEFAULTS, collect, documented
from .._runtime.driver import run_to_end
from ..approval import Ask
from ..budget import CostGuard
from ..clock import Clock
from ..errors import Policy
from ..events import Event, Subscriber
from ..loop import Run
from ..models.base import Model, capabilities
from ..pricing import Prices
from ..results import Result, Stopped
from ..tools import Tool
from ..vocab import RESUMABLE, EventKind
from ._state import PanelState

TICK_S = 0.5
"""While a step is in flight, refresh the elapsed-time gauge this often, events or not (the events that come are
drawn sooner: the ticker runs every ``refresh_s``, see ``Lab._tick``)."""

TURN_S = 0.01
"""Running, the drive gives the event loop a turn (a click, a redraw) between steps at least this often. The steps
give their own (see the module's docstring) unless they neither wait nor run tools (an instant model's replies
that pause their turn): Pause or Stop is then handled within this many seconds, and within 2 ms otherwise."""

REFRESH_FLOOR_S = 0.001
"""The ticker's shortest interval (``refresh_s=0`` asks for a redraw as often as the run allows)."""


def _require_ipywidgets() -> None:
    try:
        import ipywidgets  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "agentlab.Lab draws its panel with ipywidgets, which is not installed: "
            "pip install 'ipywidgets>=8.1' (in a script, agentlab.run() needs no widgets)"
        ) from exc


@documented
class Lab:
    """An agent run with a live control panel. Display it (last line of a cell) to see it.

    ``task``, ``tools``, ``model`` and the run options (listed below) go to
    :class:`agentlab.Run`.

    Args:
        pause_before_tools: start with "pause before tools" ticked: after the
            model asks for tools, stop so the calls can be read before they run.
        trace: write the run's events to the runs folder (``True``), to a
            folder (a path), or not at all (``False``); ``lab.trace`` reads it.
        refresh_s: redraw the panel at most this often while running.
        log_limit: how many recent steps the log shows (all are in the trace).
        chart: draw the live tokens/cost chart.
    """

    def __init__(
        self,
        task: str | Sequence[dict[str, Any]],
        tools: Iterable[Tool | Callable[..., Any]] | dict[str, Any] | None = None,
        *,
        pause_before_tools: bool = False,
        trace: bool | str | os.PathLike[str] = True,
        refresh_s: float = 0.2,
        log_limit: int = 50,
        chart: bool = True,
        model: Model | str,
        max_steps: int | None = DEFAULTS.max_steps,
        max_cost: float | None = DEFAULTS.max_cost,
        deadline_s: float | None = DEFAULTS.deadline_s,
        cost_guard: CostGuard = DEFAULTS.cost_guard,
        system: str | None = DEFAULTS.system,
        max_tokens: int = DEFAULTS.max_tokens,
        policy: Policy | None = DEFAULTS.policy,
        max_concurrency: int = DEFAULTS.max_concurrency,
        loop_nudge_at: int = DEFAULTS.loop_nudge_at,
        prices: Prices | None = DEFAULTS.prices,
        clock: Clock | None = DEFAULTS.clock,
        rng: random.Random | None = DEFAULTS.rng,
        run_id: str | None = DEFAULTS.run_id,
        subscribers: Iterable[Subscriber] = DEFAULTS.subscribers,
        approve: Any = DEFAULTS.approve,
        approval_stops_clock: bool = DEFAULTS.approval_stops_clock,
    ) -> None:
        _require_ipywidgets()
        if isinstance(refresh_s, bool) or not isinstance(refresh_s, (int, float)) or not refresh_s >= 0:
            raise ValueError(f"refresh_s must be a number of seconds >= 0, got {refresh_s!r}")
        whole("log_limit", log_limit)
        if trace is not True and trace is not False and not isinstance(trace, (str, os.PathLike)):
            raise TypeError(f"trace must be True, False or a folder path, got {type(trace).__name__}")
        from ._panel import Panel

        self._trace_dir = None if trace is True or trace is False else trace
        self._writer = None
        run_options = collect(locals())
        subscribers = list(run_options.pop("subscribers"))
        if trace is not False:
            from ..trace.writer import TraceWriter

            self._writer = TraceWriter(self._trace_dir)
            subscribers.insert(0, self._writer)
        queue: list[Event] = []  # the panel state's PanelState.pending (made below, once the run has its id)
        subscribers.append(queue.append)  # the panel's subscriber: a C call an event, no Python frame
        approve = run_options.pop("approve")  # a callback of the user's, or the panel's buttons
        run_options["approve"] = approve if callable(approve) else Ask(self._ask_in_panel, all_writes=approve is True)
        self.engine = Run(task, tools, model=model, subscribers=subscribers, **run_options)
        """The :class:`agentlab.Run` being driven."""
        # The panel keeps what the trace keeps: the same redaction, the same learned values. The writer, subscribed
        # first, runs that redactor over every event, so the panel may check a step's log entry when it draws it.
        if self._writer is not None:
            redactor = self._writer.redactor_for(self.engine.run_id)
            self.state = PanelState(redactor, checked_upstream=True, keep=log_limit)
        else:
            self.state = PanelState(keep=log_limit)
        s = self.state
        s.pending = queue
        s.run_id, s.task = self.engine.run_id, self.engine.task
        caps = capabilities(self.engine.model)
        s.model = model_label(self.engine.model.model, caps.name, billed=caps.bills)
        b = self.engine.budget
        s.limits = {"max_steps": b.max_steps, "max_cost": b.max_cost, "deadline_s": b.deadline_s}
        s.modes = {t.name: t.mode for t in self.engine.tools.values()}
        self.panel = Panel(
            s,
            on_click=self._clicked,
            pause_before_tools=pause_before_tools,
            refresh_s=refresh_s,
            log_limit=log_limit,
            chart=chart,
        )
        # the checkbox mirrored as a plain attribute, which the drive reads every step
        self._pause_before_tools = bool(pause_before_tools)
        self.panel.pause_before_tools.observe(self._pause_before_tools_changed, names="value")
        self.error: BaseException | None = None
        self.pending_approval: Any = None
        """The call waiting for Approve / Deny in the panel, if one is."""
        self._task: asyncio.Task[Any] | concurrent.futures.Future[Any] | None = None
        self._pause = False
        self._busy = False
        self._ticker: asyncio.TimerHandle | None = None
        self._tick_s = min(TICK_S, max(refresh_s, REFRESH_FLOOR_S))
        self._gauge_at = 0.0  # when a tick next refreshes the elapsed-time gauge (perf_counter)
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    # ------------------------------------------------------------ controls
    def step(self) -> Any:
        """One step, then pause. In a notebook returns the task (awaitable); in a script, the result."""
        return self._start(single=True, limits={})

    def run(
        self,
        *,
        max_steps: int | None | EllipsisType = ...,
        max_cost: float | None | EllipsisType = ...,
        deadline_s: float | None | EllipsisType = ...,
    ) -> Any:
        """Step until the run finishes or is paused.

        On a run stopped by a budget (or cancelled), continues it; pass raised
        limits (``max_cost=1.0``, ``max_steps=20``, ``deadline_s=120``; ``None``
        for no limit) to give it room. In a notebook returns the task; in a
        script, the result.
        """
        given = (("max_steps", max_steps), ("max_cost", max_cost), ("deadline_s", deadline_s))
        return self._start(single=False, limits={k: v for k, v in given if v is not ...})

    def pause(self) -> None:
        """Pause after the step in flight (the panel says "pausing" until then). From any thread."""
        if self._hop(self.pause):
            return
        if self.running and self.state.control == "running":
            self._pause = True
            self.state.control = "pausing"
            self.panel.render()

    def stop(self) -> Any:
        """Cancel the run: it ends ``Stopped("cancelled")``, interrupting a step in flight. From any thread."""
        if self._hop(self.stop, cancel_now=True):
            return None
        if self.engine.finished:
            return None
        self.engine.cancel()
        if self.running:
            self.state.control = "stopping"
            self.panel.render()
            return self._task
        return self._start(single=True, limits={}, resume=False)  # one (empty) step records the stop

    def _hop(self, method: Callable[[], Any], *, cancel_now: bool = False) -> bool:
        """Called off the ``Lab``'s loop: redo the call on that loop (the run and the widgets live there).

        ``cancel_now``: cancel the run at once from here too (a Stop), since the loop may be busy for a while.
        """
        loop = self._loop
        if loop is None or not loop.is_running() or _on_loop(loop):
            return False
        if cancel_now:
            self.engine.cancel()
        loop.call_soon_threadsafe(method)
        return True

    async def wait(self) -> Result | None:
        """Wait for the step or run in flight to pause or finish; the result, if finished.

        An error the run raised (a bug, not a stop) is raised here.
        """
        task = self._task
        if isinstance(task, concurrent.futures.Future):
            await asyncio.wrap_future(task)
        elif task is not None:
            await task
        return self.result

    def close(self) -> None:
        """Remove the panel and close the trace file."""
        self._stop_ticker()
        self.panel.close()
        if self._writer is not None:
            self._writer.close()

    # --------------------------------------------------------------- state
    @property
    def running(self) -> bool:
        """A step or run is in flight (its task may still be drawing the panel after it)."""
        return self._busy

    @property
    def result(self) -> Result | None:
        """The run's result once it has ended (``Done`` or ``Stopped``), else ``None``."""
        return self.engine.result

    @property
    def phase(self) -> str:
        """What the panel shows as the phase: calling model, running tools, pausing, paused, done, stopped..."""
        return self.state.phase

    @property
    def snapshot(self) -> Any:
        """The budgets as they stand now (steps, dollars, seconds used of each limit)."""
        return self.engine.snapshot

    @property
    def run_id(self) -> str:
        """The id of the run the panel drives (its trace file's name)."""
        return self.engine.run_id

    @property
    def trace(self) -> Any:
        """This run read back from its trace file (an `agentlab.trace.Trace`)."""
        if self._writer is None:
            raise RuntimeError("this Lab was made with trace=False, so there is no trace to read")
        from ..trace import load_run

        return load_run(self.engine.run_id, self._trace_dir)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget, plus a text fallback for where widgets cannot render."""
        from ._text import panel_text

        bundle = self.panel.widget._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = panel_text(self.state, pending=self.pending_approval)
        return bundle

    async def _ask_in_panel(self, request: Any) -> Any:
        """Approval through the panel: show the call and wait for Approve or Deny."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def answer(value: Any) -> None:  # a click: maybe on a subshell's thread (see the module's docstring)
            if _on_loop(loop):
                if not future.done():
                    future.set_result(value)
            else:
                loop.call_soon_threadsafe(answer, value)

        self.pending_approval = request
        self.panel.ask(request, answer)
        self.panel.flush()  # the gauges as they are while it waits
        try:
            return await future
        finally:
            self.pending_approval = None
            self.panel.ask(None, None)

    def __repr__(self) -> str:
        return f"<Lab run {self.engine.run_id} · {self.state.status_line()} · {self.engine.snapshot}>"

    # ------------------------------------------------------------- driving
    def _clicked(self, name: str) -> None:
        """A button was pressed, on the thread the kernel chose. Errors go to the panel (a handler's are invisible)."""
        if self._hop(functools.partial(self._clicked, name), cancel_now=name == "stop"):
            return
        try:
            self.panel.say("")
            if name == "pause":
                self.pause()
            elif name == "stop":
                self.stop()
            else:
                limits = self.panel.limits()
                if self._resumable():
                    self._start(single=name == "step", limits=limits)
                else:  # a fresh or paused run: what the fields say is the budget it runs under
                    self._set_limits(limits)
                    self._start(single=name == "step", limits={})
        except Exception as exc:
            self.panel.say(str(exc), error=True)

    def _set_limits(self, limits: dict[str, Any]) -> None:
        """Apply the panel's limits to a run that has not finished, before its next step (a field typed before the
        first Run counts, like one typed after a stop). The trace's ``run_started`` (or, for a run already under
        way, a ``limits_set`` note) records them."""
        run = self.engine
        if run.finished or self.running:
            return
        changes = {k: v for k, v in limits.items() if getattr(run.budget, k) != v}
        if not changes:
            return
        run.budget = replace(run.budget, **changes)
        self.state.limits = {**self.state.limits, **changes}
        if run.steps or run.result is not None:
            run.note("limits_set", limits=changes)

    def _resumable(self) -> bool:
        r = self.engine.result
        return isinstance(r, Stopped) and r.reason in RESUMABLE

    def _start(self, *, single: bool, limits: dict[str, Any], resume: bool = True) -> Any:
        """Drive the run (one step if ``single``) on the ``Lab``'s loop; a finished one resumed if ``resume``."""
        if self.running:
            return self._task
        if self.engine.finished:
            if not resume:
                return None
            if not self._resumable():
                raise RuntimeError(f"the run has finished ({self.engine.result!r}); make a new Lab to run again")
            self.engine.resume(**limits)
        elif limits:
            raise ValueError(
                f"limits ({', '.join(sorted(limits))}) can be changed only to continue a stopped run; "
                "this one has not stopped"
            )
        self._pause = False
        self._busy = True
        self.state.control = "running"
        home = self._loop if self._loop is not None and self._loop.is_running() else None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None and (home is None or loop is home):
            self._task = loop.create_task(self._drive(single))
            self.panel.render()  # a click gets its answer at once, not at the next redraw
            return self._task
        if home is not None:  # called from another thread (or another thread's loop)
            self._task = asyncio.run_coroutine_threadsafe(self._drive(single), home)
            return self._task
        # A script: the one driver (agentlab._runtime.driver) runs it, like agentlab.run(); a Ctrl-C stops the run.
        return run_to_end(self._drive(single), cancel=self.engine.cancel, result=lambda: self.engine.result)

    async def _drive(self, single: bool) -> Result | None:
        run = self.engine
        self._start_ticker()
        try:
            turn = time.perf_counter()
            while run.result is None:
                # run.step() without the StepRecord, which nobody here reads (the panel follows the events)
                await run.advance(pause_before_tools=self._pause_before_tools)
                if run.result is not None or single or self._pause or run.phase == "awaiting tools":
                    break
                if time.perf_counter() - turn >= TURN_S:  # a turn of the drive's own, for steps that give none (TURN_S)
                    await asyncio.sleep(0)
                    turn = time.perf_counter()
        except BaseException as exc:
            self.error = exc
            self.panel.say(f"the run raised {type(exc).__name__}: {exc}", error=True)
            raise
        finally:
            # Not busy before the final redraw: a click handled while it is drawn
            # (the kernel can deliver one then) must start a new drive, not be dropped.
            self._busy = False
            self._stop_ticker()
            self._pause = False
            self.state.catch_up()  # the run's last events first: the lines below have the last word
            self.state.engine_phase = run.phase
            self.state.elapsed = run.elapsed
            self.state.control = None if run.finished else "paused"
            if not run.finished:
                run.note(EventKind.PAUSED, phase=run.phase)  # the trace shows where the user paused
            if run.finished and self._writer is not None:
                self._writer.close()  # reopened (append) if the run is continued
            self.panel.flush()
        return run.result

    def _pause_before_tools_changed(self, change: Any) -> None:
        self._pause_before_tools = bool(change["new"])

    def _start_ticker(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._gauge_at = time.perf_counter() + TICK_S
        self._ticker = loop.call_later(self._tick_s, self._tick)

    def _tick(self) -> None:
        """While the drive runs, every ``refresh_s`` (at most :data:`TICK_S`): the events queued since the last
        redraw are drawn (the subscriber only queues them; nothing folds them between steps), a step in flight's
        included (a model streaming its reply, tools running); and every :data:`TICK_S`, events or not, the
        elapsed-time gauge. The panel coalesces the redraws."""
        state = self.state
        now = time.perf_counter()
        if now >= self._gauge_at:
            self._gauge_at = now + TICK_S
            state.catch_up()
            state.elapsed = self.engine.elapsed
            state.dirty = True
            self.panel.changed()
        elif state.pending:
            self.panel.changed()
        self._ticker = asyncio.get_running_loop().call_later(self._tick_s, self._tick)

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Is this code running on ``loop`` (its thread, inside it)?"""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False

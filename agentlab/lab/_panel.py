"""The widgets: draw a :class:`PanelState`, and turn clicks into calls.

No engine logic here (the ``Lab`` drives the run) and no event mapping (that
is :mod:`agentlab.lab._state`). Redraws are coalesced: :meth:`Panel.changed` is
called when the state may have changed (by the ``Lab``'s drive between steps, and by its
ticker while a step is in flight) and is O(1); it redraws at most every
``refresh_s`` seconds, and the chart at most every ``chart_s`` seconds. The
interval also stretches to 20× what the last redraw cost (40× for the chart), so
however slow the frontend or the chart is, redraws take a few percent of the run's time.
:meth:`Panel.flush` draws everything now (at pause and at the end).

Everything is written to widgets, never to stdout: ``print()`` from a task
running in the background is lost or lands in another cell.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ..vocab import RESUMABLE
from ._chart import chart_svg
from ._html import BAR_STYLE, gauge_html, status_html, step_html
from ._state import PanelState

ADAPT = 20.0
"""Redraw no more often than every ADAPT × (the last redraw's own cost)."""
CHART_ADAPT = 40.0
"""The chart waits longer: each update writes every point again, so its share of the run stays a few percent."""

BUTTONS = ("step", "run", "pause", "stop")
LIMIT_FIELDS = (("max_steps", "max steps"), ("max_cost", "max cost (USD)"), ("deadline_s", "deadline (s)"))


def enabled_buttons(state: PanelState) -> dict[str, bool]:
    """Which controls make sense now (pure: tested without widgets)."""
    if state.outcome == "done":
        return dict.fromkeys(BUTTONS, False)
    if state.outcome == "stopped":
        again = state.reason in RESUMABLE
        return {"step": again, "run": again, "pause": False, "stop": False}
    busy = state.control in ("running", "pausing", "stopping")
    return {"step": not busy, "run": not busy, "pause": state.control == "running", "stop": state.control != "stopping"}


def format_limit(value: Any) -> str:
    return "" if value is None else f"{value:g}"


def parse_limit(name: str, text: str) -> int | float | None:
    """A limit field's text as a number; empty means no limit. Errors name the field."""
    text = text.strip().replace("$", "")
    if text in ("", "∞", "none", "None"):
        return None
    try:
        value = int(text) if name == "max_steps" else float(text)
    except ValueError:
        kind = "a whole number" if name == "max_steps" else "a number"
        raise ValueError(f"{name} must be {kind} (empty for no limit), got {text!r}") from None
    if value <= 0:
        raise ValueError(f"{name} must be > 0 (empty for no limit), got {text!r}")
    return value


class Panel:
    """The ipywidgets panel. ``panel.widget`` is what gets displayed."""

    def __init__(
        self,
        state: PanelState,
        *,
        on_click: Callable[[str], None],
        pause_before_tools: bool = False,
        refresh_s: float = 0.2,
        chart_s: float = 0.5,
        log_limit: int = 50,
        chart: bool = True,
        now: Callable[[], float] = time.perf_counter,
    ) -> None:
        import ipywidgets as w

        self.state = state
        self.refresh_s, self.chart_s, self.log_limit = refresh_s, chart_s, log_limit
        self._now = now
        self.renders = 0
        self._next_at = 0.0
        self._chart_next_at = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = 0.0  # when the scheduled redraw runs (``now``'s clock)
        self._limits_shown: dict[str, Any] | None = None

        icons = {"step": "step-forward", "run": "play", "pause": "pause", "stop": "stop"}
        tips = {
            "step": "One step (a model call and its tools), then pause",
            "run": "Step until the run finishes or you pause it",
            "pause": "Pause after the step in flight",
            "stop": "Cancel the run: Stopped('cancelled')",
        }
        self.buttons: dict[str, Any] = {}
        for name in BUTTONS:
            b = w.Button(
                description=name.capitalize(), icon=icons[name], tooltip=tips[name], layout=w.Layout(width="90px")
            )
            b.add_class(f"agentlab-button-{name}")
            b.on_click(lambda _b, name=name: on_click(name))
            self.buttons[name] = b
        self.buttons["stop"].button_style = "danger"
        self.buttons["run"].button_style = "success"
        self.pause_before_tools = w.Checkbox(
            value=pause_before_tools, description="pause before tools", indent=False, layout=w.Layout(width="auto")
        )
        self.pause_before_tools.add_class("agentlab-pause-before-tools")
        self.limit_fields = {
            key: w.Text(
                description=label,
                placeholder="∞",
                layout=w.Layout(width="190px"),
                style={"description_width": "initial"},
            )
            for key, label in LIMIT_FIELDS
        }
        for key, f in self.limit_fields.items():
            f.add_class(f"agentlab-limit-{key}")
        self.message = w.HTML()
        self.message.add_class("agentlab-message")

        self.status = w.HTML()
        self.status.add_class("agentlab-status-box")
        self.bars: dict[str, Any] = {}
        self.gauge_texts: dict[str, Any] = {}
        self.gauge_rows: dict[str, Any] = {}
        rows = []
        for name, label in (("steps", "steps"), ("cost", "cost"), ("time", "time")):
            bar = w.FloatProgress(value=0.0, min=0.0, max=1.0, layout=w.Layout(width="220px"))
            text = w.HTML()
            row = w.HBox([w.HTML(f"<b>{label}</b>", layout=w.Layout(width="50px")), bar, text])
            row.add_class(f"agentlab-gauge-{name}")
            self.bars[name], self.gauge_texts[name], self.gauge_rows[name] = bar, text, row
            rows.append(row)
        # The chart is SVG markup in an HTML widget, drawn by the browser (_chart.py): a fresh one is empty axes.
        self.chart = w.HTML(chart_svg([], [], [])) if chart else None
        if self.chart is not None:
            self.chart.add_class("agentlab-chart-box")
        # The log, newest step first, in one scrolling box of two HTML widgets: the newest step (redrawn while its
        # reply streams, up to every refresh_s) and the steps before it (redrawn when the log moves on a step). A
        # redraw while a reply streams then sends the browser that step alone, not every earlier step's results
        # again (each up to FULL_CHARS). Not a widget per step: one costs ~0.7 ms to create.
        self.log_newest = w.HTML(layout=w.Layout(flex="none"))
        self.log_newest.add_class("agentlab-log-newest")
        self.log_earlier = w.HTML(layout=w.Layout(flex="none"))
        self.log_earlier.add_class("agentlab-log-earlier")
        self.log = w.VBox(
            [self.log_newest, self.log_earlier], layout=w.Layout(max_height="420px", overflow="auto", width="100%")
        )
        self.log.add_class("agentlab-log")
        self._step_html: dict[int, str] = {}
        self._newest_drawn: int | None = None  # the step log_newest shows; the ones before it are in log_earlier

        # A write waiting for a human: the call and Approve / Deny (hidden otherwise).
        self.approval_text = w.HTML()
        self.approve_button = w.Button(
            description="Approve", icon="check", button_style="success", layout=w.Layout(width="110px")
        )
        self.deny_button = w.Button(
            description="Deny", icon="times", button_style="danger", layout=w.Layout(width="110px")
        )
        self.approve_button.add_class("agentlab-approve")
        self.deny_button.add_class("agentlab-deny")
        self._answer: Any = None
        self.approve_button.on_click(lambda _b: self._answer and self._answer(True))
        self.deny_button.on_click(lambda _b: self._answer and self._answer("denied in the panel"))
        self.approval = w.VBox(
            [self.approval_text, w.HBox([self.approve_button, self.deny_button])],
            layout=w.Layout(display="none", border="2px solid #d4a72c", padding="4px"),
        )
        self.approval.add_class("agentlab-approval")
        top = [
            w.HBox([*self.buttons.values(), self.pause_before_tools]),
            w.HBox(list(self.limit_fields.values())),
            self.message,
            self.status,
            self.approval,
        ]
        middle = w.HBox([w.VBox(rows), *([self.chart] if self.chart is not None else [])])
        self.widget = w.VBox([*top, middle, self.log], layout=w.Layout(border="1px solid #d0d7de", padding="6px"))
        self.widget.add_class("agentlab-panel")
        self.render()
        self._chart_next_at = self._now() + chart_s  # a run shorter than this draws one frame, at the end

    # ------------------------------------------------------------- redraws
    def changed(self) -> None:
        """The state changed: redraw now if due, else once later (coalesced). O(1).

        With a redraw scheduled by the time one is due there is nothing to decide: it draws this change too (it
        runs at the event loop's next turn, which the ``Lab`` gives between steps at least every millisecond)."""
        if self._handle is not None and self._handle_at <= self._next_at:
            return
        now = self._now()
        if now >= self._next_at:
            self.render()
        elif self._handle is None:
            self._schedule(self._next_at)

    def flush(self) -> None:
        """Draw everything now, chart included (at pause, stop and the end)."""
        self._cancel_timer()
        self.render(chart_due=True)

    def close(self) -> None:
        """Close every widget of the panel, children first: a container left open around a closed child
        would make a notebook's saved widget state fail to serialise."""
        self._cancel_timer()
        if self.chart is not None:
            self.chart.close()
        _close_tree(self.widget)

    def _schedule(self, at: float) -> None:
        """Redraw at ``at`` (``now``'s clock), from the running event loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # nobody to wake us: the driver flushes at the end
        self._handle = loop.call_later(max(at - self._now(), 0.0), self._deferred)
        self._handle_at = at

    def _deferred(self) -> None:
        self._handle = None
        self.render()

    def _cancel_timer(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def render(self, *, chart_due: bool = False) -> None:
        """Map the state onto the widgets; touch only what changed."""
        t0 = self._now()
        s = self.state
        s.catch_up()  # the events queued since the last redraw (PanelState.pending), its cost in this one's
        s.dirty = False
        self.renders += 1
        for g in s.gauges():
            bar = self.bars[g.name]
            with bar.hold_sync():  # its value and colour in one message to the front end, not two
                bar.value = 0.0 if g.fraction is None else min(g.fraction, 1.0)
                bar.bar_style = BAR_STYLE[g.level]
            self.gauge_texts[g.name].value = gauge_html(g)
            row = self.gauge_rows[g.name]
            for level in ("idle", "ok", "warn", "danger", "stopped"):
                cls = f"agentlab-level-{level}"
                if level == g.level:
                    row.add_class(cls)
                elif cls in row._dom_classes:
                    row.remove_class(cls)
        for key, on in enabled_buttons(s).items():
            self.buttons[key].disabled = not on
        self.pause_before_tools.disabled = s.outcome == "done"
        if s.limits != self._limits_shown:
            self._limits_shown = dict(s.limits)
            for key, f in self.limit_fields.items():
                f.value = format_limit(s.limits.get(key))
        self._render_log()
        # The status line last: a page that reads "stopped" has already been sent the buttons, gauges and log
        # of the same moment (the browser test waits on the status, then reads the rest).
        self.status.value = status_html(s)
        self._next_at = t0 + max(self.refresh_s, ADAPT * (self._now() - t0))
        if self.chart is not None and s.chart_dirty:
            if chart_due or t0 >= self._chart_next_at:
                self._render_chart()
            elif self._handle is None:
                self._schedule(self._chart_next_at)

    def _render_log(self) -> None:
        steps = self.state.take_dirty_steps()
        if not steps:
            return
        log = self.state.log
        newest = log.newest
        if newest is None:
            return
        oldest_shown = newest - self.log_limit + 1
        for n in steps:  # reading an entry folds it (its secret checks): only the steps drawn are read
            if n >= oldest_shown and n in log:
                self._step_html[n] = step_html(log[n])
        self.log_newest.value = self._step_html.get(newest, "")
        if newest == self._newest_drawn and steps == [newest]:
            return  # only the newest step changed (a reply streaming): the earlier ones are drawn already
        self._newest_drawn = newest
        for n in [k for k in self._step_html if k < oldest_shown]:
            del self._step_html[n]
        parts = [self._step_html[k] for k in sorted(self._step_html, reverse=True) if k != newest]
        hidden = log.dropped + len(log) - sum(1 for k in range(oldest_shown, newest + 1) if k in log)
        if hidden:
            parts.append(
                f"<i class='agentlab-log-note' style='color:#57606a'>… {hidden} earlier step(s) not shown: see "
                "lab.trace</i>"
            )
        self.log_earlier.value = "".join(parts)

    @property
    def log_html(self) -> str:
        """The log as one HTML string, newest step first: what its two widgets show, in order."""
        return self.log_newest.value + self.log_earlier.value

    def _render_chart(self) -> None:
        assert self.chart is not None  # only a panel with a chart draws one
        t0 = self._now()
        s = self.state
        s.chart_dirty = False
        self.chart.value = chart_svg(s.chart_steps, s.chart_tokens, s.chart_cost)
        self._chart_next_at = t0 + max(self.chart_s, CHART_ADAPT * (self._now() - t0))

    # ------------------------------------------------------------- reading
    def limits(self) -> dict[str, int | float | None]:
        """The limit fields, parsed (``ValueError`` naming the field if one is bad)."""
        return {key: parse_limit(key, f.value) for key, f in self.limit_fields.items()}

    def ask(self, request: Any, answer: Any) -> None:
        """Show a call waiting for approval (``request``), or hide the box (``None``).

        ``answer(value)`` gets ``True`` (Approve) or a reason string (Deny).
        The other buttons and the gauges keep working meanwhile.
        """
        import json

        from ._html import esc

        self._answer = answer
        if request is None:
            self.approval.layout.display = "none"
            self.approval_text.value = ""
            return
        args = json.dumps(self.state.redactor.clean(request.args), ensure_ascii=False, indent=1, default=str)
        self.approval_text.value = (
            f"<b>approve this write?</b> step {esc(request.step)}: <code>{esc(request.tool)}</code>"
            f"<pre style='margin:2px 0'>{esc(args)}</pre>"
        )
        self.approval.layout.display = "flex"

    def say(self, text: str, *, error: bool = False) -> None:
        from ._html import esc

        colour = "#cf222e" if error else "#57606a"
        self.message.value = f"<span style='color:{colour}'>{esc(text)}</span>" if text else ""


def _close_tree(widget: Any) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    for part in (getattr(widget, "layout", None), getattr(widget, "style", None)):  # widgets of their own
        if part is not None and hasattr(part, "close"):
            part.close()
    widget.close()

"""Small builders shared by the engine tests (no mocks: real offline models)."""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import agentlab as al


class Recorder:
    """A subscriber that keeps every event."""

    def __init__(self) -> None:
        self.events: list[al.Event] = []

    def __call__(self, event: al.Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def of(self, kind: str) -> list[al.Event]:
        return [e for e in self.events if e.kind == kind]


class Seen:
    """A model function wrapper that records a deep copy of what each call received."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.requests: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        self.requests.append(copy.deepcopy(messages))
        return self.fn(messages, tools)


def last_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool_result blocks of the latest user message."""
    content = messages[-1]["content"]
    assert isinstance(content, list), messages[-1]
    return [b for b in content if b.get("type") == "tool_result"]


ONE_TOOL_STEP = [
    "model_request",
    "model_called",
    "tool_started",
    "tool_finished",
    "tool_results",
    "step_finished",
]
"""The events of a step with one tool call, in order (between a run's ``run_started`` and ``run_finished``)."""

PRICES = al.Prices(input=3.0, output=15.0)
"""Test prices: $3 / $15 per million tokens (Claude Sonnet's)."""


@al.tool(mode="read")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def within(seconds: float, fn: Any, why: str = "") -> Any:
    """Run ``fn()`` on a thread and fail (instead of hanging the suite) if it has not returned in time;
    its value, or what it raised. ``why`` says what a hang would mean."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s" + (f": {why}" if why else "")
    if "error" in box:
        raise box["error"]
    return box["value"]


async def hang() -> None:
    """Wait forever, spending no time: a tool or model call that never answers, for a deadline or a
    timeout to cut (the test waits on the run's result, never on this)."""
    await asyncio.Event().wait()


ROOT = Path(__file__).resolve().parent.parent


def killed_when_it_says(expected: bytes, script: str, *args: str, why: str, env: dict[str, str] | None = None) -> bytes:
    """Run ``python -c script *args`` (the package importable), wait for the first line it prints (no sleeps: the
    child says when it has reached the point to be killed at; at most 120 s, failing with ``why``), SIGKILL it
    there and return that line. ``expected``: what the line must start with; a child that ended early, or said
    something else, fails the test with its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        said = within(120, proc.stdout.readline, why)  # generous: a noisy machine
        assert said.startswith(expected), (
            f"the child ended early or said {said!r} (exit {proc.poll()}): "
            f"{proc.stderr.read().decode(errors='replace')[-2000:]}"
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return said


class WrappedFile:
    """A trace file stand-in that passes everything but ``write`` (and what a subclass overrides) to the real
    file: the writer's failure tests script how the disk answers."""

    def __init__(self, real: Any) -> None:
        self.real, self.name = real, real.name

    def write(self, data: Any) -> int:
        return self.real.write(data)

    def truncate(self, size: int) -> int:
        return self.real.truncate(size)

    def fileno(self) -> int:
        return self.real.fileno()

    def close(self) -> None:
        self.real.close()

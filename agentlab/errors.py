"""The three kinds of failure, and the one table that decides which is which.

The seed article's central point: a failure is *recoverable* (tell the model,
naming the next step), *retryable* (retry invisibly with backoff) or *fatal*
(stop the run; the model is never told). Tools raise the exceptions below;
:func:`classify` is the only place that maps an exception to a kind, so a
policy change (say, treating a permission denial as recoverable for a lesson)
is one setting, not a hunt through the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._checks import is_seconds, is_whole
from .redact import scrub

Kind = Literal["recoverable", "retryable", "fatal"]


class AgentlabError(Exception):
    """Base class of every error agentlab raises or understands.

    One tree: an error that is also a builtin kind subclasses both (``MalformedReply`` is a
    ``ValueError``, ``TraceWriteError`` an ``OSError``), so ``except AgentlabError`` catches every
    one of them and existing ``except ValueError`` clauses keep working. An error that came from an
    HTTP API carries its status and request id in typed fields (``None`` otherwise).
    """

    status_code: int | None = None
    request_id: str | None = None


class ToolError(AgentlabError):
    """Recoverable: the model gets ``message`` plus ``hint`` (its next step).

    Raise it for "record not found", "bad argument", a failed validation:
    things the model can fix by asking differently.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def for_model(self) -> str:
        """The message the model is shown: the error and, when there is one, the hint for its next step."""
        return f"{self.message} Next step: {self.hint}" if self.hint else self.message


class RetryableError(AgentlabError):
    """Retryable: infrastructure noise (429, 503, a dropped socket).

    Retried inside the loop with backoff; ``retry_after`` (seconds), when the
    upstream said how long to wait, is honoured. The model hears of it only
    when the retries run out, and then as a recoverable error.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class FatalError(AgentlabError):
    """Fatal: nothing the model can do fixes it; the run stops at once."""


class PermissionDenied(FatalError):
    """The caller lacks a right. Never handed to the model to work around."""


class AuthenticationFailed(FatalError):
    """Credentials were refused (a 401, a bad key)."""


class UnknownTool(FatalError):
    """The model asked for a tool that is not registered."""


class OutcomeUnknown(FatalError):
    """A call was sent and its answer lost (the connection dropped, the server died): it may have run.

    Fatal, never retried, for a tool not known to be safe to repeat: sending
    a write again could apply it twice. The run stops and its
    detail says the outcome is unknown, so a person checks before re-running.
    """


class Escaped(AgentlabError):
    """A tool (or model) raised something that must not travel as itself.

    ``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``, a
    ``CancelledError`` the code raised on its own, and ``StopIteration``
    (which a coroutine or a future cannot carry) would end the program, hang a
    future or be mistaken for a cancellation of the step. The engine catches
    them where the code runs and carries them as this ordinary exception;
    ``original`` is what was raised. :func:`classify` gives the original's
    kind (``Policy.base_exceptions`` for the ``BaseException`` family).
    """

    def __init__(self, original: BaseException, where: str = "the tool") -> None:
        self.original = original
        self.where = where
        super().__init__(f"{where} raised {type(original).__name__}{_args_of(original)}")


def _args_of(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f" (exit code {safe_str(exc.code)})"
    text = safe_str(exc)
    return f": {text}" if text else ""


def safe_str(value: object) -> str:
    """``str(value)``, or a note saying it failed: an exception's own ``__str__`` may raise."""
    try:
        return str(value)
    except BaseException as exc:  # noqa: BLE001 - whatever a user's __str__ does, we must say something
        try:
            name = type(exc).__name__
        except BaseException:  # noqa: BLE001
            name = "an exception"
        return f"<{type(value).__name__} whose str() raised {name}>"


class ModelError(AgentlabError):
    """The model endpoint refused the request for a reason a retry cannot fix.

    ``reason`` becomes the run's stop reason (``"model error"``,
    ``"context window"``), so the result says what went wrong.
    """

    def __init__(self, message: str, *, reason: str = "model error") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Policy:
    """How failures are treated. The defaults follow the article's prose.

    Attributes:
        unknown_tool: kind of a call to an unregistered tool. The article's
            prose says fatal (its code sketch says otherwise).
        permission_denied: kind of :class:`PermissionDenied` / ``PermissionError``.
            ``"recoverable"`` exists only to *show* the classic bug: the model
            then spends steps probing for another route to the same data.
        unclassified: kind of any other exception: a bug in a tool, so fatal
            unless you say otherwise.
        base_exceptions: kind of what a tool raises outside the ``Exception``
            family (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``,
            its own ``CancelledError``): fatal unless you say otherwise, and
            never allowed to end the program or the event loop.
        max_attempts: attempts per call, the first included, for retryables.
        base_delay: first backoff wait in seconds; doubled each attempt.
        max_delay: cap on a single backoff wait, in seconds.
        jitter: fraction of each wait drawn at random (0 = none, 1 = "full").
    """

    unknown_tool: Kind = "fatal"
    permission_denied: Kind = "fatal"
    unclassified: Kind = "fatal"
    base_exceptions: Kind = "fatal"
    max_attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        for name in ("unknown_tool", "permission_denied", "unclassified", "base_exceptions"):
            if getattr(self, name) not in ("recoverable", "retryable", "fatal"):
                raise ValueError(f"Policy.{name} must be 'recoverable', 'retryable' or 'fatal'")
        if not is_whole(self.max_attempts, 1):
            raise ValueError(f"Policy.max_attempts must be an int >= 1 (1 = no retry), got {self.max_attempts!r}")
        for name in ("base_delay", "max_delay"):
            if not is_seconds(getattr(self, name)):
                raise ValueError(f"Policy.{name} must be a finite number of seconds >= 0, got {getattr(self, name)!r}")
        if not is_seconds(self.jitter) or self.jitter > 1:
            raise ValueError(f"Policy.jitter must be a number within [0, 1], got {self.jitter!r}")


def classify(exc: BaseException, policy: Policy) -> Kind:
    """The policy table: which kind of failure ``exc`` is."""
    if isinstance(exc, Escaped):
        inner = exc.original
        return classify(inner, policy) if isinstance(inner, Exception) else policy.base_exceptions
    if isinstance(exc, (PermissionDenied, PermissionError)):
        return policy.permission_denied
    if isinstance(exc, UnknownTool):
        return policy.unknown_tool
    if isinstance(exc, (FatalError, ModelError)):
        return "fatal"
    if isinstance(exc, ToolError):
        return "recoverable"
    if isinstance(exc, (RetryableError, TimeoutError, ConnectionError)):
        return "retryable"
    return policy.unclassified


class TraceWriteError(AgentlabError, OSError):
    """The trace could not be written (disk full, file too large, permission lost, another writer):
    the run stops with reason ``"trace write failed"`` (raised by :class:`agentlab.trace.TraceWriter`)."""


def describe(exc: BaseException) -> str:
    """A one-line ``Type: message`` for results, traces and the model."""
    if isinstance(exc, ToolError):
        text = safe_str(exc.for_model())
    elif isinstance(exc, Escaped):
        text = safe_str(exc)
    else:
        text = f"{exc.__class__.__name__}: {safe_str(exc) or exc.__class__.__name__}"
    return scrub(text)  # a secret quoted in an error reaches neither the trace nor the model

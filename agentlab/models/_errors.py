"""SDK errors mapped to agentlab's errors, in one place.

Every failure of a call through the ``anthropic`` SDK (a message, a stream, a
token count) passes :func:`sdk_error`, which applies the policy table
(:func:`api_error`): billing and spend limits, 401 and 403 are fatal; 413 is
the request's byte size; a prompt too long for the context stops with
"context window"; ``x-should-retry`` is obeyed; 408, 409, 429 and 5xx are
retryable with the server's ``retry-after``; an ``error`` event inside a
stream is handled like its HTTP status and described by what the API said.
No SDK exception is chained to what it returns (its request holds the auth
headers), and secrets are scrubbed from every message.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from ..errors import (
    AgentlabError,
    AuthenticationFailed,
    FatalError,
    ModelError,
    PermissionDenied,
    RetryableError,
)
from ..netguard import NetworkBlocked
from ..redact import scrub  # the one owner of scrubbing

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The Messages API refuses a request body larger than this with HTTP 413."""

STREAM_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "timeout_error": 408,
    "conflict_error": 409,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""The HTTP status matching an ``error`` event's type, so a stream error is handled like that status."""


SPEND_LIMIT_CODES = frozenset(
    {
        "enforced_spend_limit_reached",
        "contract_spend_limit_reached",
        "linked_organization_spend_limit_reached",
        "linked_organization_billing_unavailable",
    }
)
"""Error codes a retry cannot fix: the account has hit a spending or billing wall."""

_TOO_LONG = re.compile(
    r"prompt is too long|context (window|length|limit)|exceeds? (the )?(model'?s? )?context|too many (input )?tokens",
    re.IGNORECASE,
)


def _after_shown(err: AgentlabError, shown: int, what: str) -> AgentlabError:
    """A stream failure after fragments were shown is not retried: the watcher saw a reply that will not come."""
    if shown == 0 or not isinstance(err, RetryableError):
        return err
    out = ModelError(
        f"{what} after {shown} fragments of the reply were shown; not retried (a new reply would not match them): "
        f"{err}",
        reason="model error",
    )
    for attr in ("status_code", "request_id"):
        if hasattr(err, attr):
            setattr(out, attr, getattr(err, attr))
    return out


def _lost(err: AgentlabError, shown: int, what: str) -> AgentlabError:
    """A stream that broke after the API began its reply may have been billed: not retried, and marked so
    the engine charges the call at its worst case (``maybe_billed``)."""
    out = ModelError(
        f"{what} after the Messages API began the reply ({shown} fragments shown): the reply was lost in transit "
        f"and may have been billed, so it is charged at its worst case and not retried: {err}",
        reason="model error",
    )
    out.maybe_billed = True  # type: ignore[attr-defined]
    return out


def _maybe_billed(err: RetryableError) -> RetryableError:
    """A non-streamed request reached the API and its answer was lost: retried, but only after the engine
    charges the lost attempt at its worst case (``maybe_billed``) and the cost guard clears the retry."""
    out = RetryableError(
        f"{err.message} after the request reached the Messages API: the reply was lost in transit and may have "
        "been billed, so it is charged at its worst case before any retry",
        retry_after=err.retry_after,
    )
    out.maybe_billed = True  # type: ignore[attr-defined]
    return out


def _never_sent(cause: BaseException | None) -> bool:
    """The request cannot have reached the API: the failure was in connecting (or in the local guard)."""
    import httpx2

    connecting = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.ProxyError)
    local = (httpx2.UnsupportedProtocol, ConnectionRefusedError, NetworkBlocked, ValueError)  # ValueError: built here
    return isinstance(cause, (*connecting, *local))


def _read_body(exc: Any) -> Any:
    """The JSON body of an HTTP error raised while opening a stream (the SDK may leave it unread)."""
    body = getattr(exc, "body", None)
    if body is not None:
        return body
    try:
        return json.loads(exc.response.text)
    except Exception:
        return None


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, else ``retry-after`` (seconds or a date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000
            return value if value > 0 else None
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra is None:
        return None
    try:
        value = float(ra)
    except ValueError:
        parsed = email.utils.parsedate_tz(ra)
        if parsed is None:
            return None
        value = email.utils.mktime_tz(parsed) - (time.time() if now is None else now)
    return value if value > 0 else None


def api_error(
    status: int,
    headers: Mapping[str, str],
    body: Any,
    *,
    secrets: tuple[str, ...] = (),
    request_bytes: int | None = None,
    in_stream: bool = False,
) -> AgentlabError:
    """The agentlab error for an HTTP error from the Messages API: the policy table for the model.

    Billing/spend limits, 401 and 403 are fatal; HTTP 413 is the request's
    *byte size* over the API's limit (stops with "request too large", the size
    given); a prompt too long for the model's context stops with "context
    window"; ``x-should-retry`` is obeyed; 408,
    409, 429 and 5xx are retryable (with the server's ``retry-after``); any
    other 4xx stops with "model error" and the API's message. ``in_stream``:
    the error came as an event inside a streamed reply (after a 200), so it is
    described by what the API said, never by the local request's size.
    """
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    err_type = error.get("type") if isinstance(error.get("type"), str) else None
    api_message = (
        error.get("message") if isinstance(error.get("message"), str) else (body if isinstance(body, str) else "")
    )
    details = error.get("details")
    details = details if isinstance(details, dict) else {}
    code = details.get("error_code") if isinstance(details.get("error_code"), str) else None
    request_id = headers.get("request-id")
    what = " ".join(x for x in (str(status), err_type, f"[{code}]" if code else None) if x)
    text = scrub(f"{what}: {api_message or 'no message'}" + (f" (request {request_id})" if request_id else ""), secrets)

    err: AgentlabError
    should_retry = (headers.get("x-should-retry") or "").lower()
    if status == 402 or err_type == "billing_error" or code in SPEND_LIMIT_CODES:
        err = FatalError(f"billing: {text}; a retry cannot fix this")
    elif status == 401:
        err = AuthenticationFailed(f"the API key was refused: {text}")
    elif status == 403:
        err = PermissionDenied(f"permission denied by the Messages API: {text}")
    elif in_stream and (status == 413 or err_type == "request_too_large"):
        err = ModelError(f"the Messages API said, inside the streamed reply: {text}", reason="request too large")
    elif status == 413 or err_type == "request_too_large":
        size = f"the request is {request_bytes:,} bytes" if request_bytes else "the request body is too large"
        err = ModelError(
            f"{size}, over the Messages API's request size limit ({MAX_REQUEST_BYTES // (1024 * 1024)} MB): {text}; "
            "send fewer or smaller documents/images (this is the byte size, not the context window)",
            reason="request too large",
        )
    elif status == 400 and _TOO_LONG.search(api_message or ""):
        err = ModelError(f"the request is too large for the model's context: {text}", reason="context window")
    elif should_retry == "true" or (should_retry != "false" and (status in (408, 409, 429) or status >= 500)):
        err = RetryableError(text, retry_after=retry_after(headers))
    elif should_retry == "false" and status >= 500:
        err = ModelError(f"{text} (the server said not to retry)", reason="model error")
    else:
        err = ModelError(text, reason="model error")
    err.status_code = status  # typed fields of AgentlabError
    err.request_id = request_id
    return err


def sdk_error(
    exc: BaseException,
    *,
    secrets: tuple[str, ...],
    what: str = "the Messages API",
    timeout: float | None = None,
    request_bytes: int | None = None,
    shown: int = 0,
    began: bool = False,
    sent: bool = False,
) -> AgentlabError:
    """The agentlab error for ``exc``, raised by the SDK during a call to ``what``.

    ``shown`` fragments of a streamed reply already reached a watcher: a
    retryable failure then becomes a :class:`ModelError` (a new reply would not
    match them). ``began``: the stream's ``message_start`` arrived, so a timeout
    or a broken connection lost a reply the API may have billed (:func:`_lost`).
    ``sent``: a non-streamed request whose answer was lost after connecting: it
    may have been billed too, and stays retryable once charged (:func:`_maybe_billed`).
    Raises :class:`NetworkBlocked` for a request the local-only
    guard stopped. Anything else (not an SDK, HTTP or OS error) is re-raised.
    """
    import anthropic
    import httpx2

    from .streaming import StreamError

    err: AgentlabError
    if isinstance(exc, anthropic.APIStatusError) and exc.response.status_code == 200 or isinstance(exc, StreamError):
        body = exc.body if isinstance(exc, StreamError) else exc.body
        body = body if isinstance(body, dict) else {}
        event = StreamError(body)
        status = STREAM_ERROR_STATUS.get(event.error_type, 500)
        request_id = None if isinstance(exc, StreamError) else exc.response.headers.get("request-id")
        err = api_error(status, {"request-id": request_id or ""}, body, secrets=secrets, in_stream=True)
        return _after_shown(err, shown, f"an {event.error_type} event arrived inside the streamed reply")
    if isinstance(exc, anthropic.APIStatusError):
        return api_error(
            exc.response.status_code,
            exc.response.headers,
            _read_body(exc),
            secrets=secrets,
            request_bytes=request_bytes,
        )
    if isinstance(exc, anthropic.APITimeoutError):
        limit = f" within {timeout:.1f}s" if timeout is not None else ""
        err = RetryableError(f"no reply from {what}{limit}")
        if began:
            return _lost(err, shown, "the stream timed out")
        if sent and not _never_sent(exc.__cause__):
            return _maybe_billed(err)
        return _after_shown(err, shown, "the stream timed out")
    if isinstance(exc, (anthropic.APIConnectionError, httpx2.HTTPError, OSError, ValueError)):
        cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) else exc
        if isinstance(cause, NetworkBlocked):  # a redirect off this machine, caught by the pool's request hook
            raise NetworkBlocked(str(cause)) from None
        why = f"{type(cause).__name__}: {cause}" if cause else str(exc)
        err = RetryableError(scrub(f"connection to {what} failed ({why})", secrets))
        if began:
            return _lost(err, shown, "the connection broke mid-stream")
        if sent and not _never_sent(cause):
            return _maybe_billed(err)
        return _after_shown(err, shown, "the connection broke mid-stream")
    raise exc

"""No accidental network: with ``AGENTLAB_LOCAL_ONLY=1`` a model may only call loopback.

A lesson or a test suite that meant to talk to a local Messages API server
must never reach the real API by mistake (a forgotten ``base_url``, a stray
``ANTHROPIC_BASE_URL``): that spends money and leaks prompts. The adapter
calls :func:`check_url` before every request, so the mistake fails loudly at
the first call instead of quietly succeeding.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from .errors import FatalError

LOCAL_ONLY_ENV = "AGENTLAB_LOCAL_ONLY"


class NetworkBlocked(FatalError):
    """A model call would have left this machine while local-only mode is on."""


def local_only(environ: Mapping[str, str] | None = None) -> bool:
    """Whether local-only mode is on (``AGENTLAB_LOCAL_ONLY`` set to 1/true/yes/on)."""
    env = os.environ if environ is None else environ
    return env.get(LOCAL_ONLY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def is_loopback(host: str) -> bool:
    """True for a loopback IP literal (127.0.0.0/8, ::1) or ``localhost``."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`NetworkBlocked` if local-only mode is on and ``url`` is not loopback."""
    if not local_only(environ):
        return
    host = urlsplit(str(url)).hostname or ""
    if not is_loopback(host):
        raise NetworkBlocked(
            f"refusing a model call to {host or url!r}: {LOCAL_ONLY_ENV}=1 allows only 127.0.0.1 "
            "(point the client's base_url at a local server, e.g. agentlab.testing.MessagesServer, "
            f"or unset {LOCAL_ONLY_ENV})"
        )

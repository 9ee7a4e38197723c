"""Keep secrets out of trace files: API keys, auth headers, password fields.

A trace is meant to be read, shared and attached to bug reports, so nothing
that grants access may reach it. Three things are redacted:

* values of fields whose *name* says they are secret (``api_key``,
  ``password``, ``access_token``, ``Authorization``, ``x-api-key``,
  ``client_secret`` ...), wherever they sit: tool arguments, the run's
  configuration, nested objects;
* strings that look like credentials (``sk-...`` keys, ``Bearer ...``,
  ``x-api-key: ...`` / ``Authorization: ...`` written out in text);
* the exact values of secret-looking environment variables (such as
  ``ANTHROPIC_API_KEY``) wherever they appear, even inside a tool's result.

A bare ``key`` is *not* a secret name: a lookup key or a dictionary key is
data a reader needs to debug a run; ``api_key``, ``secret_key``,
``private_key`` and the like are.

The writer calls :meth:`Redactor.needs_redaction` on each serialized line
first: a lower-case copy and a few substring tests (3-5 µs for a typical
event, against about 45 µs for a case-insensitive regex on this machine). Only
a line that might hold a secret is walked and rewritten.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"

_SECRET_WORDS = frozenset({
    "token", "secret", "password", "passwd", "pwd", "passphrase", "authorization", "auth", "oauth",
    "credential", "credentials", "cookie", "bearer", "apikey", "privatekey", "signature",
})
_KEY_OWNERS = frozenset({
    "api", "access", "secret", "private", "signing", "encryption", "session", "auth", "client",
    "master", "license", "x", "ssh", "aws",
})
# Lower-case substrings that any secret name or credential-looking text contains,
# besides "token" (not a name ending in "tokens": usage counts) and "key" (not a bare "key"),
# which needs_redaction tests by counting. Few hints, few scans: each costs ~0.1 µs.
_HINTS = ("secret", "pass", "pwd", "auth", "credential", "cookie", "bearer", "signature", "sk-")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")
_CREDENTIAL_TEXT = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{12,}"
    r"|((?i:\bbearer\s+))[A-Za-z0-9._~+/=\-]{8,}"
    r"|((?i:\b(?:x-api-key|authorization|api[_-]?key|access[_-]?token|auth[_-]?token|password|client[_-]?secret)"
    r"[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token)\s+)?))(?!(?i:(?:bearer|basic|token)\s+)?\[redacted\])[^\s\"',;}]+"
)
# Fields the engine itself writes whose names merely mention a secret word.
_SAFE_SUBTREES = frozenset({"input_schema"})


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a field called ``name`` holds a secret (``apiKey``, ``x-api-key``, ``password``).

    Token *counts* (``input_tokens``, ``max_tokens``) and a bare ``key`` are not secrets.
    """
    words = [w for w in _SPLIT.split(_CAMEL.sub("_", name).lower()) if w]
    if not words:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    if "".join(words) in {"apikey", "secretkey", "privatekey", "accesskey", "xapikey"}:
        return True
    return len(words) >= 2 and words[-1] in ("key", "keys") and words[-2] in _KEY_OWNERS


def secrets_from_environment(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables named like secrets (8 characters or more)."""
    env = os.environ if env is None else env
    return sorted(
        {v for k, v in env.items() if len(v) >= 8 and is_secret_name(k)}, key=len, reverse=True
    )


class Redactor:
    """Replaces secrets in events with ``"[redacted]"``; cheap when there are none.

    ``secrets`` are exact strings never to write (the environment's secret
    values are added unless ``env=False``).
    """

    def __init__(self, secrets: Iterable[str] = (), *, env: Mapping[str, str] | bool = True) -> None:
        values = set(s for s in secrets if isinstance(s, str) and s)
        if env is not False:
            values.update(secrets_from_environment(None if env is True else env))
        self.secrets: tuple[str, ...] = tuple(sorted(values, key=len, reverse=True))

    def needs_redaction(self, line: str | bytes) -> bool:
        """A cheap test on a serialized event: False means it certainly holds no secret."""
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")  # str search is faster than bytes search here
        for s in self.secrets:
            if s in line:
                return True
        low = line.lower()
        if low.count("token") != low.count('tokens"') or low.count("key") != low.count('"key"'):
            return True
        for h in _HINTS:
            if h in low:
                return True
        return False

    def redact(self, value: Any) -> Any:
        """A copy of ``value`` (JSON-like) with every secret replaced; the input is not changed."""
        if isinstance(value, dict):
            out = {}
            # A thinking block's signature is the API's own integrity check, not a
            # credential: without it a history rebuilt from a trace cannot be sent back.
            thinking = value.get("type") == "thinking"
            for k, v in value.items():
                if thinking and k == "signature":
                    out[k] = v
                elif isinstance(k, str) and is_secret_name(k) and v is not None and not isinstance(v, bool):
                    out[k] = REDACTED
                elif k in _SAFE_SUBTREES:
                    out[k] = v
                else:
                    out[k] = self.redact(v)
            return out
        if isinstance(value, (list, tuple)):
            return [self.redact(v) for v in value]
        if isinstance(value, str):
            return self.redact_text(value)
        return value

    def redact_text(self, text: str) -> str:
        """``text`` with known secret values and credential-looking strings replaced."""
        for s in self.secrets:
            if s in text:
                text = text.replace(s, REDACTED)
        return _CREDENTIAL_TEXT.sub(_keep_label, text)


def _keep_label(m: re.Match[str]) -> str:
    """Keep a label such as ``Authorization: `` or ``Bearer `` and drop what follows it."""
    return (m.group(1) or m.group(2) or "") + REDACTED

"""Keep secrets out of trace files (and out of error text the model reads).

A trace is meant to be read, shared and attached to bug reports, so nothing
that grants access may reach it. Secrets are found three ways, whatever shape
the value arrives in (an object, a JSON string, free text, an error message):

* by field *name* at any depth (``api_key``, ``password``, ``db_pass``,
  ``access_token``, ``Authorization``, ``Set-Cookie``, ``client_secret`` ...),
  in objects, in JSON held in a string (a tool result is often one), and in
  ``name=value`` / ``name: value`` text;
* by *value* for the well-known credential formats: provider keys by their
  prefixes (``sk-ant-``, ``sk-``, ``ghp_``, ``github_pat_``, ``AKIA``,
  ``xoxb-``, ``AIza``, ``glpat-``, ``hf_``, ``npm_``, ``sk_live_`` ...), JWTs,
  PEM private-key blocks, passwords inside connection URLs, cookies and
  ``Bearer``/``Basic`` credentials;
* by exact value: secret-named environment variables (``ANTHROPIC_API_KEY``),
  values passed as ``secrets=``, and every value this redactor has already
  removed by field name, so a password the model repeats in its own words
  later in the run is removed too.

Users add names, patterns and values with :func:`add_secret_names`,
:func:`add_secret_patterns`, :func:`add_secret_values` (process-wide: every
trace writer and every error message) or per redactor.

A bare ``key`` is *not* a secret name: a lookup key is data a reader needs;
``api_key``, ``secret_key``, ``private_key`` and the like are.

The writer calls :meth:`Redactor.needs_redaction` on each serialized line
first: a lower-case copy and a few substring tests (a few µs for a typical
event). Only a line that might hold a secret is walked and rewritten.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"

_SECRET_WORDS = frozenset({
    "token", "secret", "password", "passwd", "pwd", "pass", "passphrase", "passcode", "authorization", "auth",
    "oauth", "credential", "credentials", "cookie", "cookies", "bearer", "apikey", "privatekey", "signature",
    "sessionid", "jwt", "otp", "totp",
})
_KEY_OWNERS = frozenset({
    "api", "access", "secret", "private", "signing", "encryption", "session", "auth", "client",
    "master", "license", "x", "ssh", "aws", "account", "storage", "subscription", "consumer", "app", "service",
    "webhook", "gpg", "pgp", "deploy",
})
# Lower-case substrings that any secret name or credential-looking text contains,
# besides "token" (not a name ending in "tokens": usage counts) and "key" (not a bare "key"),
# which needs_redaction tests by counting. Each costs ~0.1 µs.
_HINTS = (
    "token", "key", "secret", "pass", "pwd", "auth", "credential", "cookie", "bearer", "signature", "session",
    "jwt", "otp", "sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "akia", "asia",
    "agpa", "aida", "aroa", "anpa", "xox", "xapp-", "eyj", "aiza", "glpat-", "hf_", "npm_", "pypi-", "sg.",
    "hooks.slack", "dop_v1_", "shpat_", "shpss_", "shpca_", "shppa_", "-----begin",
)
# Matches of these instead of "token"/"key" are harmless: usage counts ("input_tokens": ...) and a bare "key" field.
_HARMLESS = ('tokens"', '"key"')
_N_HINTS = len(_HINTS)
try:  # one pass over the line for every hint: ~1 µs against ~7 µs for a loop of `in` tests
    import ahocorasick_rs

    _FINDER: Any = ahocorasick_rs.AhoCorasick(_HINTS + _HARMLESS, matchkind=ahocorasick_rs.MatchKind.LeftmostLongest)
except ImportError:  # pragma: no cover - the dependency is declared; this keeps a broken install working
    _FINDER = None
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")

# Well-known credential formats, matched by value wherever they appear.
_VALUE_PATTERNS = [
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)",
    r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{12,}",  # Anthropic, OpenAI (sk-proj-...) and look-alikes
    r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b",  # AWS access key ids
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
    r"\bxapp-[A-Za-z0-9-]{10,}",
    r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+",
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",  # JWT
    r"\bAIza[0-9A-Za-z_\-]{30,}",  # Google API keys
    r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"\bnpm_[A-Za-z0-9]{30,}",
    r"\bpypi-[A-Za-z0-9_\-]{40,}",
    r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",  # SendGrid
    r"\bdop_v1_[a-f0-9]{40,}",  # DigitalOcean
    r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",  # Shopify
]
# Credentials after a label: keep the label, drop what follows.
_LABELLED = [
    # user:password@ inside a URL (postgres://, redis://, https://, amqp://...)
    r"([a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@\"'<>]*:)[^\s@/\"'<>]+(?=@)",
    r"((?i:\b(?:bearer|basic|token|digest)\s+))(?!\s*\[redacted\])[A-Za-z0-9._~+/=\-]{8,}",
    # a whole Cookie / Set-Cookie header line
    r"((?i:\b(?:set-)?cookie\s*:\s*))(?!\s*\[redacted\])[^\r\n]+",
    # "the password is hunter2", "passphrase was: x"
    r"((?i:\b(?:password|passphrase|passcode|passwd)\s+(?:is|was)\s*:?\s*)[\"'`]?)(?!\s*\[redacted\])[^\s\"'`,;]+",
]
# name = value / name: value / "name": "value" in text; the name is checked with is_secret_name.
_NAME_VALUE = re.compile(
    r"(?P<label>(?P<q>[\"']?)(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,63})(?P=q)\s*(?::|=|=>)\s*"
    r"(?P<vq>[\"'])?(?:(?i:bearer|basic|token)\s+)?)"
    r"(?P<value>(?!\[redacted\])(?(vq)[^\"'\r\n]+|[^\s\"',;&)}\]]+))"
)
# Fields the engine itself writes whose names merely mention a secret word.
_SAFE_SUBTREES = frozenset({"input_schema"})
API_VERBATIM: dict[str, tuple[str, ...]] = {
    "thinking": ("signature", "data"), "redacted_thinking": ("signature", "data"),
    "compaction": ("signature", "encrypted_content"), "refusal": ("fallback_credit_token",),
}
"""Per block (or ``stop_details``) type, the fields the Messages API requires back byte for byte: never redacted."""
_NOT_VALUES = frozenset({"true", "false", "null", "none", "", "nan", "[redacted]", "***", "****"})

_lock = threading.Lock()
_user_names: set[str] = set()
_user_patterns: list[re.Pattern[str]] = []
_user_values: set[str] = set()
_generation = [0]


def _words(name: str) -> list[str]:
    return [w for w in _SPLIT.split(_CAMEL.sub("_", name).lower()) if w]


def _normal(name: str) -> str:
    return "".join(_words(name))


def add_secret_names(*names: str) -> None:
    """Treat fields called any of ``names`` as secret everywhere (case and separators ignored)."""
    for n in names:
        if not isinstance(n, str) or not _normal(n):
            raise ValueError(f"a secret field name must be a non-empty string of letters or digits, got {n!r}")
    with _lock:
        _user_names.update(_normal(n) for n in names)
        _generation[0] += 1
    is_secret_name.cache_clear()


def add_secret_patterns(*patterns: str | re.Pattern[str]) -> None:
    """Redact every match of these regular expressions (the whole match) everywhere."""
    compiled = []
    for p in patterns:
        try:
            c = re.compile(p) if isinstance(p, str) else p
        except re.error as exc:
            raise ValueError(f"secret pattern {p!r} is not a valid regular expression: {exc}") from None
        if not isinstance(c, re.Pattern) or c.search("") is not None:
            raise ValueError(f"secret pattern {p!r} must be a regular expression that does not match empty text")
        compiled.append(c)
    with _lock:
        _user_patterns.extend(compiled)
        _generation[0] += 1


def add_secret_values(*values: str) -> None:
    """Never write these exact strings (4 characters or more) in any trace or error text."""
    for v in values:
        if not isinstance(v, str) or len(v) < 4:
            raise ValueError(f"a secret value must be a string of 4 characters or more, got {v!r}")
    with _lock:
        _user_values.update(values)
        _generation[0] += 1


def clear_user_rules() -> None:
    """Forget names, patterns and values added with the ``add_secret_*`` functions."""
    with _lock:
        _user_names.clear()
        _user_patterns.clear()
        _user_values.clear()
        _generation[0] += 1
    is_secret_name.cache_clear()


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a field called ``name`` holds a secret (``apiKey``, ``x-api-key``, ``password``).

    Token *counts* (``input_tokens``, ``max_tokens``) and a bare ``key`` are not secrets.
    """
    words = _words(name)
    if not words:
        return False
    joined = "".join(words)
    if joined in _user_names:
        return True
    if any(w in _SECRET_WORDS for w in words):
        return True
    if joined in {"apikey", "secretkey", "privatekey", "accesskey", "xapikey", "setcookie", "accountkey",
                  "sharedaccesskey", "masterkey", "appkey", "clientkey"}:
        return True
    if joined.endswith(("sessionid", "sessiontoken", "sessionkey", "sessioncookie")):
        return True
    if words[-1] == "key" and len(words) >= 2 and words[-2] in _KEY_OWNERS:
        return True
    return len(words) >= 2 and words[-1] == "keys" and words[-2] in _KEY_OWNERS


def secrets_from_environment(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables named like secrets (8 characters or more)."""
    env = os.environ if env is None else env
    return sorted(
        {v for k, v in env.items() if len(v) >= 8 and is_secret_name(k)}, key=len, reverse=True
    )


def _keep_label(m: re.Match[str]) -> str:
    """Keep a label such as ``Authorization: `` or ``Bearer `` and drop what follows it."""
    return (m.group(1) or "") + REDACTED


_VALUES_RE = re.compile("|".join(f"(?:{p})" for p in _VALUE_PATTERNS))
_LABELLED_RE = [re.compile(p) for p in _LABELLED]


class Redactor:
    """Replaces secrets in events with ``"[redacted]"``; cheap when there are none.

    ``secrets`` are exact strings never to write (the environment's secret
    values are added unless ``env=False``); ``names`` extra secret field
    names; ``patterns`` extra regular expressions whose matches are secrets.
    ``learn`` (default on): a value removed by field name is remembered and
    removed wherever it appears later (the model repeating a password).
    """

    def __init__(
        self,
        secrets: Iterable[str] = (),
        *,
        env: Mapping[str, str] | bool = True,
        names: Iterable[str] = (),
        patterns: Iterable[str | re.Pattern[str]] = (),
        learn: bool = True,
    ) -> None:
        values = set(s for s in secrets if isinstance(s, str) and s)
        if env is not False:
            values.update(secrets_from_environment(None if env is True else env))
        self._own: set[str] = values
        self.names = frozenset(_normal(n) for n in names if isinstance(n, str) and _normal(n))
        self.patterns = [re.compile(p) if isinstance(p, str) else p for p in patterns]
        self.learn = learn
        self._learned: set[str] = set()
        self._gen = -1
        self.secrets: tuple[str, ...] = ()
        self._refresh()

    def _refresh(self) -> None:
        self._gen = _generation[0]
        self._patterns = self.patterns + list(_user_patterns)
        self._names = tuple(self.names | _user_names)
        values = self._own | self._learned | _user_values
        self.secrets = tuple(sorted(values, key=len, reverse=True))

    def _secret_name(self, name: str) -> bool:
        return is_secret_name(name) or (bool(self.names) and _normal(name) in self.names)

    def needs_redaction(self, line: str | bytes) -> bool:
        """A cheap test on a serialized event: False means it certainly holds no secret."""
        if self._gen != _generation[0]:
            self._refresh()
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")  # str search is faster than bytes search here
        for s in self.secrets:
            if s in line:
                return True
        low = line.lower()
        if _FINDER is not None:
            if any(i < _N_HINTS for i, _, _ in _FINDER.find_matches_as_indexes(low)):
                return True
        elif low.count("token") != low.count('tokens"') or low.count("key") != low.count('"key"') or any(
            h in low for h in _HINTS[2:]
        ):
            return True
        if "://" in low and "@" in low:
            return True
        if self._names and any(n in low.replace("_", "").replace("-", "").replace(".", "") for n in self._names):
            return True
        return any(p.search(line) for p in self._patterns)

    def redact(self, value: Any) -> Any:
        """A copy of ``value`` (JSON-like) with every secret replaced; the input is not changed."""
        if self._gen != _generation[0]:
            self._refresh()
        return self._redact(value)

    def _redact(self, value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            # Fields the API requires back verbatim (a thinking or compaction block's signature,
            # a refusal's fallback credit token) are its own integrity checks, not credentials:
            # without them a history rebuilt from a trace cannot be sent back.
            kind = value.get("type")
            verbatim = API_VERBATIM.get(kind, ()) if isinstance(kind, str) else ()
            for k, v in value.items():
                if k in verbatim:
                    out[k] = v
                elif isinstance(k, str) and self._secret_name(k) and v is not None and not isinstance(v, bool):
                    self._remember(v)
                    out[k] = REDACTED
                elif k in _SAFE_SUBTREES:
                    out[k] = v
                else:
                    out[k] = self._redact(v)
            return out
        if isinstance(value, (list, tuple)):
            return [self._redact(v) for v in value]
        if isinstance(value, str):
            return self._redact_string(value)
        return value

    def _remember(self, v: Any) -> None:
        if self.learn and isinstance(v, str) and len(v) >= 6 and v.strip().lower() not in _NOT_VALUES:
            if v not in self._learned:
                self._learned.add(v)
                self._refresh()

    def _redact_string(self, text: str) -> str:
        s = text.strip()
        if len(s) >= 2 and s[0] in "{[" and s[-1] in "}]":
            try:
                parsed = json.loads(s)
            except ValueError:
                pass
            else:
                if isinstance(parsed, (dict, list)):
                    cleaned = self._redact(parsed)
                    if cleaned == parsed:
                        return text
                    return json.dumps(cleaned, ensure_ascii=False)
        return self.redact_text(text)

    def redact_text(self, text: str) -> str:
        """``text`` with known secret values and credential-looking strings replaced."""
        if self._gen != _generation[0]:
            self._refresh()
        text = _NAME_VALUE.sub(self._name_value, text)
        for s in self.secrets:
            if s in text:
                text = text.replace(s, REDACTED)
        text = _VALUES_RE.sub(REDACTED, text)
        for p in _LABELLED_RE:
            text = p.sub(_keep_label, text)
        for p in self._patterns:
            text = p.sub(REDACTED, text)
        return text

    def _name_value(self, m: re.Match[str]) -> str:
        value = m.group("value")
        if not self._secret_name(m.group("name")) or value.strip().lower() in _NOT_VALUES:
            return m.group(0)
        self._remember(value.strip())
        return m.group("label") + REDACTED


_default: list[Redactor] = []


def scrub(text: str) -> str:
    """``text`` (an error message, say) with every secret this module recognizes replaced.

    Uses a process-wide redactor with the environment's secrets and the rules
    added by :func:`add_secret_names` / :func:`add_secret_patterns` / :func:`add_secret_values`.
    """
    if not _default:
        _default.append(Redactor(learn=False))
    r = _default[0]
    try:
        return r.redact_text(text) if r.needs_redaction(text) else text
    except Exception:  # redaction must never turn an error into another error
        return REDACTED

"""What counts as a secret: the one table of redaction rules (names, formats, labels).

:mod:`agentlab.redact` compiles this table into every scanner it runs: the substring automaton that finds
where a rule may start, the text walk's patterns, and the byte-level prefilter the trace writer runs on
each line's JSON text. Nothing here is code; a rule added here reaches all three.

* **Names**: a field or a ``name = value`` whose name is secret (``api_key``, ``db_pass``). A name is
  secret when one of its words is a :data:`SECRET_WORDS` word, when it is one of :data:`SECRET_NAMES`, or
  when it ends in ``key``/``keys`` after a :data:`KEY_OWNERS` word. Every such name holds one of
  :data:`NAME_WORDS`, the substrings the automaton looks for (a test holds this).
* **Formats**: credentials recognisable by their shape alone (``sk-ant-...``, ``ghp_...``), found where one of
  their prefixes occurs.
* **Labels**: a word that says the next thing is a credential (``Bearer <token>``, ``Cookie: ...``,
  ``the password is ...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# ------------------------------------------------------------------ names
SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "pass",
        "passphrase",
        "passcode",
        "authorization",
        "auth",
        "oauth",
        "credential",
        "credentials",
        "cookie",
        "cookies",
        "bearer",
        "apikey",
        "privatekey",
        "signature",
        "sessionid",
        "jwt",
        "otp",
        "totp",
    }
)
"""A name with one of these words in it is secret (``user_password``, ``X-Auth-Token``)."""

SECRET_NAMES = frozenset(
    {
        "apikey",
        "secretkey",
        "privatekey",
        "accesskey",
        "xapikey",
        "setcookie",
        "accountkey",
        "sharedaccesskey",
        "masterkey",
        "appkey",
        "clientkey",
    }
)
"""Whole names (words joined, lower case) that are secret."""

SECRET_NAME_ENDINGS = ("sessionid", "sessiontoken", "sessionkey", "sessioncookie")
"""A name ending like this is secret (``userSessionId``)."""

KEY_OWNERS = frozenset(
    {
        "api",
        "access",
        "secret",
        "private",
        "signing",
        "encryption",
        "session",
        "auth",
        "client",
        "master",
        "license",
        "x",
        "ssh",
        "aws",
        "account",
        "storage",
        "subscription",
        "consumer",
        "app",
        "service",
        "webhook",
        "gpg",
        "pgp",
        "deploy",
    }
)
"""``<owner>_key`` / ``<owner>_keys`` is secret for these owners; a bare ``key`` is a lookup key, not a secret."""

STRONG_LAST = frozenset({"password", "passwd", "passphrase", "passcode", "pwd", "pass", "secret", "otp", "totp", "pin"})
"""Names ending in these words hold a secret whatever it looks like (a password may be a plain word)."""

NUMERIC_NAMES = frozenset({"otp", "totp", "pin", "passcode"})
"""Names whose secret may be all digits."""

NEVER_SECRET_ENV = frozenset({"PWD", "OLDPWD"})
"""Environment variables that look secret by name and are not (the shell's current and previous directory)."""

NAME_WORDS = (
    "token",
    "key",
    "secret",
    "pass",
    "pwd",
    "auth",
    "credential",
    "cookie",
    "bearer",
    "signature",
    "session",
    "jwt",
    "otp",
)
"""Lower-case substrings every secret name holds: where the name rules are tried."""

HARMLESS = ('tokens"', '"key"')
"""Matched instead of ``token``/``key``, these are no secret: a usage count's field, a bare ``key`` field."""

NAME_CHARS = r"A-Za-z0-9_.\-"
"""The characters of a name in ``name = value`` text (a character class's body)."""

SEPARATORS = (":", "=>", "=")
"""What stands between a name and its value in text, after blanks."""

VALUE_PREFIXES = ("bearer", "basic", "token")
"""Words a value may start with that are not part of it (``api_key: Bearer <credential>``)."""


# ------------------------------------------------------------------ formats
@dataclass(frozen=True)
class Format:
    """A credential recognisable by its shape: ``pattern`` tried where one of ``prefixes`` (lower case) occurs."""

    name: str
    prefixes: tuple[str, ...]
    pattern: str


FORMATS = (
    Format("Anthropic or OpenAI key", ("sk-",), r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{12,}"),
    Format("Stripe key", ("sk_", "rk_", "pk_"), r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"),
    Format("GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    Format("GitHub fine-grained token", ("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    Format(
        "AWS access key id",
        ("akia", "asia", "agpa", "aida", "aroa", "anpa"),
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b",
    ),
    Format("Slack token", ("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    Format("Slack app token", ("xapp-",), r"\bxapp-[A-Za-z0-9-]{10,}"),
    Format("Slack webhook", ("hooks.slack",), r"hooks\.slack\.com/services/[A-Za-z0-9/_-]+"),
    Format("JWT", ("eyj",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    Format("Google API key", ("aiza",), r"\bAIza[0-9A-Za-z_\-]{30,}"),
    Format("GitLab token", ("glpat-",), r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    Format("Hugging Face token", ("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),
    Format("npm token", ("npm_",), r"\bnpm_[A-Za-z0-9]{30,}"),
    Format("PyPI token", ("pypi-",), r"\bpypi-[A-Za-z0-9_\-]{40,}"),
    Format("SendGrid key", ("sg.",), r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    Format("DigitalOcean token", ("dop_v1_",), r"\bdop_v1_[a-f0-9]{40,}"),
    Format("Shopify token", ("shpat_", "shpss_", "shpca_", "shppa_"), r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"),
)

PEM_PREFIX = "-----begin"
"""Where a PEM private-key block may start; the block runs to its END line (or the end of the text)."""
PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
PEM_END = r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"

URL_CREDENTIAL = r"://[^\s:/@\"'<>]{0,256}:(?P<pw>[^\s@/\"'<>]{1,256})@"
"""The password of a URL with credentials (``postgres://app:<password>@host``), tried where ``://`` occurs."""


# ------------------------------------------------------------------ labels
@dataclass(frozen=True)
class Label:
    """A word that says what follows it is a credential: ``word`` (a pattern, case ignored; found where
    ``hint`` occurs), then ``after`` (blanks, or a colon), then ``between``, then the value (``value_pattern``).

    ``value`` says which values count: ``"token"`` (one that looks like a credential, see
    :func:`agentlab.redact.value_shape`), ``"token or number"``, or ``"any"`` (a whole header line).
    """

    hint: str
    word: str
    after: Literal["blank", "colon"]
    value_pattern: str
    between: str = ""
    value: Literal["token", "token or number", "any"] = "token"


AFTER = {"blank": r"\s{1,16}", "colon": r"[ \t]{0,16}:[ \t]{0,16}"}
"""What must follow a label's word, as text."""

LABELS = (
    Label("bearer", "bearer", "blank", r"[A-Za-z0-9._~+/=\-]{8,4096}"),
    Label("basic", "basic", "blank", r"[A-Za-z0-9+/]{12,4096}={0,2}(?![A-Za-z0-9._~+/=\-])"),
    Label("token", "token", "blank", r"[A-Za-z0-9._~+/=\-]{8,4096}"),
    Label("cookie", "cookie", "colon", r"[^\r\n]{1,65536}", value="any"),  # a whole Cookie / Set-Cookie line
    Label(  # "the password is hunter2", "passphrase was: x"
        "pass",
        "pass(?:word|phrase|code|wd)",
        "blank",
        r"[^\s\"'`,;]{1,4096}",
        between=r"(?i:is|was)\s{0,16}:?\s{0,16}[\"'`]?",
        value="token or number",
    ),
)

"""Keep secrets out of every byte the lab saves (and out of error text the model reads).

A trace is meant to be read, shared and attached to bug reports, so nothing
that grants access may reach it, nor the notebook panel whose widget state is
saved with the notebook. Secrets are found three ways, whatever shape the
value arrives in (an object, a JSON string, free text, an error message):

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

Precision matters as much as recall: redaction runs on every imported line
and every native event, so a rule that fires on ordinary text corrupts it. A
*name* says a value may be secret; the *value* must also look like one
(:func:`value_shape`): code (``self.cookies = cookies``), identifiers
(``signature: scroll_down``), paths, URLs without credentials, placeholders
(``$TOKEN``, ``<your key>``) and plain numbers are left alone, except under
the strongest names (``password``, ``passphrase``, ``otp`` ...). Only values
that look secret are learned, and an environment variable counts only when
its name *and* its value do (``PWD`` never does).

Cost is linear in the text: one Aho-Corasick pass finds every place a rule
could start (a secret word, a key prefix, ``://``), and each rule is tried
there only, with bounded scans; nothing is retried at every position of a
long run of characters.

Users add names, patterns and values with :func:`add_secret_names`,
:func:`add_secret_patterns`, :func:`add_secret_values` (process-wide: every
trace writer and every error message) or per redactor.

A bare ``key`` is *not* a secret name: a lookup key is data a reader needs;
``api_key``, ``secret_key``, ``private_key`` and the like are.

The writer calls :meth:`Redactor.needs_redaction` on each serialized line
first: a lower-case copy and one substring automaton. Only a line that might hold a secret is walked and rewritten.
Streamed fragments are redacted over the assembled text of their block by
:class:`StreamRedactor`, which holds back the tail that could still be the
start of a secret.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Hashable, Iterable, Mapping
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import unquote

import ahocorasick_rs
import orjson

from ._secret_rules import (
    AFTER,
    FORMATS,
    HARMLESS,
    KEY_OWNERS,
    LABELS,
    NAME_CHARS,
    NAME_WORDS,
    NEVER_SECRET_ENV,
    NUMERIC_NAMES,
    PEM_BEGIN,
    PEM_END,
    PEM_PREFIX,
    SECRET_NAME_ENDINGS,
    SECRET_NAMES,
    SECRET_WORDS,
    SEPARATORS,
    STRONG_LAST,
    URL_CREDENTIAL,
    VALUE_PREFIXES,
)

REDACTED = "[redacted]"

_SECRET_WORDS = SECRET_WORDS
_KEY_OWNERS = KEY_OWNERS
_STRONG_LAST = STRONG_LAST
_NUMERIC_NAMES = NUMERIC_NAMES
_NEVER_SECRET_ENV = NEVER_SECRET_ENV

# The scanners, compiled from the rule table (:mod:`agentlab._secret_rules`). One automaton finds every place a
# rule may start: a name word, a format's prefix, a label's word, and "://"; a match's index says which.
_NAME_HINTS = NAME_WORDS
_FORMAT_HINTS = tuple(dict.fromkeys([p for f in FORMATS for p in f.prefixes] + [PEM_PREFIX]))
_HINTS = _NAME_HINTS + _FORMAT_HINTS
_HARMLESS = HARMLESS
_N_HINTS = len(_HINTS)
_LABEL_WORDS = tuple(label.hint for label in LABELS if label.hint not in _HINTS)  # "Basic <credential>"
# Matched in this order: a match's index says which (hints, then label words, then the harmless ones, then
# "://"), so the smallest index of a line's matches tells the pre-test whether any hint or label occurs.
_MATCHED = _HINTS + _LABEL_WORDS + _HARMLESS + ("://",)
_LAST_LABEL = _N_HINTS + len(_LABEL_WORDS) - 1
_URL_HINT = len(_MATCHED) - 1
_FINDER = ahocorasick_rs.AhoCorasick(_MATCHED, matchkind=ahocorasick_rs.MatchKind.LeftmostLongest)
# The same automaton over bytes: ~5x faster, as it need not turn UTF-8 offsets into character
# offsets; for ASCII text the two agree, so :func:`_hints` uses it whenever it can.
_BYTES_FINDER = ahocorasick_rs.BytesAhoCorasick(
    [h.encode() for h in _MATCHED], matchkind=ahocorasick_rs.MatchKind.LeftmostLongest
)


def _hints(low: str) -> list[tuple[int, int, int]]:
    """Every hint in the lower-case text ``low``: (which, start, end), in character offsets."""
    if low.isascii():
        return _BYTES_FINDER.find_matches_as_indexes(low.encode("ascii"))
    return _FINDER.find_matches_as_indexes(low)


def _any_hint(low: str) -> tuple[bool, bool]:
    """(a secret word, key prefix or label occurs in ``low``; ``://`` does) for a yes/no test,
    which needs no character offsets: the bytes automaton reads any text."""
    url = False
    for i, _, _ in _BYTES_FINDER.find_matches_as_indexes(low.encode("utf-8")):
        if i <= _LAST_LABEL:
            return True, url
        url = url or i == _URL_HINT
    return False, url


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^a-z0-9]+")

# Well-known credential formats, tried where their prefix (a hint) occurs.
_FORMATS: dict[str, re.Pattern[str]] = {p: re.compile(f.pattern) for f in FORMATS for p in f.prefixes}
_PEM_BEGIN = re.compile(PEM_BEGIN)
_PEM_END = re.compile(PEM_END)
_PEM_OPENING = PEM_PREFIX.upper()

# Scans that start at a hint; every repetition is bounded or stops at a character the next hint cannot pass.
_NAME_CHARS = frozenset(c for c in map(chr, range(128)) if re.fullmatch(f"[{NAME_CHARS}]", c))
_NAME_RUN = re.compile(f"[{NAME_CHARS}]{{0,65}}")
_SEPARATOR = re.compile(
    r"[ \t]{0,16}(?:" + "|".join(map(re.escape, SEPARATORS)) + r")[ \t]{0,16}(?P<vq>[\"'])?"
    r"(?:(?i:" + "|".join(VALUE_PREFIXES) + r")[ \t]+)?"
)
_QUOTED_VALUE = re.compile(r"[^\"'\r\n]{1,4096}")
_BARE_VALUE = re.compile(r"[^\s\"'`,;&)}\]]{1,4096}")
_URL_CREDENTIAL = re.compile(URL_CREDENTIAL)
_LABELS = {label.hint: label for label in LABELS}
_LABELLED: dict[str, re.Pattern[str]] = {
    label.hint: re.compile(f"(?i:{label.word}){AFTER[label.after]}{label.between}(?P<v>{label.value_pattern})")
    for label in LABELS
}

# Values that are no secret under any name.
_NOT_VALUES = frozenset({"true", "false", "null", "none", "", "nan", "[redacted]", "undefined", "required", "optional"})
_MASK = frozenset("*x.-_ #?")
_WORDLIKE = re.compile(r"\.?[A-Za-z_][A-Za-z_.\-]*")  # identifiers, attribute paths, kebab-case words, domains
# Words that make up example credentials in docs and tests (``user:pass``, ``your_password``, ``my-secret-token``).
_PLACEHOLDER_WORDS = frozenset(
    {
        "user",
        "username",
        "name",
        "pass",
        "password",
        "passwd",
        "pwd",
        "pw",
        "word",
        "secret",
        "token",
        "key",
        "apikey",
        "api",
        "example",
        "sample",
        "test",
        "dummy",
        "fake",
        "foo",
        "bar",
        "baz",
        "xxx",
        "your",
        "my",
        "here",
        "value",
        "host",
        "s",
        "x",
        "the",
        "a",
        "insert",
        "enter",
        "redacted",
    }
)
_LETTERS = re.compile(r"[A-Za-z]+")
_DIGIT = re.compile(r"\d")
_SPACE = re.compile(r"\s")
_TRAILING_ESCAPES = re.compile(r"(?:\\[nrt\"'\\/])+$")  # "\n" and "\"" left by JSON quoted inside text
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_NUMBERLIKE = re.compile(r"[+\-]?[0-9][0-9.,:_/\-]*")
_WINDOWS_PATH = re.compile(r"[A-Za-z]:[\\/]")
# Fields the engine itself writes whose names merely mention a secret word.
_SAFE_SUBTREES = frozenset({"input_schema"})
_END: Any = object()
_MEMO_MIN = 64  # shorter strings are redacted again: cheaper than remembering them

Shape = Literal["empty", "placeholder", "path", "url", "number", "prose", "word", "code", "token"]

_lock = threading.Lock()
_user_names: set[str] = set()
_user_patterns: list[re.Pattern[str]] = []
_user_values: set[str] = set()
_generation = [0]


@lru_cache(maxsize=8192)
def _words(name: str) -> tuple[str, ...]:
    return tuple(w for w in _SPLIT.split(_CAMEL.sub("_", name).lower()) if w)


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
    _strength.cache_clear()


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
    _strength.cache_clear()


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a field called ``name`` may hold a secret (``apiKey``, ``x-api-key``, ``password``).

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
    if joined in SECRET_NAMES or joined.endswith(SECRET_NAME_ENDINGS):
        return True
    if words[-1] == "key" and len(words) >= 2 and words[-2] in _KEY_OWNERS:
        return True
    return len(words) >= 2 and words[-1] == "keys" and words[-2] in _KEY_OWNERS


@lru_cache(maxsize=4096)
def _strength(name: str) -> int:
    """2: the value is secret whatever it looks like (``password``); 1: only if it looks secret; 0: not a secret
    name.
    """
    if not is_secret_name(name):
        return 0
    words = _words(name)
    return 2 if words[-1] in _STRONG_LAST or "".join(words) in _user_names else 1


def _numeric_name(name: str) -> bool:
    return _words(name)[-1] in _NUMERIC_NAMES


def value_shape(value: str) -> Shape:
    """What a candidate secret looks like; only a ``"token"`` is secret under any secret name.

    ``token``: letters mixed with digits or punctuation (``Tr0ub4dor&3``,
    ``live_a1b2c3``); ``word``: an identifier or attribute path without digits
    (``scroll_down``, ``self.cookies``, ``YOUR_API_KEY``); ``code``: a call or
    subscript; ``prose``: has spaces; ``number``; ``url`` (without
    credentials); ``path``; ``placeholder`` (``$TOKEN``, ``<key>``,
    ``{token}``); ``empty`` (``null``, ``****``).
    """
    return _shape(value) if len(value) <= 256 else _shape.__wrapped__(value)  # cache short values only


@lru_cache(maxsize=8192)
def _shape(value: str) -> Shape:
    s = _TRAILING_ESCAPES.sub("", value.strip())
    if s.lower() in _NOT_VALUES or set(s) <= _MASK or s.startswith(REDACTED):
        return "empty"
    plain = unquote(s) if "%" in s else s
    if not _DIGIT.search(plain):
        parts = _LETTERS.findall(plain.lower())
        if parts and all(p in _PLACEHOLDER_WORDS for p in parts):
            return "placeholder"
    if s[0] in "$<{%" or s.endswith((">", "}")):
        return "placeholder"
    if s.endswith(":"):  # a label of its own (``username:``), not a value
        return "code"
    s = s.rstrip(".,!?") or s  # the end of a sentence
    if s[0] in "/~\\" or s.startswith(("./", "../")) or _WINDOWS_PATH.match(s):
        return "path"
    if "://" in s:
        return "url"
    if _NUMBERLIKE.fullmatch(s):
        return "number"
    if _SPACE.search(s):
        return "prose"
    if _WORDLIKE.fullmatch(s):
        return "word"
    if "(" in s or "[" in s:
        return "code"
    return "token"


def _secret_in_text(name: str, value: str, quoted: bool) -> bool:
    """Whether ``value`` after ``name =`` / ``name:`` in free text is a secret to remove."""
    strength = _strength(name)
    if not strength:
        return False
    shape = value_shape(value)
    n = len(value.strip())
    if shape == "token":
        return n >= 8 or (strength == 2 and n >= 6)
    if shape == "number":
        return strength == 2 and _numeric_name(name) and n >= 4
    if shape in ("word", "prose"):  # a plain word after "password = " is code, a quoted one a hard-coded password
        return strength == 2 and quoted and n >= 4
    return False


def _is_session_uuid(name: str, value: str) -> bool:
    """A recorded session's id (Claude Code's ``sessionId``) is a UUID naming a file, not a login."""
    return _normal(name).endswith("sessionid") and _UUID.fullmatch(value.strip()) is not None


def _not_secret_here(thinking_at: int, at: int, name: str, value: str) -> bool:
    """Values that a secret name labels in text but that are not secrets: a session's UUID, and
    the ``signature`` of a thinking block quoted as JSON (the API's integrity check, kept in objects too);
    ``thinking_at`` is where the text first says ``"thinking"`` (-1: nowhere)."""
    if _is_session_uuid(name, value):
        return True
    return 0 <= thinking_at < at and _normal(name) == "signature"


def _secret_field(name: str, value: Any) -> bool:
    """Whether the value of an object field called ``name`` is replaced whole."""
    strength = _strength(name)
    if not strength or value is None or isinstance(value, bool):
        return False
    if isinstance(value, str):
        if _is_session_uuid(name, value):
            return False
        shape = value_shape(value)
        if shape in ("empty", "placeholder"):
            return False
        return shape == "token" or (strength == 2 and shape in ("word", "prose", "number", "code"))
    if isinstance(value, (int, float)):
        return strength == 2
    if isinstance(value, (dict, list, tuple)):
        return bool(value)
    return True


def _learnable(value: str, name: str) -> bool:
    """Whether a removed value is remembered and removed wherever it appears later: only one that looks secret."""
    s = value.strip()
    shape = value_shape(s)
    if shape == "token":
        return len(s) >= 6
    if shape == "number":
        return len(s) >= 6 and _numeric_name(name)
    return shape == "prose" and len(s) >= 12 and _strength(name) == 2


def secrets_from_environment(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names *and* values look secret (8 characters or more).

    For the process's own environment the answer is kept until the environment changes: every trace
    writer asks (each ``run()`` makes one). A change to ``os.environ`` (a key set after import), or a secret
    name added, is seen at the next call."""
    if env is None:
        raw = getattr(os.environ, "_data", None)  # CPython: the raw items os.environ decodes on each read
        key = (_generation[0], *raw.items()) if isinstance(raw, dict) else None  # user names change the answer
        if key is not None and _env_secrets[0] == key:
            return list(_env_secrets[1])
        found = _secrets_in(os.environ)
        if key is not None:
            _env_secrets[:] = [key, tuple(found)]
        return found
    return _secrets_in(env)


_env_secrets: list[Any] = [None, ()]  # (the rules' generation and the environment's raw items, its secrets)


def _secrets_in(env: Mapping[str, str]) -> list[str]:
    return sorted(
        {
            v
            for k, v in env.items()
            if len(v) >= 8 and k not in _NEVER_SECRET_ENV and is_secret_name(k) and value_shape(v) == "token"
        },
        key=len,
        reverse=True,
    )


# The characters outside ASCII whose lower case holds an ASCII letter (İ -> i̇, the Kelvin sign -> k), in UTF-8.
_LOWER_TO_ASCII = tuple(
    chr(c).encode() for c in (0x130, 0x212A)
)  # = [c for c in every code point if any(ord(x) < 128 for x in chr(c).lower())]


def _lowers_like_text(line: bytes) -> bool:
    """Whether ``bytes.lower`` lowers ``line`` (UTF-8) as ``str.lower`` would: no character outside ASCII
    in it has an ASCII letter in its lower case."""
    return not any(line.find(c) >= 0 for c in _LOWER_TO_ASCII)


_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')  # what JSON text writes as an escape
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lower(text: str) -> str:
    """A lower-case copy with the same length (so hint positions index ``text``); a lone surrogate
    (text cut from a UTF-16 source) becomes U+FFFD, one character for one, which the matcher can read."""
    low = text.lower()
    if len(low) != len(text):
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return _SURROGATE.sub("\ufffd", low) if not low.isascii() else low


def _name_before(text: str, start: int, end: int) -> int:
    """Where the name ending at ``end`` starts: the run of name characters, at most 64 of them, from a letter or
    ``_``.
    """
    s = start
    floor = max(0, end - 64)
    while s > floor and text[s - 1] in _NAME_CHARS:
        s -= 1
    while s < end and not (text[s].isalpha() or text[s] == "_"):
        s += 1
    return s


# The prefilter over JSON text (bytes, lower case), compiled from the same table as the walk. A secret word
# leads the walk to a redaction only (a) in an object key (the field is judged by its name), (b) as a label's
# word with what the label needs after it, or (c) before a separator, in a secret name. In JSON text a blank
# may be written as an escape, and a string may hold JSON whose quotes are escaped, so each piece is
# loosened to what the walk could read once the text is decoded: any byte that is not a printable
# character may be a blank, and escapes and quotes are skipped on the way to a separator.
_J_BLANK = rb"[^!-\[\]-~]"  # no printable ASCII but a backslash: a blank, a control, an escape, a non-ASCII byte
_J_GAP = rb"(?:[\x00-\x20\"']|\\++[/bfnrt\"])*+"  # blanks, quotes and escapes, skipped (any number)
_J_SEPARATOR = (
    rb"(?:[" + re.escape("".join(dict.fromkeys(sep[0] for sep in SEPARATORS))).encode() + rb"]|\\++u)"
)  # a separator's first character, or a \u escape (which may write one)
_J_LABEL = {
    label.hint: re.compile(
        label.word.encode() + (_J_BLANK if label.after == "blank" else _J_GAP + rb"(?::|\\++u)"), re.S
    )
    for label in LABELS
}  # a label's word and what it needs next
_J_IN_KEY = re.compile(rb'(?:[^"\\]++|\\.)*?\\*"' + _J_GAP + rb"(?::|\\++u)", re.S)  # a quote, then ":"
_J_NAME_THEN_SEPARATOR = re.compile(rb"(?P<run>[" + NAME_CHARS.encode() + rb"]*+)" + _J_GAP + _J_SEPARATOR)
_NAME_BYTES = frozenset(ord(c) for c in _NAME_CHARS)
_BACKSLASH = ord("\\")


def _may_fire(line: bytes, low: bytes, matches: list[tuple[int, int, int]], redactor: Redactor) -> bool:
    """Whether a rule of the walk may fire at a secret word or label in ``line`` (JSON text, bytes; ``low``:
    its lower-case copy, with the same offsets; ``matches``: what the automaton found in ``low``).

    Errs towards yes: a format's prefix always says yes; a name word says yes in a key, before a separator
    after a secret name (or a name it cannot judge: one next to an escape or 64 characters long), and, for
    a label's word, with what the label needs after it. ``tests/test_redaction_prefilter.py`` holds it to
    the walk."""
    for i, a, b in matches:
        if i >= _N_HINTS:
            if i <= _LAST_LABEL and _J_LABEL[_MATCHED[i]].match(low, a):
                return True
            continue  # harmless, and "://" (left to the test's other rules)
        if i >= len(_NAME_HINTS):  # a credential format's prefix
            return True
        label = _J_LABEL.get(_NAME_HINTS[i])
        if (label is not None and label.match(low, a)) or _J_IN_KEY.match(low, b):
            return True
        m = _J_NAME_THEN_SEPARATOR.match(low, b)
        if m is None:
            continue
        end = m.end("run")
        s, floor = a, max(0, end - 64)
        while s > floor and low[s - 1] in _NAME_BYTES:
            s -= 1
        if s <= floor or end - a > 64 or (s and low[s - 1] == _BACKSLASH):
            return True  # a name the walk may read otherwise once the text is decoded
        while s < end and not (chr(low[s]).isalpha() or low[s] == 0x5F):
            s += 1
        if redactor._secret_name(line[s:end].decode("ascii")):  # its own case: "myAPIKey" is api + key
            return True
    return False


class Redactor:
    """Replaces secrets in events with ``"[redacted]"``; cheap when there are none.

    ``secrets`` are exact strings never to write (the environment's secret
    values are added unless ``env=False``); ``names`` extra secret field
    names; ``patterns`` extra regular expressions whose matches are secrets.
    ``learn`` (default on): a value removed by field name is remembered and
    removed wherever it appears later (the model repeating a password); use
    :meth:`for_run` to give each run its own memory.
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
        self.changes = 0
        """How many replacements this redactor has made (a cheap way to tell whether a walk changed anything)."""
        self.secrets: tuple[str, ...] = ()
        self._memo: dict[str, str] | None = None  # see for_run(repeats=True)
        self._memo_for: tuple[str, ...] = ()
        self._refresh()

    def for_run(self, *, repeats: bool = False) -> Redactor:
        """A redactor with the same rules and none of the values this one learned: values learned in one run
        apply to that run only (an import of thousands of sessions does not slow down as they pile up).

        ``repeats=True`` for a run whose records repeat the same text (an import writes each
        tool result twice, each tool input twice): a string is redacted once and its result
        reused while the redactor's secrets stay the same. The memory is the run's own
        strings, held for as long as the redactor is."""
        fresh = object.__new__(Redactor)
        fresh._own, fresh.names, fresh.patterns, fresh.learn = self._own, self.names, self.patterns, self.learn
        fresh._learned, fresh._gen, fresh.changes, fresh.secrets = set(), -1, 0, ()
        fresh._memo = {} if repeats else None
        fresh._memo_for = ()
        fresh._refresh()
        return fresh

    @property
    def learned(self) -> frozenset[str]:
        """The values this redactor removed by name and now removes wherever they appear."""
        return frozenset(self._learned)

    def _refresh(self) -> None:
        self._gen = _generation[0]
        self._patterns = self.patterns + list(_user_patterns)
        self._names = tuple(self.names | _user_names)
        values = self._own | self._learned | _user_values
        self.secrets = tuple(sorted(values, key=len, reverse=True))
        # the JSON text of a value holds every secret value and pattern match its strings hold only when
        # no value has a character JSON escapes and no pattern is the user's (which may match across escapes)
        self._json_test = not self._patterns and not any(_JSON_ESCAPED.search(v) for v in values)
        self._secret_bytes = tuple(v.encode("utf-8", "surrogatepass") for v in self.secrets)
        self._user_rules = bool(self._names or self._patterns)

    def _secret_name(self, name: str) -> bool:
        return is_secret_name(name) or (bool(self.names) and _normal(name) in self.names)

    def needs_redaction(self, line: str | bytes, *, json_text: bool = False, hints_in: bytes | None = None) -> bool:
        """A cheap test on a serialized event: False means it certainly holds no secret.

        The test runs on UTF-8 bytes (a lower-case copy, one bytes automaton: no
        character offsets are needed for a yes/no answer); bytes are read as they
        are, without decoding: ``bytes.lower`` changes only ASCII letters, and the
        only other characters whose lower case is ASCII are checked for first.

        ``json_text=True`` says ``line`` is JSON text (bytes, as orjson writes it): a secret *word* in it
        (``key``, ``token`` ...) then trips the test only where a rule of the walk could fire on it
        (:func:`_may_fire`, compiled from the rule table), so the engine's own prose ("Look up a key",
        "353 input tokens: worst case") costs no walk; a format prefix (``sk-``, ``ghp_``) always trips it.

        ``hints_in``: the part of ``line`` (bytes; JSON text itself when ``json_text``) in which secret words
        and key prefixes (and the ``://`` of a URL with credentials) are looked for, when the caller knows the
        rest of the line holds none and none runs across the border (the trace writer: a line but its run's
        first bytes, tested once when the run's file opens, and the numbers and kind after them). Secret
        values and every other rule still read the whole line."""
        if self._gen != _generation[0]:
            self._refresh()
        if not isinstance(line, bytes) or not (line.isascii() or _lowers_like_text(line)):
            return self._text_needs_redaction(line)
        for b in self._secret_bytes:
            if line.find(b) >= 0:
                return True
        text = line if hints_in is None else hints_in
        low = text.lower()
        matches = _BYTES_FINDER.find_matches_as_indexes(low)
        url = judged = False
        for which, _, _ in matches:
            if which <= _LAST_LABEL:  # a hint or a label (the harmless matches and "://" come after them)
                if not json_text or (not judged and _may_fire(text, low, matches, self)):
                    return True
                judged = True  # every hint of the line judged at once
            elif which == _URL_HINT:
                url = True
        # "://" is one of the automaton's patterns, and no other holds a ":", so none hides it: found above
        # (in ``hints_in``'s part, which the caller vouches for), it costs no search of its own
        if url and line.find(b"@") >= 0:  # neither has a case
            return True
        return self._by_user_rules(line, line.lower()) if self._user_rules else False

    def _text_needs_redaction(self, line: str | bytes) -> bool:
        """:meth:`needs_redaction` of a ``str``, or of bytes holding a character whose lower case is ASCII."""
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        for s in self.secrets:
            if s in line:
                return True
        # a lone surrogate (text cut from a UTF-16 source) is written as bytes no hint contains
        low = line.lower().encode("utf-8", "surrogatepass")
        matches = _BYTES_FINDER.find_matches_as_indexes(low)
        if matches and min(matches)[0] <= _LAST_LABEL:
            return True
        if low.find(b"@") >= 0 and low.find(b"://") >= 0:
            return True
        return self._by_user_rules(line, low)

    def _by_user_rules(self, line: str | bytes, low: bytes) -> bool:
        """The user's own secret names and patterns (``names=``, ``patterns=``, :func:`add_secret_names`...)
        in ``line`` (``low``: its lower-case UTF-8)."""
        if self._names:
            squeezed = low.replace(b"_", b"").replace(b"-", b"").replace(b".", b"")
            if any(squeezed.find(n.encode()) >= 0 for n in self._names):
                return True
        if not self._patterns:
            return False
        text = line if isinstance(line, str) else line.decode("utf-8", "replace")
        return any(p.search(text) for p in self._patterns)

    def clean(self, value: Any) -> Any:
        """``value`` itself when nothing in it can be a secret, else a redacted copy.

        The test is :meth:`certainly_clean` (one scan of the value's JSON text); a
        value it cannot judge is walked (each field name checked, every string
        scanned once, joined)."""
        if self._gen != _generation[0]:
            self._refresh()
        if isinstance(value, str):
            return self.redact(value) if value and self.needs_redaction(value) else value
        if not isinstance(value, (dict, list, tuple)):
            return value
        verdict = self._json_verdict(value)
        if verdict is not None:
            return self.redact(value) if verdict else value
        strings: list[str] = []
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                for k, x in v.items():
                    if not isinstance(k, str) or self._secret_name(k):
                        return self.redact(value)
                    if isinstance(x, str):
                        strings.append(x)
                    elif isinstance(x, (dict, list, tuple)) and k not in _SAFE_SUBTREES:
                        stack.append(x)
            else:
                for x in v:
                    if isinstance(x, str):
                        strings.append(x)
                    elif isinstance(x, (dict, list, tuple)):
                        stack.append(x)
        # one test over every string: no hint or secret contains the NUL that joins them
        return self.redact(value) if strings and self.needs_redaction("\0".join(strings)) else value

    def certainly_clean(self, value: Any) -> bool:
        """True when nothing in ``value`` (JSON-like) can be a secret; False means "look closer"."""
        if self._gen != _generation[0]:
            self._refresh()
        return self._json_verdict(value) is False

    def _json_verdict(self, value: Any) -> bool | None:
        """Whether ``value`` may hold a secret, from one test over its JSON text; None: cannot tell.

        orjson writes the text at C speed, far faster than walking the value in
        Python, and every secret field name, every place a rule starts and every
        exact secret value appears in that text as in the value itself (none of
        them holds a character JSON escapes). A value orjson cannot write (keys
        that are not strings, a lone surrogate, very deep nesting), and any value
        while user patterns (which could match across an escape) are set, is
        left to the walk."""
        if not self._json_test:
            return None
        try:
            text = orjson.dumps(value)
        except (TypeError, orjson.JSONEncodeError):
            return None
        return self.needs_redaction(text, json_text=True)

    def redact(self, value: Any) -> Any:
        """A copy of ``value`` (JSON-like) with every secret replaced; the input is not changed.

        The walk is iterative (document order), so any depth of nesting is fine."""
        if self._gen != _generation[0]:
            self._refresh()
        return self._redact(value)

    def redact_fields(self, record: dict[str, Any]) -> dict[str, Any]:
        """``redact(record)`` for a flat event record, walking only the fields that may hold a secret.

        Each field is judged as :meth:`redact` judges it (its name, the API's verbatim fields), and its value
        is :meth:`clean`: kept as it is when its JSON text holds no hint (one scan), walked otherwise. A
        run's first and last events hold its tools, prices, budget and history: a dozen fields of which
        one or two mention a key or tokens, so the walk of the rest is saved (~0.1 ms a run)."""
        if self._gen != _generation[0]:
            self._refresh()
        verbatim = _verbatim(record)
        out: dict[str, Any] = {}
        for k, v in record.items():  # the same tests, in the same order, as _redact's for each field
            if k in verbatim:
                out[k] = v
            elif isinstance(k, str) and self._field_is_secret(k, v):
                self._remember(v, k)
                self.changes += 1
                out[k] = REDACTED
            elif k in _SAFE_SUBTREES:
                out[k] = v
            else:
                out[k] = self.clean(v)
        return out

    def _redact(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._redact_string(value)
        if not isinstance(value, (dict, list, tuple)):
            return value
        root: Any = {} if isinstance(value, dict) else []
        stack: list[tuple[Any, Any, tuple[str, ...]]] = [(self._items(value), root, _verbatim(value))]
        while stack:
            items, out, verbatim = stack[-1]
            nxt: Any = next(items, _END)
            if nxt is _END:
                stack.pop()
                continue
            k, v = nxt
            if isinstance(out, dict):
                # Fields the API requires back verbatim (a thinking or compaction block's signature,
                # a refusal's fallback credit token) are its own integrity checks, not credentials:
                # without them a history rebuilt from a trace cannot be sent back.
                if k in verbatim:
                    out[k] = v
                    continue
                if isinstance(k, str) and self._field_is_secret(k, v):
                    self._remember(v, k)
                    self.changes += 1
                    out[k] = REDACTED
                    continue
                if k in _SAFE_SUBTREES:
                    out[k] = v
                    continue
            if isinstance(v, (dict, list, tuple)):
                child: Any = {} if isinstance(v, dict) else []
                stack.append((self._items(v), child, _verbatim(v)))
            elif isinstance(v, str):
                child = self._redact_string(v)
            else:
                child = v
            if isinstance(out, dict):
                out[k] = child
            else:
                out.append(child)
        return root

    @staticmethod
    def _items(value: Any) -> Any:
        return iter(value.items()) if isinstance(value, dict) else ((None, v) for v in value)

    def _field_is_secret(self, name: str, value: Any) -> bool:
        if _secret_field(name, value):
            return True
        if self.names and _normal(name) in self.names:  # the user said so: any value
            return value is not None and not isinstance(value, bool) and value not in ("", REDACTED)
        return False

    def _remember(self, v: Any, name: str) -> None:
        if self.learn and isinstance(v, str) and _learnable(v, name):
            v = v.strip()
            if v not in self._learned:
                self._learned.add(v)
                self._refresh()

    def _redact_string(self, text: str) -> str:
        memo = self._memo
        if memo is None or len(text) < _MEMO_MIN:
            return self._redact_string_now(text)
        if self._memo_for is not self.secrets:  # a value learned, a rule added: earlier results may be stale
            memo.clear()
            self._memo_for = self.secrets
        done = memo.get(text)
        if done is not None:
            if done is not text:
                self.changes += 1  # callers tell from this whether anything was replaced
            return done
        secrets = self.secrets
        done = self._redact_string_now(text)
        if self.secrets is secrets:  # the result is what these secrets give (nothing learned meanwhile)
            memo[text] = done
        return done

    def _redact_string_now(self, text: str) -> str:
        s = text.strip()
        if len(s) >= 2 and s[0] in "{[" and s[-1] in "}]":
            try:
                parsed = json.loads(s)
            except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes: redact it as text
                pass
            else:
                if isinstance(parsed, (dict, list)):
                    before = self.changes
                    cleaned = self._redact(parsed)
                    if self.changes == before:
                        return text
                    try:
                        return json.dumps(cleaned, ensure_ascii=False)
                    except (RecursionError, ValueError):
                        pass
        return self.redact_text(text)

    def redact_text(self, text: str) -> str:
        """``text`` with known secret values and credential-looking strings replaced."""
        if self._gen != _generation[0]:
            self._refresh()
        spans = self._spans(text)
        if spans:
            text = self._apply(text, spans)
        for s in self.secrets:
            if s in text:
                self.changes += 1
                text = text.replace(s, REDACTED)
        if self._names:
            text = self._user_name_values(text)
        for p in self._patterns:
            text, n = p.subn(REDACTED, text)
            self.changes += n
        return text

    def _apply(self, text: str, spans: list[tuple[int, int]]) -> str:
        spans.sort()
        out, at = [], 0
        for a, b in spans:
            if b <= at:
                continue
            a = max(a, at)
            out.append(text[at:a])
            out.append(REDACTED)
            self.changes += 1
            at = b
        out.append(text[at:])
        return "".join(out)

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Every secret's (start, end) in ``text``, found by trying each rule where a hint occurs."""
        spans: list[tuple[int, int]] = []
        if len(text) < 4:
            return spans
        low = _lower(text)
        name_done = label_done = 0  # like re.sub: a rule resumes after its last match
        pem_done = format_done = 0
        thinking_at = -2  # found on first need
        for i, a, b in _hints(low):
            if i >= _N_HINTS:
                if i == _URL_HINT:
                    m = _URL_CREDENTIAL.match(text, a)
                    if m and len(m.group("pw")) >= 4 and value_shape(m.group("pw")) not in ("empty", "placeholder"):
                        spans.append(m.span("pw"))
                elif low[a:b] in _LABELLED and a >= label_done:
                    label_done = self._label(text, low[a:b], a, spans)
                continue
            hint = low[a:b]
            if i < len(_NAME_HINTS):
                if a >= name_done:
                    if thinking_at == -2:
                        thinking_at = text.find('"thinking"')
                    name_done = self._name_value(text, a, b, spans, thinking_at)
                if hint in _LABELLED and a >= label_done:
                    label_done = self._label(text, hint, a, spans)
                continue
            if hint == PEM_PREFIX:
                if a >= pem_done:
                    pem_done = self._pem(text, a, spans)
                continue
            pattern = _FORMATS.get(hint)
            if pattern is not None and a >= format_done:
                m = pattern.match(text, a)
                if m:
                    spans.append(m.span())
                    format_done = m.end()
        return spans

    def _label(self, text: str, word: str, at: int, spans: list[tuple[int, int]]) -> int:
        m = _LABELLED[word].match(text, at)
        if not m:
            return at
        v = m.group("v")
        if v.startswith(REDACTED):
            return m.end()
        wanted = _LABELS[word].value
        shape = value_shape(v) if wanted != "any" else "token"
        if shape == "token" or (wanted == "token or number" and shape == "number"):
            spans.append(m.span("v"))
        return m.end()

    def _pem(self, text: str, at: int, spans: list[tuple[int, int]]) -> int:
        m = _PEM_BEGIN.match(text, at)
        if not m:
            return at
        end = _PEM_END.search(text, m.end())
        stop = end.end() if end else len(text)
        spans.append((at, stop))
        return stop

    def _name_value(self, text: str, a: int, b: int, spans: list[tuple[int, int]], thinking_at: int) -> int:
        """At a secret word: ``name = value`` / ``"name": "value"`` around it; returns where the next try may start."""
        run = _NAME_RUN.match(text, b)
        end = run.end() if run else b
        if end - a > 64:
            return a + 1
        sep = _SEPARATOR.match(text, end)  # the cheap test first: most secret words are no label
        if not sep and end < len(text) and text[end] in "\"'":
            sep = _SEPARATOR.match(text, end + 1)
        if not sep:
            return a + 1
        name = text[_name_before(text, a, end) : end]
        vq = sep.group("vq")
        vm = (_QUOTED_VALUE if vq else _BARE_VALUE).match(text, sep.end())
        if not vm:
            return sep.end()
        value = _TRAILING_ESCAPES.sub("", vm.group())
        span = (vm.start(), vm.start() + len(value))
        if not value or _not_secret_here(thinking_at, a, name, value):
            return vm.end()
        if self._secret_name(name) and _secret_in_text(name, value, bool(vq)):
            self._remember(value, name)
            spans.append(span)
        elif self.names and _normal(name) in self.names and value_shape(value) not in ("empty", "placeholder"):
            spans.append(span)
        return vm.end()

    def _user_name_values(self, text: str) -> str:
        """``name = value`` for names the user registered (which no built-in hint finds)."""

        def one(m: re.Match[str]) -> str:
            if _normal(m.group("name")) in self._names and value_shape(m.group("value")) not in (
                "empty",
                "placeholder",
            ):
                self.changes += 1
                return m.group("label") + REDACTED
            return m.group(0)

        return _USER_NAME_VALUE.sub(one, text)


_USER_NAME_VALUE = re.compile(
    r"(?P<label>(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,63})[\"']?[ \t]{0,16}(?::|=>|=)[ \t]{0,16}"
    r"(?P<vq>[\"'])?)(?P<value>(?(vq)[^\"'\r\n]{1,4096}|[^\s\"',;&)}\]]{1,4096}))"
)


API_VERBATIM: dict[str, tuple[str, ...]] = {
    "thinking": ("signature", "data"),
    "redacted_thinking": ("signature", "data"),
    "compaction": ("signature", "encrypted_content"),
    "refusal": ("fallback_credit_token",),
}
"""Per block (or ``stop_details``) type, the fields the Messages API requires back byte for byte: never redacted."""


def _verbatim(value: Any) -> tuple[str, ...]:
    kind = value.get("type") if isinstance(value, dict) else None
    return API_VERBATIM.get(kind, ()) if isinstance(kind, str) else ()


class StreamRedactor:
    """Redacts streamed fragments over the assembled text of each content block.

    Redacting each fragment on its own lets a key or a password split across
    fragments pass every rule while the saved fragments rebuild it whole. So
    each block's text is gathered, and a prefix is released (redacted) only up
    to a *safe cut*: a whitespace after which nothing can still turn earlier
    text into a secret. A cut is safe when no secret word or label occurred in
    the line before it or in the 256 characters before it (a ``password:``
    whose value is still coming), no PEM block is open, and no exact secret
    value containing spaces spans it. Secrets without spaces (keys, tokens,
    URLs with passwords) never span a whitespace. Whatever has not been
    released is the held-back tail; :meth:`flush` releases it, redacted, when
    the block ends. Work per fragment is proportional to the fragment.
    """

    LOOKBACK = 256

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._blocks: dict[Hashable, _Block] = {}

    def feed(self, key: Hashable, text: str) -> str:
        """Add a fragment of block ``key``; return the redacted text released now (maybe ``""``)."""
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = _Block()
        if not text:
            return ""
        r = self.redactor
        if r._gen != _generation[0]:
            r._refresh()
        scan_from = max(0, len(block.pending) - 16)  # a hint may straddle the fragments
        block.pending += text
        pending, base = block.pending, block.base
        hint_end = block.hint_end
        for i, _a, b in _hints(_lower(pending[scan_from:])):
            if i <= _LAST_LABEL:  # a secret word, a key prefix or a label word
                hint_end = max(hint_end, base + scan_from + b)
        if hint_end != block.hint_end:
            block.hint_end, block.newline = hint_end, -1
        if block.newline < 0:  # the first line end after the last hint
            nl = pending.find("\n", max(scan_from, hint_end - base))
            block.newline = base + nl if nl >= 0 else -1
        begin = pending.rfind(_PEM_OPENING, scan_from)
        if begin >= 0:
            block.pem_open = pending.find("-----END", begin) < 0
        elif block.pem_open and pending.find("-----END", scan_from) >= 0:
            block.pem_open = False
        if block.pem_open or r._patterns or r._names:  # user rules may span anything: release at the end
            return ""
        spaced = [s for s in r.secrets if any(c.isspace() for c in s)]
        margin = max((len(s) for s in spaced), default=0)
        lo = max(scan_from - margin, 0, hint_end - base + self.LOOKBACK)
        limit = len(pending) - margin
        cut = max(pending.rfind(c, lo, limit) for c in " \n\t\r")
        if cut < 0:
            return ""
        if hint_end > base and not 0 <= block.newline - base <= cut:
            return ""  # the last hint's line is not over before the cut
        for s in spaced:
            pos = pending.find(s, max(0, cut - len(s) + 1), cut + len(s))
            if 0 <= pos <= cut < pos + len(s):
                return ""
        chunk, block.pending = pending[: cut + 1], pending[cut + 1 :]
        block.base += cut + 1
        block.released = True
        return r.redact_text(chunk) if r.needs_redaction(chunk) else chunk

    def flush(self, key: Hashable) -> str:
        """The rest of block ``key``, redacted; the block is forgotten."""
        block = self._blocks.pop(key, None)
        if block is None or not block.pending:
            return ""
        r = self.redactor
        text = block.pending
        if not r.needs_redaction(text):
            return text
        # a whole tool input is JSON: redact it by its field names
        return r.redact_text(text) if block.released else r._redact_string(text)

    def pending(self) -> list[Hashable]:
        """The blocks holding text not yet released."""
        return [k for k, b in self._blocks.items() if b.pending]

    def forget(self) -> None:
        """Drop every held-back tail (a retried call streams anew)."""
        self._blocks.clear()


class _Block:
    """One content block's held-back text and where a cut may fall."""

    __slots__ = ("base", "hint_end", "newline", "pem_open", "pending", "released")

    def __init__(self) -> None:
        self.pending = ""  # text not yet released
        self.base = 0  # the block offset where pending starts
        self.hint_end = -(10**9)  # block offset just after the last secret word or key prefix
        self.newline = -1  # block offset of the first line end after it (-1: none yet)
        self.pem_open = False
        self.released = False


_default: list[Redactor] = []


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` (an error message, say) with every secret this module recognizes replaced.

    Uses a process-wide redactor with the environment's secrets and the rules
    added by :func:`add_secret_names` / :func:`add_secret_patterns` /
    :func:`add_secret_values`; ``secrets`` are exact values to remove as well
    (an API client's key). The one place error text is scrubbed.
    """
    try:
        for s in secrets:
            if s and s in text:
                text = text.replace(s, REDACTED)
        if not _default:
            _default.append(Redactor(learn=False))
        r = _default[0]
        return r.redact_text(text) if r.needs_redaction(text) else text
    except Exception:  # redaction must never turn an error into another error
        return REDACTED

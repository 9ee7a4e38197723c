"""A secret word in prose ("Look up a key", "353 input tokens: worst case") costs no walk, and no secret is missed.

The trace writer and ``Redactor.clean`` test a line's JSON text with ``needs_redaction(line, json_text=True)``:
a secret *word* trips it only where a rule of the full walk could fire on it. That prefilter is compiled from
the same rule table as the walk (``agentlab._secret_rules``): a rule added to the table reaches both. These
tests hold the prefilter to the walk: whenever it says "clean", the walk (``Redactor.redact``) changes
nothing and learns nothing, on the precision corpus, on every secret of the recall corpus in every shape, and
on generated values built from the pieces that make rules fire (names, separators, labels, quotes and
escapes, JSON held in strings).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlab.redact import Redactor
from agentlab.trace.writer import dumps

from .secrets_corpus import ALL, everywhere, shapes

CORPUS = Path(__file__).parent / "fixtures" / "redaction" / "precision.jsonl"


def _said_clean_and_is(value) -> bool:
    """False only when the JSON-text test calls ``value`` clean and the walk disagrees."""
    r = Redactor(env=False)
    line = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    if r.needs_redaction(line, json_text=True):
        return True
    walker = Redactor(env=False)
    return walker.redact(value) == value and walker.changes == 0 and not walker.learned


def test_a_line_called_clean_is_one_the_walk_leaves_alone_over_the_precision_corpus_and_every_secret_shape():
    values = [json.loads(x)["value"] for x in CORPUS.read_text(encoding="utf-8").splitlines()] + shapes()
    assert len(values) > 3000
    assert [v for v in values if not _said_clean_and_is(v)] == []


def test_every_secret_of_the_recall_corpus_trips_the_json_text_test():
    r = Redactor(env=False)
    for value in [everywhere(), *shapes()]:
        assert r.needs_redaction(dumps(value), json_text=True), value
    for value in [*({"text": f"use {s} now"} for s in ALL), *({"note": s} for s in ALL)]:
        assert _said_clean_and_is(value)


def test_the_engines_own_prose_trips_no_walk_and_a_label_after_it_still_does():
    r = Redactor(env=False)
    tool = {"name": "lookup", "description": "Look up a key and return its value.", "input_schema": {}}
    why = {"guard_why": "at most 353 input tokens: worst case $0.0164 of $999999.9775 left"}
    assert not r.needs_redaction(dumps({"tools": [tool], "last_guard_check": why}), json_text=True)
    for text in [
        "Look up a key: sk1live2Zq9x8w7v",  # no secret name before the colon, but a format-free token ...
        "api_key: Zq9x8w7v6u5t",
        "the password is hunter2!",
        "Authorization: Bearer abcdefghijkl0123",
        "xcookie: sid=abc",
        "my token Zq9x8w7v6u5t",
        '{"password hint": "Zq9x8w7v6u5t"}',
        '{"pass\\"word": "Zq9x8w7v6u5t"}',
        "secret_key\t= Zq9x8w7v6u5t",
    ]:
        value = {"text": text}
        walked = Redactor(env=False).redact(value)
        if walked != value:  # whatever the walk removes, the test must send to the walk
            assert r.needs_redaction(dumps(value), json_text=True), text


# The pieces that make the walk's rules fire, and the ones that make a word inert, with JSON's escapes.
PIECES = st.sampled_from(
    [
        "key",
        "Key",
        "api_key",
        "apiKey",
        "myAPIKey",
        "secret",
        "token",
        "tokens",
        "Token",
        "bearer",
        "Bearer",
        "cookie",
        "Set-Cookie",
        "xcookie",
        "pass",
        "password",
        "passwd",
        "session",
        "sessionId",
        "auth",
        "otp",
        "jwt",
        "signature",
        "credential",
        "pwd",
        "input",
        "a",
        "is",
        "was",
        "hint",
        " ",
        "  ",
        "\t",
        "\n",
        "\r",
        "\x0b",
        "\xa0",
        "\u2003",
        ":",
        ": ",
        "=",
        "=>",
        " = ",
        '"',
        "'",
        "\\",
        "\\u0070",
        "\\t",
        "\\n",
        '\\"',
        "{",
        "}",
        '{"',
        '":',
        '": "',
        "[",
        "_",
        "-",
        ".",
        "é",
        "İ",
        "\u212a",
        "Zq9x8w7v6u5t",
        "hunter2!",
        "123456",
        "Tr0ub4dor&3xyz",
        "scroll_down",
        "$TOKEN",
        "<your key>",
        "ok",
        "sk",
        "thinking",
        '"thinking"',
    ]
)
TEXT = st.lists(PIECES, max_size=14).map("".join) | st.lists(PIECES, max_size=10).map(" ".join)
KEYS = st.sampled_from(["text", "description", "guard_why", "password", "api key", "my key", "key", "tokens"]) | TEXT
JSONISH = st.recursive(
    TEXT | st.integers(-(2**40), 2**40) | st.none() | st.booleans(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(KEYS, inner, max_size=4)
        | st.dictionaries(KEYS, inner, max_size=3).map(json.dumps)
    ),  # JSON held in a string: the walk parses it
    max_leaves=10,
)


@settings(max_examples=1500, deadline=None)
@given(JSONISH)
def test_a_generated_value_called_clean_is_one_the_walk_leaves_alone(value):
    assert _said_clean_and_is(value)


@settings(max_examples=500, deadline=None)
@given(TEXT)
def test_text_called_clean_is_text_the_walk_leaves_alone_at_any_depth_of_quoting(text):
    for value in ({"text": text}, {"text": json.dumps({"inner": text})}, {"text": json.dumps([json.dumps(text)])}):
        assert _said_clean_and_is(value)


def test_every_secret_name_the_rules_know_holds_a_word_the_automaton_looks_for():
    """The prefilter sees a name only through the automaton's words: a secret name without one would pass it."""
    from agentlab import _secret_rules as rules

    names = (
        set(rules.SECRET_WORDS)
        | set(rules.SECRET_NAMES)
        | set(rules.SECRET_NAME_ENDINGS)
        | {f"{owner}key" for owner in rules.KEY_OWNERS}
    )
    missing = sorted(n for n in names if not any(w in n for w in rules.NAME_WORDS))
    assert missing == []


def test_a_format_and_a_label_added_to_the_table_reach_the_walk_the_prefilter_and_the_stream(tmp_path):
    """The scanners are compiled from the table: one entry added there is found by every path."""
    import subprocess
    import sys

    script = tmp_path / "added.py"
    script.write_text(
        """
import importlib
import orjson
from agentlab import _secret_rules as rules, redact
rules.FORMATS += (rules.Format("Vault token", ("hvs.",), r"\\bhvs\\.[A-Za-z0-9]{20,}"),)
rules.LABELS += (rules.Label("ticket", "ticket", "blank", r"[A-Za-z0-9]{10,}"),)
redact = importlib.reload(redact)  # the scanners compiled again, from the table as it now is
Redactor, StreamRedactor = redact.Redactor, redact.StreamRedactor

token, ticket = "hvs.Zq9x8w7v6u5tZq9x8w7v6u5t", "Tk1Tk2Tk3Tk4Tk5"
text = f"use {token} with ticket {ticket} now"
r = Redactor(env=False)
assert r.redact_text(text) == "use [redacted] with ticket [redacted] now", r.redact_text(text)
assert r.needs_redaction(orjson.dumps({"note": f"use {token}"}), json_text=True)
assert r.needs_redaction(orjson.dumps({"note": f"ticket {ticket}"}), json_text=True)
assert not r.needs_redaction(orjson.dumps({"note": "a ticket-free line"}), json_text=True)
stream = StreamRedactor(r)
out = "".join(stream.feed("b", c) for c in text) + stream.flush("b")
assert token not in out and ticket not in out, out
print("ok")
"""
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr

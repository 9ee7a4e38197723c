"""The fast path an import takes gives exactly what the full walk gives (issue 26, performance).

An import judges each value by one scan of its JSON text (``Redactor.clean``)
and redacts each string once per run (``for_run(repeats=True)``); both only
decide sooner that nothing needs changing. These tests hold them to the full
walk (``Redactor.redact``) on the precision corpus, on every secret of the
recall corpus in every shape, on generated values, and through a real import.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from agentlab.recorded import load_recorded
from agentlab.redact import REDACTED, Redactor

from .secrets_corpus import ALL, ENV_FILE, FORMAT_SECRETS, NAMED_SECRETS, RULE_WORDS, everywhere, shapes

CORPUS = Path(__file__).parent / "fixtures" / "redaction" / "precision.jsonl"
TOOL_HEAVY = Path(__file__).parent / "fixtures" / "recorded" / "claude_code" / "tool_heavy.jsonl"


def test_clean_equals_the_full_walk_on_every_precision_record_and_every_secret_shape():
    values = [json.loads(x)["value"] for x in CORPUS.read_text(encoding="utf-8").splitlines()] + shapes()
    assert len(values) > 3000
    differ = [v for v in values if Redactor(env=False).clean(v) != Redactor(env=False).redact(v)]
    assert differ == []
    for v in shapes():  # and the secrets are gone, not merely left alone by both
        text = json.dumps(Redactor(env=False).clean(v))
        assert [s for s in ALL if s in text or json.dumps(s)[1:-1] in text] == []


# Words that start rules, look like secrets or change under lower-casing, plus JSON's escapes.
WORDS = st.sampled_from(
    [
        *RULE_WORDS,
        "Authorization:",
        "session",
        ": ",
        "\t",
        "\x00",
        "api_\u212aey=live_a1b2c3d4e5f6",
        "\ud800",  # a lone surrogate (text cut from UTF-16)
        "Tr0ub4dor&3xyz",
        "sk-",
        "ghp_",
        "-----BEGIN",
    ]
    + ALL[:12]
)
TEXT = st.lists(WORDS, max_size=12).map(" ".join) | st.lists(WORDS, max_size=12).map("".join)
KEYS = st.sampled_from(["text", "input", "content", "password", "apiKey", "key", "input_schema", "signature", "type"])
JSONISH = st.recursive(
    TEXT | st.integers() | st.none() | st.booleans(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(JSONISH)
def test_clean_equals_the_full_walk_on_any_json_like_value(value):
    assert Redactor(env=False).clean(value) == Redactor(env=False).redact(value)


def test_a_string_redacted_once_in_a_run_is_redacted_anew_after_a_value_is_learned():
    """The per-run memory of redacted strings is only as good as the secrets it was made with."""
    r = Redactor(env=False).for_run(repeats=True)
    password = "Zx9-qq81-Lm3t"
    text = f"the deploy script ran with {password} and finished; " + "ok " * 30
    assert r.clean(text) == text  # nothing says it is a secret yet
    assert r.clean({"password": password}) == {"password": REDACTED}  # now it is known
    assert password not in r.clean(text)
    assert r.clean(text) == r.clean(text)  # and remembered again


def test_every_secret_of_the_recall_corpus_in_an_imported_session_is_redacted(tmp_path):
    lines = [json.loads(x) for x in TOOL_HEAVY.read_text().splitlines()]
    use = next(d for d in lines if d["type"] == "assistant" and d["message"]["content"][0]["type"] == "tool_use")
    use["message"]["content"][0]["input"] = everywhere()
    result = next(d for d in lines if d["type"] == "user" and "tool_result" in json.dumps(d["message"]["content"]))
    block = next(b for b in result["message"]["content"] if b.get("type") == "tool_result")
    block["content"] = ENV_FILE
    said = [d for d in lines if d["type"] == "assistant" and d["message"]["content"][0]["type"] == "text"][-1]
    repeat = " ".join(v for v in NAMED_SECRETS.values() if len(v) >= 6)  # learned from the tool input
    said["message"]["content"][0]["text"] = f"Done; the secrets were {repeat} {' '.join(FORMAT_SECRETS)}"
    f = tmp_path / "session.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in lines))
    trace = load_recorded(f)
    text = json.dumps(trace.records)
    assert [s for s in ALL if s in text or json.dumps(s)[1:-1] in text] == []
    assert "passphrase" in text  # names stay readable; only values go

"""What the trace writer's tests generate and expect: event data with secrets, NaNs and odd keys, times, and
the lines the writer wrote before its hot path existed (one write an event, the record, redacted by the whole
walk when the pre-test says so)."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from agentlab.events import Event
from agentlab.redact import Redactor
from agentlab.trace import dumps
from agentlab.trace.schema import KINDS, PLAIN_KINDS, event_record
from agentlab.vocab import EventKind

from .secrets_corpus import ALL, RULE_WORDS

URLS = ["postgres://app:Pg-Str3am-77@db/x", "https://example.com/a", "ops@example.com"]  # a URL's "@" and "://"
WORDS = st.sampled_from([*RULE_WORDS, "null", "v:k0_0", "run_id", *ALL[:8], *URLS])
TEXT = st.lists(WORDS, max_size=6).map(" ".join)
NUMBERS = (
    st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 1e-5, 0.00012, 1e16, 2.5])
)
KEYS = st.sampled_from(["text", "args", "result", "content", "password", "apiKey", "key", "error", "type", "v", "t"])
VALUES = st.recursive(
    TEXT | NUMBERS | st.none() | st.booleans(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=10,
)
DATA = st.dictionaries(KEYS | st.sampled_from(["call_id", "tool", "usage", "seq", "kind"]), VALUES, max_size=5)
ENGINE_KINDS = [
    k.value for k in KINDS if k not in (EventKind.RUN_STARTED, EventKind.RUN_FINISHED, EventKind.MODEL_DELTA)
]
WHEN = st.floats(0, 1e6) | st.sampled_from([0.0, 3e-5, 0.0001, 0.007435, 12.5, math.nan, math.inf])


def expected_lines(events: list[Event]) -> list[bytes]:
    """What the writer wrote before the hot path existed: the record, redacted by the whole walk when the
    pre-test says so (kinds of numbers only skip it)."""
    redactor = Redactor(env=False).for_run()
    out = []
    for e in events:
        record = event_record(e)
        line = dumps(record)
        if e.kind not in PLAIN_KINDS and redactor.needs_redaction(line):
            line = dumps(redactor.redact(record))
        out.append(line)
    return out

"""One rule cuts text everywhere the lab shows it: within its width, at a word boundary when one is
near, and saying how much was left out."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import agentlab
from agentlab._shorten import shorten

CUT_MID_WORD = re.compile(r"\w(?:…|\.\.\.)(?=\W|$)(?!\s*\(\+[\d,]+ char)")  # as tests/test_notebooks.py reads a cut


@given(st.text(min_size=0, max_size=400), st.integers(min_value=20, max_value=200))
def test_a_shortened_text_fits_and_says_what_it_hid(text, width):
    out = shorten(text, width)
    assert len(out) <= width
    if out != text:
        hidden = int(re.search(r"\(\+([\d,]+) chars\)$", out).group(1).replace(",", ""))
        assert text.startswith(out[: out.rindex("… (+")]) and hidden > 0
        assert CUT_MID_WORD.search(out) is None


def test_a_done_repr_no_longer_cuts_the_answer_mid_word():
    done = agentlab.run(
        "q",
        model=agentlab.ScriptedModel(
            [agentlab.reply("The customer meant order 1042, not 1402. Order 1042 was packed late at the depot.")]
        ),
        trace=False,
    )
    assert "was p..." not in repr(done) and "chars)" in repr(done)


def test_no_other_module_cuts_text_by_hand():
    """The rule has one owner: no module appends an ellipsis to a slice of its own."""
    by_hand = re.compile(r"\[:\s*[\w -]+\]\s*\+\s*(?:f?\"\.\.\.\"|f?\"…\")")
    offenders = [str(f) for f in Path(agentlab.__file__).parent.rglob("*.py") if by_hand.search(f.read_text())]
    assert offenders == []

"""The cost guard's arithmetic as properties: what it grants never lets a call's worst case pass what is left."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentlab.budget import affordable_max_tokens

RATES = st.floats(1e-9, 1e-4) | st.just(0.0)


@settings(max_examples=150, deadline=None)
@given(
    remaining=st.floats(0.0, 10.0),
    est_input=st.integers(0, 2_000_000),
    input_rate=st.floats(0.0, 1e-4),
    output_rate=RATES,
    wanted=st.integers(1, 200_000),
)
@example(remaining=1e-6, est_input=0, input_rate=0.0, output_rate=1e-5, wanted=5)  # not one output token fits
# x = left / output_rate rounds up to 696.000...: without the 1e-9 margin 696 tokens would pass what is left
@example(
    remaining=0.06654304533816825, est_input=12004, input_rate=0.0, output_rate=9.560782376173602e-05, wanted=10**5
)
def test_the_granted_max_tokens_fit_what_is_left_and_no_more_would(
    remaining, est_input, input_rate, output_rate, wanted
):
    granted = affordable_max_tokens(remaining, est_input, input_rate, output_rate, wanted)
    assert 0 <= granted <= wanted
    input_cost = est_input * input_rate
    if input_cost >= remaining:
        assert granted == 0  # not even the input fits
        return
    if output_rate == 0:
        assert granted == wanted  # output costs nothing: all of it fits
        return
    assert input_cost + granted * output_rate <= remaining  # the worst case fits
    if granted < wanted:  # and one more token would not (the guard gives all it can)
        assert input_cost + (granted + 2) * output_rate > remaining

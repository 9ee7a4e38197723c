"""The money account: a call reserved, charged one way of four, settled; refusals say who ran out and what was left."""

from __future__ import annotations

import pytest

from agentlab._account import NO_LEDGER, Account, Hold, Refusal
from agentlab.budget import MIN_REPLY_TOKENS
from agentlab.experiments import TotalLedger
from agentlab.messages import Usage
from agentlab.vocab import StopReason

RATES = (3e-6, 15e-6)  # $3 / $15 per million tokens


def test_a_run_on_its_own_is_granted_every_call_whole_and_holds_nothing():
    account = Account("solo")
    hold = account.reserve(1000, RATES, 800, worst=0.015)
    assert hold == Hold(800, 0.0, 0.015) and account.ledger is NO_LEDGER and not account.shared


def test_a_shared_total_holds_the_worst_case_and_settles_it_to_what_the_call_cost():
    ledger = TotalLedger(1.0)
    account = Account("r1", ledger)
    hold = account.reserve(1000, RATES, 800, worst=0.015)
    assert isinstance(hold, Hold) and hold.reserved == pytest.approx(1000 * 3e-6 + 800 * 15e-6)
    assert ledger.reserved == pytest.approx(hold.reserved)
    charge = account.charge(hold, "usage", 0.004, Usage(input_tokens=1000, output_tokens=67))
    assert (charge.cost, charge.spent, account.model_calls) == (0.004, 0.004, 1)
    assert ledger.spent == pytest.approx(0.004) and ledger.reserved == pytest.approx(0.0, abs=1e-12)
    assert (account.input_tokens, account.output_tokens) == (1000, 67)
    assert charge.fields() == {
        "cost": 0.004,
        "spent": 0.004,
        "estimated": False,
        "usage": Usage(input_tokens=1000, output_tokens=67).as_dict(),
        "context_tokens": 1000,
    }


def test_a_partial_grant_lowers_max_tokens_until_the_call_fits_what_was_granted():
    ledger = TotalLedger(0.01)  # the whole call would want $0.015
    hold = Account("r", ledger).reserve(1000, RATES, 800, worst=0.015)
    assert isinstance(hold, Hold) and hold.reserved == pytest.approx(0.01)
    assert MIN_REPLY_TOKENS <= hold.max_tokens < 800
    assert 1000 * RATES[0] + hold.max_tokens * RATES[1] <= hold.reserved
    assert hold.worst <= hold.reserved  # a lost reply never settles past what was held for it


def test_an_experiment_that_cannot_cover_the_smallest_reply_refuses_saying_how_much_is_left():
    ledger = TotalLedger(0.003, spent=0.0025)
    refusal = Account("r", ledger).reserve(1000, RATES, 800, worst=0.015)
    assert isinstance(refusal, Refusal) and refusal.who == "experiment"
    assert refusal.left == pytest.approx(0.0005) and refusal.needed == pytest.approx(1000 * 3e-6 + 32 * 15e-6)
    assert refusal.reason == StopReason.EXPERIMENT_BUDGET
    assert refusal.detail == "the experiment's total budget cannot cover the next call (at least $0.0035), $0.0005 left"
    assert ledger.reserved == 0 and ledger.refused == 1  # nothing held by a refused call


def test_each_way_of_charging_says_how_in_the_event_fields():
    account = Account("r")
    hold = account.reserve(10, RATES, 100, worst=0.002)
    assert isinstance(hold, Hold)
    lost = account.charge(hold, "lost", hold.worst).fields()
    assert lost == {"cost": 0.002, "spent": 0.002, "estimated": True, "lost": True}
    part = account.charge(hold, "partial", 0.001, Usage(input_tokens=10, output_tokens=5)).fields()
    assert part["estimated"] is True and "lost" not in part and part["spent"] == pytest.approx(0.003)
    assert account.model_calls == 2 and account.output_tokens == 5  # a lost reply has no tokens to count

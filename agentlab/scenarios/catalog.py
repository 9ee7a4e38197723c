"""The scenarios, in the order the article tells its lessons.

Budgets are chosen so each lesson shows in seconds: the hanging tool meets a
1.5 s deadline, the growing context a $0.10 budget. Reads in the shop take
0.4 s where overlap is the point (three lookups at once), and notes take
0.2 s between read and write where a race would be.
"""

from __future__ import annotations

from ..errors import Policy
from . import behaviours as b
from .base import Scenario

ORDER_TASK = "Customer 7 asks why order 1042 was late. Check the order, the customer and their other orders."

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "parallel-lookups",
            "three reads in one turn",
            "Independent reads asked for in one turn run together: three 0.4 s lookups take about 0.4 s, "
            "not 1.2 s, and their results come back in the order requested.",
            ORDER_TASK,
            "done",
            lambda rng: b.ParallelLookups(rng),
            options={"max_steps": 4, "max_cost": 0.10, "deadline_s": 20},
            shop={"latency": 0.4},
        ),
        Scenario(
            "ping-pong",
            "alternates two tools forever",
            "Every call is new, so no repeat is detected and the cost per step stays small: "
            "only the step limit stops a model that never converges.",
            "Find the order with the blue enamel teapot.",
            "step limit",
            lambda rng: b.PingPong(rng),
            options={"max_steps": 8, "max_cost": 0.50, "deadline_s": 30},
        ),
        Scenario(
            "growing-context",
            "context grows every step",
            "Each page of results stays in the context and is sent again on every later call: "
            "legitimate steps, a cost quadratic in the run's length, and the cost budget stops it.",
            "Audit every order: which ones shipped but were never delivered?",
            "budget",
            lambda rng: b.GrowingContext(rng),
            options={"max_steps": 12, "max_cost": 0.10, "deadline_s": 60},
        ),
        Scenario(
            "hanging-tool",
            "a tool that never answers",
            "The carrier's API accepts the call and never replies; the deadline bounds every tool, "
            "so the run stops at 1.5 s instead of hanging.",
            "Where is order 1042 right now? Ask the carrier.",
            "deadline",
            lambda rng: b.AskCarrier(rng),
            options={"max_steps": 6, "max_cost": 0.10, "deadline_s": 1.5},
            carrier={"hang": True},
        ),
        Scenario(
            "repeat-recovers",
            "the same call, nudged, then recovery",
            "The third identical call is not run: the model gets the earlier result and a nudge, "
            "and this time it changes course and answers.",
            "Has the carrier delivered order 1218 yet?",
            "done",
            lambda rng: b.Repeater(rng, recovers=True),
            options={"max_steps": 10, "max_cost": 0.20, "deadline_s": 30},
        ),
        Scenario(
            "repeat-forever",
            "the same call, nudged, no recovery",
            "Nudged and still asking the same thing: the fourth identical call stops the run "
            'with "loop detected" instead of burning the step budget.',
            "Has the carrier delivered order 1218 yet?",
            "loop detected",
            lambda rng: b.Repeater(rng, recovers=False),
            options={"max_steps": 10, "max_cost": 0.20, "deadline_s": 30},
        ),
        Scenario(
            "permission-denied",
            "a refund the agent may not make",
            "A permission denial is fatal: the run stops at once, the model is never told, "
            "and no further tool is called.",
            "Order 1042 arrived late. Refund the customer £20 as a goodwill gesture.",
            "fatal",
            lambda rng: b.Refunder(rng),
            options={"max_steps": 10, "max_cost": 0.20, "deadline_s": 30},
        ),
        Scenario(
            "permission-probing",
            "the same denial, treated as recoverable",
            'The classic bug: told "denied", the model probes other routes to the same end '
            "(a smaller refund, a status change, a note asking someone else) and pays for every step.",
            "Order 1042 arrived late. Refund the customer £20 as a goodwill gesture.",
            "done",
            lambda rng: b.Refunder(rng),
            options={
                "max_steps": 10,
                "max_cost": 0.20,
                "deadline_s": 30,
                "policy": Policy(permission_denied="recoverable"),
            },
        ),
        Scenario(
            "hidden-denial",
            "a refusal the last message hides",
            "The refund is denied at step four and handed back as recoverable; the model notes it and answers "
            '"the customer has been refunded". The run ends "done": only the trace shows the refusal.',
            "Order 1042 arrived late. Check the delay with the carrier, then refund the customer £20.",
            "done",
            lambda rng: b.Reassures(rng),
            options={
                "max_steps": 10,
                "max_cost": 0.20,
                "deadline_s": 30,
                "policy": Policy(permission_denied="recoverable"),
            },
        ),
        Scenario(
            "approval-denied",
            "a person says no to a refund",
            "Writes wait for a person: the agent may refund, but a manager approves each write first. "
            "Told no, the run stops at once; the model never hears it, so it cannot try another route.",
            "Order 1042 arrived late. Refund the customer £20 as a goodwill gesture.",
            "fatal",
            lambda rng: b.Refunder(rng),
            options={"max_steps": 10, "max_cost": 0.20, "deadline_s": 30, "approve": b.manager_approves},
            shop={"role": "billing"},
        ),
        Scenario(
            "flaky-upstream",
            "503, 503, then an answer",
            "A flaky upstream is retried inside the loop with backoff; the model sees only the answer, "
            "never the two 503s.",
            "What does the carrier say about order 1042?",
            "done",
            lambda rng: b.AskCarrier(rng),
            options={"max_steps": 6, "max_cost": 0.10, "deadline_s": 30},
            carrier={"fail_first": 2},
        ),
        Scenario(
            "not-found-hint",
            "a record not found, with a hint",
            'A recoverable error names the next step: "no order 1402" plus how to list the customer\'s '
            "orders leads the model to order 1042, the digits it mistyped.",
            "Customer 7 says their order 1402 was late. Why?",
            "done",
            lambda rng: b.FollowsHints(rng),
            options={"max_steps": 6, "max_cost": 0.10, "deadline_s": 30},
        ),
        Scenario(
            "parallel-writes",
            "two writes to one record in one turn",
            "Two notes for the same order asked for together are run one after the other, "
            "so the read-modify-write of each sees the other and nothing is lost.",
            "Note on order 1042 that the customer phoned, and that we offered a £10 voucher.",
            "done",
            lambda rng: b.ParallelNotes(rng),
            options={"max_steps": 4, "max_cost": 0.10, "deadline_s": 30},
            shop={"write_latency": 0.2},
        ),
        Scenario(
            "truncated",
            "a reply cut off at max_tokens",
            'A reply that hits max_tokens is not an answer: the run stops with "max_tokens" '
            "instead of handing half a report back as done.",
            "Write a full incident report for order 1042.",
            "max_tokens",
            lambda rng: b.LongReport(rng),
            options={"max_steps": 4, "max_cost": 0.10, "deadline_s": 30, "max_tokens": 200},
        ),
    ]
}

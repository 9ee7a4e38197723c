"""Offline model behaviours: each one imitates how a model acts in one lesson.

A behaviour is called like a model function, ``behaviour(messages, tools)``,
and answers from what it has read so far (see :mod:`.reading`): it looks at
the tool results it received and picks its next call the way a model would,
so a changed tool or policy changes what it does next. Its only randomness is
the ``rng`` it is given, so a seed reproduces a run exactly.
"""

from __future__ import annotations

import random
import re
from datetime import date
from typing import Any

from ..models.offline import Call, reply
from .reading import History


class Behaviour:
    """Base: turns the history into a :class:`History` and asks :meth:`next`."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random(0)

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        return self.next(History(messages))

    def next(self, h: History) -> dict[str, Any]:
        raise NotImplementedError

    def say(self, *options: str) -> str:
        """One of several phrasings (seeded): replies vary with the seed, the behaviour does not."""
        return self.rng.choice(options)


def _days_late(shipment: dict[str, Any]) -> int | None:
    if not shipment or not shipment.get("delivered_on"):
        return None
    return (date.fromisoformat(shipment["delivered_on"]) - date.fromisoformat(shipment["promised_on"])).days


def explain_lateness(order: dict[str, Any]) -> str:
    """The answer a careful model gives about one order's delivery."""
    ship = order.get("shipment") or {}
    late = _days_late(ship)
    if late is None:
        return f"Order {order['id']} has not been delivered yet (status: {order['status']})."
    if late <= 0:
        return f"Order {order['id']} was not late: promised {ship['promised_on']}, delivered {ship['delivered_on']}."
    why = ship.get("delay_reason") or "the carrier gave no reason"
    return (
        f"Order {order['id']} was promised for {ship['promised_on']} and delivered on {ship['delivered_on']}, "
        f"{late} days late. {ship['carrier']} says it was {why}."
    )


class ParallelLookups(Behaviour):
    """Asks for three independent reads in one turn, then answers from all three."""

    def next(self, h: History) -> dict[str, Any]:
        if h.turn == 0:
            return reply(
                self.say(
                    "I'll fetch the order, the customer and their orders together.",
                    "Three lookups, independent of each other: asking for all at once.",
                ),
                ("get_order", {"order_id": 1042}),
                ("get_customer", {"customer_id": 7}),
                ("search_orders", {"customer_id": 7}),
            )
        got = {o.name: o.data for o in h.latest() if not o.is_error}
        order, customer, orders = got.get("get_order"), got.get("get_customer"), got.get("search_orders")
        if not (order and customer and orders):
            return reply("I could not read everything I needed: " + "; ".join(o.text for o in h.latest() if o.is_error))
        return reply(
            f"{explain_lateness(order)} The customer is {customer['name']} ({customer['tier']} tier, "
            f"with us since {customer['since']}), who has placed {orders['total']} orders."
        )


class PingPong(Behaviour):
    """Hunts for something that is not there, alternating two tools with fresh arguments.

    Every call differs, so no repeat is ever detected: only the step limit stops it.
    """

    WORDS = ["teapot", "blue teapot", "enamel teapot", "tea pot", "enamel", "cobalt", "kettle blue", "teapot lid"]

    def __init__(self, rng: random.Random | None = None) -> None:
        super().__init__(rng)
        self.words = list(self.WORDS)
        self.rng.shuffle(self.words)
        self.customers = self.rng.sample(range(1, 41), 40)

    def next(self, h: History) -> dict[str, Any]:
        n = h.turn
        if n % 2 == 0:
            word = self.words[(n // 2) % len(self.words)] + ("" if n // 2 < len(self.words) else f" {n // 2}")
            return reply(
                self.say("Let me search again.", "Maybe different words will find it."),
                ("search_orders", {"text": word}),
            )
        return reply(
            self.say("Perhaps a customer's record mentions it.", "Checking another customer."),
            ("get_customer", {"customer_id": self.customers[(n // 2) % 40]}),
        )


class GrowingContext(Behaviour):
    """Audits every order a page at a time: each page's result stays in the context.

    Every step is legitimate; what grows is what each call re-sends, so the
    cost of the run grows with the square of its length.
    """

    def __init__(self, rng: random.Random | None = None, page_size: int = 30) -> None:
        super().__init__(rng)
        self.page_size = page_size

    def next(self, h: History) -> dict[str, Any]:
        last = h.last("search_orders")
        page = 1 if last is None or last.data is None else last.data["page"] + 1
        if last is not None and last.data is not None and last.data["page"] >= last.data["pages"]:
            seen = [o for r in h.outcomes() if r.name == "search_orders" and r.data for o in r.data["orders"]]
            held = [o["id"] for o in seen if o["status"] == "shipped"]
            return reply(
                f"Audited {len(seen)} orders: {len(held)} shipped but not yet delivered ({', '.join(map(str, held))})."
            )
        return reply(
            self.say(f"Reading page {page}.", f"On to page {page} of the orders."),
            ("search_orders", {"page": page, "page_size": self.page_size}),
        )


class AskCarrier(Behaviour):
    """Reads the order, then asks the carrier's API about its parcel, then answers."""

    def __init__(self, rng: random.Random | None = None, order_id: int = 1042) -> None:
        super().__init__(rng)
        self.order_id = order_id

    def next(self, h: History) -> dict[str, Any]:
        if h.turn == 0:
            return reply("First the order, for its tracking number.", ("get_order", {"order_id": self.order_id}))
        order = h.last("get_order")
        if h.turn == 1 and order and order.data and order.data.get("shipment"):
            tracking = order.data["shipment"]["tracking"]
            return reply("Now the carrier's live tracking.", ("carrier_status", {"tracking": tracking}))
        status = h.last("carrier_status")
        if status is None or status.data is None:
            return reply(f"I could not reach the carrier: {status.text if status else 'no tracking number'}.")
        events = "; ".join(f"{e['date']}: {e['event']}" for e in status.data["events"])
        return reply(
            f"{status.data['carrier']} shows order {self.order_id} as {status.data['state']}. Tracking: {events}."
        )


class Repeater(Behaviour):
    """Wants the carrier to say "delivered" and asks again when it does not.

    ``recovers=True``: the nudge gets through and it answers with what it has
    (the article: roughly half the time). ``False``: it ignores the nudge.
    """

    def __init__(self, rng: random.Random | None = None, recovers: bool = True, order_id: int = 1218) -> None:
        super().__init__(rng)
        self.recovers = recovers
        self.order_id = order_id

    def next(self, h: History) -> dict[str, Any]:
        if h.turn == 0:
            return reply(None, ("get_order", {"order_id": self.order_id}))
        order = h.last("get_order")
        assert order is not None and order.data is not None, order
        tracking = order.data["shipment"]["tracking"]
        status = h.last("carrier_status")
        if status is not None and status.nudged and self.recovers:
            state = status.text.split('"state": "')[1].split('"')[0] if '"state": "' in status.text else "unknown"
            return reply(
                f"The carrier still shows order {self.order_id} as {state}; asking again will not change that. "
                "It has not been delivered yet; I'll tell the customer and check again tomorrow."
            )
        if status is not None and status.data and status.data["state"] == "delivered":
            return reply(f"Delivered: order {self.order_id}.")
        return reply(
            self.say("Checking with the carrier again.", "Maybe it has been delivered by now.") if status else None,
            ("carrier_status", {"tracking": tracking}),
        )


class Refunder(Behaviour):
    """Reads the order and tries to refund it; told "denied", looks for other routes.

    With a fatal policy it never hears the denial (the run stops). With the
    denial handed back as recoverable it does what the article warns about:
    it tries a smaller refund, a status change, and finally a note asking
    someone else to do it.
    """

    ROUTES: list[Call] = [
        ("refund_order", {"order_id": 1042, "amount": 20.0, "reason": "late delivery, goodwill"}),
        ("refund_order", {"order_id": 1042, "amount": 5.0, "reason": "partial goodwill credit"}),
        ("update_order_status", {"order_id": 1042, "status": "refunded"}),
        ("search_orders", {"status": "refunded"}),
        ("refund_order", {"order_id": 1042, "amount": 86.4, "reason": "match order 1077's full refund"}),
    ]

    def next(self, h: History) -> dict[str, Any]:
        if h.turn == 0:
            return reply("Reading the order first.", ("get_order", {"order_id": 1042}))
        tried = h.turn - 1
        denied = [o for o in h.outcomes() if o.is_error and "PermissionDenied" in o.text]
        if tried < len(self.ROUTES) and (tried == 0 or h.latest()):
            intro = (
                "Refunding £20 for the late delivery."
                if tried == 0
                else self.say("That was denied; trying another way.", "Denied again. There may be another route.")
            )
            return reply(intro, self.ROUTES[tried])
        if denied:
            note = "Refund of £20 approved for late delivery; please process (support agent)."
            if not any(o.name == "add_note" for o in h.outcomes()):
                return reply(
                    "I can't refund directly, so I'll leave a note for someone who can.",
                    ("add_note", {"order_id": 1042, "note": note}),
                )
            return reply(
                f"I could not refund order 1042 myself ({len(denied)} attempts were denied), "
                "so I added a note marking the refund as approved."
            )
        return reply("Refunded.")


class Reassures(Behaviour):
    """Checks the order, the carrier and the customer, refunds, and reports success whatever happened.

    The failure a trace exists for: told at step four that the refund was
    denied, it notes the refund on the order and answers "the customer has
    been refunded". Its last message reads like success; the run ends "done".
    """

    def next(self, h: History) -> dict[str, Any]:
        order = h.last("get_order")
        data = order.data if order is not None and order.data else {}
        if h.turn == 0:
            return reply("Reading the order first.", ("get_order", {"order_id": 1042}))
        if h.turn == 1 and (data.get("shipment") or {}).get("tracking"):
            return reply(
                "Confirming the delay with the carrier.", ("carrier_status", {"tracking": data["shipment"]["tracking"]})
            )
        if h.last("get_customer") is None and data.get("customer_id"):
            return reply("Now the customer, to address them.", ("get_customer", {"customer_id": data["customer_id"]}))
        if h.last("refund_order") is None:
            return reply(
                "Refunding £20 for the late delivery.",
                ("refund_order", {"order_id": 1042, "amount": 20.0, "reason": "late delivery, goodwill"}),
            )
        if h.last("add_note") is None:  # the denial is in its history; it writes as if the refund went through
            return reply(
                self.say("Recording it on the order.", "Adding a note for the team."),
                ("add_note", {"order_id": 1042, "note": "Goodwill refund of £20 for the late delivery."}),
            )
        return reply(
            self.say(
                "Done: the customer has been refunded £20 for the late delivery, and it is noted on order 1042.",
                "All set. £20 has been refunded to the customer for the late delivery (noted on order 1042).",
            )
        )


class FollowsHints(Behaviour):
    """Asks for the order id the customer gave; a not-found error's hint leads it to the right one."""

    def next(self, h: History) -> dict[str, Any]:
        if h.turn == 0:
            return reply("Looking up the order the customer quoted.", ("get_order", {"order_id": 1402}))
        last = h.latest()[-1] if h.latest() else None
        if last and last.name == "get_order" and last.is_error:
            if "search_orders(customer_id" in last.text:
                return reply(
                    "No such order; the error suggests listing the customer's orders.",
                    ("search_orders", {"customer_id": 7}),
                )
            return reply(f"I could not find the order: {last.text}")
        if last and last.name == "search_orders" and last.data:
            first = h.outcomes()[0]
            same = (
                [int(x) for x in re.findall(r"\d{4}", first.text.split("same digits")[-1])]
                if "same digits" in first.text
                else []
            )
            theirs = [o["id"] for o in last.data["orders"] if o["id"] in same]
            if theirs:
                return reply(
                    f"Order {theirs[0]} is theirs and has the same digits: a transposition.",
                    ("get_order", {"order_id": theirs[0]}),
                )
            return reply("None of the customer's orders matches; I need the order number again.")
        if last and last.name == "get_order" and last.data:
            return reply(f"The customer meant order {last.data['id']}, not 1402. {explain_lateness(last.data)}")
        return reply("I could not work out which order the customer meant.")


class ParallelNotes(Behaviour):
    """Writes two notes to the same order in one turn, then reads the order back."""

    NOTES = ["Customer phoned about the late delivery.", "Offered a £10 voucher; customer accepted."]

    def next(self, h: History) -> dict[str, Any]:
        if h.turn == 0:
            return reply("Recording both notes.", *[("add_note", {"order_id": 1042, "note": n}) for n in self.NOTES])
        if h.turn == 1:
            return reply("Reading the order back to check.", ("get_order", {"order_id": 1042}))
        order = h.last("get_order")
        notes = order.data["notes"] if order and order.data else []
        missing = [n for n in self.NOTES if n not in notes]
        if missing:
            return reply(f"Only {len(notes)} note(s) are on order 1042; missing: {missing}.")
        return reply(f"Both notes are on order 1042 ({len(notes)} in all).")


class LongReport(Behaviour):
    """Reads the order, then writes a report longer than ``max_tokens`` allows."""

    def next(self, h: History) -> dict[str, Any]:
        if h.turn == 0:
            return reply(None, ("get_order", {"order_id": 1042}))
        order = h.last("get_order")
        summary = explain_lateness(order.data) if order and order.data else "The order could not be read."
        sections = [
            "Incident report: order 1042.",
            "Summary. " + summary,
            "Timeline. The order was placed on 4 March, packed the same evening and collected by ParcelNorth on 5 "
            "March. "
            "The carrier's promised date was 8 March. The parcel reached the Avonmouth hub on 6 March and was held "
            "there.",
            "Customer impact. The customer waited five extra days for a kettle bought as a gift, contacted support "
            "twice "
            "and was not told of the delay before the promised date passed.",
            "Root cause. Weather holds at the hub were not pushed to our order system, so no one saw the delay; "
            "after the hold the parcel was mis-sorted to Cardiff, adding two more days.",
            "Actions. Subscribe to the carrier's delay webhooks; email customers automatically when a promise date is "
            "at "
            "risk; review the sorting error with ParcelNorth; offer a voucher to affected customers.",
        ]
        return reply("\n\n".join(sections * 2))


class ShopAssistant(Behaviour):
    """A general offline stand-in for the shop: looks up the orders a question names, then answers.

    What ``agentlab run "..." --tools shop --model offline-shop`` uses: it
    reads order numbers from the task, fetches them in one turn, and explains
    their delivery; anything else it says plainly it cannot do offline.
    """

    def next(self, h: History) -> dict[str, Any]:
        ids = list(dict.fromkeys(int(x) for x in re.findall(r"\b(\d{4})\b", h.task)))
        if h.turn == 0:
            if not ids:
                return reply(
                    "(offline) I can only look up orders by number without a real model: "
                    "ask about an order such as 1042, set ANTHROPIC_API_KEY, or try --scenario."
                )
            return reply(
                f"Looking up order{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}.",
                *[("get_order", {"order_id": i}) for i in ids],
            )
        parts = [explain_lateness(o.data) if o.data else o.text for o in h.latest()]
        return reply(" ".join(parts) or "I found nothing to report.")


def manager_approves(request: Any) -> Any:
    """A scripted manager for the approval scenario: notes and status changes yes, refunds over £10 no."""
    if request.tool == "refund_order" and float(request.args.get("amount", 0)) > 10:
        return f"refunds over £10 need a manager's sign-off; this one was for £{request.args.get('amount')}"
    return True
